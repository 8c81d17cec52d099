"""The secret guard's rules: what a secret looks like (``core.secrets`` scans with them).

- detect-secrets' plugins, loaded on the first scan, and the hints that say when a text can
  hold one of their matches at all;
- our own table of key formats (after gitleaks' rule list), each with the anchors that must be
  in a text before its regex runs;
- how people paste secrets in context: ``.env`` lines, assignments and ``password: ...`` /
  ``パスワードは ...`` in prose, passphrase lines, keys grouped in blocks;
- the value heuristics that tell a credential from a word, a path, a placeholder or a hash.

Every regular expression is a ``_Lazy``: compiled on its first use, not on import. The guard's
version (``core.secrets.guard_version``) hashes this module with ``core.secrets``, so a
changed rule scans stored texts again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

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


GLOBAL_MIN_CHARS = 8  # a value at least this long is redacted wherever it occurs
MIN_VALUE_CHARS = 4  # shorter "secrets" are noise (password = "" / "x")
_MARKER_PREFIX = "[REDACTED:"


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
