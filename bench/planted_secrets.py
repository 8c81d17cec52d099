"""The secret guard's numbers, for the issue's closing note:

1. catch rate on the planted corpus (tests/security/planted.py) over several seeds, per format;
2. non-secret redactions per 10,000 words on the eval corpus and the real export samples
   (the rule of tests/security/test_guard_false_positives.py);
3. with ``--places``: the planted-secret table by place, from the end-to-end test
   (tests/security/test_planted_places.py: the offline backfill as the Prefect flow, an LLM
   backfill against a local fake of the OpenAI API, then every place scanned).

    .venv/bin/python bench/planted_secrets.py [--seeds 5] [--places] [--json]

Nothing here prints a secret: formats, counts and places only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def catch_rate(seeds: int) -> dict:
    from core.secrets import redact_messages
    from tests.security.planted import conversations, corpus, surviving_pieces

    total = caught = 0
    missed: Counter[str] = Counter()
    formats: set[str] = set()
    started = time.perf_counter()
    for seed in range(seeds):
        planted = corpus(seed=seed)
        convs = conversations(planted)
        joined = [("\n".join(c), "\n".join(redact_messages(c))) for c in convs]
        for p in planted:
            formats.add(p.format)
            orig, red = next((o, r) for o, r in joined if all(m in o for m in p.messages))
            total += 1
            if surviving_pieces(p, orig, red):
                missed[p.format] += 1
            else:
                caught += 1
    return {
        "planted": total,
        "caught": caught,
        "rate": round(caught / total, 4),
        "formats": len(formats),
        "missed_by_format": dict(missed),
        "seeds": seeds,
        "seconds": round(time.perf_counter() - started, 2),
    }


def false_positives() -> dict:
    from tests.security.test_guard_false_positives import fp_report

    return fp_report()


def places() -> dict:
    """Runs the end-to-end test in a subprocess and reads the table it writes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "table.json"
        env = dict(os.environ, PMEM_PLANTED_TABLE=str(out))
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "tests/security/test_planted_places.py"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if not out.exists():
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
            raise SystemExit("the end-to-end test wrote no table")
        data = json.loads(out.read_text())
        data["test_passed"] = proc.returncode == 0
        return data


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--places", action="store_true", help="also run the end-to-end scan (~3 min)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = {"catch": catch_rate(args.seeds), "false_positives": false_positives()}
    if args.places:
        result["places"] = places()
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return
    c = result["catch"]
    print(
        f"catch rate: {c['caught']}/{c['planted']} = {c['rate']:.2%} "
        f"({c['formats']} formats, {c['seeds']} seeds, {c['seconds']} s)"
    )
    for fmt, n in sorted(c["missed_by_format"].items()):
        print(f"  missed {n}x {fmt}")
    for name, fp in result["false_positives"].items():
        print(
            f"false positives on {name}: {fp['non_secret_redactions']} in {fp['words']} words "
            f"= {fp['per_10k_words']} per 10k words"
        )
    if "places" in result:
        pl = result["places"]
        facts = pl["facts"]
        print(
            f"\nplanted-secret table ({facts['secrets']} secrets, {facts['formats']} formats; "
            f"{facts['llm_requests']} LLM and {facts['embedding_requests']} embedding requests; "
            f"test passed: {pl['test_passed']})"
        )
        width = max(len(k) for k in pl["table"])
        for place, n in sorted(
            pl["table"].items(), key=lambda kv: (kv[0].startswith("table "), kv[0])
        ):
            print(f"  {place:<{width}}  {n}")


if __name__ == "__main__":
    main()
