"""`pmem timeline`: one self-contained HTML page of the months (seed 001, made visible).

Sentiment by month as a Plotly chart (plotly.js embedded in the page: it opens without any
network), the top keywords of each month on hover and under the chart, and each month's
summary with the memories and messages it cites, linked from the chart (a click on a month
jumps to it). The page holds private text: it is written 0600.
"""

from __future__ import annotations

import html
from pathlib import Path

from core.private import write_private
from core.summaries import MonthSummary, Profile


def _figure_html(months: list[MonthSummary]) -> str:
    import plotly.graph_objects as go

    xs = [m.month for m in months]
    ys = [round(m.sentiment, 3) for m in months]
    hover = [
        "<br>".join([m.month, f"sentiment {m.sentiment:+.2f}", ", ".join(m.keywords[:5])])
        for m in months
    ]
    fig = go.Figure(
        go.Bar(
            x=xs,
            y=ys,
            hovertext=hover,
            hoverinfo="text",
            marker_color=["#c0392b" if y < 0 else "#2e86c1" for y in ys],
        )
    )
    fig.update_layout(
        title="Sentiment by month",
        yaxis={"range": [-1, 1], "title": "sentiment (−1 … 1)"},
        xaxis={"type": "category", "title": "month"},
        height=380,
        font={"family": FONTS},  # the hover's keywords are Japanese too
        margin={"l": 60, "r": 20, "t": 50, "b": 60},
    )
    return fig.to_html(
        full_html=False, include_plotlyjs=True, div_id="sentiment", config={"displaylogo": False}
    )


_CLICK = """<script>
(function () {
  var plot = document.getElementById('sentiment');
  if (plot && plot.on) {
    plot.on('plotly_click', function (ev) {
      var m = ev.points && ev.points[0] && ev.points[0].x;
      if (m) { location.hash = 'm-' + m; }
    });
  }
})();
</script>"""

#: a font stack with a Japanese font on every platform (macOS, Debian/Ubuntu's fonts-noto-cjk,
#: Windows), so the page's Japanese never falls to a font without its glyphs (boxes)
FONTS = (
    'system-ui, -apple-system, "Hiragino Sans", "Hiragino Kaku Gothic ProN", "Noto Sans CJK JP", '
    '"Noto Sans JP", "Yu Gothic", "Meiryo", sans-serif'
)

_STYLE = """<style>
body { font-family: FONTS;
       max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
.month { border-top: 1px solid #ddd; padding: .6rem 0; }
.kw span { display: inline-block; background: #eef3f8; border-radius: .3rem; padding: 0 .4rem; margin: .1rem; }
.summary { white-space: pre-wrap; }
.cites { color: #666; font-size: .85rem; }
a.cite { color: #2e86c1; font-size: .75rem; margin-left: .2rem; text-decoration: none; }
nav a { margin-right: .5rem; }
</style>""".replace("FONTS", FONTS)


def write_timeline(months: list[MonthSummary], profile: Profile | None, out: Path) -> int:
    """Writes the page to ``out``; returns the number of months on it."""
    months = sorted(months, key=lambda m: m.month)
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>personal-memory timeline</title>",
        _STYLE,
        "</head><body><h1>Timeline</h1>",
    ]
    if not months:
        parts.append("<p id='empty'>No monthly summaries yet: run <code>pmem summarize</code>.</p>")
    else:
        parts.append(_figure_html(months))
        parts.append(
            "<nav>"
            + "".join(f"<a href='#m-{e(m.month)}'>{e(m.month)}</a>" for m in months)
            + "</nav>"
        )
    if profile is not None:
        parts.append(f"<h2>Profile <small>(version {profile.version})</small></h2>")
        parts.append(f"<div class='summary' id='profile'>{e(profile.profile)}</div>")
    for m in months:
        kws = "".join(f"<span>{e(k)}</span>" for k in m.keywords)
        anchor = f"c-{e(m.month)}-"
        cites = " ".join(f"<code id='{anchor}{e(i)}'>{e(i)}</code>" for i in m.memory_ids)
        keys = " ".join(f"<code id='{anchor}{e(k)}'>{e(k)}</code>" for k in m.message_keys)
        lines = "".join(
            f"<div class='line'>{e(x['text'])} "
            + "".join(
                f"<a class='cite' href='#{anchor}{e(ref)}' data-ref='{e(ref)}'>[{e(ref)}]</a>"
                for ref in [*x["memory_ids"], *x["message_keys"]]
            )
            + "</div>"
            for x in m.to_json()["sentences"]
        )
        parts.append(
            f"<section class='month' id='m-{e(m.month)}'><h3>{e(m.month)} "
            f"<small>sentiment {m.sentiment:+.2f} · version {m.version}</small></h3>"
            f"<div class='kw'>{kws}</div><div class='summary'>{lines}</div>"
            f"<div class='cites'>memories: {cites or '—'}<br>messages: {keys or '—'}"
            f"<br>(<code>pmem show ID</code>, <code>pmem summary show {e(m.month)}</code>)</div></section>"
        )
    parts.append(_CLICK + "</body></html>")
    write_private(out, "\n".join(parts))
    return len(months)
