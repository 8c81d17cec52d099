"""A corpus of planted secrets, generated from templates with a seeded random source.

Every value is fake but has the format of the real thing (prefixes, lengths, alphabets, check
characters where a format has them), so a scanner recognises it as it would a leaked key. Each
secret is dressed in the way people paste secrets into a chat: a `.env` block, a shell command,
a JSON config, a Japanese sentence, full-width characters, a key wrapped over two lines or cut
into two messages, a recovery key in blocks, a base64-encoded key. ``conversations()`` mixes
them into ordinary Japanese/English conversations.

Nothing here is a real credential: every value is drawn from ``random.Random(seed)``.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
BASE32 = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


@dataclass
class Planted:
    """One planted secret: its format, the text that carries it (one or two messages), and the
    secret itself (whole, as it would be used: for a wrapped or split key, joined)."""

    format: str
    messages: list[str]
    secret: str
    parts: list[str] = field(default_factory=list)  # the secret as it appears in the text
    roles: list[str] = field(default_factory=list)  # each message's author (default: the person)

    def __post_init__(self) -> None:
        if not self.parts:
            self.parts = [self.secret]
        if not self.roles:
            self.roles = ["user"] * len(self.messages)


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _mixed(rng: random.Random, n: int, symbols: str = "") -> str:
    """A password: letters of both cases and digits (and symbols), each class present."""
    while True:
        value = _r(rng, ALNUM + symbols, n)
        if (
            any(c.isdigit() for c in value)
            and any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and (not symbols or any(c in symbols for c in value))
        ):
            return value


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


# ---------------------------------------------------------------- the formats

# Each maker returns (format name, messages, secret[, parts]); one or two messages.
Maker = Callable[[random.Random], Planted]

_EN_ASK = [
    "Here is my config, why does the request fail?\n\n```\n{}\n```",
    "I pasted this into the terminal:\n{}\nand it still says unauthorized.",
    "Quick note for myself: {}",
    "The deploy broke after I rotated things. Current value: {}",
]
_JA_ASK = [
    "この設定で動かないんだけど、どこが悪い？\n\n```\n{}\n```",
    "メモ: {} ← 忘れないように",
    "ターミナルでこれ打ったらエラーになった:\n{}\n何が違う？",
    "デプロイがこけた。今の値はこれ: {}",
]


def _wrap(rng: random.Random, snippet: str) -> str:
    return rng.choice(_EN_ASK + _JA_ASK).format(snippet)


def _token(fmt: str, build: Callable[[random.Random], str], show: Callable[[str], str]) -> Maker:
    def make(rng: random.Random) -> Planted:
        value = build(rng)
        return Planted(fmt, [_wrap(rng, show(value))], value)

    return make


def _env(name: str) -> Callable[[str], str]:
    return lambda v: f"{name}={v}"


def _aws_pair(rng: random.Random) -> Planted:
    key_id = "AKIA" + _r(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
    secret = _r(rng, B64, 40)
    text = f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\nregion = ap-northeast-1"
    return Planted("aws-secret-access-key", [_wrap(rng, text)], secret)


def _pem(kind: str) -> Maker:
    def make(rng: random.Random) -> Planted:
        lines = [_r(rng, B64, 64) for _ in range(rng.randint(4, 7))]
        body = "\n".join(lines)
        text = f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"
        return Planted(f"pem-{kind.strip().lower() or 'pkcs8'}", [_wrap(rng, text)], body, lines)

    return make


def _url_credentials(scheme: str, empty_user: bool) -> Maker:
    def make(rng: random.Random) -> Planted:
        pw = _mixed(rng, rng.randint(12, 20))
        user = "" if empty_user else rng.choice(["app", "yamalog_app", "admin", "minato"])
        host = rng.choice(["db.internal", "10.0.3.7", "ep-quiet-river-4172.aws.neon.tech", "cache"])
        port = {"redis": 6379, "postgresql": 5432, "mysql": 3306, "amqp": 5672, "mongodb": 27017}
        url = f"{scheme}://{user}:{pw}@{host}:{port.get(scheme, 443)}/main"
        fmt = "url-credentials-empty-user" if empty_user else f"url-credentials-{scheme}"
        return Planted(fmt, [_wrap(rng, f"DATABASE_URL={url}" if rng.random() < 0.5 else url)], pw)

    return make


def _cli(fmt: str, template: str, symbols: str = "") -> Maker:
    def make(rng: random.Random) -> Planted:
        pw = _mixed(rng, rng.randint(10, 16), symbols)
        return Planted(fmt, [_wrap(rng, template.format(pw=pw))], pw)

    return make


def _statement(fmt: str, templates: list[str], symbols: str = "#!%") -> Maker:
    def make(rng: random.Random) -> Planted:
        pw = _mixed(rng, rng.randint(9, 14), symbols)
        return Planted(fmt, [rng.choice(templates).format(pw=pw)], pw)

    return make


def _full_width_password(rng: random.Random) -> Planted:
    pw = _mixed(rng, rng.randint(9, 12))
    fw = _full_width(pw)
    text = rng.choice(
        [
            "ルーターの管理画面　ｐａｓｓｗｏｒｄ：{}　（スマホで打ったら全角になった）",
            "ＰＡＳＳＷＯＲＤ＝{}　って書いてあった",
            "ログイン情報　ＩＤ：ｍｉｎａｔｏ　ＰＷ：{}",
        ]
    ).format(fw)
    return Planted("full-width-password", [text], fw)


def _full_width_key(rng: random.Random) -> Planted:
    key = "sk-proj-" + _r(rng, URLSAFE, 40) + "T3BlbkFJ" + _r(rng, URLSAFE, 20)
    fw = _full_width(key)
    return Planted("full-width-openai-key", [f"キーを全角で貼っちゃった：{fw}"], fw)


def _passphrase(rng: random.Random) -> Planted:
    words = ["tulip", "Orbit", "canyon", "maple", "river", "Quartz", "lantern", "ember", "violet"]
    phrase = "-".join(rng.sample(words, 3)) + "-" + str(rng.randint(10, 99))
    text = rng.choice(
        [
            "ssh がまた聞いてくる:\nEnter passphrase for key '/home/minato/.ssh/id_ed25519': {}\nagent に入れるには？",
            "GPG passphrase (backup key, 2024): {}\nこれをどこに保管すべき？",
            "passphrase for the wallet export: {}",
        ]
    ).format(phrase)
    return Planted("passphrase-line", [text], phrase)


def _wrapped(rng: random.Random) -> Planted:
    key = "sk-proj-" + _r(rng, URLSAFE, 58) + "T3BlbkFJ" + _r(rng, URLSAFE, 58)
    cut = rng.randint(30, 60)
    head, tail = key[:cut], key[cut:]
    text = f"コピペしたら改行が入った:\nOPENAI_API_KEY={head}\n{tail}\nこれで合ってる？"
    return Planted("wrapped-two-lines", [text], key, [head, tail])


def _split_messages(rng: random.Random) -> Planted:
    key = "ghp_" + _r(rng, ALNUM, 36)
    cut = rng.randint(12, 26)
    head, tail = key[:cut], key[cut:]
    first = f"CIのトークンこれ {head}"
    return Planted("split-two-messages", [first, tail], key, [head, tail])


def _split_messages_en(rng: random.Random) -> Planted:
    key = "glpat-" + _r(rng, URLSAFE, 20)
    cut = rng.randint(9, 16)
    head, tail = key[:cut], key[cut:]
    return Planted(
        "split-two-messages-gitlab", [f"my gitlab token is {head}", tail], key, [head, tail]
    )


def _split_after_reply(rng: random.Random) -> Planted:
    """A key whose tail the person sends after the assistant's answer (issue 29, finding 3)."""
    key = "sk-proj-" + _r(rng, URLSAFE, 40)
    cut = rng.randint(16, 30)
    head, tail = key[:cut], key[cut:]
    reply = "キーの続きはありますか？途中で切れているようです。"
    return Planted(
        "split-after-reply",
        [f"OpenAI のキーはこれ {head}", reply, f"{tail} です、続き"],
        key,
        [head, tail],
        ["user", "assistant", "user"],
    )


def _split_after_reply_en(rng: random.Random) -> Planted:
    key = "sk-ant-api03-" + _r(rng, URLSAFE, 40)
    cut = rng.randint(18, 32)
    head, tail = key[:cut], key[cut:]
    return Planted(
        "split-after-reply-en",
        [f"here is the Anthropic key {head}", "It looks cut off.", f"{tail} is the rest"],
        key,
        [head, tail],
        ["user", "assistant", "user"],
    )


def _typed_in_groups(rng: random.Random) -> Planted:
    """A GitHub token read off a screen and typed in groups (issue 29, finding 3)."""
    key = "ghp_" + _r(rng, ALNUM, 36)
    size = rng.choice([4, 6, 8, 10])
    start = rng.choice([0, 4])  # the prefix on its own, or joined to the first group
    head = [key[:4]] if start else []
    groups = head + [key[i : i + size] for i in range(start, len(key), size)]
    sep = rng.choice([" ", "  ", "\u3000"])
    value = sep.join(groups)
    text = rng.choice(
        [
            "画面のトークンを書き写した: {} これで CI に入れる",
            "GitHub のトークンは {} です",
            "I typed the token off the screen: {} - does it work?",
        ]
    ).format(value)
    return Planted("typed-in-groups", [text], key, groups)


def _grouped(rng: random.Random) -> Planted:
    groups = [_r(rng, BASE32, 6) for _ in range(rng.randint(5, 8))]
    sep = rng.choice([" ", "-"])
    value = sep.join(groups)
    text = rng.choice(
        [
            "1Password のリカバリーキー {} を紙に書いて金庫に入れた",
            "Recovery key {} - I wrote it down, is that enough?",
            "バックアップ用の復旧コード: {}",
        ]
    ).format(value)
    return Planted("grouped-blocks-of-six", [text], value, groups)


def _base64_key(rng: random.Random) -> Planted:
    key = rng.choice(
        [
            "sk-proj-" + _r(rng, URLSAFE, 48),
            "ghp_" + _r(rng, ALNUM, 36),
            "xoxb-"
            + _r(rng, string.digits, 12)
            + "-"
            + _r(rng, string.digits, 12)
            + "-"
            + _r(rng, ALNUM, 24),
        ]
    )
    encoded = base64.b64encode(key.encode()).decode()
    text = rng.choice(
        [
            "k8s の Secret に入れる値、base64 にした: {}",
            "data:\n  token: {}",
            "I encoded it so it's not readable: {}",
        ]
    ).format(encoded)
    return Planted("base64-encoded-key", [text], encoded)


def _hex_signing(rng: random.Random) -> Planted:
    value = _r(rng, HEX, rng.choice([32, 40, 64]))
    text = rng.choice(
        [
            "Stripe の webhook signing secret {} を Fly に入れた",
            "署名用シークレット {} でHMACを検証してる",
            "the HMAC signing key for the callbacks {} (hex)",
        ]
    ).format(value)
    return Planted("hex-signing-secret", [text], value)


def _jwt(rng: random.Random) -> Planted:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    payload = (
        base64.urlsafe_b64encode(
            json.dumps(
                {"sub": str(rng.randint(1, 9999)), "iat": rng.randint(1_600_000_000, 1_800_000_000)}
            ).encode()
        )
        .decode()
        .rstrip("=")
    )
    sig = _r(rng, URLSAFE, 43)
    token = f"{header}.{payload}.{sig}"
    return Planted("jwt", [_wrap(rng, f"Authorization: Bearer {token}")], token)


def _telegram(rng: random.Random) -> Planted:
    token = f"{rng.randint(10**8, 10**9)}:AA{_r(rng, URLSAFE, 33)}"
    return Planted("telegram-bot-token", [_wrap(rng, f"TELEGRAM_BOT_TOKEN={token}")], token)


def _azure(rng: random.Random) -> Planted:
    value = _r(rng, ALNUM, 3) + str(rng.randint(0, 9)) + "Q~" + _r(rng, ALNUM + "_~.-", 34)
    return Planted("azure-ad-client-secret", [_wrap(rng, f'"clientSecret": "{value}"')], value)


def _onepassword(rng: random.Random) -> Planted:
    value = "A3-" + "-".join(
        [_r(rng, UPPER_ALNUM, 6), _r(rng, UPPER_ALNUM, 6), _r(rng, UPPER_ALNUM, 5)]
        + [_r(rng, UPPER_ALNUM, 5) for _ in range(3)]
    )
    return Planted("1password-secret-key", [f"Emergency Kit の Secret Key は {value}"], value)


def _json_secret(rng: random.Random) -> Planted:
    value = _r(rng, URLSAFE, 32)
    client_id = _r(rng, string.digits, 12) + ".apps.example.com"
    text = json.dumps({"client_id": client_id, "client_secret": value}, indent=2)
    return Planted("json-client-secret", [_wrap(rng, text)], value)


def _discord_webhook(rng: random.Random) -> Planted:
    path = f"{rng.randint(10**17, 10**18)}/{_r(rng, URLSAFE, 68)}"
    url = f"https://discord.com/api/webhooks/{path}"
    return Planted("discord-webhook", [_wrap(rng, url)], path)


def _slack_webhook(rng: random.Random) -> Planted:
    path = f"T{_r(rng, UPPER_ALNUM, 10)}/B{_r(rng, UPPER_ALNUM, 10)}/{_r(rng, ALNUM, 24)}"
    return Planted("slack-webhook", [_wrap(rng, f"https://hooks.slack.com/services/{path}")], path)


def _basic_auth(rng: random.Random) -> Planted:
    creds = base64.b64encode(f"minato:{_mixed(rng, 12)}".encode()).decode()
    return Planted("basic-auth-header", [_wrap(rng, f"Authorization: Basic {creds}")], creds)


FORMATS: list[Maker] = [
    _token(
        "openai-legacy",
        lambda r: "sk-" + _r(r, ALNUM, 20) + "T3BlbkFJ" + _r(r, ALNUM, 20),
        _env("OPENAI_API_KEY"),
    ),
    _token(
        "openai-project",
        lambda r: "sk-proj-" + _r(r, URLSAFE, 58) + "T3BlbkFJ" + _r(r, URLSAFE, 58),
        lambda v: f'client = OpenAI(api_key="{v}")',
    ),
    _token(
        "openai-service-account",
        lambda r: "sk-svcacct-" + _r(r, URLSAFE, 58) + "T3BlbkFJ" + _r(r, URLSAFE, 58),
        _env("OPENAI_API_KEY"),
    ),
    _token(
        "openai-admin",
        lambda r: "sk-admin-" + _r(r, URLSAFE, 58) + "T3BlbkFJ" + _r(r, URLSAFE, 58),
        lambda v: v,
    ),
    _token(
        "anthropic-api",
        lambda r: "sk-ant-api03-" + _r(r, URLSAFE, 93) + "AA",
        _env("ANTHROPIC_API_KEY"),
    ),
    _token(
        "anthropic-admin",
        lambda r: "sk-ant-admin01-" + _r(r, URLSAFE, 93) + "AA",
        lambda v: f"x-api-key: {v}",
    ),
    _token(
        "google-api-key", lambda r: "AIza" + _r(r, URLSAFE, 35), lambda v: f"GOOGLE_MAPS_KEY={v}"
    ),
    _token(
        "google-oauth-client-secret",
        lambda r: "GOCSPX-" + _r(r, URLSAFE, 28),
        lambda v: f"クライアントシークレット {v}",
    ),
    _token(
        "google-oauth-access-token",
        lambda r: "ya29.a0" + _r(r, URLSAFE, 120),
        lambda v: f"access token {v}",
    ),
    _token(
        "docker-pat",
        lambda r: "dckr_pat_" + _r(r, URLSAFE, 27),
        lambda v: f"echo {v} | docker login -u minato --password-stdin",
    ),
    _token(
        "github-classic-pat",
        lambda r: "ghp_" + _r(r, ALNUM, 36),
        lambda v: f"git remote set-url origin https://{v}@github.com/minato/yamalog.git",
    ),
    _token(
        "github-fine-grained-pat",
        lambda r: "github_pat_11" + _r(r, UPPER_ALNUM, 20) + "_" + _r(r, ALNUM, 59),
        _env("GH_TOKEN"),
    ),
    _token("github-oauth", lambda r: "gho_" + _r(r, ALNUM, 36), lambda v: f"oauth token: {v}"),
    _token("gitlab-pat", lambda r: "glpat-" + _r(r, URLSAFE, 20), lambda v: f"GITLAB_TOKEN={v}"),
    _token(
        "gitlab-runner",
        lambda r: "glrt-" + _r(r, URLSAFE, 20),
        lambda v: f"gitlab-runner register --token {v}",
    ),
    _token(
        "aws-access-key-id",
        lambda r: "AKIA" + _r(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16),
        _env("AWS_ACCESS_KEY_ID"),
    ),
    _aws_pair,
    _token(
        "slack-bot-token",
        lambda r: f"xoxb-{_r(r, string.digits, 12)}-{_r(r, string.digits, 13)}-{_r(r, ALNUM, 24)}",
        _env("SLACK_BOT_TOKEN"),
    ),
    _slack_webhook,
    _discord_webhook,
    _token(
        "stripe-live-secret",
        lambda r: "sk_live_" + _r(r, ALNUM, 24),
        lambda v: f"Stripe.api_key = '{v}'",
    ),
    _token("stripe-restricted", lambda r: "rk_live_" + _r(r, ALNUM, 24), lambda v: v),
    _token(
        "stripe-webhook-secret",
        lambda r: "whsec_" + _r(r, ALNUM, 32),
        _env("STRIPE_WEBHOOK_SECRET"),
    ),
    _token(
        "npm-token",
        lambda r: "npm_" + _r(r, ALNUM, 36),
        lambda v: f"//registry.npmjs.org/:_authToken={v}",
    ),
    _token(
        "pypi-token",
        lambda r: "pypi-AgEIcHlwaS5vcmc" + _r(r, URLSAFE, 70),
        lambda v: f"[pypi]\n  username = __token__\n  password = {v}",
    ),
    _token(
        "sendgrid-key",
        lambda r: "SG." + _r(r, URLSAFE, 22) + "." + _r(r, URLSAFE, 43),
        _env("SENDGRID_API_KEY"),
    ),
    _token("twilio-api-key", lambda r: "SK" + _r(r, HEX, 32), lambda v: f"twilio key {v}"),
    _token(
        "huggingface-token",
        lambda r: "hf_" + _r(r, string.ascii_letters, 34),
        lambda v: f"huggingface-cli login --token {v}",
    ),
    _jwt,
    _pem("RSA "),
    _pem("OPENSSH "),
    _pem("EC "),
    _token(
        "digitalocean-pat",
        lambda r: "dop_v1_" + _r(r, HEX, 64),
        lambda v: f"doctl auth init -t {v}",
    ),
    _token(
        "grafana-service-account",
        lambda r: "glsa_" + _r(r, ALNUM, 32) + "_" + _r(r, HEX, 8),
        lambda v: v,
    ),
    _token("vault-token", lambda r: "hvs." + _r(r, URLSAFE, 95), _env("VAULT_TOKEN")),
    _token(
        "shopify-token",
        lambda r: "shpat_" + _r(r, HEX, 32),
        lambda v: f"X-Shopify-Access-Token: {v}",
    ),
    _token("sentry-user-token", lambda r: "sntryu_" + _r(r, HEX, 64), _env("SENTRY_AUTH_TOKEN")),
    _token(
        "linear-api-key",
        lambda r: "lin_api_" + _r(r, ALNUM, 40),
        lambda v: f"Linear の API キー {v}",
    ),
    _token(
        "notion-token",
        lambda r: "ntn_" + _r(r, string.digits, 11) + _r(r, ALNUM, 35),
        lambda v: f"NOTION_TOKEN={v}",
    ),
    _token("perplexity-key", lambda r: "pplx-" + _r(r, ALNUM, 48), lambda v: v),
    _token(
        "age-secret-key",
        lambda r: "AGE-SECRET-KEY-1" + _r(r, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58),
        lambda v: (
            f"# created: 2024-05-01\n# public key: age1{_r(random.Random(len(v)), 'qpzry9x8gf2tvdw0s3jn54khce6mua7l', 58)}\n{v}"
        ),
    ),
    _token(
        "databricks-token", lambda r: "dapi" + _r(r, HEX, 32), lambda v: f"DATABRICKS_TOKEN={v}"
    ),
    _token("postman-key", lambda r: "PMAK-" + _r(r, HEX, 24) + "-" + _r(r, HEX, 34), lambda v: v),
    _telegram,
    _azure,
    _onepassword,
    _token(
        "planetscale-password",
        lambda r: "pscale_pw_" + _r(r, URLSAFE, 43),
        lambda v: f"mysql://yamalog:{v}@aws.connect.psdb.cloud/yamalog",
    ),
    _token(
        "new-relic-key",
        lambda r: "NRAK-" + _r(r, UPPER_ALNUM, 27),
        lambda v: f"NEW_RELIC_API_KEY={v}",
    ),
    _token(
        "alibaba-access-key", lambda r: "LTAI" + _r(r, ALNUM, 20), lambda v: f"AccessKeyId: {v}"
    ),
    _token(
        "heroku-api-key",
        lambda r: "HRKU-AA" + _r(r, URLSAFE, 58),
        lambda v: f"heroku auth token => {v}",
    ),
    _url_credentials("postgresql", False),
    _url_credentials("mysql", False),
    _url_credentials("redis", True),
    _url_credentials("amqp", True),
    _cli("mysql-password-flag", "mysql -h db.internal -u root -p{pw} yamalog < dump.sql"),
    _cli("curl-user-flag", "curl -u minato:{pw} https://registry.example.com/v2/_catalog"),
    _cli("sshpass-flag", "sshpass -p '{pw}' ssh deploy@203.0.113.10"),
    _cli("long-password-flag", "pg_dump --dbname=yamalog --password={pw} > out.sql", "!#%"),
    _cli("redis-cli-flag", "redis-cli -h cache -a {pw} ping"),
    _cli("env-password-line", "DB_PASSWORD={pw}\nDB_HOST=localhost", "!#%"),
    _cli("yaml-password", "spring:\n  datasource:\n    password: {pw}", "#%"),
    _json_secret,
    _basic_auth,
    _statement(
        "japanese-password",
        [
            "Wi-Fiのパスワードは {pw} です",
            "管理画面のパスワード：{pw}",
            "銀行アプリのパスワードを {pw} に変えた",
        ],
    ),
    _statement(
        "japanese-pasu",
        ["NASのパスは{pw}だよ", "ルーターのパスは {pw}（メモ）", "パスは「{pw}」にした"],
    ),
    _statement("pw-arrow", ["社内VPN pw→{pw}", "PW→ {pw} （月末に変更）", "wifi pw -> {pw}"]),
    _statement(
        "english-password-statement",
        ["my password is {pw} for that site", "the admin password: {pw}"],
    ),
    _statement("pin-code", ["暗証番号は {pw} にした"], symbols=""),
    _full_width_password,
    _full_width_key,
    _passphrase,
    _wrapped,
    _split_messages,
    _split_messages_en,
    _split_after_reply,
    _split_after_reply_en,
    _typed_in_groups,
    _grouped,
    _base64_key,
    _hex_signing,
]

_FILLER_JA = [
    "家計簿アプリのDBをどうするか迷っている。",
    "結局 PostgreSQL にした。同期したいから。",
    "来週は丹沢に行く予定。天気が心配。",
    "yamalog の地図表示を直したい。",
    "ありがとう、助かった！",
    "NISA の積立額を月3万円に上げることにした。",
]
_FILLER_EN = [
    "I decided to move the side project to Fly.io because the free tier is enough.",
    "Thanks, that fixed it.",
    "Can you explain why the cache misses so often?",
    "Let's keep the schema simple for now.",
]
_ASSISTANT = [
    "キーや パスワードをチャットに貼るのは避けて、すぐにローテーションしてください。",
    "Please rotate that credential; it is now in the chat history.",
    "設定は合っています。環境変数が読み込まれているか確認してください。",
    "The error means the token has no access to that scope.",
]


def corpus(seed: int = 20240501, per_format: int = 3) -> list[Planted]:
    """Every format, ``per_format`` times, with values drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    return [make(rng) for _ in range(per_format) for make in FORMATS]


def conversations(planted: list[Planted], seed: int = 7) -> list[list[str]]:
    """The planted texts mixed into conversations: 2-4 secrets each, ordinary messages and
    assistant replies around them (a split secret's two messages stay next to each other)."""
    rng = random.Random(seed)
    out: list[list[str]] = []
    i = 0
    while i < len(planted):
        n = rng.randint(2, 4)
        messages: list[str] = [rng.choice(_FILLER_JA + _FILLER_EN)]
        for p in planted[i : i + n]:
            messages.extend(p.messages)
            messages.append(rng.choice(_ASSISTANT))
            if rng.random() < 0.5:
                messages.append(rng.choice(_FILLER_JA + _FILLER_EN))
        out.append(messages)
        i += n
    return out


def surviving_pieces(planted: Planted, original: str, redacted: str, size: int = 5) -> list[str]:
    """Pieces (``size`` characters) of the secret still in ``redacted`` that are not ordinary
    text of ``original`` (a piece that also occurs outside the secret, like "-----", is not
    counted)."""
    redacted = re.sub(r"\[REDACTED:[a-z0-9\-]+\]", " ", redacted)
    outside = original
    for part in planted.parts:
        outside = outside.replace(part, "\x00")
    pieces: set[str] = set()
    for part in planted.parts:
        for k in range(len(part) - size + 1):
            piece = part[k : k + size]
            if piece in redacted and piece not in outside:
                pieces.add(piece)
    return sorted(pieces)
