"""Issue 29, finding 18: recall never confirms a guessed secret. A query holding a password or a
key the ledger holds finds no hit by it (no "(exact)" hit, no hit at all by that word), while
the message is still found, redacted, by its other words, and the owner's --raw recall sees it."""

from __future__ import annotations

from datetime import UTC, datetime

from mcp_server.service import MemoryService
from store.ledger import Ledger
from tests.test_recall import _conversation, at

NOW = "2025-03-04T12:00+00:00"


def test_a_guessed_secret_gets_no_hit(db) -> None:
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    when = datetime(2025, 3, 3, 10, 0, tzinfo=UTC)
    password, key = "Tr0ub4dor&3xQ", "ghp_" + "Zx81Qw72Er63Ty54Ui45Op36As27Df18Gh09Jk"
    texts = {
        "p1": f"ルーターの管理画面のパスワードは {password} にした。",
        "p2": f"the deploy token is {key} for the homelab",
    }
    for k, text in texts.items():
        ledger.upsert(_conversation(k, text, when), imp)
    svc = MemoryService(db, embedder=None, tz="UTC")
    for guess in (password, key, f"パスワード {password}", f"is my token {key}?"):
        r = svc.recall(guess, now=at(NOW))
        assert not [h for h in r.hits if h.conversation_key in ("chatgpt:p1", "chatgpt:p2")], (
            guess,
            [(h.match, h.text[:30]) for h in r.hits],
        )
    found = svc.recall("ルーター 管理画面", now=at(NOW)).hits
    assert found and "[REDACTED" in found[0].text and password not in found[0].text
    found = svc.recall("deploy token homelab", now=at(NOW)).hits
    assert found and key not in found[0].text
    raw = svc.recall(password, now=at(NOW), raw=True).hits  # the owner's own --raw
    assert raw and password in raw[0].text
