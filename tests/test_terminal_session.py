"""`pmem backfill` in a real terminal (pexpect, a pty): the wait line while the HTTP committer
waits for its budget, then Ctrl-C in the middle of the run with -v: one line saying what was
kept and the exact resume command, exit 130, no traceback; the resume command then finishes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pexpect

from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_ctrl_c_in_a_terminal_prints_one_line_and_the_resume_command_finishes(cli_env, api_server):
    url = api_server()
    env = dict(
        cli_env,
        PMEM_MEMORY_URL=url,
        PMEM_COMMIT_BUDGET="3/60s",
        PMEM_MAX_WAIT_SECONDS="600",
        PMEM_BATCH_MAX_CONVERSATIONS="2",
        COLUMNS="200",
        TERM="xterm",
    )
    args = ["-m", "cli.main", "-v", "backfill", "--source", "chatgpt", "--export", str(DEMO)]
    child = pexpect.spawn(
        sys.executable,
        args,
        env=env,
        cwd=str(PROJECT),
        encoding="utf-8",
        timeout=240,
        dimensions=(40, 200),
    )
    try:
        # the terminal says what the run waits for and until when
        child.expect(
            r"waiting for the memory API budget \(3 requests per 60 s\) until \d\d:\d\d:\d\d"
        )
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    after = ANSI.sub("", child.before or "")
    assert child.exitstatus == 130, after[-3000:]
    stopped = [line for line in after.splitlines() if "stopped (Ctrl-C)" in line]
    assert len(stopped) == 1, after[-3000:]
    assert "Traceback" not in after and "PoolClosed" not in after, after[-3000:]
    m = re.search(
        r"stopped \(Ctrl-C\): run (\S+) keeps \d+ of \d+ batches drafted and \d+ commits?; "
        r"resume with: (pmem .+)$",
        stopped[0].strip(),
    )
    assert m, stopped[0]
    run_id, resume = m.groups()
    assert resume == f"pmem -v backfill --source chatgpt --export {DEMO}"

    # the resume command, as printed (pmem = this interpreter's cli.main), finishes the same run
    env.update(PMEM_COMMIT_BUDGET="100000/600s")
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", *resume.split()[1:], "--json"],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["run_id"] == run_id and summary["resumed"] and summary["status"] == "complete"
