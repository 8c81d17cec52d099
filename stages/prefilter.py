"""Prefilter: a local, explainable rule set deciding which conversations go on to drafting.

Pure: no I/O. Every decision carries a machine-readable reason:

* ``keep:override`` / ``drop:override``: the person said so (by conversation key).
* ``drop:empty``: no words of the person's own.
* ``drop:code-fix``: a technical chat (the person pastes code or logs, or the answers are code)
  in which the person says little (at most ``_FIX_PROSE_MAX`` characters of prose) and never
  why: a "1にした。通った" closing is a fix, not a personal decision, whatever decision or
  judgement marker it holds. A person who gives a reason, states a lesson, or speaks of their
  own project, plans or things is kept.
* ``keep:decision`` / ``keep:judgement`` / ``keep:lesson``: the person states a decision (or a
  change of mind), a judgement, or a result / lesson (Japanese or English markers).
* ``drop:error-log``: the person mostly pastes error output for analysis.
* ``drop:code-only``: the person only asks for code and the answers are mostly code blocks.
* ``drop:word-lookup``: a very short exchange asking what a word means.
* ``keep:default``: everything else. When in doubt, keep.

A text the person pastes to be summarised or translated is not their own words: only the
request before it counts (``split_prose``).

Markers are looked for in the person's prose only (code blocks and log lines removed), so a
``because`` inside a pasted stack trace or an assistant's answer does not count. A person who
describes their own project, business or plans is never dropped by the drop rules; one who
mentions something of theirs ("my website") is not dropped as code-only or a word look-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.models import Channel, Conversation, PrefilterDecision

RULE_VERSION = "prefilter-v2"  # v2: drop:code-fix


def _rx(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE | re.MULTILINE)


_JA_END = r"(?=[。．！!？?、,\s」』)]|$|よ|ね|わ|な)"

DECISION_RE = _rx(
    r"\b(?:I|we)(?:'ve| have)? decided\b",
    r"\bdecided to\b",
    r"\b(?:my|our) decision\b",
    r"\b(?:I|we)(?:'ll| will| am going to|'m going to| are going to|'re going to) go with\b",
    r"\blet's go with\b",
    r"\b(?:I|we) (?:chose|picked|selected|opted for|went with|settled on|switched to|moved to)\b",
    r"\b(?:I|we)(?:'ll| will) (?:stick with|stay with)\b",
    r"\b(?:I|we)'ll use\b",
    r"\bchanged (?:my|our) minds?\b",
    r"\bgoing with\b",
    r"決め(?:た|ました|ている|てる)",
    r"決定(?:した|しました|です|事項)",
    r"(?:に|ことに)(?:する|します|しよう|した|しました)" + _JA_END,
    r"選(?:んだ|びました)",
    r"採用(?:した|する|します|しました|決定)",
    r"やめ(?:た|ました|る|ます)" + _JA_END,
    r"結局",
    r"(?:乗り換え|切り替え)(?:た|ました|る|ます)",
    r"方針",
)

JUDGEMENT_RE = _rx(
    r"\bbecause\b",
    r"\binstead of\b",
    r"\bprefer(?:s|red|ence)?\b",
    r"\b(?:I|we)(?:'d| would) rather\b",
    r"\bthe reason\b",
    r"\b(?:better|worse|cheaper|simpler|faster) than\b",
    r"\bnot worth\b",
    r"\boverkill\b",
    r"\bI (?:don't|do not) (?:like|want|trust)\b",
    r"理由",
    r"なぜなら",
    r"方が(?:いい|良い|よい|好き|安い|速い|楽|合って)",
    r"(?:と|って)(?:思う|思います|思った|考えて|感じ)",
    r"好み|好き|嫌い",
    r"判断",
    r"向いて(?:いる|いない|ない|る)",
)

LESSON_RE = _rx(
    r"\bturn(?:s|ed) out\b",
    r"\blessons?\b",
    r"\blearn(?:ed|t)\b",
    r"\bI (?:realized|realised|found out|noticed|figured out)\b",
    r"\bin hindsight\b",
    r"\bnext time\b",
    r"\b(?:it|that|this) (?:worked|fixed it|solved it)\b",
    r"\bworks now\b",
    r"\bin the end\b",
    r"分かった|わかった|判明",
    r"学んだ|学び|教訓|反省",
    r"気(?:づ|付)いた",
    r"結果(?:的に|として|は)",
    r"(?:うまく|上手く)(?:いった|いきました)",
    r"解決(?:した|しました)",
    r"次(?:から|回)は",
)

REASON_RE = _rx(
    r"\bbecause\b",
    r"\bsince\b",
    r"\bso that\b",
    r"\bthe reason\b",
    r"\bdue to\b",
    r"理由",
    r"なぜなら",
    r"ので",
    r"から(?=[。．、,!！\s]|$|です|だ|ね|よ)",
    r"ため(?=[にの、。]|$)",
)

# The person describes their own project, business, plans or themselves (strong signal).
PLANS_RE = _rx(
    r"\b(?:I|we)(?:'m| am|'re| are) (?:building|developing|working on|planning|starting|running"
    r"|launching|writing|teaching|a |an )",
    r"\b(?:I|we) (?:want|plan|intend|need|would like|'d like) to (?:develop|build|create|launch"
    r"|start|set up|open|run|make|design|teach|improve)\b",
    r"\b(?:my|our) (?:own )?(?:business|company|startup|freelance|career|family|thesis|plans?)\b",
    r"弊社|自社|個人開発|副業|事業|起業|プロジェクト|予定",
    r"(?:開発|作成|構築|運営|制作)(?:したい|している|してる|中|する予定)",
)

# The person mentions something of theirs (weaker: "my app", "私のサイト").
OWNERSHIP_RE = _rx(
    r"\b(?:my|our)\s+(?:own\s+)?(?:[\w'.-]+\s+){0,3}?(?:project|business|company|app|application"
    r"|website|site|startup|client|customer|team|product|shop|webshop|store|plan|thesis|course"
    r"|class|students?|family|career|job|work|service|blog|portfolio|logo|brand|home|house)s?\b",
    r"私の|僕の|俺の|うちの|自分の",
)

_CODE_REQUEST_RE = _rx(
    r"\b(?:write|generate|give me|show me|implement|refactor|convert|fix)\b",
    r"\b(?:code|function|script|snippet|class|method|regex|regular expression|query|sql"
    r"|program|one-liner)\b",
    r"コード|関数|書いて|実装|スクリプト|正規表現|クエリ|作って|直して|変換",
)

_LOOKUP_RE = _rx(
    r"\bwhat (?:does|do) .{1,60} mean\b",
    r"\bmeaning of\b",
    r"\bdefin(?:e|ition of)\b",
    r"\bwhat(?:'s| is) (?:an? |the )?[\w'-]+\s*\??\s*$",
    r"\bsynonyms? (?:of|for)\b",
    r"\bhow (?:do you|to) (?:say|pronounce|spell)\b",
    r"意味",
    r"とは[？?]?\s*$",
    r"読み方",
    r"どういうこと",
)

# a log line: one of these at its start (after white space), or the anywhere pattern. Compiled
# with ``^\s*`` once before the alternation (not in each branch): the same lines match, and the
# engine tries the branches only at a line's start (~3.5x faster; the import runs it per line)
_LOG_LINE_AT_START = (
    r"Traceback \(most recent call last\)",
    r"File \".*\", line \d+",
    r"at [\w.$<>/\\-]+ ?\(.*\)\s*$",
    r"at .+:\d+(?::\d+)?\)?\s*$",
    r"[\w.]*(?:Error|Exception|Warning)(?::|\s*$)",
    r"\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}",
    r"(?-i:\[?(?:ERROR|WARN|WARNING|FATAL|CRITICAL|DEBUG|INFO|TRACE)\]?[\s:|])",
    r"npm ERR!",
    r"error(?:\[E\d+\])?:",
    r"(?:panic|fatal error|Segmentation fault|Caused by)\b",
    r"\^+\s*$",
    r"#\d+\s+0x[0-9a-f]+",
    r"(?-i:E\s{2,}\S)",
)
_LOG_LINE_ANYWHERE = (r":\d+:\d+: (?:error|warning|note):",)
_LOG_LINE_RE = _rx(r"^\s*(?:" + "|".join(_LOG_LINE_AT_START) + ")", *_LOG_LINE_ANYWHERE)

PASTE_INTRO_RE = _rx(
    r"\bsummari[sz](?:e|ing)\b",
    r"\b(?:following|this|the below|below) (?:text|article|document|e-?mail|paper|passage"
    r"|transcript|content|essay|report|letter|notes|slides|chapter|message)\b",
    r"\btranslat(?:e|ion)\b",
    r"\bproofread\b",
    r"以下の|次の(?:文章|テキスト|記事|メール|内容)",
    r"要約|翻訳|添削|校正",
)

_FENCE_RE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)

# Each of the person's messages is read up to this many characters: the rules look for a stated
# decision, judgement or lesson and for short code/log/look-up requests; what a 50 MB paste holds
# after its first 64k characters changes none of them in practice, and scanning it all made the
# import of one huge message take minutes (issue 12, item 2).
MAX_SCAN_CHARS = 65_536
_CODE_SHARE_MIN = 0.5
_CODE_PROSE_MAX = 600
_LOG_PROSE_MAX = 400
_LOOKUP_PROSE_MAX = 100
_LOOKUP_TOTAL_MAX = 2000
_FIX_PROSE_MAX = 200
_FIX_CODE_SHARE = 0.25
_PASTE_INTRO_LINES = 6
_PASTE_MIN = 300


@dataclass(frozen=True)
class _Signals:
    """What the rules look at, computed once per conversation."""

    person_messages: int
    person_prose: str  # person text without code blocks and log lines
    person_has_code: bool
    log_chars: int
    assistant_code_share: float
    total_chars: int


def prefilter(
    conv: Conversation, overrides: dict[str, bool] | None = None, *, content_hash: str | None = None
) -> PrefilterDecision:
    """Decide whether ``conv`` goes on to drafting, with a machine-readable reason.
    ``content_hash``: the conversation's hash when the caller has it already (saves a pass)."""
    drafting = [(m.channel, m.text) for m in conv.drafting_messages]
    return prefilter_texts(conv.key, content_hash or conv.content_hash, drafting, overrides)


def prefilter_texts(
    key: str,
    content_hash: str,
    drafting: Sequence[tuple[Channel, str]],
    overrides: dict[str, bool] | None = None,
) -> PrefilterDecision:
    """:func:`prefilter` of a conversation given by its key, its hash and the channel and text
    of each of its ``drafting_messages`` in order: what the import hands its index workers,
    which decide behind the ledger's commit (the same decision)."""
    keep, reason = _decide(key, drafting, overrides or {})
    return PrefilterDecision(
        conversation_key=key,
        content_hash=content_hash,
        keep=keep,
        reason=reason,
        rule_version=RULE_VERSION,
    )


def _decide(
    key: str, drafting: Sequence[tuple[Channel, str]], overrides: dict[str, bool]
) -> tuple[bool, str]:
    if key in overrides:
        return (True, "keep:override") if overrides[key] else (False, "drop:override")
    sig = _signals(drafting)
    if sig.person_messages == 0:
        return False, "drop:empty"
    keep_reason = _keep_reason(sig.person_prose)
    if keep_reason in ("keep:decision", "keep:judgement") and _is_code_fix(sig):
        return False, "drop:code-fix"  # "1にした。通った": a fix, not a personal decision
    if keep_reason is not None:
        return True, keep_reason
    drop_reason = _drop_reason(sig)
    if drop_reason is not None:
        return False, drop_reason
    if _is_code_fix(sig):
        return False, "drop:code-fix"
    return True, "keep:default"


def _keep_reason(prose: str) -> str | None:
    for rx, reason in (
        (DECISION_RE, "keep:decision"),
        (JUDGEMENT_RE, "keep:judgement"),
        (LESSON_RE, "keep:lesson"),
    ):
        if rx.search(prose):
            return reason
    return None


def _drop_reason(sig: _Signals) -> str | None:
    if PLANS_RE.search(sig.person_prose):
        return None
    if _is_error_log(sig):  # "my app crashes: <log>" is still a log paste
        return "drop:error-log"
    if OWNERSHIP_RE.search(sig.person_prose):
        return None
    if _is_code_only(sig):
        return "drop:code-only"
    if _is_word_lookup(sig):
        return "drop:word-lookup"
    return None


def _is_code_fix(sig: _Signals) -> bool:
    technical = (
        sig.person_has_code or sig.log_chars > 0 or sig.assistant_code_share >= _FIX_CODE_SHARE
    )
    prose = sig.person_prose.strip()
    return (
        technical
        and len(prose) <= _FIX_PROSE_MAX
        and not REASON_RE.search(prose)
        and not PLANS_RE.search(prose)
        and not OWNERSHIP_RE.search(prose)
    )


def _is_error_log(sig: _Signals) -> bool:
    prose = len(sig.person_prose.strip())
    return sig.log_chars > 0 and sig.log_chars >= prose and prose <= _LOG_PROSE_MAX


def _is_code_only(sig: _Signals) -> bool:
    asks_for_code = sig.person_has_code or bool(_CODE_REQUEST_RE.search(sig.person_prose))
    return (
        asks_for_code
        and sig.assistant_code_share >= _CODE_SHARE_MIN
        and len(sig.person_prose.strip()) <= _CODE_PROSE_MAX
    )


def _is_word_lookup(sig: _Signals) -> bool:
    prose = sig.person_prose.strip()
    return (
        sig.person_messages <= 2
        and 0 < len(prose) <= _LOOKUP_PROSE_MAX
        and sig.total_chars <= _LOOKUP_TOTAL_MAX
        and bool(_LOOKUP_RE.search(prose))
    )


# ---------------------------------------------------------------- signals


def _signals(messages: Sequence[tuple[Channel, str]]) -> _Signals:
    person = [text for channel, text in messages if channel == Channel.PERSON]
    assistant = [text for channel, text in messages if channel == Channel.ASSISTANT]
    prose_parts: list[str] = []
    log_chars = 0
    has_code = False
    for text in person:
        prose, logs, code = split_prose(text[:MAX_SCAN_CHARS])
        prose_parts.append(prose)
        log_chars += logs
        has_code = has_code or code > 0
    return _Signals(
        person_messages=len(person),
        person_prose="\n".join(prose_parts),
        person_has_code=has_code,
        log_chars=log_chars,
        assistant_code_share=_code_share(assistant),
        total_chars=sum(len(text) for _, text in messages),
    )


def split_prose(text: str) -> tuple[str, int, int]:
    """(prose without code blocks and log lines, chars of log output, chars of other code)."""
    log_chars = 0
    code_chars = 0
    for block in _FENCE_RE.findall(text):
        block_logs = _log_chars(block.splitlines())
        if block_logs:
            log_chars += len(block)
        else:
            code_chars += len(block)
    outside = _FENCE_RE.sub("\n", text)
    kept: list[str] = []
    for line, is_log in _mark_log_lines(outside.splitlines()):
        if is_log:
            log_chars += len(line)
        else:
            kept.append(line)
    return "\n".join(_drop_paste(kept)), log_chars, code_chars


def _drop_paste(lines: list[str]) -> list[str]:
    """Keep only the request when the person pastes a text to be summarised, translated..."""
    for i, line in enumerate(lines[:_PASTE_INTRO_LINES]):
        if not line.rstrip().endswith((":", "：")):
            continue
        intro = lines[: i + 1]
        if PASTE_INTRO_RE.search("\n".join(intro)) and _chars(lines[i + 1 :]) >= _PASTE_MIN:
            return intro
    return lines


def _chars(lines: list[str]) -> int:
    return sum(len(line.strip()) for line in lines)


def _log_chars(lines: Iterable[str]) -> int:
    return sum(len(line) for line, is_log in _mark_log_lines(list(lines)) if is_log)


def _mark_log_lines(lines: list[str]) -> list[tuple[str, bool]]:
    """Mark log lines; the indented lines inside a traceback count as log too."""
    marked: list[tuple[str, bool]] = []
    in_trace = False
    for line in lines:
        if _LOG_LINE_RE.search(line):
            in_trace = True
            marked.append((line, True))
        elif in_trace and line.startswith((" ", "\t")) and line.strip():
            marked.append((line, True))
        else:
            in_trace = False
            marked.append((line, False))
    return marked


def _code_share(texts: list[str]) -> float:
    total = sum(len(t) for t in texts)
    if total == 0:
        return 0.0
    code = sum(len(block) for t in texts for block in _FENCE_RE.findall(t))
    return code / total
