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


from core.secret_rules import (
    _ASSIGNMENT_RE,
    _BASE64_RE,
    _ENV_LINE_RE,
    _FORMATS,
    _GROUPED_RE,
    _HEX_RE,
    _KEYWORD_HINT_RE,
    _LIBRARY_HINT_RE,
    _MARKER_PREFIX,
    _PASSPHRASE_LINE_RE,
    _PASSWORD_KINDS,
    _PATTERNS,
    _PROXIMITY_RE,
    _TRAILING_PUNCT,
    GLOBAL_MIN_CHARS,
    MIN_VALUE_CHARS,
    _credential_like,
    _inner_caps,
    _keyword_plugin,
    _Lazy,
    _library_plugins,
    _machine_made,
    _plausible,
    _random_looking,
    _regex_detector,
)

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


# a run of token groups split by single spaces (or an ideographic space, NFKC: a space)
_GROUP_RUN_RE = _Lazy(
    r"(?<![A-Za-z0-9_\-])[A-Za-z0-9][A-Za-z0-9_\-.]{1,15}(?:[ \t]{1,2}[A-Za-z0-9_\-]{2,16}){2,}"
)


def _typed_in_groups(text: str) -> Iterator[tuple[int, int, str]]:
    """A key of a known format typed in groups (``ghp_Xa9K q2Lm 7Pz4 ...``, as read off a
    screen): the run with its spaces taken out matches a format from its start; the span is
    the groups the format's match covers. Most runs are words of prose: one test against every
    format's anchors leaves them only the formats without anchors to try."""
    for m in _GROUP_RUN_RE.finditer(text):
        run = m.group()
        joined = run.replace(" ", "").replace("\t", "")  # the run holds no other white space
        keep: list[int] | None = None
        for kind, pattern, group, anchors in (
            _FORMATS if joined.startswith(_FORMAT_ANCHORS) else _UNANCHORED_FORMATS
        ):
            if anchors is not None and not joined.startswith(anchors):
                continue
            fm = pattern.compiled().match(joined)
            if fm is None or fm.end(group) - fm.start(group) < 16:
                continue
            if not _random_looking(fm.group(group)):
                continue
            if keep is None:
                keep = [k for k, ch in enumerate(run) if ch not in " \t"]
            yield m.start() + keep[fm.start(group)], m.start() + keep[fm.end(group) - 1] + 1, kind
            break


#: every format's anchors (a run that starts with none of them can match an unanchored format only)
_FORMAT_ANCHORS = tuple(a for *_, anchors in _FORMATS if anchors is not None for a in anchors)
_UNANCHORED_FORMATS = tuple(f for f in _FORMATS if f[3] is None)


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
    for start, end, kind in _typed_in_groups(view.text):
        add(view, start, end, kind)

    # a value found once is a secret wherever it occurs
    for value, kind in values.items():
        for start in _occurrences(text, value):
            spans.append((start, start + len(value), kind))
    return spans


def _scan_view(view: _View, add, *, depth: int, formats_only: bool = False) -> None:  # noqa: ANN001
    text = view.text
    lower = text.lower()
    has, has_lower = text.__contains__, lower.__contains__
    for kind, pattern, group, anchors in _FORMATS:
        if anchors is not None and not any(map(has, anchors)):
            continue
        for m in pattern.finditer(text):
            add(view, m.start(group), m.end(group), kind)
    for kind, pattern, group, anchors in _PATTERNS:
        if anchors is not None and not any(map(has_lower, anchors)):
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
            end = start + len(value)
            if password:  # "hunter2!": a "!" written onto a password may be its last character
                tail = m.group("value")[len(value) :]
                end += len(tail) - len(tail.lstrip("!"))
            add(view, start, end, "password" if password else "secret")
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
    """What identifies the guard's findings: the source of this module and of its rules
    (``core.secret_rules``) and the installed detect-secrets release. A stored result of a scan (``store.guard_cache``) is used only
    under the version that made it, so a changed rule or plugin scans again."""
    from importlib.util import find_spec

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(Path(__file__).with_name("secret_rules.py").read_bytes())
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


_SPLIT_END_RE = _Lazy(r"[A-Za-z0-9_\-+/]{8}\s*$")
_SPLIT_START_RE = _Lazy(
    r"\s*(?=[A-Za-z0-9_\-+/]{0,40}[0-9])[A-Za-z0-9_\-+/]{6,}(?![A-Za-z0-9_\-+/])"
)

#: how much of the end of one message and the start of the next one of the same person is
#: scanned together for a secret split across them (a key's tail sent in the next message)
_SPLIT_WINDOW = 256


def find_secrets_in_messages(
    messages: Sequence[str], speakers: Sequence[object] | None = None
) -> list[list[Finding]]:
    """The findings of each message, with the conversation scanned as one text.

    A secret split across two consecutive messages (the end of one, the start of the next) is
    found whole and reported in both, each message's part with its own span. A value found in
    one message is found in every other message of the conversation too. A secret split across
    two messages of one person with another's turn between them (a key, then the assistant's
    answer, then the key's tail) is found too: the end of each message and the start of the
    same speaker's next one are scanned joined (``speakers``, one per message; without them
    turns are taken to alternate, so each message is joined with the one after next).
    """
    texts = list(messages)
    out: list[list[Finding]] = [[] for _ in texts]
    if not any(texts):
        return out
    _spread(texts, list(range(len(texts))), out, window=None)
    for i, j in _same_speaker_pairs(texts, speakers):
        _spread(texts, [i, j], out, window=_SPLIT_WINDOW)
    for i in range(len(texts) - 1):  # a tail followed by more words: joined without a break
        if _SPLIT_END_RE.search(texts[i]) and _SPLIT_START_RE.match(texts[i + 1]):
            _spread(texts, [i, i + 1], out, window=_SPLIT_WINDOW)
    return [_merge((f.start, f.end, f.type) for f in fs) if len(fs) > 1 else fs for fs in out]


def _same_speaker_pairs(
    texts: Sequence[str], speakers: Sequence[object] | None
) -> Iterator[tuple[int, int]]:
    """Each message and the next one of the same speaker, when another message is between."""
    if speakers is None:
        speakers = [i % 2 for i in range(len(texts))]
    last: dict[object, int] = {}
    for j, who in enumerate(speakers[: len(texts)]):
        i = last.get(who)
        if i is not None and j > i + 1 and texts[i] and texts[j]:
            yield i, j
        last[who] = j


def _spread(
    texts: Sequence[str], idxs: list[int], out: list[list[Finding]], *, window: int | None
) -> None:
    """Scan the messages ``idxs`` joined (with ``window``: the end of the first and the start
    of the second only) and add each finding's part to the messages it covers."""
    parts: list[tuple[int, int, int]] = []  # message, its offset in the message, length
    for n, i in enumerate(idxs):
        t = texts[i]
        if window is None:
            parts.append((i, 0, len(t)))
        elif n == 0:
            parts.append((i, max(0, len(t) - window), min(len(t), window)))
        else:
            parts.append((i, 0, min(len(t), window)))
    pieces = [texts[i][start : start + length] for i, start, length in parts]
    # a token run at the end of one and a token run with a digit or inner capital at the start
    # of the next: one key sent in two messages, read as one run (the guard's joined view
    # joins a wrapped line only when the next holds nothing else)
    sep = _MESSAGE_SEPARATOR
    if window is not None and _SPLIT_END_RE.search(pieces[0]) and _SPLIT_START_RE.match(pieces[1]):
        sep = ""
        (i, a, n), (j, b, m) = parts
        lead = len(pieces[1]) - len(pieces[1].lstrip())
        parts = [(i, a, len(pieces[0].rstrip())), (j, b + lead, m - lead)]
        pieces = [texts[k][start : start + length] for k, start, length in parts]
    offsets, pos = [], 0
    for piece in pieces:
        offsets.append(pos)
        pos += len(piece) + len(sep)
    for f in find_secrets(sep.join(pieces)):
        for (i, start, length), base in zip(parts, offsets, strict=True):
            a, b = max(f.start, base), min(f.end, base + length)
            if a < b:
                out[i].append(Finding(type=f.type, start=a - base + start, end=b - base + start))


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
    found = find_secrets_in_messages(texts, ["title", *(m.channel for m in messages)])
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


def secret_values(texts: Iterable[str], speakers: Sequence[object] | None = None) -> set[str]:
    """The secret values themselves, as found in these texts (to scrub them elsewhere).

    The texts are scanned as one conversation, so a secret split across two of them is found,
    and each of its parts (6+ characters) is returned (``speakers``: see
    ``find_secrets_in_messages``)."""
    texts = list(texts)
    values: set[str] = set()
    for text, findings in zip(texts, find_secrets_in_messages(texts, speakers), strict=True):
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
        if any(
            fv[i : i + 8] in folded and _random_looking(fv[i : i + 8]) for i in range(len(fv) - 7)
        ):
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
                # an ordinary word the secret happens to hold ("password" of "password2024!")
                # is not a piece of it: "Home lab passwords" stays as it is
                if _random_looking(text[a:b], long=12) or _inner_caps(text[a:b]):
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
