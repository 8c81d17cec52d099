"""`pmem timeline`'s page in a real browser (issue 27, item 4): Debian's Chromium, headless,
every request outside the file refused. Its Japanese renders as Japanese glyphs, not boxes: the
font Chromium actually drew the summary with is a CJK font (asked of the renderer through the
DevTools protocol), and two different Japanese texts of the same length give different pixels
(with no font for them both would be the same row of empty boxes). `make browser` installs
Chromium and fonts-noto-cjk; the page names a CJK font stack. The screenshot goes to
PMEM_SHOTS_DIR when that is set."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from core.summaries import MonthSummary
from reports.timeline import write_timeline
from tests.test_related_graph import ARGS, CHROMIUM

TEXTS = {"2024-03": "・丹沢で登山した日", "2024-04": "・家計簿を見直す月"}  # same length


def _month(month: str, text: str) -> MonthSummary:
    return MonthSummary(
        month=month,
        version=1,
        summary=text,
        sentiment=0.2,
        keywords=("登山", "家計"),
        memory_ids=("mem_1",),
        message_keys=("chatgpt:c1:m1",),
        inputs_hash="sha256:x",
        model="extractive:v1",
        prompt_version="t",
        time_zone="Asia/Tokyo",
        run_id=None,
        citations=({"memory_ids": ["mem_1"], "message_keys": ["chatgpt:c1:m1"]},),
    )


def test_the_timeline_draws_japanese_with_a_cjk_font(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "install Debian's chromium (make browser)"
    out = tmp_path / "timeline.html"
    assert write_timeline([_month(m, t) for m, t in TEXTS.items()], None, out) == 2
    assert "Noto Sans CJK JP" in out.read_text(encoding="utf-8")  # the stack names one
    requests: list[str] = []
    shot = tmp_path / "timeline.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.route(
                "**/*",
                lambda route: (
                    route.continue_()
                    if route.request.url.startswith("file://")
                    else (requests.append(route.request.url), route.abort())
                ),
            )
            page.goto(out.as_uri())
            # the fonts the renderer used for each summary's glyphs
            cdp = page.context.new_cdp_session(page)
            cdp.send("DOM.enable")
            cdp.send("CSS.enable")
            root = cdp.send("DOM.getDocument")["root"]["nodeId"]
            for month in TEXTS:
                node = cdp.send(
                    "DOM.querySelector", {"nodeId": root, "selector": f"#m-{month} .summary"}
                )["nodeId"]
                fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
                used = {f["familyName"]: f["glyphCount"] for f in fonts}
                cjk = {name: n for name, n in used.items() if "CJK" in name or "JP" in name}
                # every character of the text but the bullet is drawn by the CJK font
                assert sum(cjk.values()) >= len(TEXTS[month]) - 1, used
            # each sentence's citations are links to the month's list of what it cites
            cite = page.locator("#m-2024-03 a.cite").first
            assert cite.inner_text() == "[1]"
            cite.click()
            assert page.evaluate("location.hash") == "#c-2024-03-1"
            assert page.locator("#c-2024-03-1").inner_text() == "mem_1"
            # pixels: two different texts of one length look different (boxes would not)
            a = page.locator("#m-2024-03 .summary").screenshot()
            b = page.locator("#m-2024-04 .summary").screenshot()
            assert a != b
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert requests == []
    if os.environ.get("PMEM_SHOTS_DIR"):
        dest = Path(os.environ["PMEM_SHOTS_DIR"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / "timeline-ja.png")
