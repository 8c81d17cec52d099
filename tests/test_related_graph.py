"""`pmem graph`'s page in a real browser (issue 16, point 5): Debian's Chromium, headless,
driven by Playwright, every request that is not the page itself refused. The concepts are drawn
as nodes, the weighted links as edges, and a click on a concept shows the experiences it indexes.
The screenshot goes to PMEM_SHOTS_DIR when that is set."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from reports.graph import DRAWN, UNLINKED_DRAWN, graph_from_rows, page_html, write_graph

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _seed_graph():  # type: ignore[no-untyped-def]
    """The seed's example by hand: E101 hiking with a friend, E102 the mountains as a change of
    pace, E103 dinner with a friend."""
    concepts = [
        {
            "id": "c_hike",
            "name": "登山",
            "aliases": ["hiking"],
            "experiences": ["mem_e101", "mem_e102"],
        },
        {
            "id": "c_friend",
            "name": "友人",
            "aliases": ["friend"],
            "experiences": ["mem_e101", "mem_e103"],
        },
        {"id": "c_fun", "name": "楽しい", "experiences": ["mem_e101"]},
        {"id": "c_pace", "name": "気分転換", "experiences": ["mem_e102"]},
        {"id": "c_meal", "name": "食事", "experiences": ["mem_e103"]},
        {"id": "c_full", "name": "満腹感", "experiences": ["mem_e103"]},
        {
            "id": "c_alone",
            "name": "</script><b>x</b>",
            "experiences": [],
        },  # hostile name: stays text
    ]
    links = [
        {
            "source": "c_hike",
            "target": "c_friend",
            "weight": 0.5,
            "relation": "with",
            "experiences": ["mem_e101"],
        },
        {
            "source": "c_hike",
            "target": "c_fun",
            "weight": 0.55,
            "relation": "felt",
            "experiences": ["mem_e101"],
        },
        {
            "source": "c_hike",
            "target": "c_pace",
            "weight": 0.5,
            "relation": "helped",
            "experiences": ["mem_e102"],
        },
        {"source": "c_meal", "target": "c_full", "weight": 0.5, "experiences": ["mem_e103"]},
        {
            "source": "c_meal",
            "target": "c_friend",
            "weight": 0.2,
            "stated": False,
            "experiences": ["mem_e103"],
        },
    ]
    experiences = [
        {
            "memory_id": "mem_e101",
            "title": "友人と登山した",
            "occurred_at": "2024-05-03T10:00:00+09:00",
        },
        {
            "memory_id": "mem_e102",
            "title": "仕事で疲れたので山へ行った",
            "occurred_at": "2024-06-10",
        },
        {"memory_id": "mem_e103", "title": "友人と食事した", "occurred_at": None},
    ]
    return graph_from_rows(concepts, links, experiences)


def test_page_is_self_contained_and_escapes_names() -> None:
    page = page_html(_seed_graph())
    assert "<script src" not in page and "<link " not in page  # nothing to fetch
    assert "</script><b>x</b>" not in page  # the hostile name never closes a script element
    assert "&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in page  # in the list, escaped
    # a big store: the most connected concepts are drawn (no SciPy needed), every one is listed
    many = [{"id": f"c{i}", "name": f"概念{i}", "experiences": [f"mem_{i}"]} for i in range(600)]
    ring = [{"source": f"c{i}", "target": f"c{i + 1}", "weight": 0.5} for i in range(0, 20)]
    big = page_html(graph_from_rows(many, ring, []))
    assert (
        big.count("<g class='node'") == 21 and big.count("data-concept='c599'") == 1
    )  # listed only
    assert "data-concept='c3' transform" in big and "id='partial'" in big
    ring = [{"source": f"c{i}", "target": f"c{i + 1}", "weight": 0.5} for i in range(0, 599)]
    assert (
        page_html(graph_from_rows(many, ring, [])).count("<g class='node'") == DRAWN
    )  # no SciPy needed
    lone = page_html(graph_from_rows(many, [], []))  # no links yet: the most experienced, as dots
    assert lone.count("<g class='node'") == UNLINKED_DRAWN
    empty = page_html(graph_from_rows([], [], []))
    assert "id='empty'" in empty and "<svg" not in empty


def test_graph_page_in_headless_chromium(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "install Debian's chromium (make browser)"
    out = tmp_path / "graph.html"
    assert write_graph(_seed_graph(), out) == 7
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    requests: list[str] = []
    shot = tmp_path / "graph.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            # no network at all: anything but the file itself is recorded and refused
            page.route(
                "**/*",
                lambda route: (
                    route.continue_()
                    if route.request.url.startswith("file://")
                    else (requests.append(route.request.url), route.abort())
                ),
            )
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(out.as_uri())
            # every linked concept is a node on the drawing, every link a line, both with a size
            nodes = page.locator("#graph g.node")
            assert nodes.count() == 6  # the seventh has no link: in the list only
            boxes = [nodes.nth(i).locator("circle").bounding_box() for i in range(6)]
            assert all(b is not None and b["width"] > 5 for b in boxes)
            assert len({(round(b["x"]), round(b["y"])) for b in boxes if b}) == 6  # laid out apart
            links = page.locator("#graph line.link")
            assert links.count() == 5
            widths = {
                ln.get_attribute("data-weight"): float(ln.get_attribute("stroke-width") or 0)
                for ln in links.all()
            }
            assert (
                widths["0.5500"] > widths["0.5000"] > widths["0.2000"]
            )  # the stronger, the thicker
            labels = page.locator("#graph g.node text").all_text_contents()
            assert "登山" in labels and "気分転換" in labels
            # a click on the node of 気分転換 shows its experience
            page.click("#graph g.node[data-concept='c_pace'] circle")
            page.wait_for_selector("#concept[data-concept='c_pace']", timeout=5000)
            panel = page.inner_text("#concept")
            assert (
                "気分転換" in panel
                and "mem_e102" in panel
                and "仕事で疲れたので山へ行った" in panel
            )
            assert "mem_e101" not in panel  # only its own experiences
            assert "登山" in panel and "0.50" in panel  # its link, with the weight
            # following the link in the panel opens 登山: both hiking experiences
            page.click("#concept ul.links a")
            page.wait_for_selector("#concept[data-concept='c_hike']")
            hike = page.locator("#concept li.experience").evaluate_all(
                "els => els.map(e => e.dataset.memory)"
            )
            assert sorted(hike) == ["mem_e101", "mem_e102"]
            # the hostile name is shown as text
            page.click("#names a[data-concept='c_alone']")
            assert page.inner_text("#concept h2") == "</script><b>x</b>"
            page.screenshot(path=str(shot), full_page=True)
            assert not errors, errors
        finally:
            browser.close()
    assert requests == []
    if os.environ.get("PMEM_SHOTS_DIR"):
        dest = Path(os.environ["PMEM_SHOTS_DIR"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / "graph-seed.png")
