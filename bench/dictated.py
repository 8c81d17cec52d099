"""The dictated twin of a labelled set: the same conversations with the person's Japanese typed
in one breath (every 。 a 、, line breaks spaces; code blocks and English left as they are),
labels unchanged (each still verbatim: checked). A robustness check of the drafter's roles on a
style no rule was written for: run `bench/eval.py --drafting-only --eval-dir OUT` on both.

    ./.venv/bin/python bench/dictated.py ../shared/eval /tmp/eval_dictated
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

_JA = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def dictated(text: str) -> str:
    """``text`` as one breath: 。 (not closing a quote) -> 、, runs of line breaks -> a space."""
    if "```" in text or not _JA.search(text):
        return text
    return re.sub(r"\n+", " ", re.sub(r"。(?!」)", "、", text))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("src", type=Path, help="a labelled set (conversations.json, make_export.py)")
    ap.add_argument("out", type=Path, help="the folder to write (replaced)")
    a = ap.parse_args(argv)
    if a.out.exists():
        shutil.rmtree(a.out)
    shutil.copytree(a.src, a.out, ignore=shutil.ignore_patterns("_build", "*_data", "results-*"))
    path = a.out / "conversations.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    broken = []
    for c in data["conversations"]:
        for m in c["messages"]:
            if m["role"] == "user":
                m["text"] = dictated(m["text"])
        said = [m["text"] for m in c["messages"] if m["role"] == "user"]
        labels = [c.get("decision") or "", *c.get("reasons", []), *c.get("open_points", [])]
        broken += [f"{c['id']}: {x}" for x in labels if x and not any(x in t for t in said)]
    if broken:
        print("labels no longer verbatim:", *broken, sep="\n  ", file=sys.stderr)
        return 1
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    subprocess.run([sys.executable, "make_export.py"], cwd=a.out, check=True, capture_output=True)
    print(f"{a.out}: {len(data['conversations'])} conversations, dictated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
