"""The secret guard: a corpus of planted secrets (>= 30, >= 15 kinds), clean text left alone,
redaction that is idempotent, findings that never carry the secret, and the prompt guarded."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.models import Channel, Conversation, MemoryIndexEntry, Message, Provenance
from core.secrets import Finding, contains_secret, find_secrets, redact
from prompts.case_record import build_prompt, build_prompt_guarded

# Built from pieces so that no scanner mistakes this file for a leak; the values are fake.
A20 = "AbCdEfGhIjKlMnOpQrSt"
D20 = "01234567890123456789"
PEM_BODY = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Ul6Sv\n9x1R2q3yTqLk8vN0pQwErTyUiOpAsDfGhJkLzXcV\n"

# (kind, text holding the secret, the secret value that must not survive)
CORPUS: list[tuple[str, str, str]] = [
    ("openai-legacy", "key: sk-" + A20 + "T3BlbkFJ" + D20, A20 + "T3BlbkFJ" + D20),
    ("openai-project", "OPENAI key sk-proj-" + A20 + D20 + "_xY-9z", "sk-proj-" + A20 + D20),
    ("openai-service", "use sk-svcacct-" + D20 + A20 + " in CI", "sk-svcacct-" + D20 + A20),
    ("anthropic", "ANTHROPIC: sk-ant-api03-" + A20 + D20 + "-AA", "sk-ant-api03-" + A20 + D20),
    ("github-classic", "token ghp_" + A20 + "0123456789abcdef", "ghp_" + A20 + "0123456789abcdef"),
    ("github-fine", "github_pat_11AB" + D20 + "_" + A20 + D20, "github_pat_11AB" + D20),
    ("gitlab", "GITLAB glpat-" + A20 + "xyz", "glpat-" + A20),
    ("aws-access-key", "AWS id AKIA" + "IOSFODNN7EXAMPLE" + " in use", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws-secret-key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("google-api-key", "maps: AIza" + "SyD-" + A20 + "0123456789A", "SyD-" + A20 + "0123456789A"),
    ("slack-bot", "bot xoxb-" + "123456789012-1234567890123-" + A20, "1234567890123-" + A20),
    (
        "slack-webhook",
        "post to https://hooks.slack.com/services/T0123ABCD/B0123ABCD/" + A20,
        "T0123ABCD/B0123ABCD/" + A20,
    ),
    ("stripe-live", "stripe sk_" + "live_" + A20 + "0123", "live_" + A20 + "0123"),
    ("stripe-test", "test key sk_" + "test_" + A20 + "4567", "test_" + A20 + "4567"),
    ("stripe-webhook", "whsec_" + A20 + "abcdefgh", "whsec_" + A20 + "abcdefgh"),
    (
        "jwt",
        "id_token=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    (
        "rsa-private-key",
        "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Ul6Sv",
    ),
    (
        "openssh-private-key",
        "鍵はこれ:\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY,  # pasted without its end
        "9x1R2q3yTqLk8vN0pQwErTyUiOpAsDfGhJkLzXcV",
    ),
    (
        "bearer",
        "curl -H 'Authorization: Bearer " + A20 + D20 + "' https://api.example.com",
        A20 + D20,
    ),
    ("basic-auth", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpwYXNzd29yZDEyMw"),
    ("postgres-url", "DATABASE_URL=postgres://app:Sup3rS3cret@db:5432/app", "Sup3rS3cret"),
    ("https-url", "clone https://alice:gh0stPass!@git.example.com/repo.git", "gh0stPass!"),
    ("env-password", "DB_PASSWORD=s3cr3t-Pa55", "s3cr3t-Pa55"),
    ("env-secret", "export SECRET_KEY=django-insecure-" + D20, "django-insecure-" + D20),
    ("prose-password", "the db password: hunter2hunter2 (do not share)", "hunter2hunter2"),
    ("japanese-password", "Wi-Fiのパスワードは aB3dE5gH7 です", "aB3dE5gH7"),
    ("japanese-colon", "管理画面のパスワード：Kanri-2024!", "Kanri-2024!"),
    ("json-password", '{"user": "alice", "password": "C0rrect-Horse"}', "C0rrect-Horse"),
    ("python-api-key", "api_key = '" + A20 + "99'", A20 + "99"),
    ("prose-is", "my password is Tr0ub4dor&3 on that site", "Tr0ub4dor&3"),
    ("huggingface", "HF hf_" + A20 + D20 + "ab", "hf_" + A20 + D20),
    (
        "npm",
        "//registry.npmjs.org/:_authToken=npm_" + A20 + "0123456789abcdef",
        A20 + "0123456789abcdef",
    ),
    ("pypi", "password = pypi-AgEIcHlwaS5vcmc" + A20 * 4, "AgEIcHlwaS5vcmc" + A20 * 4),
    ("sendgrid", "SG." + "abcdefghij0123456789AB." + A20 + D20 + "abc", A20 + D20),
    (
        "twilio",
        "twilio SK" + "0123456789abcdef0123456789abcdef",
        "0123456789abcdef0123456789abcdef",
    ),
    ("telegram", "bot 123456789:" + "AAE" + A20 + "abcdefghijkl", "AAE" + A20 + "abcdefghijkl"),
    ("access-token", "access_token=ya29.a0AfH6SM" + A20 + D20, "ya29.a0AfH6SM" + A20),
]

CLEAN = [
    "I decided to use PostgreSQL because sync across devices matters.",
    "家計簿アプリはSQLiteにした。理由は端末内で完結するから。",
    "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed the bug",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "def tokenize(text):\n    tokens = text.split()\n    return tokens",
    "The password field must be at least 8 characters long.",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "max_tokens=4096, temperature=0.2",
    "see https://example.com/docs?page=2#intro",
    "password = os.environ['DB_PASSWORD']",
    "api_key = get_api_key()",
    "The API key is stored in the keychain.",
    "トークンは有効期限切れだった。パスワードを変更した。",
    "Token: 512 per request; the secret to success is practice.",
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 alice@laptop",
    "server at 192.168.1.10:8080, scikit-learn and sk-learn are the same",
    "PASSWORD=${DB_PASSWORD}",
    "password: <your password here>",
]


def test_the_corpus_is_large_and_varied() -> None:
    assert len(CORPUS) >= 30
    assert len({kind for kind, _, _ in CORPUS}) >= 15


@pytest.mark.parametrize(("kind", "text", "secret"), CORPUS, ids=[c[0] for c in CORPUS])
def test_every_planted_secret_is_redacted(kind: str, text: str, secret: str) -> None:
    assert secret in text  # the corpus itself is right
    assert contains_secret(text)
    clean, findings = redact(text)
    assert findings
    assert secret not in clean
    assert "[REDACTED:" in clean
    assert not contains_secret(clean)


@pytest.mark.parametrize("text", CLEAN)
def test_clean_text_is_left_alone(text: str) -> None:
    assert find_secrets(text) == []
    assert redact(text) == (text, [])


def test_findings_carry_type_and_span_never_the_secret() -> None:
    text = "a\npassword: hunter2hunter2\nb"
    clean, [finding] = redact(text)
    assert set(Finding.model_fields) == {"type", "start", "end"}
    assert finding.type == "password"
    assert text[finding.start : finding.end] == "hunter2hunter2"
    assert "hunter2" not in finding.model_dump_json() and "hunter2" not in repr(finding)
    assert clean == "a\npassword: [REDACTED:password]\nb"


def test_a_value_found_once_is_redacted_everywhere() -> None:
    text = "password: Kx9-vault-42\n...later I typed Kx9-vault-42 into the wrong box"
    clean, findings = redact(text)
    assert "Kx9-vault-42" not in clean and len(findings) == 2


def test_the_whole_corpus_in_one_text() -> None:
    text = "\n".join(t for _, t, _ in CORPUS)
    clean, findings = redact(text)
    assert len(findings) >= len(CORPUS) // 2  # a key wrapped onto the next line is one finding
    for _, _, secret in CORPUS:
        assert secret not in clean
    assert redact(clean) == (clean, [])


def test_redaction_is_idempotent() -> None:
    for _, text, _ in CORPUS:
        once, _ = redact(text)
        assert redact(once) == (once, [])


@given(
    st.sampled_from(CORPUS),
    st.text(alphabet=st.sampled_from("abc xyz 日本語です。\n.,!?"), max_size=60),
    st.text(alphabet=st.sampled_from("abc xyz 日本語です。\n.,!?"), max_size=60),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_secret_is_redacted_whatever_surrounds_it(
    case: tuple[str, str, str], before: str, after: str
) -> None:
    _, text, secret = case
    clean, _ = redact(f"{before}\n{text}\n{after}")
    assert secret not in clean


# ---------------------------------------------------------------- the prompt is guarded

T0 = datetime(2024, 3, 5, 21, 10, tzinfo=UTC)


def _conversation(
    texts: list[str], *, title: str, key: str = "s1", when: datetime = T0
) -> Conversation:
    """A ChatGPT conversation whose turns alternate person / assistant."""
    messages = [
        Message(
            key=f"chatgpt:{key}:n{i}",
            node_id=f"n{i}",
            role="user" if i % 2 == 0 else "assistant",
            channel=Channel.PERSON if i % 2 == 0 else Channel.ASSISTANT,
            content_type="text",
            text=text,
            created_at=when,
            position=i,
        )
        for i, text in enumerate(texts)
    ]
    return Conversation(
        key=f"chatgpt:{key}",
        source="chatgpt",
        external_id=key,
        title=title,
        created_at=when,
        messages=messages,
        provenance=Provenance(file="conversations.json", position=0),
    )


def test_build_prompt_sends_no_planted_secret() -> None:
    texts = [text for _, text, _ in CORPUS]
    conv = _conversation(texts, title="keys: ghp_" + A20 + "0123456789abcdef")
    entry = MemoryIndexEntry(
        id="mem_1",
        title="Deploy notes",
        index_summary="password: hunter2hunter2",
        kind="project",
        current_revision=2,
    )
    static, dynamic, redacted = build_prompt_guarded([conv], [entry])
    body = json.dumps({"system": static, "user": dynamic}, ensure_ascii=False)
    for _, _, secret in CORPUS:
        assert secret not in body
    assert "hunter2hunter2" not in body and "ghp_" + A20 not in body
    assert redacted >= len(CORPUS)
    assert not contains_secret(dynamic)
    # keys, roles and the person's ordinary words are untouched
    assert "[1] key: chatgpt:s1:n0 | role: person" in dynamic
    assert "mem_1" in dynamic and "current revision: 2" in dynamic
    assert build_prompt([conv], [entry]) == (static, dynamic)


def test_an_ordinary_word_after_a_keyword_is_not_erased_everywhere() -> None:
    assert redact("Password: required. Fields: name (required), email (required).")[1] == []
    clean, findings = redact("Password: Kx9-vault. Fields: name (Kx9), email (vault).")
    assert len(findings) == 1
    assert clean == "Password: [REDACTED:password]. Fields: name (Kx9), email (vault)."


def test_a_placeholder_or_dev_default_in_a_config_is_not_a_secret() -> None:
    for text in (
        "POSTGRES_PASSWORD: localdev",
        "DB_PASSWORD=securepassword",
        "apiKey: 'proxy-handled'",
        "'PASSWORD': 'testpassword',",
        '--api-key sk-... "review code"',
        "postgresql://yamalog_app:****@host/db",
        "export API_KEY=REDACTED_API_KEY",
    ):
        assert find_secrets(text) == [], text


def test_a_private_key_cut_short_takes_only_its_own_lines() -> None:
    text = (
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
        + PEM_BODY
        + "\nThanks. Can you help me debug this?"
    )
    clean, _ = redact(text)
    assert clean == "[REDACTED:private-key]\n\nThanks. Can you help me debug this?"


def test_secret_fields_names_the_fields_of_a_draft_that_hold_one() -> None:
    from core.models import DraftRecord
    from core.secrets import secret_fields

    clean = DraftRecord(
        action="create",
        title="DB choice",
        memory_kind="decision",
        canonical_summary="Chose PostgreSQL for sync.",
        index_summary="PostgreSQL for the household app",
        aliases=["データベース選定"],
    )
    assert secret_fields(clean) == []
    leaky = clean.model_copy(
        update={
            "canonical_summary": "Chose PostgreSQL. db password: hunter2hunter2",
            "tags": ["db", "ghp_" + A20 + "0123456789abcdef"],
        }
    )
    assert secret_fields(leaky) == ["canonical_summary", "tags"]


def test_a_bang_written_onto_a_password_goes_with_it() -> None:
    # the "!" may be the password's last character: never left beside the marker (a key's value
    # is machine-made, so its "!" is the sentence's and stays)
    assert redact("my password is password2024! ok")[0] == "my password is [REDACTED:password] ok"
    assert redact("パスワードはabc123!です")[0] == "パスワードは[REDACTED:password]です"
    assert redact("API key = abcdEF12345678xyz! ok")[0] == "API key = [REDACTED:secret]! ok"
