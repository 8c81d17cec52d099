"""The secret guard: find API keys, tokens, passwords and private keys in text, and redact them.

Nothing the guard flags may reach an LLM request, an embedding request, a memory, an evidence
row, a log or a client. The raw ledger keeps the export as it is (it is the person's own copy);
everything that leaves it goes through ``redact`` first.

Two sources of detections, merged:

1. detect-secrets' plugins (Yelp's scanner: AWS, GitHub, GitLab, Slack, Stripe, Twilio,
   SendGrid, npm, PyPI, JWT, private keys, basic auth, keyword assignments in code, ...). Its
   entropy plugins are left out on purpose: in chat text they flag every commit hash, UUID and
   base64 image. Its public-IP plugin is left out too (an address is not a credential).
2. Our own patterns for current key formats and for how people paste secrets into a chat:
   OpenAI ``sk-``/``sk-proj-``, Anthropic ``sk-ant-``, Google ``AIza``, GitHub fine-grained
   ``github_pat_``, Hugging Face, Stripe test keys and webhook secrets, whole PEM blocks,
   JWTs with their signature, ``Bearer`` / ``Basic`` headers, passwords in URLs, ``.env``
   lines, and ``password: ...`` / ``パスワードは ...`` in prose.

A value found once is redacted wherever else it occurs in the same text, when it is at least
8 characters and looks random (a digit, a symbol, or 16+ characters), so that "password:
required" cannot erase every "required" in a conversation. ``Finding`` carries the type
and the span in the input, never the secret itself. Redaction replaces each span with
``[REDACTED:<type>]``; redacting redacted text changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import KeywordDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector
from pydantic import BaseModel, ConfigDict

from core.models import DraftRecord

__all__ = [
    "Finding",
    "contains_secret",
    "find_secrets",
    "redact",
    "redaction_marker",
    "secret_fields",
]

GLOBAL_MIN_CHARS = 8  # a value at least this long is redacted wherever it occurs
MIN_VALUE_CHARS = 4  # shorter "secrets" are noise (password = "" / "x")
_MARKER_PREFIX = "[REDACTED:"


class Finding(BaseModel):
    """One detected secret: its type and where it was, never its value."""

    model_config = ConfigDict(frozen=True)

    type: str
    start: int
    end: int


def redaction_marker(kind: str) -> str:
    return f"{_MARKER_PREFIX}{kind}]"


# ---------------------------------------------------------------- detect-secrets plugins

# Plugins whose regexes are run over the whole text (see ``_library_spans``).
_LIBRARY_PLUGINS: tuple[tuple[str, BasePlugin], ...] = (
    ("artifactory-token", ArtifactoryDetector()),
    ("aws-access-key", AWSKeyDetector()),
    ("azure-storage-key", AzureStorageKeyDetector()),
    ("url-credentials", BasicAuthDetector()),
    ("cloudant-credentials", CloudantDetector()),
    ("discord-token", DiscordBotTokenDetector()),
    ("github-token", GitHubTokenDetector()),
    ("gitlab-token", GitLabTokenDetector()),
    ("ibm-cloud-iam-key", IbmCloudIamDetector()),
    ("ibm-cos-hmac", IbmCosHmacDetector()),
    ("jwt", JwtTokenDetector()),
    ("mailchimp-key", MailchimpDetector()),
    ("npm-token", NpmDetector()),
    ("openai-api-key", OpenAIDetector()),
    ("private-key", PrivateKeyDetector()),
    ("pypi-token", PypiTokenDetector()),
    ("sendgrid-key", SendGridDetector()),
    ("slack-token", SlackDetector()),
    ("softlayer-credentials", SoftlayerDetector()),
    ("square-oauth-secret", SquareOAuthDetector()),
    ("stripe-key", StripeDetector()),
    ("telegram-token", TelegramBotTokenDetector()),
    ("twilio-key", TwilioKeyDetector()),
)
# The keyword plugin reports the first hit per pattern, so it runs line by line, and only on
# lines that mention a keyword at all.
_KEYWORD_PLUGIN = KeywordDetector()
_KEYWORD_HINT_RE = re.compile(r"key|pass|pwd|secret|contrase", re.IGNORECASE)

# ---------------------------------------------------------------- our own patterns

# (type, pattern, group): group 0 redacts the whole match, group 1 only the value.
_B = r"(?<![A-Za-z0-9_\-])"  # a token boundary that treats - and _ as part of a token
_E = r"(?![A-Za-z0-9_\-])"
_ASSIGN_VALUE = r"[\x21\x23-\x26\x28-\x5f\x61-\x7e]"  # printable ASCII except space, " ' `

_PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            # with its END line, or (pasted cut short) its header and base64 lines only
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"|(?:[ \t]*\r?\n[ \t]*(?:[A-Za-z0-9+/=]{16,}|[A-Za-z\-]+:[^\n]*))*)",
            re.DOTALL,
        ),
        0,
    ),
    ("anthropic-api-key", re.compile(_B + r"sk-ant-[A-Za-z0-9_\-]{20,}" + _E), 0),
    (
        "openai-api-key",
        re.compile(_B + r"sk-(?!ant-)(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}" + _E),
        0,
    ),
    ("google-api-key", re.compile(_B + r"AIza[0-9A-Za-z_\-]{35}" + _E), 0),
    (
        "github-token",
        re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})" + _E),
        0,
    ),
    (
        "gitlab-token",
        re.compile(_B + r"gl(?:pat|dt|rt|cbt|ptt|ft|soat)-[A-Za-z0-9_\-]{20,}" + _E),
        0,
    ),
    ("huggingface-token", re.compile(_B + r"hf_[A-Za-z0-9]{30,}" + _E), 0),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"), 0),
    (
        "aws-secret-key",
        re.compile(
            r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*(?:[:=]|=>)\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        1,
    ),
    ("slack-token", re.compile(_B + r"xox[abposre]-[A-Za-z0-9\-]{10,}" + _E), 0),
    ("slack-token", re.compile(_B + r"xapp-\d-[A-Za-z0-9\-]{10,}" + _E), 0),
    (
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+"),
        0,
    ),
    ("stripe-key", re.compile(_B + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}" + _E), 0),
    ("stripe-webhook-secret", re.compile(_B + r"whsec_[A-Za-z0-9]{24,}" + _E), 0),
    ("npm-token", re.compile(_B + r"npm_[A-Za-z0-9]{36}" + _E), 0),
    ("pypi-token", re.compile(_B + r"pypi-[A-Za-z0-9_\-]{50,}" + _E), 0),
    ("sendgrid-key", re.compile(_B + r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}" + _E), 0),
    ("twilio-key", re.compile(r"\b(?:SK|AC)[0-9a-fA-F]{32}\b"), 0),
    (
        "jwt",
        re.compile(_B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}" + _E),
        0,
    ),
    ("bearer-token", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/\-]{16,}=*)"), 1),
    (
        "basic-auth",
        re.compile(r"(?i)\bauthorization\s*[:=]\s*[\"']?basic\s+([A-Za-z0-9+/]{8,}=*)"),
        1,
    ),
    ("url-credentials", re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]+:([^\s/@]+)@"), 1),
)

# .env / shell lines: NAME=value where the name speaks of a credential (value checked below)
_ENV_LINE_RE = re.compile(
    r"(?im)^[ \t]*(?:export[ \t]+)?(?P<name>[A-Za-z0-9_]*"
    r"(?:PASSWORD|PASSWD|PASS|PWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?|AUTH)"
    r"[A-Za-z0-9_]*)[ \t]*=[ \t]*[\"']?(?P<value>[^\s\"'#]{4,})"
)

# "password: hunter2", "API key = abc123...", "パスワードは hunter2", "my password is hunter2"
_PASSWORD_WORDS = (
    r"passwords?|passwd|passphrase|pass ?code|pwd|パスワード|暗証番号|合言葉|パスフレーズ"
)
_KEY_WORDS = (
    r"secret(?:[ _\-]?key)?|client[ _\-]?secret|api[ _\-]?key|access[ _\-]?key|access[ _\-]?token"
    r"|auth[ _\-]?token|refresh[ _\-]?token|private[ _\-]?key|token|credentials?"
    r"|秘密鍵|シークレット|トークン|APIキー|アクセスキー"
)
_ASSIGNMENT_RE = re.compile(
    rf"(?i)(?<![A-Za-z])(?:(?P<pw>{_PASSWORD_WORDS})|(?:{_KEY_WORDS}))[\"'`\]]*\s*"
    rf"(?:(?P<assign>:=|=>|==?|[:：]|は|を)|\s(?P<prose>is|was)\s)\s*[\"'`]?"
    rf"(?P<value>{_ASSIGN_VALUE}{{{MIN_VALUE_CHARS},}})"
)
_TRAILING_PUNCT = ".,;:!?)]}>"
_SYMBOLS = set("!@#$%^&*_+-=/~|\\")
_PLACEHOLDER_RE = re.compile(
    r"^(?:x+|\*+|\.+|-+|_+|<.*|\{[^}]*\}|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_]+%"
    r"|your[_\-]?\w*|changeme|placeholder|example|redacted|none|null|true|false|undefined)$",
    re.IGNORECASE,
)
_CODE_REF_RE = re.compile(
    r"[(\[{]|^(?:os\.|process\.env|env\.|self\.|this\.|config\.|settings\.|getenv|\$)",
    re.IGNORECASE,
)


def _plausible(value: str) -> bool:
    """Not a placeholder, not a reference to code or configuration."""
    return (
        len(value) >= MIN_VALUE_CHARS
        and not _PLACEHOLDER_RE.match(value)
        and not _CODE_REF_RE.search(value)
    )


def _credential_like(value: str, *, password: bool, prose: bool) -> bool:
    """Whether a value after "password:" / "token =" / "password is" looks like a credential.

    After a password keyword and an assignment any plausible value counts (a PIN included).
    After "is"/"was", or after a key/token keyword, the value must look random: a digit or a
    symbol, or length; a key/token value also needs 8 characters and not only digits.
    """
    if not _plausible(value):
        return False
    if password:
        return True if not prose else _random_looking(value, long=12)
    if len(value) < GLOBAL_MIN_CHARS or value.isdigit():
        return False
    return _random_looking(value)


def _random_looking(value: str, *, long: int = 16) -> bool:
    """A digit or a symbol in it, or long: not an ordinary word."""
    return (
        len(value) >= long
        or any(ch.isdigit() for ch in value)
        or any(ch in _SYMBOLS for ch in value)
    )


# ---------------------------------------------------------------- detection


def find_secrets(text: str) -> list[Finding]:
    """Every secret span in ``text``, merged, in order. Empty when the text is clean."""
    if not text:
        return []
    spans: list[tuple[int, int, str]] = []
    values: dict[str, str] = {}

    def add(start: int, end: int, kind: str) -> None:
        # trim white space and quotes the patterns may have taken at the edges
        while start < end and text[start] in " \t\r\n\"'`=:":
            start += 1
        while end > start and text[end - 1] in " \t\r\n\"'`,;":
            end -= 1
        if end - start < MIN_VALUE_CHARS or text.startswith(_MARKER_PREFIX, start):
            return
        spans.append((start, end, kind))
        value = text[start:end]
        if len(value) >= GLOBAL_MIN_CHARS and _random_looking(value):
            values.setdefault(value, kind)

    for kind, plugin in _LIBRARY_PLUGINS:
        for start, end in _library_spans(plugin, text):
            add(start, end, kind)

    offset = 0
    for line in text.splitlines(keepends=True):
        if _KEYWORD_HINT_RE.search(line):
            for value in _plugin_values(_KEYWORD_PLUGIN, line):
                if _plausible(value):
                    for start in _occurrences(line, value):
                        add(offset + start, offset + start + len(value), "keyword-secret")
        offset += len(line)

    for kind, pattern, group in _PATTERNS:
        for m in pattern.finditer(text):
            add(m.start(group), m.end(group), kind)

    for m in _ENV_LINE_RE.finditer(text):
        name = m.group("name").upper()
        password = "PASS" in name or "PWD" in name
        if _credential_like(m.group("value"), password=password, prose=False):
            add(m.start("value"), m.end("value"), "env-secret")

    for m in _ASSIGNMENT_RE.finditer(text):
        value = m.group("value").rstrip(_TRAILING_PUNCT)
        password = m.group("pw") is not None
        if _credential_like(value, password=password, prose=m.group("prose") is not None):
            start = m.start("value")
            add(start, start + len(value), "password" if password else "secret")

    # a value found once is a secret wherever it occurs
    for value, kind in values.items():
        for start in _occurrences(text, value):
            spans.append((start, start + len(value), kind))

    return _merge(spans)


def _library_spans(plugin: BasePlugin, text: str) -> Iterator[tuple[int, int]]:
    """Spans of a detect-secrets plugin's hits.

    Its ``analyze_string`` yields only the values, and for a pattern with a group only the
    group (GitHub's yields the prefix "ghp"), so the regexes are run here with ``finditer``:
    a group that holds a value is the secret, else the whole match. A plugin that filters
    its matches in its own ``analyze_string`` (JWT checks the token's form) is asked for
    values and each value is located.
    """
    if type(plugin).analyze_string is not RegexBasedDetector.analyze_string:
        for value in _plugin_values(plugin, text):
            for start in _occurrences(text, value):
                yield start, start + len(value)
        return
    for regex in getattr(plugin, "denylist", ()):
        for m in regex.finditer(text):
            groups = [
                i
                for i in range(1, regex.groups + 1)
                if m.group(i) and len(m.group(i).strip("\"'` ")) >= MIN_VALUE_CHARS
            ]
            if groups:
                for i in groups:
                    yield m.start(i), m.end(i)
            else:
                yield m.start(), m.end()


def _plugin_values(plugin: BasePlugin, text: str) -> Iterator[str]:
    for raw in plugin.analyze_string(text):
        if not isinstance(raw, str):
            continue
        value = raw.strip().strip("\"'`=:").strip()
        if len(value) >= MIN_VALUE_CHARS and not value.startswith(_MARKER_PREFIX):
            yield value


def _occurrences(text: str, value: str) -> Iterator[int]:
    start = text.find(value)
    while start >= 0:
        yield start
        start = text.find(value, start + 1)


def _merge(spans: Iterable[tuple[int, int, str]]) -> list[Finding]:
    merged: list[list] = []
    for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            continue
        merged.append([start, end, kind])
    return [Finding(type=kind, start=start, end=end) for start, end, kind in merged]


def redact(text: str) -> tuple[str, list[Finding]]:
    """``text`` with every secret replaced by ``[REDACTED:<type>]``, and what was found.

    The findings' spans refer to the input text.
    """
    findings = find_secrets(text)
    if not findings:
        return text, []
    parts: list[str] = []
    cursor = 0
    for f in findings:
        parts.append(text[cursor : f.start])
        parts.append(redaction_marker(f.type))
        cursor = f.end
    parts.append(text[cursor:])
    return "".join(parts), findings


def contains_secret(text: str) -> bool:
    return bool(find_secrets(text))


_TEXT_FIELDS = ("title", "canonical_summary", "index_summary")
_LIST_FIELDS = ("aliases", "tags", "stated_facts", "inferences")


def secret_fields(draft: DraftRecord) -> list[str]:
    """The names of a draft's text fields that hold a secret (empty when the draft is clean).

    For the verifier: a draft whose summary, index text or aliases still hold a secret must not
    be committed. Evidence is checked separately (``stages.evidence``), against its source.
    """
    found = [name for name in _TEXT_FIELDS if contains_secret(getattr(draft, name))]
    found += [
        name for name in _LIST_FIELDS if any(contains_secret(v) for v in getattr(draft, name))
    ]
    return found


def secret_values(texts: Iterable[str]) -> set[str]:
    """The secret values themselves, as found in these texts (to scrub them elsewhere)."""
    values: set[str] = set()
    for text in texts:
        for f in find_secrets(text):
            value = text[f.start : f.end].strip()
            if len(value) >= 6:
                values.add(value)
    return values


def redact_draft(draft: DraftRecord, known: Iterable[str] = ()) -> tuple[DraftRecord, list[str]]:
    """The draft with every secret in its text fields replaced by a marker, and the names of the
    fields that held one. ``known`` are secret values found in the source messages: a value
    that appears without its context (a bare password as an alias) is scrubbed too. Aliases and
    tags that held a secret are dropped. Used before a draft is written to result.json or
    committed, so that no memory, revision or index row holds a secret (invariant 7)."""
    values = set(known) | secret_values(getattr(draft, n) for n in _TEXT_FIELDS)
    values |= secret_values(v for n in _LIST_FIELDS for v in getattr(draft, n))

    def scrub(text: str) -> str:
        text = redact(text)[0]
        for v in sorted(values, key=len, reverse=True):
            text = text.replace(v, redaction_marker("secret"))
        return text

    update: dict[str, object] = {}
    changed: list[str] = []
    for name in _TEXT_FIELDS:
        value = getattr(draft, name)
        new = scrub(value)
        if new != value:
            update[name] = new
            changed.append(name)
    for name in _LIST_FIELDS:
        items = getattr(draft, name)
        if name in ("stated_facts", "inferences"):
            kept = [scrub(v) for v in items]  # sentences: keep them, redacted
        else:
            kept = [v for v in items if scrub(v) == v]  # a label that held a secret goes
        if kept != items:
            update[name] = kept
            changed.append(name)
    pointers = [p.model_copy(update={"quote_hint": scrub(p.quote_hint)}) for p in draft.evidence]
    if pointers != draft.evidence:  # such a pointer no longer verifies: it is rejected, not stored
        update["evidence"] = pointers
        changed.append("evidence")
    return (draft.model_copy(update=update) if update else draft), changed
