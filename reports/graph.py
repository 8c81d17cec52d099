"""`pmem graph`: one self-contained HTML page of the concept memory (seed 003, made visible).

The concepts are the nodes (sized by how many experiences they index), the links between them
the edges (thicker and darker the higher their weight; a dotted edge is an inferred link, a
solid one a stated link). A click on a concept, on the drawing or in the list beside it, shows
its links and the experiences (memories) it indexes, each with its id for `pmem show ID`; the
wheel zooms, a drag pans.

The page needs no network: the drawing is SVG written here, laid out by NetworkX's spring layout
(pulled together by the link weights, seeded, so the same graph draws the same), its few lines
of JavaScript (click, zoom, pan) are inline, and the data the click handler reads is a JSON
block in the page, read with ``textContent`` and shown with ``textContent`` (never parsed as
HTML). A chart library was tried first: Plotly's 4.7 MB took ten seconds to load in the test's
browser, for nothing SVG cannot draw. The page holds private text (memory titles): it is
written 0600.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.private import write_private

__all__ = [
    "ConceptGraph",
    "GraphConcept",
    "GraphExperience",
    "GraphLink",
    "graph_from_rows",
    "page_html",
    "write_graph",
]

LABELLED = 80  # names written on the drawing for the most connected concepts (all on hover)
DRAWN = 400  # concepts drawn at most: those with links, the most connected first (every concept
# stays in the list beside the drawing and opens from there)
UNLINKED_DRAWN = 60  # without any link yet: the concepts of the most experiences, as dots


@dataclass(frozen=True)
class GraphConcept:
    id: str
    name: str
    aliases: tuple[str, ...] = ()
    experiences: tuple[str, ...] = ()  # memory ids


@dataclass(frozen=True)
class GraphLink:
    source: str  # concept ids
    target: str
    weight: float
    relation: str = ""
    stated: bool = True
    experiences: tuple[str, ...] = ()  # the memory ids that support it


@dataclass(frozen=True)
class GraphExperience:
    memory_id: str
    title: str = ""
    occurred_at: str | None = None  # an ISO date, or None


@dataclass(frozen=True)
class ConceptGraph:
    concepts: tuple[GraphConcept, ...]
    links: tuple[GraphLink, ...]
    experiences: dict[str, GraphExperience] = field(default_factory=dict)


def graph_from_rows(
    concepts: list[dict[str, Any]], links: list[dict[str, Any]], experiences: list[dict[str, Any]]
) -> ConceptGraph:
    """The graph from plain rows (as the store reads them): concepts ``{id, name, aliases,
    experiences}``, links ``{source, target, weight, relation, stated, experiences}``,
    experiences ``{memory_id, title, occurred_at}``."""
    return ConceptGraph(
        concepts=tuple(
            GraphConcept(
                str(c["id"]),
                str(c["name"]),
                tuple(c.get("aliases") or ()),
                tuple(c.get("experiences") or ()),
            )
            for c in concepts
        ),
        links=tuple(
            GraphLink(
                str(k["source"]),
                str(k["target"]),
                float(k["weight"]),
                str(k.get("relation") or ""),
                bool(k.get("stated", True)),
                tuple(k.get("experiences") or ()),
            )
            for k in links
        ),
        experiences={
            str(e["memory_id"]): GraphExperience(
                str(e["memory_id"]),
                str(e.get("title") or ""),
                str(e["occurred_at"])[:10] if e.get("occurred_at") else None,
            )
            for e in experiences
        },
    )


def drawn(graph: ConceptGraph, limit: int = DRAWN) -> set[str]:
    """The concepts on the drawing: those with links, the ``limit`` most connected (then most
    experienced) of them; when no concept has a link yet, the ``UNLINKED_DRAWN`` of the most
    experiences. A concept without links would only be a dot in a ring around the rest: the list
    beside the drawing holds every concept."""
    degree: dict[str, int] = {}
    for k in graph.links:
        degree[k.source] = degree.get(k.source, 0) + 1
        degree[k.target] = degree.get(k.target, 0) + 1
    ranked = sorted(
        graph.concepts, key=lambda c: (-degree.get(c.id, 0), -len(c.experiences), c.name, c.id)
    )
    linked = [c.id for c in ranked if degree.get(c.id, 0)]
    return set(linked[:limit]) if linked else {c.id for c in ranked[:UNLINKED_DRAWN]}


def _layout(graph: ConceptGraph, only: set[str]) -> dict[str, tuple[float, float]]:
    """Positions of the concepts in ``only``: NetworkX's spring layout, pulled together by the
    link weights, seeded (the dense Fruchterman-Reingold below 500 nodes: no SciPy)."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(c.id for c in graph.concepts if c.id in only)
    for k in graph.links:
        if k.source in g and k.target in g:
            g.add_edge(k.source, k.target, weight=max(k.weight, 0.05))
    if g.number_of_nodes() == 0:
        return {}
    if g.number_of_nodes() == 1:
        return {next(iter(g.nodes)): (0.0, 0.0)}
    pos = nx.spring_layout(g, weight="weight", seed=3, k=1.5 / max(1, g.number_of_nodes()) ** 0.5)
    return {n: (round(float(x), 4), round(float(y), 4)) for n, (x, y) in pos.items()}


WIDTH, HEIGHT, PAD = 1000.0, 700.0, 60.0


def _svg(graph: ConceptGraph, pos: dict[str, tuple[float, float]]) -> str:
    """The drawing: one ``<line class='link'>`` per link (width and opacity by weight, dotted
    when inferred) under one ``<g class='node'>`` per concept (a circle sized by its
    experiences, its name for the most connected), each with a ``<title>`` tooltip."""
    e = html.escape
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0

    def at(cid: str) -> tuple[float, float]:
        x, y = pos[cid]
        return (
            round(PAD + (x - min(xs)) / span_x * (WIDTH - 2 * PAD), 1),
            round(PAD + (y - min(ys)) / span_y * (HEIGHT - 2 * PAD), 1),
        )

    names = {c.id: c.name for c in graph.concepts}
    degree: dict[str, int] = {}
    for k in graph.links:
        degree[k.source] = degree.get(k.source, 0) + 1
        degree[k.target] = degree.get(k.target, 0) + 1
    ranked = sorted(
        graph.concepts, key=lambda c: (-degree.get(c.id, 0), -len(c.experiences), c.name)
    )
    labelled = {c.id for c in ranked[:LABELLED]}
    parts = [
        f"<svg id='graph' viewBox='0 0 {WIDTH:.0f} {HEIGHT:.0f}' role='img' "
        "aria-label='concepts and their links'><g id='links'>"
    ]
    for k in sorted(graph.links, key=lambda k: k.weight):
        if k.source not in pos or k.target not in pos:
            continue
        (x1, y1), (x2, y2) = at(k.source), at(k.target)
        n = len(k.experiences)
        tip = (
            f"{names[k.source]} —{k.relation or 'related'}→ {names[k.target]} · weight {k.weight:.2f} · "
            f"{'stated' if k.stated else 'inferred'} · {n} experience{'s' if n != 1 else ''}"
        )
        dash = "" if k.stated else " stroke-dasharray='4 4'"
        parts.append(
            f"<line class='link' data-source='{e(k.source)}' data-target='{e(k.target)}' "
            f"data-weight='{k.weight:.4f}' x1='{x1}' y1='{y1}' x2='{x2}' y2='{y2}' "
            f"stroke-width='{1 + 5 * k.weight:.2f}' stroke-opacity='{0.25 + 0.7 * k.weight:.2f}'{dash}>"
            f"<title>{e(tip)}</title></line>"
        )
    parts.append("</g><g id='nodes'>")
    for c in graph.concepts:
        if c.id not in pos:
            continue
        x, y = at(c.id)
        r = 6 + 2.5 * min(len(c.experiences), 8)
        n, d = len(c.experiences), degree.get(c.id, 0)
        tip = f"{c.name} · {n} experience{'s' if n != 1 else ''} · {d} link{'s' if d != 1 else ''}"
        label = f"<text x='0' y='{-r - 4:.1f}'>{e(c.name)}</text>" if c.id in labelled else ""
        parts.append(
            f"<g class='node' data-concept='{e(c.id)}' transform='translate({x} {y})'>"
            f"<circle r='{r:.1f}'><title>{e(tip)}</title></circle>{label}</g>"
        )
    parts.append("</g></svg>")
    return "".join(parts)


def _data(graph: ConceptGraph) -> dict[str, Any]:
    """What the click handler reads: each concept with its links and experiences."""
    by_id = {c.id: c for c in graph.concepts}
    links: dict[str, list[dict[str, Any]]] = {c.id: [] for c in graph.concepts}
    for k in sorted(graph.links, key=lambda k: -k.weight):
        for a, b in ((k.source, k.target), (k.target, k.source)):
            if a in links and b in by_id:
                links[a].append(
                    {
                        "to": by_id[b].name,
                        "to_id": b,
                        "relation": k.relation,
                        "out": a == k.source,
                        "weight": round(k.weight, 4),
                        "stated": k.stated,
                        "experiences": list(k.experiences),
                    }
                )
    used = {m for c in graph.concepts for m in c.experiences}
    return {
        "concepts": {
            c.id: {
                "name": c.name,
                "aliases": list(c.aliases),
                "experiences": list(c.experiences),
                "links": links[c.id],
            }
            for c in graph.concepts
        },
        "experiences": {
            m: {"title": e.title, "date": e.occurred_at}
            for m, e in graph.experiences.items()
            if m in used
        },
    }


def _json_for_script(obj: Any) -> str:
    """JSON safe inside a <script> element (no ``</``, no ``<!--``, no line separators)."""
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


_SCRIPT = """<script>
(function () {
  var data = JSON.parse(document.getElementById('graph-data').textContent);
  var panel = document.getElementById('concept');
  function el(tag, text, cls) {
    var n = document.createElement(tag);
    if (text !== undefined) { n.textContent = text; }
    if (cls) { n.className = cls; }
    return n;
  }
  function show(id) {
    var c = data.concepts[id];
    if (!c) { return; }
    panel.textContent = '';
    panel.setAttribute('data-concept', id);
    panel.appendChild(el('h2', c.name));
    if (c.aliases.length) { panel.appendChild(el('p', 'also: ' + c.aliases.join(', '), 'aliases')); }
    panel.appendChild(el('h3', 'Experiences (' + c.experiences.length + ')'));
    var ul = el('ul', undefined, 'experiences');
    c.experiences.forEach(function (m) {
      var e = data.experiences[m] || {};
      var li = el('li', undefined, 'experience');
      li.setAttribute('data-memory', m);
      li.appendChild(el('code', m));
      li.appendChild(document.createTextNode(' ' + (e.date || '') + ' '));
      li.appendChild(el('span', e.title || ''));
      ul.appendChild(li);
    });
    panel.appendChild(ul);
    panel.appendChild(el('h3', 'Links (' + c.links.length + ')'));
    var links = el('ul', undefined, 'links');
    c.links.forEach(function (k) {
      var li = el('li');
      li.appendChild(document.createTextNode((k.out ? '→ ' : '← ')));
      var a = el('a', k.to);
      a.href = '#';
      a.onclick = function (ev) { ev.preventDefault(); mark(k.to_id); show(k.to_id); };
      li.appendChild(a);
      li.appendChild(document.createTextNode(' · ' + (k.relation || 'related') + ' · weight ' +
        k.weight.toFixed(2) + ' · ' + (k.stated ? 'stated' : 'inferred') + ' · ' + k.experiences.join(', ')));
      links.appendChild(li);
    });
    panel.appendChild(links);
  }
  var svg = document.getElementById('graph');
  function mark(id) {
    svg.querySelectorAll('g.node').forEach(function (g) {
      g.classList.toggle('selected', g.getAttribute('data-concept') === id);
    });
    svg.querySelectorAll('line.link').forEach(function (l) {
      var on = l.getAttribute('data-source') === id || l.getAttribute('data-target') === id;
      l.classList.toggle('near', on);
    });
  }
  svg.querySelectorAll('g.node').forEach(function (g) {
    g.addEventListener('click', function () { var id = g.getAttribute('data-concept'); mark(id); show(id); });
  });
  // the wheel zooms around the pointer, a drag pans (the viewBox moves; nothing is redrawn)
  var box = svg.viewBox.baseVal, drag = null;
  function point(ev) {
    var r = svg.getBoundingClientRect();
    return [box.x + (ev.clientX - r.left) / r.width * box.width, box.y + (ev.clientY - r.top) / r.height * box.height];
  }
  svg.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var p = point(ev), f = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
    box.x = p[0] - (p[0] - box.x) * f; box.y = p[1] - (p[1] - box.y) * f;
    box.width *= f; box.height *= f;
  }, {passive: false});
  svg.addEventListener('mousedown', function (ev) { drag = [ev.clientX, ev.clientY]; });
  window.addEventListener('mouseup', function () { drag = null; });
  window.addEventListener('mousemove', function (ev) {
    if (!drag) { return; }
    var r = svg.getBoundingClientRect();
    box.x -= (ev.clientX - drag[0]) / r.width * box.width;
    box.y -= (ev.clientY - drag[1]) / r.height * box.height;
    drag = [ev.clientX, ev.clientY];
  });
  document.querySelectorAll('#names a[data-concept]').forEach(function (a) {
    a.onclick = function (ev) { ev.preventDefault(); mark(a.getAttribute('data-concept')); show(a.getAttribute('data-concept')); };
  });
})();
</script>"""

_STYLE = """<style>
body { font-family: system-ui, -apple-system, "Hiragino Sans", "Hiragino Kaku Gothic ProN",
       "Noto Sans CJK JP", "Noto Sans JP", "Yu Gothic", "Meiryo", sans-serif;
       margin: 1rem 2rem; color: #222; }
main { display: flex; gap: 1.5rem; align-items: flex-start; }
#graph { flex: 3; min-width: 0; border: 1px solid #ddd; background: #fff; cursor: grab; }
#graph line.link { stroke: #1b4f72; }
#graph line.link.near { stroke: #c0392b; }
#graph g.node { cursor: pointer; }
#graph g.node circle { fill: #2e86c1; stroke: #1b4f72; stroke-width: 1; }
#graph g.node.selected circle { fill: #c0392b; }
#graph g.node text { font-size: 13px; text-anchor: middle; fill: #222; paint-order: stroke;
                     stroke: #fff; stroke-width: 3px; }
aside { flex: 1; min-width: 16rem; max-height: 640px; overflow: auto; }
#concept h2 { margin-top: 0; }
#concept code { background: #eef3f8; padding: 0 .3rem; border-radius: .2rem; }
#names a { display: inline-block; margin: .1rem .3rem; }
.hint { color: #666; font-size: .9rem; }
</style>"""


def page_html(graph: ConceptGraph) -> str:
    """The whole page: the chart, the concept panel, the list of concepts, the data block."""
    e = html.escape
    n_c, n_l = len(graph.concepts), len(graph.links)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>personal-memory concepts</title>",
        _STYLE,
        "</head><body><h1>Concepts</h1>",
        f"<p class='hint'>{n_c} concept{'s' if n_c != 1 else ''}, {n_l} link{'s' if n_l != 1 else ''}: "
        "thicker, darker links weigh more; dotted ones are inferred, not stated. Click a concept "
        "for its experiences (<code>pmem show ID</code> opens one); the wheel zooms, a drag pans.</p>",
    ]
    if not graph.concepts:
        parts.append(
            "<p id='empty'>No concepts yet: the backfill extracts them from the memories "
            "(<code>pmem concepts rebuild</code>).</p>"
        )
    else:
        shown = drawn(graph)
        if len(shown) < n_c:
            parts.append(
                f"<p class='hint' id='partial'>Drawn: {len(shown)} concepts, those with links "
                "(the most connected first); every concept is in the list.</p>"
            )
        parts.append("<main>" + _svg(graph, _layout(graph, shown)))
        parts.append(
            "<aside><div id='concept'><p class='hint'>Click a concept.</p></div>"
            "<h3>All concepts</h3><div id='names'>"
        )
        for c in sorted(graph.concepts, key=lambda c: (-len(c.experiences), c.name)):
            parts.append(f"<a href='#' data-concept='{e(c.id)}'>{e(c.name)}</a>")
        parts.append("</div></aside></main>")
    parts.append(
        f"<script type='application/json' id='graph-data'>{_json_for_script(_data(graph))}</script>"
    )
    parts.append(_SCRIPT + "</body></html>")
    return "\n".join(parts)


def write_graph(graph: ConceptGraph, out: Path) -> int:
    """Writes the page to ``out`` (0600); returns the number of concepts on it."""
    write_private(out, page_html(graph))
    return len(graph.concepts)
