"""`pmem summary timeline`: one self-contained HTML page of the months (seed 001, made visible).

Sentiment by month as a bar chart drawn here as inline SVG (no chart library, no script: the
page opens without any network and weighs what its text weighs, ~10 kB a month), each bar a
link to its month with the month's sentiment and top keywords as its tooltip; then each month's
summary, every line with numbered citations ``[1]`` that jump to the month's list of the
memories and messages it cites, where each id or key is written once (``pmem show ID`` opens
it: the messages' text is one command away, not copied into the page; ADR 0020). The page holds
private text: it is written 0600.
"""

from __future__ import annotations

import html
from pathlib import Path

from core.private import write_private
from core.summaries import MonthSummary, Profile

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
.cites li { margin: 0; }
.cites :target { background: #fff3c4; }
a.cite { color: #2e86c1; font-size: .75rem; margin-left: .2rem; text-decoration: none; }
nav a { margin-right: .5rem; }
#sentiment { width: 100%; height: auto; font-family: FONTS; font-size: 11px; }
#sentiment a.bar rect { cursor: pointer; }
#sentiment a.bar:hover rect { opacity: .75; }
</style>""".replace("FONTS", FONTS)

_W, _H, _TOP, _BOTTOM, _LEFT = 900, 300, 30, 60, 50  # the chart's box, in SVG units


def _chart(months: list[MonthSummary]) -> str:
    """Sentiment by month: one bar per month from the zero line (blue above, red below), each
    an SVG link to ``#m-MONTH`` with the month, its sentiment and top keywords as its title."""
    e = html.escape
    inner_h = _H - _TOP - _BOTTOM
    zero = _TOP + inner_h / 2
    step = (_W - _LEFT - 10) / max(1, len(months))
    bar = max(2.0, step * 0.7)
    label_every = max(1, -(-len(months) // 24))  # at most ~24 month labels under the bars
    out = [
        f'<svg id="sentiment" viewBox="0 0 {_W} {_H}" role="img" '
        'aria-label="Sentiment by month" xmlns="http://www.w3.org/2000/svg">',
        '<text x="0" y="16" font-size="14">Sentiment by month '
        "(the tone of the month's sentences, −1 … +1)</text>",
    ]
    for value in (1, 0, -1):
        y = zero - value * inner_h / 2
        out.append(
            f'<line x1="{_LEFT}" x2="{_W - 10}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{"#999" if value == 0 else "#e5e5e5"}"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:+d}</text>'
        )
    for i, m in enumerate(months):
        s = max(-1.0, min(1.0, m.sentiment))
        x = _LEFT + i * step + (step - bar) / 2
        h = abs(s) * inner_h / 2
        y = zero - h if s >= 0 else zero
        tip = f"{m.month}: sentiment {m.sentiment:+.2f}; {', '.join(m.keywords[:5])}"
        out.append(
            f'<a class="bar" href="#m-{e(m.month)}" data-month="{e(m.month)}"><title>{e(tip)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{max(h, 1.5):.1f}" '
            f'fill="{"#c0392b" if s < 0 else "#2e86c1"}"/></a>'
        )
        if i % label_every == 0:
            cx = x + bar / 2
            out.append(
                f'<text x="{cx:.1f}" y="{_H - _BOTTOM + 14}" text-anchor="end" '
                f'transform="rotate(-45 {cx:.1f} {_H - _BOTTOM + 14})">{e(m.month)}</text>'
            )
    out.append("</svg>")
    return "".join(out)


def _month_section(m: MonthSummary) -> str:
    """A month: keywords, each summary line with numbered citations, then the list they point
    to (each memory id and message key written once, with the command that opens it)."""
    e = html.escape
    refs = [*m.memory_ids, *m.message_keys]
    number = {ref: n for n, ref in enumerate(refs, 1)}
    anchor = f"c-{e(m.month)}-"
    lines = []
    for x in m.to_json()["sentences"]:
        cited = []
        for ref in [*x["memory_ids"], *x["message_keys"]]:
            if ref not in number:  # a line may cite what the month's lists lack
                refs.append(ref)
                number[ref] = len(refs)
            cited.append(f"<a class='cite' href='#{anchor}{number[ref]}'>[{number[ref]}]</a>")
        lines.append(f"<div class='line'>{e(x['text'])} {''.join(cited)}</div>")
    items = "".join(f"<li id='{anchor}{number[r]}'><code>{e(r)}</code></li>" for r in refs)
    kws = "".join(f"<span>{e(k)}</span>" for k in m.keywords)
    return (
        f"<section class='month' id='m-{e(m.month)}'><h3>{e(m.month)} "
        f"<small>sentiment {m.sentiment:+.2f} · version {m.version}</small></h3>"
        f"<div class='kw'>{kws}</div><div class='summary'>{''.join(lines)}</div>"
        f"<div class='cites'>cites ({len(m.memory_ids)} memories, {len(m.message_keys)} messages; "
        f"<code>pmem show ID</code> opens one, <code>pmem summary show {e(m.month)}</code> the month)"
        f"<ol>{items}</ol></div></section>"
    )


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
        parts.append(
            "<p id='empty'>No monthly summaries yet: run <code>pmem summary update</code>.</p>"
        )
    else:
        parts.append(_chart(months))
        parts.append(
            "<nav>"
            + "".join(f"<a href='#m-{e(m.month)}'>{e(m.month)}</a>" for m in months)
            + "</nav>"
        )
    if profile is not None:
        parts.append(f"<h2>Profile <small>(version {profile.version})</small></h2>")
        parts.append(f"<div class='summary' id='profile'>{e(profile.profile)}</div>")
    parts += [_month_section(m) for m in months]
    parts.append("</body></html>")
    write_private(out, "\n".join(parts))
    return len(months)
