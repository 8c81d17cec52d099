"""The guard runs detect-secrets' plugins only on a text that holds what every one of their
patterns needs (`core.secrets._LIBRARY_HINT_RE`). A text one of those patterns matches must
always pass the hint, or a secret would go unredacted: checked here on strings generated from
each pattern of the installed detect-secrets, and on every plugin's known form."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import secrets
from core.secrets import _LIBRARY_HINT_RE, _library_plugins, find_secrets

PATTERNS = [
    (kind, regex)
    for kind, plugin in _library_plugins()
    for regex in getattr(plugin, "denylist", ())
]

# The patterns the hint was written against. When detect-secrets changes them, read the new
# ones, widen `_LIBRARY_HINT_RE` where needed, and update this fingerprint.
FINGERPRINT = "b3f741a3"


def _fingerprint() -> str:
    text = "\n".join(f"{kind}\t{r.pattern}\t{r.flags}" for kind, r in PATTERNS)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def test_the_hint_was_written_against_the_installed_patterns() -> None:
    assert _fingerprint() == FINGERPRINT, (
        "detect-secrets' patterns changed: re-check core.secrets._LIBRARY_HINT_RE against them"
    )


@pytest.mark.parametrize(
    ("kind", "regex"), PATTERNS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(PATTERNS)]
)
def test_every_string_a_library_pattern_matches_passes_the_hint(
    kind: str, regex: re.Pattern[str]
) -> None:
    @given(st.from_regex(regex, fullmatch=False))
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    def check(text: str) -> None:
        if regex.search(text):
            assert _LIBRARY_HINT_RE.search(text), (kind, regex.pattern)

    check()


@pytest.mark.parametrize(
    "text",
    [
        "AKIAIOSFODNN7EXAMPLE",
        "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",
        "xoxb-1-a",
        "https://user:pw@example.com/",
        "npm //registry.npmjs.org/:_authToken=npm_x",
        "-----BEGIN RSA PRIVATE KEY-----",
        "sk_live_" + "a1" * 12,
        "AKCp5bueTFpfypEqQbGJPp7aa",
        "APBx3Ekq7Mz",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbg",
    ],
)
def test_the_known_forms_pass_the_hint(text: str) -> None:
    assert _LIBRARY_HINT_RE.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "結局、家計簿アプリのDBは PostgreSQL にした。複数端末で同期したいから。",
        "What did I end up deciding about the laptop? The ThinkPad, because of Linux.",
        "丹沢は来月にする。",
    ],
)
def test_prose_skips_the_plugins_and_is_still_scanned(text: str) -> None:
    assert not _LIBRARY_HINT_RE.search(text)
    assert find_secrets(text) == []
    assert find_secrets(text + " password: hunter2hunter2")  # the guard's own rules still run


def test_a_search_of_prose_does_not_import_detect_secrets() -> None:
    code = (
        "import sys; from core.secrets import redact, redact_messages;"
        "redact('PostgreSQL にした'); redact_messages(['丹沢', 'the laptop, because of Linux.']);"
        "print('detect_secrets' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert secrets.redact("key AKIAIOSFODNN7EXAMPLE")[1]  # and a key in the same process is found
