"""The secret guard: find API keys, tokens, passwords and private keys in text, and redact them.

Nothing the guard flags may reach an LLM request, an embedding request, a memory, an evidence
row, a log or a client. The raw ledger keeps the export as it is (it is the person's own copy);
everything that leaves it goes through ``redact`` (one text) or ``redact_messages`` (a
conversation: a secret split across two messages is found as one) first, and always on the
final text, before it is cut into aliases or tags.

Where detections come from, merged:

1. detect-secrets' plugins (Yelp's scanner: AWS, GitHub, GitLab, Slack, Stripe, Twilio,
   SendGrid, npm, PyPI, JWT, private keys, basic auth, keyword assignments in code, ...). Its
   entropy plugins are left out on purpose: in chat text they flag every commit hash, UUID and
   base64 image. Its public-IP plugin is left out too (an address is not a credential).
2. Our own table of current key formats, read from gitleaks' rule list (OpenAI, Anthropic,
   Google OAuth ``GOCSPX-``, Docker ``dckr_pat_``, DigitalOcean, Grafana, Vault, Shopify,
   Sentry, Linear, Notion, Perplexity, age, 1Password, ...).
3. How people paste secrets into a chat: whole PEM blocks, ``Bearer`` / ``Basic`` headers,
   passwords in URLs (also with an empty user, ``redis://:pw@host``), ``.env`` lines,
   password flags on command lines (``mysql -p…``, ``curl -u user:pw``, ``sshpass -p``,
   ``--password``), ``password: ...`` / ``パスワードは ...`` / ``パスは…`` / ``pw→…`` in
   prose, "passphrase …:" lines, keys grouped in blocks, a hex or base64 secret next to a
   word like "signing secret" with no ``:``/``=`` beside it, and base64 that decodes to a
   secret.

Three views of the text are scanned, and every span is mapped back to the input:

- the NFKC view, so that full-width ``ｐａｓｓｗｏｒｄ：ｈｕｎｔｅｒ２`` reads as ASCII;
- the joined view, where a line break between two runs of token characters is removed, so that
  a key wrapped over two lines (or, through ``redact_messages``, split across two messages) is
  found whole: its redaction covers both lines, and no piece longer than 4 characters survives.

A value found once is redacted wherever else it occurs in the same text (or conversation), when
it is at least 8 characters and looks random (a digit, a symbol, or 16+ characters), so that
"password: required" cannot erase every "required" in a conversation. ``Finding`` carries the
type and the span in the input, never the secret itself. Redaction replaces each span with
``[REDACTED:<type>]``; redacting redacted text changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict

from core.models import Conversation, DraftRecord

if TYPE_CHECKING:
    from detect_secrets.plugins.base import BasePlugin


class _Lazy:
    """A regular expression compiled on its first use, not on import: most of the guard's
    patterns run only on a text holding one of their anchors, and a command that scans nothing
    compiles nothing (``re.compile`` of them all costs a few hundred ms at start-up)."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return self._compiled

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled().finditer(text)

    def search(self, text: str) -> re.Match[str] | None:
        return self.compiled().search(text)

    def match(self, text: str) -> re.Match[str] | None:
        return self.compiled().match(text)

    def sub(self, repl: Any, text: str) -> str:
        return self.compiled().sub(repl, text)


__all__ = [
    "Finding",
    "apply_findings",
    "contains_secret",
    "find_secrets",
    "find_secrets_in_messages",
    "guard_version",
    "redact",
    "redact_conversation",
    "redact_draft",
    "redact_messages",
    "redaction_marker",
    "secret_fields",
    "secret_values",
]

GLOBAL_MIN_CHARS = 8  # a value at least this long is redacted wherever it occurs
MIN_VALUE_CHARS = 4  # shorter "secrets" are noise (password = "" / "x")
_MARKER_PREFIX = "[REDACTED:"
_MARKER_RE = _Lazy(r"\[REDACTED:[a-z0-9\-]+\]")
_MESSAGE_SEPARATOR = "\n"  # messages of a conversation are scanned as lines of one text


class Finding(BaseModel):
    """One detected secret: its type and where it was, never its value."""

    model_config = ConfigDict(frozen=True)

    type: str
    start: int
    end: int


def redaction_marker(kind: str) -> str:
    return f"{_MARKER_PREFIX}{kind}]"


# ---------------------------------------------------------------- detect-secrets plugins


# Plugins whose regexes are run over the whole text (see ``_library_spans``). detect-secrets
# (and the HTTP client its verifiers import) is loaded on the first scan, not on import: a
# command that never scans a text does not pay for it.
@lru_cache(maxsize=1)
def _library_plugins() -> tuple[tuple[str, BasePlugin], ...]:
    from detect_secrets.plugins.artifactory import ArtifactoryDetector
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.cloudant import CloudantDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
    from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
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

    return (
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
@lru_cache(maxsize=1)
def _keyword_plugin() -> BasePlugin:
    from detect_secrets.plugins.keyword import KeywordDetector

    return KeywordDetector()


@lru_cache(maxsize=1)
def _regex_detector() -> type:
    from detect_secrets.plugins.base import RegexBasedDetector

    return RegexBasedDetector


_KEYWORD_HINT_RE = _Lazy(r"key|pass|pwd|secret|contrase", re.IGNORECASE)

# What every detect-secrets format plugin of ``_library_plugins`` needs in a text before one of
# its patterns can match: a run of 20 or more token characters (every key format: AWS, GitHub,
# GitLab, Stripe, Twilio, Telegram, SendGrid, Slack's bot tokens' tails, Mailchimp, PyPI, Azure,
# IBM, Cloudant, SoftLayer, Discord, Square, OpenAI), "://" (credentials in a URL, Slack's
# webhooks), "eyJ" (a JWT), "_authToken" (npm), "BEGIN " or PuTTY's header (private keys),
# Slack's "xox?-", and Artifactory's two short prefixes. Case is ignored, so the test is a
# superset of the patterns' own case rules. On a text without any of them (most prose) the
# plugins are not run, and a process that scans only such texts never imports detect-secrets
# (a fresh `pmem search`, ADR 0027). `tests/test_secrets_library_hint.py` checks the hint
# against strings generated from every pattern of the installed detect-secrets, and fails
# when those patterns change.
_LIBRARY_HINT_RE = _Lazy(
    r"[a-z\d_\-+/=\\]{20,}|://|eyJ|_authToken|BEGIN |PuTTY-User-Key|xox[abposr]-"
    r"|AKC[a-z0-9]{10}|AP[\dA-F][a-z0-9]{8}",
    re.IGNORECASE,
)

# ---------------------------------------------------------------- key formats

_B = r"(?<![A-Za-z0-9_\-])"  # a token boundary that treats - and _ as part of a token
_E = r"(?![A-Za-z0-9_\-])"
_T = r"[A-Za-z0-9_\-]"  # a token character


_Rule = tuple[str, _Lazy, int, tuple[str, ...] | None]


def _fmt(kind: str, body: str, anchors: tuple[str, ...] | None) -> _Rule:
    """A format rule; the regex runs only on a text holding one of its ``anchors``."""
    return kind, _Lazy(_B + body + _E), 0, anchors


# Formats recognised by their prefix and shape alone (after gitleaks' rule list, written here;
# lengths are lower bounds so that a key pasted with a character too many still counts).
_FORMATS: tuple[_Rule, ...] = (
    _fmt("anthropic-api-key", r"sk-ant-(?:api|admin|sid|oat)\d{2}-" + _T + "{20,}", ("sk-ant-",)),
    _fmt("anthropic-api-key", r"sk-ant-" + _T + "{20,}", ("sk-ant-",)),
    _fmt("openai-api-key", r"sk-(?!ant-)(?=" + _T + r"*\d)" + _T + "{20,}", ("sk-",)),
    _fmt("google-api-key", r"AIza[0-9A-Za-z_\-]{35}", ("AIza",)),
    _fmt("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_\-]{20,}", ("GOCSPX-",)),
    _fmt("google-oauth-token", r"ya29\.[A-Za-z0-9_\-.]{20,}", ("ya29.",)),
    _fmt("google-refresh-token", r"1//0[A-Za-z0-9_\-]{30,}", ("1//0",)),
    _fmt("docker-pat", r"dckr_(?:pat|oat)_[A-Za-z0-9_\-]{20,}", ("dckr_",)),
    _fmt(
        "github-token",
        r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
        ("gh", "github_pat_"),
    ),
    _fmt(
        "gitlab-token",
        r"gl(?:pat|dt|rt|cbt|ptt|ft|soat|imt|agent|oas|ffct)-[A-Za-z0-9_\-.]{20,}",
        ("gl",),
    ),
    _fmt("gitlab-token", r"GR1348941[A-Za-z0-9_\-]{20,}", ("GR1348941",)),
    _fmt("huggingface-token", r"(?:hf_|api_org_)[A-Za-z0-9]{30,}", ("hf_", "api_org_")),
    (
        "aws-access-key",
        _Lazy(r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
        0,
        ("A3T", "AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    _fmt("aws-bedrock-key", r"ABSK[A-Za-z0-9+/]{60,}={0,2}", ("ABSK",)),
    _fmt("slack-token", r"xox[abposre]-[A-Za-z0-9\-]{10,}", ("xox",)),
    _fmt("slack-token", r"xoxe\.xox[bp]-[A-Za-z0-9\-]{10,}", ("xoxe.",)),
    _fmt("slack-token", r"xapp-\d-[A-Za-z0-9\-]{10,}", ("xapp-",)),
    (
        "slack-webhook",
        _Lazy(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+"),
        0,
        ("hooks.slack.com",),
    ),
    (
        "webhook-url",
        _Lazy(
            r"https://(?:discord(?:app)?\.com/api/webhooks|[a-z0-9]+\.webhook\.office\.com"
            r"/webhookb2)/[A-Za-z0-9/_\-@.]{20,}"
        ),
        0,
        ("discord", "webhook.office.com"),
    ),
    _fmt(
        "stripe-key",
        r"(?:sk|rk)_(?:live|test|prod)_[0-9A-Za-z]{10,}",
        ("k_live_", "k_test_", "k_prod_"),
    ),
    _fmt("stripe-webhook-secret", r"whsec_[A-Za-z0-9+/=]{24,}", ("whsec_",)),
    _fmt("npm-token", r"npm_[A-Za-z0-9]{36}", ("npm_",)),
    _fmt("pypi-token", r"pypi-[A-Za-z0-9_\-]{50,}", ("pypi-",)),
    _fmt("sendgrid-key", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", ("SG.",)),
    _fmt("sendinblue-key", r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", ("xkeysib-",)),
    ("twilio-key", _Lazy(r"\b(?:SK|AC)[0-9a-fA-F]{32}\b"), 0, ("SK", "AC")),
    _fmt("jwt", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", ("eyJ",)),
    _fmt("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64}", ("_v1_",)),
    _fmt(
        "grafana-token",
        r"(?:glc_[A-Za-z0-9+/]{32,}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})",
        ("glc_", "glsa_"),
    ),
    _fmt("grafana-token", r"eyJrIjoi[A-Za-z0-9]{40,}={0,3}", ("eyJrIjoi",)),
    _fmt("vault-token", r"hv[sb]\.[A-Za-z0-9_\-]{80,}", ("hvs.", "hvb.")),
    _fmt("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ("shp",)),
    _fmt("sentry-token", r"sntry[us]_[A-Za-z0-9+/=_]{40,}", ("sntry",)),
    _fmt("linear-api-key", r"lin_(?:api|oauth)_[A-Za-z0-9]{40}", ("lin_",)),
    _fmt(
        "notion-token",
        r"(?:ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43})",
        ("ntn_", "secret_"),
    ),
    _fmt("perplexity-api-key", r"pplx-[A-Za-z0-9]{40,}", ("pplx-",)),
    _fmt("groq-api-key", r"gsk_[A-Za-z0-9]{40,}", ("gsk_",)),
    _fmt("xai-api-key", r"xai-[A-Za-z0-9]{60,}", ("xai-",)),
    _fmt("replicate-token", r"r8_[A-Za-z0-9]{30,}", ("r8_",)),
    _fmt("supabase-token", r"sbp_[a-f0-9]{40}", ("sbp_",)),
    _fmt("prefect-api-key", r"pnu_[A-Za-z0-9]{36}", ("pnu_",)),
    _fmt("pulumi-token", r"pul-[a-f0-9]{40}", ("pul-",)),
    _fmt("rubygems-token", r"rubygems_[a-f0-9]{48}", ("rubygems_",)),
    _fmt("databricks-token", r"dapi[a-f0-9]{32}(?:-\d)?", ("dapi",)),
    _fmt("doppler-token", r"dp\.(?:pt|st|sa|ct)\.[A-Za-z0-9]{40,}", ("dp.",)),
    _fmt("dynatrace-token", r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}", ("dt0c01.",)),
    _fmt("postman-key", r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}", ("PMAK-",)),
    _fmt(
        "age-secret-key",
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        ("AGE-SECRET-KEY-1",),
    ),
    _fmt(
        "1password-secret-key",
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})"
        r"-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        ("A3-",),
    ),
    _fmt("1password-token", r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}", ("ops_eyJ",)),
    _fmt("atlassian-token", r"ATATT3[A-Za-z0-9_\-=]{100,}", ("ATATT3",)),
    _fmt("azure-ad-client-secret", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}", ("Q~",)),
    _fmt("alibaba-access-key", r"LTAI[A-Za-z0-9]{20}", ("LTAI",)),
    _fmt("heroku-api-key", r"HRKU-AA[0-9A-Za-z_\-]{58}", ("HRKU-AA",)),
    _fmt(
        "flyio-token",
        r"(?:fo1_[\w\-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3})",
        ("fo1_", "fm1", "fm2"),
    ),
    _fmt("planetscale-token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.\-]{32,64}", ("pscale_",)),
    _fmt("new-relic-key", r"NR(?:AK|II|JS)-[A-Za-z0-9\-]{19,32}", ("NRAK-", "NRII-", "NRJS-")),
    _fmt(
        "square-token",
        r"(?:EAAA|sq0atp-|sq0csp-)[A-Za-z0-9_\-]{22,60}",
        ("EAAA", "sq0atp-", "sq0csp-"),
    ),
    _fmt("mapbox-secret-token", r"sk\.eyJ[A-Za-z0-9_\-]{50,}\.[A-Za-z0-9_\-]{20,}", ("sk.eyJ",)),
    _fmt("figma-token", r"figd_[A-Za-z0-9_\-]{36,}", ("figd_",)),
    _fmt("openshift-token", r"sha256~[\w\-]{43}", ("sha256~",)),
    _fmt("readme-token", r"rdme_[a-z0-9]{70}", ("rdme_",)),
    _fmt("telegram-token", r"\d{8,10}:AA[A-Za-z0-9_\-]{33}", (":AA",)),
    _fmt(
        "discord-token", r"[MNO][A-Za-z\d_\-]{23,25}\.[A-Za-z\d_\-]{6}\.[A-Za-z\d_\-]{27,38}", None
    ),
    # the head of a key cut short (the rest wrapped away, or in the next message): a prefix
    # only keys have, then 6+ token characters with a digit
    _fmt(
        "key-fragment",
        r"(?:gh[pousr]_|github_pat_|glpat-|glrt-|sk-proj-|sk-svcacct-|sk-admin-|sk-ant-"
        r"|xox[bpae]-|xapp-|dckr_pat_|GOCSPX-|pypi-AgE|whsec_|[sr]k_live_|[sr]k_test_|glsa_"
        r"|do[opr]_v1_|hvs\.|shpat_|sntryu_|lin_api_|pplx-|AGE-SECRET-KEY-1|PMAK-|AIza|ya29\.)"
        r"(?=[A-Za-z0-9_\-.]*\d)[A-Za-z0-9_\-.]{6,}",
        (
            "gh",
            "glpat-",
            "glrt-",
            "sk-",
            "xox",
            "xapp-",
            "dckr_pat_",
            "GOCSPX-",
            "pypi-AgE",
            "whsec_",
            "k_live_",
            "k_test_",
            "glsa_",
            "_v1_",
            "hvs.",
            "shpat_",
            "sntryu_",
            "lin_api_",
            "pplx-",
            "AGE-SECRET-KEY-1",
            "PMAK-",
            "AIza",
            "ya29.",
        ),
    ),
)

# ---------------------------------------------------------------- secrets in context

# (type, pattern, group, anchors): group 0 redacts the whole match, group 1 only the value;
# the anchors are looked up in the lower-cased text
_PATTERNS: tuple[_Rule, ...] = (
    (
        "private-key",
        _Lazy(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            # with its END line, or (pasted cut short) its header and base64 lines only
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"|(?:[ \t]*\r?\n[ \t]*(?:[A-Za-z0-9+/=]{16,}|[A-Za-z\-]+:[^\n]*))*)",
            re.DOTALL,
        ),
        0,
        ("private key",),
    ),
    (
        "aws-secret-key",
        _Lazy(
            r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*(?:[:=]|=>)\s*[\"']?"
            r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        1,
        ("secret",),
    ),
    ("bearer-token", _Lazy(r"(?i)\bbearer\s+([A-Za-z0-9._~+/\-]{16,}=*)"), 1, ("bearer",)),
    (
        "basic-auth",
        _Lazy(r"(?i)\bauthorization\s*[:=]\s*[\"']?basic\s+([A-Za-z0-9+/]{8,}=*)"),
        1,
        ("basic",),
    ),
    # scheme://user:password@host, the user may be empty (redis://:pw@host)
    (
        "url-credentials",
        _Lazy(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*:([^\s/@]{3,})@(?=[A-Za-z0-9\[])"),
        1,
        ("://",),
    ),
    # command lines: curl -u user:pw, --user user:pw
    (
        "cli-password",
        _Lazy(r"(?:^|\s)(?:-u|--user)[ =]?[\"']?[^\s:\"']{1,64}:([^\s\"']{3,})"),
        1,
        ("-u", "--user"),
    ),
    # mysql -pS3cret / mysqldump -p'S3cret' (the value is glued to -p)
    (
        "cli-password",
        _Lazy(r"\b(?:mysql\w*|mariadb\w*)\b[^\n]{0,200}?\s-p[\"']?([^\s\"']{3,})"),
        1,
        ("mysql", "mariadb"),
    ),
    # sshpass -p pw, redis-cli -a pw, --password pw / --password=pw, docker login -p pw
    ("cli-password", _Lazy(r"\bsshpass\s+-p\s*[\"']?([^\s\"']{3,})"), 1, ("sshpass",)),
    (
        "cli-password",
        _Lazy(r"\bredis-cli\b[^\n]{0,200}?\s(?:-a|--pass)\s+[\"']?([^\s\"']{3,})"),
        1,
        ("redis-cli",),
    ),
    (
        "cli-password",
        _Lazy(
            r"(?i)(?:^|\s)--(?:password|passwd|pass|db-password|api[_\-]?key|token|"
            r"auth[_\-]?token|secret|client[_\-]secret)[ =][\"']?([^\s\"'-][^\s\"']{3,})"
        ),
        1,
        ("--",),
    ),
    (
        "cli-password",
        _Lazy(
            r"\b(?:docker|podman|helm|oras)\s+(?:registry\s+)?login\b[^\n]{0,200}?"
            r"\s-p\s+[\"']?([^\s\"']{3,})"
        ),
        1,
        ("login",),
    ),
)

_PASSWORD_KINDS = frozenset({"url-credentials", "cli-password"})

# .env / shell lines: NAME=value where the name speaks of a credential (value checked below)
_ENV_LINE_RE = _Lazy(
    r"(?im)^[ \t]*(?:export[ \t]+)?(?P<name>[A-Za-z0-9_]*"
    r"(?:PASSWORD|PASSWD|PASS|PWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?|AUTH)"
    r"[A-Za-z0-9_]*)[ \t]*=[ \t]*[\"']?(?P<value>[^\s\"'#]{4,})"
)

# "password: hunter2", "API key = abc123...", "パスワードは hunter2", "パスは…", "pw→…"
_PASSWORD_WORDS = (
    r"passwords?|passwd|passphrase|pass ?code|pwd|pw|pass|パスワード|パスワ|パス|ぱすわーど"
    r"|暗証番号|合言葉|パスフレーズ|パスコード|ログインパス|PIN(?:コード)?"
)
_KEY_WORDS = (
    r"secret(?:[ _\-]?key)?|client[ _\-]?secret|api[ _\-]?key|apikey|access[ _\-]?key"
    r"|access[ _\-]?token|auth[ _\-]?token|refresh[ _\-]?token|private[ _\-]?key|token"
    r"|credentials?|signing[ _\-]?(?:key|secret)|encryption[ _\-]?key|recovery[ _\-]?(?:key|code)"
    r"|license[ _\-]?key|backup[ _\-]?codes?"
    r"|秘密鍵|秘密の鍵|シークレット(?:キー)?|トークン|APIキー|API キー|アクセスキー|認証キー"
    r"|暗号化キー|復号キー|リカバリーキー|リカバリキー|ライセンスキー|署名キー|認証コード"
)
_ASSIGN = r"(?P<assign>:=|=>|==?|->|→|⇒|[:：]|は|を|が|って|=)"
_OPEN_QUOTE = r"[\"'`「『【\[]?"
_ASSIGNMENT_RE = _Lazy(
    rf"(?i)(?<![A-Za-z])(?:(?P<pw>{_PASSWORD_WORDS})|(?:{_KEY_WORDS}))"
    rf"(?:\s*[(（][^)）\n]{{0,20}}[)）])?[\"'`\]」』]*\s*"
    rf"(?:{_ASSIGN}|\s(?P<prose>is|was|are)\s)[、,]?\s*(?:(?:今は|いまは|now)\s*)?{_OPEN_QUOTE}"
    rf"(?P<value>[\x21\x23-\x26\x28-\x5f\x61-\x7e]{{{MIN_VALUE_CHARS},}})"
)
# "passphrase for key '/home/me/.ssh/id_ed25519': correct horse battery staple"
_PASSPHRASE_LINE_RE = _Lazy(
    r"(?im)(?:passphrase|pass phrase|パスフレーズ|seed phrase|recovery phrase|mnemonic"
    r"|リカバリーフレーズ|シードフレーズ)[^:：\n]{0,80}[:：][ \t]*(?P<value>[^\n]{6,120})"
)
# a word that announces a secret, then within a few characters (no `:`/`=` needed) a value
# that only a machine would write: hex of 32+, or mixed-case letters and digits of 20+
_PROXIMITY_RE = _Lazy(
    r"(?i)(?:secret|signing|署名|シークレット|hmac|webhook|password|パスワード|passphrase"
    r"|api[ _\-]?key|apikey|token|トークン|秘密鍵|credential|鍵|キー|\bkey\b)"
    r"[^\n\",{}]{0,40}?(?<![A-Za-z0-9_\-/+.=~#:@])"
    r"(?P<value>[A-Fa-f0-9]{32,}|[A-Za-z0-9+/_\-]{20,}={0,2})(?![A-Za-z0-9_\-/+=])"
)
# a key grouped in blocks: 4+ groups of the same length (4-8), most with letters and digits
_GROUPED_RE = _Lazy(
    r"(?<![A-Za-z0-9\-])(?P<value>(?P<g>[A-Za-z0-9]{4,8})(?:[ \-](?:[A-Za-z0-9]{4,8})){3,})"
    r"(?![A-Za-z0-9])"
)
# base64 runs that may hide an encoded secret
_BASE64_RE = _Lazy(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{16,4096}={0,2}(?![A-Za-z0-9+/=])")

_TRAILING_PUNCT = ".,;:!?)]}>」』】）。、([{"
_SYMBOLS = set("!@#$%^&*_+-=/~|\\")
_RARE_SYMBOLS = set("!@#$%^&*+=~|\\?")
_PLACEHOLDER_RE = _Lazy(
    r"^(?:x+|\*+|\.+|-+|_+|<.*|\{[^}]*\}|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_]+%"
    r"|your[_\-]?\w*|changeme|placeholder|example|redacted\w*|none|null|nil|true|false"
    r"|undefined|required|optional|string|str|int|number|secret|password|\*\*.*\*\*"
    r"|.*(?:\.\.\.|…).*)$",
    re.IGNORECASE,
)
_PLACEHOLDER_WORDS_RE = _Lazy(
    r"password|passwd|secret|changeme|example|dummy|sample|placeholder|redacted|your|xxxx"
    r"|fake|test|demo",
    re.IGNORECASE,
)
_CODE_REF_RE = _Lazy(
    r"[(\[{]|^(?:os\.|process\.env|env\.|self\.|this\.|config\.|settings\.|getenv|\$|params\.)"
    r"|^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z_]*)+$",
    re.IGNORECASE,
)
_PATH_RE = _Lazy(r"^(?:~?/|\.\.?/|[A-Za-z]:\\|https?://)|^[A-Za-z0-9_.\-]+(?:/[A-Za-z_.\-]+)+/?$")
_WORDISH_RE = _Lazy(r"^[A-Za-z]+(?:[\-_.][A-Za-z]+)*$")
_HEX_RE = _Lazy(r"^[A-Fa-f0-9]+$")


def _plausible(value: str) -> bool:
    """Not a placeholder, not a reference to code or configuration, not a path."""
    return (
        len(value) >= MIN_VALUE_CHARS
        and not _PLACEHOLDER_RE.match(value)
        and not _CODE_REF_RE.search(value)
        and not _PATH_RE.match(value)
        and not value.startswith(_MARKER_PREFIX)
    )


def _credential_like(value: str, *, password: bool, prose: bool, statement: bool = False) -> bool:
    """Whether a value after "password:" / "token =" / "password is" looks like a credential.

    After a password keyword and an assignment a value with a digit or a symbol counts (a PIN
    included); a value of letters only counts when it is mixed-case or long and not a
    placeholder word ("localdev", "testpassword" in a compose file are not taken), or when the
    person stated it in Japanese ("パスワードは sakura"). After "is"/"was", or after a
    key/token keyword, the value must look random; a key/token value also needs 8 characters
    and not only digits, and words joined by - or _ ("proxy-handled") are not random.
    """
    if not _plausible(value):
        return False
    if password:
        if prose:
            return _random_looking(value, long=12) and not _WORDISH_RE.match(value)
        if value.isalpha():
            if statement and len(value) >= 6 and not _PLACEHOLDER_WORDS_RE.search(value):
                return True
            return not _PLACEHOLDER_WORDS_RE.search(value) and (
                len(value) >= 12 or _inner_caps(value)
            )
        return not _WORDISH_RE.match(value) or _inner_caps(value)
    if len(value) < GLOBAL_MIN_CHARS or value.isdigit():
        return False
    if _WORDISH_RE.match(value) and not _inner_caps(value):
        return False
    return _random_looking(value)


def _inner_caps(value: str) -> bool:
    letters = [c for c in value if c.isalpha()]
    return any(c.isupper() for c in letters[1:]) and any(c.islower() for c in letters)


def _random_looking(value: str, *, long: int = 16) -> bool:
    """A digit or a symbol in it, or long: not an ordinary word."""
    return (
        len(value) >= long
        or any(ch.isdigit() for ch in value)
        or any(ch in _SYMBOLS for ch in value)
    )


def _machine_made(value: str) -> bool:
    """A value only a machine writes: long hex, or letters of both cases and digits."""
    if _HEX_RE.match(value):
        return (
            len(value) >= 32 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
        )
    digits = sum(c.isdigit() for c in value)
    upper = sum(c.isupper() for c in value)
    lower = sum(c.islower() for c in value)
    return len(value) >= 20 and digits >= 2 and upper >= 2 and lower >= 2


# ---------------------------------------------------------------- views of the text


class _View:
    """A text derived from the input, with each character's span in the input."""

    __slots__ = ("ends", "starts", "text")

    def __init__(self, text: str, starts: list[int] | None, ends: list[int] | None) -> None:
        self.text = text
        self.starts = starts  # None: the identity map
        self.ends = ends

    def span(self, start: int, end: int) -> tuple[int, int]:
        if self.starts is None or self.ends is None:
            return start, end
        return self.starts[start], self.ends[end - 1]


def _nfkc_view(text: str) -> _View:
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return _View(text, None, None)
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for i, ch in enumerate(text):
        norm = unicodedata.normalize("NFKC", ch) if ord(ch) > 0x7F else ch
        if not norm:
            continue
        out.append(norm)
        starts.extend([i] * len(norm))
        ends.extend([i + 1] * len(norm))
    return _View("".join(out), starts, ends)


# a line break (with the spaces around it) between a token run of 8+ characters at the end of
# one line and a line that is one token run of 6+ characters, not a word: a wrapped key
_SOFT_BREAK_RE = _Lazy(
    r"(?<=[A-Za-z0-9_\-+/=]{8})[ \t]*\r?\n[ \t]*"
    r"(?=(?P<next>[A-Za-z0-9_\-+/]{6,}={0,2})[ \t]*(?:\r?\n|$))"
)


def _joined_view(view: _View) -> _View | None:
    """``view`` with soft line breaks removed; None when it has none."""
    text = view.text
    breaks = [
        m.span()
        for m in _SOFT_BREAK_RE.finditer(text)
        if any(c.isdigit() for c in m.group("next")) or _inner_caps(m.group("next"))
    ]
    if not breaks:
        return None
    out: list[str] = []
    keep: list[int] = []  # index in view.text of each kept character
    pos = 0
    for a, b in breaks:
        out.append(text[pos:a])
        keep.extend(range(pos, a))
        pos = b
    out.append(text[pos:])
    keep.extend(range(pos, len(text)))
    starts = [view.span(i, i + 1)[0] for i in keep]
    ends = [view.span(i, i + 1)[1] for i in keep]
    return _View("".join(out), starts, ends)


# ---------------------------------------------------------------- detection


def find_secrets(text: str) -> list[Finding]:
    """Every secret span in ``text``, merged, in order. Empty when the text is clean."""
    if not text:
        return []
    return _merge(_find_spans(text))


def _find_spans(text: str, *, depth: int = 0) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    values: dict[str, str] = {}
    view = _nfkc_view(text)

    markers: dict[int, list[tuple[int, int]]] = {}

    def add(v: _View, start: int, end: int, kind: str) -> None:
        vt = v.text
        if id(v) not in markers:
            markers[id(v)] = [m.span() for m in _MARKER_RE.finditer(vt)]
        if any(a < end and start < b for a, b in markers[id(v)]):
            return  # a marker of an earlier redaction is not a secret
        # trim white space and quotes the patterns may have taken at the edges
        while start < end and vt[start] in " \t\r\n\"'`=:":
            start += 1
        while end > start and vt[end - 1] in " \t\r\n\"'`,;":
            end -= 1
        if end - start < MIN_VALUE_CHARS or vt.startswith(_MARKER_PREFIX, start):
            return
        a, b = v.span(start, end)
        spans.append((a, b, kind))
        for part in re.split(r"\s+", text[a:b]):
            if len(part) >= GLOBAL_MIN_CHARS and _random_looking(part) and _plausible(part):
                values.setdefault(part, kind)

    _scan_view(view, add, depth=depth)
    joined = _joined_view(view)
    if joined is not None:
        _scan_view(joined, add, depth=depth, formats_only=True)

    # a value found once is a secret wherever it occurs
    for value, kind in values.items():
        for start in _occurrences(text, value):
            spans.append((start, start + len(value), kind))
    return spans


def _scan_view(view: _View, add, *, depth: int, formats_only: bool = False) -> None:  # noqa: ANN001
    text = view.text
    lower = text.lower()
    for kind, pattern, group, anchors in _FORMATS:
        if anchors is not None and not any(a in text for a in anchors):
            continue
        for m in pattern.finditer(text):
            add(view, m.start(group), m.end(group), kind)
    for kind, pattern, group, anchors in _PATTERNS:
        if anchors is not None and not any(a in lower for a in anchors):
            continue
        for m in pattern.finditer(text):
            if kind in _PASSWORD_KINDS and not _credential_like(
                _value(m.group(group)), password=True, prose=False
            ):
                continue
            add(view, m.start(group), m.end(group), kind)
    for m in _ASSIGNMENT_RE.finditer(text):
        value = _value(m.group("value"))
        password = m.group("pw") is not None
        statement = m.group("assign") in ("は", "を", "が", "って", "→", "->", "⇒")
        prose = m.group("prose") is not None
        if _credential_like(value, password=password, prose=prose, statement=statement):
            start = m.start("value")
            add(view, start, start + len(value), "password" if password else "secret")
    for m in _PROXIMITY_RE.finditer(text):
        value = m.group("value")
        if _machine_made(value) and _plausible(value):
            add(view, m.start("value"), m.end("value"), "secret")
    if not formats_only:
        _scan_context(view, add)
    if depth == 0:
        for m in _BASE64_RE.finditer(text):
            if _decodes_to_secret(m.group()):
                add(view, m.start(), m.end(), "encoded-secret")


def _scan_context(view: _View, add) -> None:  # noqa: ANN001
    text = view.text
    for kind, plugin in _library_plugins() if _LIBRARY_HINT_RE.search(text) else ():
        for start, end in _library_spans(plugin, text):
            if kind in _PASSWORD_KINDS and not _credential_like(
                text[start:end], password=True, prose=False
            ):
                continue
            add(view, start, end, kind)

    offset = 0
    for line in text.splitlines(keepends=True):
        if _KEYWORD_HINT_RE.search(line):
            password = bool(re.search(r"(?i)pass|pwd", line))
            for value in _plugin_values(_keyword_plugin(), line):
                if re.search(r"\s", value):
                    continue
                if _credential_like(value, password=password, prose=False):
                    for start in _occurrences(line, value):
                        add(view, offset + start, offset + start + len(value), "keyword-secret")
        offset += len(line)

    for m in _ENV_LINE_RE.finditer(text):
        name = m.group("name").upper()
        password = "PASS" in name or "PWD" in name
        value = _value(m.group("value"))
        if _credential_like(value, password=password, prose=False):
            add(view, m.start("value"), m.start("value") + len(value), "env-secret")

    for m in _PASSPHRASE_LINE_RE.finditer(text):
        value = m.group("value").strip().rstrip(_TRAILING_PUNCT).strip("\"'`「」『』")
        words = value.split()
        if not _plausible(words[0] if words else value):
            continue
        if len(words) >= 3 or _credential_like(value, password=True, prose=False):
            start = text.find(value, m.start("value"))
            add(view, start, start + len(value), "passphrase")

    for m in _GROUPED_RE.finditer(text):
        groups = re.split(r"[ \-]", m.group("value"))
        if len({len(g) for g in groups}) != 1:
            continue
        if all(_HEX_RE.match(g.removeprefix("0x")) for g in groups):
            continue  # addresses, hex dumps
        mixed = sum(
            1 for g in groups if any(c.isdigit() for c in g) and any(c.isalpha() for c in g)
        )
        if (mixed >= 3 and 2 * mixed >= len(groups)) or (len(groups) >= 5 and mixed >= 2):
            add(view, m.start("value"), m.end("value"), "grouped-key")


def _value(raw: str) -> str:
    value = raw.rstrip(_TRAILING_PUNCT)
    return value


def _decodes_to_secret(run: str) -> bool:
    """Whether a base64 run decodes to text that holds a secret (one level deep)."""
    core = run.rstrip("=")
    if len(core) < 16 or core.isalpha() or core.isdigit() or _HEX_RE.match(core):
        return False
    try:
        raw = base64.b64decode(
            core + "=" * (-len(core) % 4),
            altchars=b"-_" if ("-" in core or "_" in core) else None,
            validate=True,
        )
    except (binascii.Error, ValueError):
        return False
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not decoded.isprintable() and not all(c.isprintable() or c in "\n\r\t" for c in decoded):
        return False
    return bool(_find_spans(decoded, depth=1))


def _library_spans(plugin: BasePlugin, text: str) -> Iterator[tuple[int, int]]:
    """Spans of a detect-secrets plugin's hits.

    Its ``analyze_string`` yields only the values, and for a pattern with a group only the
    group (GitHub's yields the prefix "ghp"), so the regexes are run here with ``finditer``:
    a group that holds a value is the secret, else the whole match. A plugin that filters
    its matches in its own ``analyze_string`` (JWT checks the token's form) is asked for
    values and each value is located.
    """
    if cast(Any, type(plugin)).analyze_string is not cast(Any, _regex_detector()).analyze_string:
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


@lru_cache(maxsize=1)
def guard_version() -> str:
    """What identifies the guard's findings: this module's source and the installed
    detect-secrets release. A stored result of a scan (``store.guard_cache``) is used only
    under the version that made it, so a changed rule or plugin scans again."""
    from importlib.util import find_spec

    digest = hashlib.sha256(Path(__file__).read_bytes())
    # the library's version file, read without importing it (or the distribution metadata)
    spec = find_spec("detect_secrets")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        release = Path(folder) / "__version__.py"
        if release.is_file():
            digest.update(release.read_bytes())
    return digest.hexdigest()[:16]


def apply_findings(text: str, findings: Sequence[Finding]) -> str:
    """``text`` with the spans of ``findings`` (found in ``text``, in order, merged) replaced
    by their markers: what ``redact`` returns, for findings computed earlier."""
    return _apply(text, findings) if findings else text


def _apply(text: str, findings: Sequence[Finding]) -> str:
    parts: list[str] = []
    cursor = 0
    for f in findings:
        parts.append(text[cursor : f.start])
        parts.append(redaction_marker(f.type))
        cursor = f.end
    parts.append(text[cursor:])
    return "".join(parts)


def redact(text: str) -> tuple[str, list[Finding]]:
    """``text`` with every secret replaced by ``[REDACTED:<type>]``, and what was found.

    The findings' spans refer to the input text.
    """
    findings = find_secrets(text)
    if not findings:
        return text, []
    return _apply(text, findings), findings


def contains_secret(text: str) -> bool:
    return bool(find_secrets(text))


# ---------------------------------------------------------------- a conversation


def find_secrets_in_messages(messages: Sequence[str]) -> list[list[Finding]]:
    """The findings of each message, with the conversation scanned as one text.

    A secret split across two consecutive messages (the end of one, the start of the next) is
    found whole and reported in both, each message's part with its own span. A value found in
    one message is found in every other message of the conversation too.
    """
    texts = list(messages)
    out: list[list[Finding]] = [[] for _ in texts]
    if not any(texts):
        return out
    offsets: list[int] = []
    pos = 0
    for t in texts:
        offsets.append(pos)
        pos += len(t) + len(_MESSAGE_SEPARATOR)
    whole = _MESSAGE_SEPARATOR.join(texts)
    for f in find_secrets(whole):
        for i, (t, base) in enumerate(zip(texts, offsets, strict=True)):
            start, end = max(f.start, base), min(f.end, base + len(t))
            if start < end:
                out[i].append(Finding(type=f.type, start=start - base, end=end - base))
    return out


def redact_messages(messages: Sequence[str]) -> list[str]:
    """Each message redacted, the conversation scanned as one text (see
    ``find_secrets_in_messages``): a secret split across two messages goes from both."""
    texts = list(messages)
    return [
        _apply(t, fs) if fs else t
        for t, fs in zip(texts, find_secrets_in_messages(texts), strict=True)
    ]


def redact_conversation(conv: Conversation) -> tuple[Conversation, int]:
    """A copy of ``conv`` for drafting: its title and drafting messages (in order) redacted as
    one conversation, the other messages left out; and the number of redactions.

    Every drafter and prompt builder works on this copy, so a secret is gone before any text
    is cut into sentences, aliases or tags, and a secret split across two messages is found."""
    messages = conv.drafting_messages
    texts = [conv.title or "", *(m.text for m in messages)]
    found = find_secrets_in_messages(texts)
    count = sum(len(f) for f in found)
    clean = [_apply(t, fs) if fs else t for t, fs in zip(texts, found, strict=True)]
    copy = conv.model_copy(
        update={
            "title": clean[0] if conv.title is not None else None,
            "messages": [
                m if t == m.text else m.model_copy(update={"text": t})
                for m, t in zip(messages, clean[1:], strict=True)
            ],
        }
    )
    return copy, count


# ---------------------------------------------------------------- drafts

_TEXT_FIELDS = ("title", "canonical_summary", "index_summary")
_LIST_FIELDS = ("aliases", "tags", "stated_facts", "inferences")
_PIECE = 5  # a piece of a known secret this long, found in a label, drops the label


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
    """The secret values themselves, as found in these texts (to scrub them elsewhere).

    The texts are scanned as one conversation, so a secret split across two of them is found,
    and each of its parts (6+ characters) is returned."""
    texts = list(texts)
    values: set[str] = set()
    for text, findings in zip(texts, find_secrets_in_messages(texts), strict=True):
        for f in findings:
            value = text[f.start : f.end].strip()
            parts = re.split(r"\s+", value)
            if len(parts) == 1:
                if len(value) >= 6:
                    values.add(value)
                continue
            values.add(value)  # a passphrase, a grouped or wrapped key: whole, and its
            values.update(  # random-looking parts (not the words of a passphrase)
                p for p in parts if len(p) >= 6 and (_random_looking(p, long=99) or _inner_caps(p))
            )
    return values


def _holds_piece(label: str, values: Iterable[str]) -> bool:
    """Whether ``label`` holds a piece of a random-looking known value (case folded): 5
    characters with a digit or a symbol in them, or any 8."""
    folded = label.casefold()
    for v in values:
        if not _random_looking(v) or len(v) < GLOBAL_MIN_CHARS:
            continue
        fv = v.casefold()
        for i in range(len(fv) - _PIECE + 1):
            piece = fv[i : i + _PIECE]
            if piece in folded and _random_looking(piece, long=99):
                return True
        if any(fv[i : i + 8] in folded for i in range(len(fv) - 7)):
            return True
    return False


def _piece_spans(text: str, values: Sequence[str], size: int = 8) -> list[tuple[int, int]]:
    """Where ``text`` holds ``size`` or more characters in a row of one of ``values`` (case
    folded), each span grown to the whole run the two share."""
    low = text.lower()
    if len(low) != len(text):  # a character whose lower case is longer: compare as it is
        low = text
    spans: list[tuple[int, int]] = []
    for v in values:
        fv = v.lower() if len(v.lower()) == len(v) else v
        for k in range(len(fv) - size + 1):
            start = low.find(fv[k : k + size])
            while start >= 0:
                a, b, i, j = start, start + size, k, k + size
                while a > 0 and i > 0 and low[a - 1] == fv[i - 1]:
                    a, i = a - 1, i - 1
                while b < len(low) and j < len(fv) and low[b] == fv[j]:
                    b, j = b + 1, j + 1
                spans.append((a, b))
                start = low.find(fv[k : k + size], start + 1)
    return spans


def redact_draft(draft: DraftRecord, known: Iterable[str] = ()) -> tuple[DraftRecord, list[str]]:
    """The draft with every secret in its text fields replaced by a marker, and the names of the
    fields that held one. ``known`` are secret values found in the source messages: a value
    that appears without its context (a bare password as an alias) is scrubbed too. Aliases and
    tags that held a secret, or a piece of a known one (a key cut at ``-`` or ``/``, lower
    cased), are dropped. Used before a draft is written to result.json or committed, so that no
    memory, revision or index row holds a secret (invariant 7)."""
    values = set(known) | secret_values(getattr(draft, n) for n in _TEXT_FIELDS)
    values |= secret_values(v for n in _LIST_FIELDS for v in getattr(draft, n))
    ordered = sorted(values, key=len, reverse=True)

    pieces = [v for v in ordered if len(v) >= GLOBAL_MIN_CHARS and _random_looking(v)]

    def scrub(text: str) -> str:
        text = redact(text)[0]
        for v in ordered:
            if v in text:
                text = text.replace(v, redaction_marker("secret"))
        spans = _piece_spans(text, pieces)  # a cut or lower-cased piece of a known secret
        return _apply(text, _merge((a, b, "secret") for a, b in spans)) if spans else text

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
        else:  # a label that held a secret, or a piece of one, goes
            kept = [v for v in items if scrub(v) == v and not _holds_piece(v, values)]
        if kept != items:
            update[name] = kept
            changed.append(name)
    pointers = [p.model_copy(update={"quote_hint": scrub(p.quote_hint)}) for p in draft.evidence]
    if pointers != draft.evidence:  # such a pointer no longer verifies: it is rejected, not stored
        update["evidence"] = pointers
        changed.append("evidence")
    return (draft.model_copy(update=update) if update else draft), changed
