"""A screenshot of the Prefect UI showing a backfill under its pmem run id (headless Chromium).

    .venv/bin/python bench/prefect_ui_shot.py [--run RUN_ID] [--out /work/shots/prefect-ui.png]

Uses the data dir of the settings (PMEM_DATA_DIR): its managed Prefect server (started with
`pmem prefect start` or by a backfill), its auth string (``prefect/api-auth``) for the login
page, and by default the newest flow run of that data dir. It opens the server's root
(``http://127.0.0.1:PORT/``, the address `pmem prefect status` prints), logs in, opens the runs
list, waits until the run's pmem run id is on screen, saves the screenshot, then opens the flow
run's own page and checks its name. Exit 1 when the run cannot be found in the UI.

To reproduce the whole check from a fresh data dir:

    export PMEM_DATA_DIR=/tmp/pmem-ui
    pmem demo
    pmem backfill --source chatgpt --export ../shared/eval/chatgpt-export.zip
    pmem prefect status
    .venv/bin/python bench/prefect_ui_shot.py

Chromium is Debian's (/usr/bin/chromium, or PMEM_CHROMIUM); playwright never downloads one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.settings import Settings  # noqa: E402
from flows import prefect_server as ps  # noqa: E402

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _api(port: int, auth: str, path: str, body: dict) -> list[dict]:
    import base64

    req = urllib.request.Request(
        ps.api_url(port) + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": "Basic " + base64.b64encode(auth.encode()).decode(),
        },
    )
    with urllib.request.urlopen(req, timeout=30) as r:  # noqa: S310 (loopback)
        return json.loads(r.read())


def newest_run(port: int, auth: str, settings: Settings) -> dict:
    runs = _api(
        port,
        auth,
        "/flow_runs/filter",
        {
            "flow_runs": {"tags": {"all_": [ps.data_tag(settings)]}},
            "sort": "START_TIME_DESC",
            "limit": 20,
        },
    )
    named = [r for r in runs if any(t.startswith("source:") for t in r["tags"])]
    if not named:
        raise SystemExit(
            "no backfill flow run of this data dir on its Prefect server: run a backfill first"
        )
    return named[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="the pmem run id (default: the newest backfill of this data dir)")
    ap.add_argument("--out", default="/work/shots/prefect-ui.png")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the UI")
    args = ap.parse_args()

    settings = Settings()
    info = ps.server_status(settings)
    if not info.running or not info.port:
        raise SystemExit("the managed Prefect server is not running: `pmem prefect start`")
    auth = ps.auth_string(settings)
    if args.run:
        runs = _api(
            info.port,
            auth,
            "/flow_runs/filter",
            {"flow_runs": {"name": {"any_": [args.run]}}, "limit": 5},
        )
        if not runs:
            raise SystemExit(f"no flow run named {args.run} on {info.ui_url}")
        run = runs[0]
    else:
        run = newest_run(info.port, auth, settings)
    print(f"UI {info.ui_url}; flow run {run['id']} named {run['name']}, tags {sorted(run['tags'])}")

    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ms = int(args.timeout * 1000)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=os.environ.get("PMEM_CHROMIUM", "/usr/bin/chromium"), args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            t0 = time.monotonic()
            page.goto(info.ui_url or "", wait_until="domcontentloaded", timeout=ms)
            password = page.locator("input[type=password]")
            password.wait_for(timeout=ms)  # the server has authentication: the UI asks for it
            password.fill(auth)
            password.press("Enter")
            page.get_by_text("Runs", exact=True).first.wait_for(timeout=ms)
            base = page.url.split("/dashboard")[0].rstrip("/")  # …/v2 (or the v1 root)
            page.goto(f"{base}/runs", wait_until="domcontentloaded", timeout=ms)
            page.get_by_text(run["name"]).first.wait_for(timeout=ms)
            time.sleep(1.0)  # let the list finish drawing
            page.screenshot(path=str(out))
            print(
                f"runs list shows {run['name']} after {time.monotonic() - t0:.1f}s; screenshot {out}"
            )
            page.goto(
                f"{base}/runs/flow-run/{run['id']}", wait_until="domcontentloaded", timeout=ms
            )
            page.get_by_text(run["name"]).first.wait_for(timeout=ms)
            page.screenshot(path=str(out.with_name(out.stem + "-run" + out.suffix)))
            print(
                f"flow run page shows {run['name']}; screenshot {out.with_name(out.stem + '-run' + out.suffix)}"
            )
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
