"""Monthly summaries and the global profile (seed 001), insert-only.

What a month is made of is read here (the person's own messages on the active path of the
conversations the prefilter kept, and the active case records that happened in the month, both
in the person's calendar), and each new version is written here: through the secret guard
(a flagged value in a summary, profile or keyword never reaches a row) and with its citations
checked against the store (a summary can only cite memories and messages that exist).
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core.errors import StoreError
from core.hashing import bytes_text
from core.secrets import contains_secret, redact
from core.summaries import (
    MemoryInput,
    MessageInput,
    MonthDraft,
    MonthInputs,
    MonthSummary,
    Profile,
    ProfileDraft,
)
from store.db import Database
from store.ledger import DECISION_JOINS, NOT_FORGOTTEN

# the conversations the prefilter (or the person's override) kept, and not erased
# the conversation of message ``s`` is kept (the prefilter's say as the ledger reads it; no
# decision yet counts as kept) and not forgotten
_KEPT = f"""
  JOIN source_conversations c ON c.conversation_key = s.conversation_key {DECISION_JOINS}
 WHERE coalesce(o.keep, d.keep, true) AND {NOT_FORGOTTEN}"""

_MONTH_OF = "to_char({col} AT TIME ZONE %(tz)s, 'YYYY-MM')"

# every revision of an active memory with the time of what it rests on: the earliest message its
# new evidence quotes (a change of mind appended in September belongs to September, while the
# memory itself happened in July); a revision without evidence of its own counts at the memory's
# time only when it is the first
_REVISIONS = """
  SELECT r.memory_id, r.revision, r.record->>'kind' AS kind, r.record->>'title' AS title,
         coalesce(r.record->>'index_summary', '') AS index_summary,
         coalesce((SELECT min(s.created_at) FROM evidence e
                     JOIN source_messages s ON s.message_key = e.source_key
                    WHERE e.memory_id = r.memory_id AND e.revision_added = r.revision),
                  CASE WHEN r.revision = 1 THEN m.occurred_at END) AS at
    FROM memory_revisions r JOIN memories m ON m.id = r.memory_id
   WHERE m.status = 'active'"""


class SummaryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------ what months are made of

    def months(self, time_zone: str) -> list[str]:
        """Every month (YYYY-MM, in ``time_zone``) with something the person wrote or a case
        record, oldest first."""
        with self.db.connection() as conn:
            rows = conn.execute(
                f"""SELECT {_MONTH_OF.format(col="s.created_at")} FROM source_messages s {_KEPT}
                      AND s.channel = 'person' AND s.on_active_path AND s.created_at IS NOT NULL
                    UNION
                    SELECT {_MONTH_OF.format(col="at")} FROM ({_REVISIONS}) rv WHERE at IS NOT NULL
                    ORDER BY 1""",
                {"tz": time_zone, "rule": None},
            ).fetchall()
        return [r[0] for r in rows]

    def month_inputs(self, month: str, time_zone: str) -> MonthInputs:
        with self.db.connection() as conn:
            # per memory, its newest revision that happened in the month (as it stood then)
            mems = conn.execute(
                f"""SELECT DISTINCT ON (memory_id) memory_id, revision, kind, title, index_summary, at
                      FROM ({_REVISIONS}) rv
                     WHERE at IS NOT NULL AND {_MONTH_OF.format(col="at")} = %(month)s
                     ORDER BY memory_id, revision DESC""",
                {"tz": time_zone, "month": month, "rule": None},
            ).fetchall()
            mems.sort(key=lambda r: (r[5], r[0]))
            # the conversations each record's evidence quotes: a sentence of the person is
            # cited through the records of its conversation
            convs = dict(
                conn.execute(
                    """SELECT e.memory_id, array_agg(DISTINCT s.conversation_key ORDER BY s.conversation_key)
                         FROM evidence e JOIN source_messages s ON s.message_key = e.source_key
                        WHERE e.memory_id = ANY(%s) GROUP BY e.memory_id""",
                    ([r[0] for r in mems],),
                ).fetchall()
            )
            msgs = conn.execute(
                f"""SELECT s.message_key, s.conversation_key, s.created_at, s.body, s.content_hash
                      FROM source_messages s {_KEPT}
                       AND s.channel = 'person' AND s.on_active_path
                       AND {_MONTH_OF.format(col="s.created_at")} = %(month)s
                     ORDER BY s.created_at, s.message_key""",
                {"tz": time_zone, "month": month, "rule": None},
            ).fetchall()
        return MonthInputs(
            month=month,
            time_zone=time_zone,
            memories=tuple(
                MemoryInput(mid, rev, kind, title, index, at, tuple(convs.get(mid) or ()))
                for mid, rev, kind, title, index, at in mems
            ),
            messages=tuple(
                MessageInput(k, ck, at, bytes_text(bytes(body)), h) for k, ck, at, body, h in msgs
            ),
        )

    # ------------------------------------------------------------ months

    def latest(self, month: str) -> MonthSummary | None:
        with self.db.connection() as conn:
            row = (
                _cur(conn)
                .execute(
                    "SELECT * FROM month_summaries WHERE month = %s ORDER BY version DESC LIMIT 1",
                    (month,),
                )
                .fetchone()
            )
        return _month(row) if row else None

    def version(self, month: str, version: int) -> MonthSummary | None:
        with self.db.connection() as conn:
            row = (
                _cur(conn)
                .execute(
                    "SELECT * FROM month_summaries WHERE month = %s AND version = %s",
                    (month, version),
                )
                .fetchone()
            )
        return _month(row) if row else None

    def latest_all(self) -> list[MonthSummary]:
        """The newest version of every month, oldest month first."""
        with self.db.connection() as conn:
            rows = (
                _cur(conn)
                .execute(
                    """SELECT DISTINCT ON (month) * FROM month_summaries
                   ORDER BY month, version DESC"""
                )
                .fetchall()
            )
        return [_month(r) for r in rows]

    def history(self, month: str) -> list[MonthSummary]:
        with self.db.connection() as conn:
            rows = (
                _cur(conn)
                .execute(
                    "SELECT * FROM month_summaries WHERE month = %s ORDER BY version", (month,)
                )
                .fetchall()
            )
        return [_month(r) for r in rows]

    def add_month(
        self,
        month: str,
        draft: MonthDraft,
        *,
        inputs_hash: str,
        model: str,
        prompt_version: str,
        time_zone: str,
        run_id: str | None,
    ) -> MonthSummary:
        """A new version of ``month``: the text guarded, the citations checked, nothing
        overwritten. Returns what was stored."""
        if not -1.0 <= draft.sentiment <= 1.0:
            raise StoreError(f"sentiment of {month} out of [-1, 1]: {draft.sentiment}")
        summary, _ = redact(draft.summary)
        keywords = _clean_keywords(draft.keywords)
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pmem-month-' || %s))", (month,))
            cites = _citations(draft.citations)
            _check_cited(
                conn,
                _unique(draft.memory_ids + [m for c in cites for m in c["memory_ids"]]),
                _unique(draft.message_keys + [k for c in cites for k in c["message_keys"]]),
                month,
            )
            row = (
                _cur(conn)
                .execute(
                    """INSERT INTO month_summaries (month, version, summary, sentiment, keywords,
                       memory_ids, message_keys, inputs_hash, model, prompt_version, time_zone, run_id,
                       citations)
                   SELECT %(month)s, coalesce(max(version), 0) + 1, %(summary)s, %(sentiment)s,
                          %(keywords)s, %(memory_ids)s, %(message_keys)s, %(hash)s, %(model)s,
                          %(prompt)s, %(tz)s, %(run)s, %(cites)s
                     FROM month_summaries WHERE month = %(month)s
                   RETURNING *""",
                    {
                        "month": month,
                        "summary": summary,
                        "sentiment": float(draft.sentiment),
                        "keywords": keywords,
                        "memory_ids": _unique(draft.memory_ids),
                        "message_keys": _unique(draft.message_keys),
                        "hash": inputs_hash,
                        "model": model,
                        "prompt": prompt_version,
                        "tz": time_zone,
                        "run": run_id,
                        "cites": Jsonb(cites),
                    },
                )
                .fetchone()
            )
        assert row is not None
        return _month(row)

    # ------------------------------------------------------------ the profile

    def profile(self, version: int | None = None) -> Profile | None:
        with self.db.connection() as conn:
            if version is None:
                row = (
                    _cur(conn)
                    .execute("SELECT * FROM profile_versions ORDER BY version DESC LIMIT 1")
                    .fetchone()
                )
            else:
                row = (
                    _cur(conn)
                    .execute("SELECT * FROM profile_versions WHERE version = %s", (version,))
                    .fetchone()
                )
        return _profile(row) if row else None

    def add_profile(
        self,
        draft: ProfileDraft,
        *,
        inputs_hash: str,
        model: str,
        prompt_version: str,
        run_id: str | None,
    ) -> Profile:
        text, _ = redact(draft.profile)
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pmem-profile'))")
            cites = _citations(draft.citations)
            _check_cited(
                conn,
                _unique(draft.memory_ids + [m for c in cites for m in c["memory_ids"]]),
                _unique([k for c in cites for k in c["message_keys"]]),
                "the profile",
            )
            known = {r[0] for r in conn.execute("SELECT DISTINCT month FROM month_summaries")}
            unknown = [m for m in draft.months if m not in known]
            if unknown:
                raise StoreError(f"the profile cites {len(unknown)} month(s) without a summary")
            row = (
                _cur(conn)
                .execute(
                    """INSERT INTO profile_versions (version, profile, months, memory_ids, inputs_hash,
                       model, prompt_version, run_id, citations)
                   SELECT coalesce(max(version), 0) + 1, %s, %s, %s, %s, %s, %s, %s, %s FROM profile_versions
                   RETURNING *""",
                    (
                        text,
                        sorted(set(draft.months)),
                        _unique(draft.memory_ids),
                        inputs_hash,
                        model,
                        prompt_version,
                        run_id,
                        Jsonb(cites),
                    ),
                )
                .fetchone()
            )
        assert row is not None
        return _profile(row)

    def drop_citing(self, conn: Connection, memory_ids: list[str]) -> int:
        """Erasure of memories: every summary version citing one goes (derived data; the next
        `pmem summarize` drafts the month again from what is left). Returns the rows removed."""
        n = conn.execute(
            "DELETE FROM month_summaries WHERE memory_ids && %s::text[]", (memory_ids,)
        ).rowcount
        n += conn.execute(
            "DELETE FROM profile_versions WHERE memory_ids && %s::text[]", (memory_ids,)
        ).rowcount
        return n


def _cur(conn: Connection) -> Any:
    return conn.cursor(row_factory=dict_row)


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _clean_keywords(words: list[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        w = " ".join(str(w).split())
        if w and len(w) <= 60 and not contains_secret(w) and w not in out:
            out.append(w)
    return out[:20]


def _citations(raw: list[dict[str, list[str]]]) -> list[dict[str, list[str]]]:
    """One citation per line, as stored: the memory ids and message keys, each once."""
    return [
        {
            "memory_ids": _unique(list(c.get("memory_ids", []))),
            "message_keys": _unique(list(c.get("message_keys", []))),
        }
        for c in raw
    ]


def _check_cited(
    conn: Connection, memory_ids: list[str], message_keys: list[str], what: str
) -> None:
    if memory_ids:
        found = {
            r[0]
            for r in conn.execute("SELECT id FROM memories WHERE id = ANY(%s)", (list(memory_ids),))
        }
        missing = [m for m in memory_ids if m not in found]
        if missing:
            raise StoreError(
                f"the summary of {what} cites {len(missing)} memory id(s) that do not exist"
            )
    if message_keys:
        found = {
            r[0]
            for r in conn.execute(
                "SELECT message_key FROM source_messages WHERE message_key = ANY(%s)",
                (list(message_keys),),
            )
        }
        missing = [k for k in message_keys if k not in found]
        if missing:
            raise StoreError(
                f"the summary of {what} cites {len(missing)} message key(s) not in the ledger"
            )


def _month(r: dict) -> MonthSummary:
    return MonthSummary(
        month=r["month"],
        version=r["version"],
        summary=r["summary"],
        sentiment=r["sentiment"],
        keywords=tuple(r["keywords"]),
        memory_ids=tuple(r["memory_ids"]),
        message_keys=tuple(r["message_keys"]),
        inputs_hash=r["inputs_hash"],
        model=r["model"],
        prompt_version=r["prompt_version"],
        time_zone=r["time_zone"],
        run_id=r["run_id"],
        created_at=r["created_at"],
        citations=tuple(r.get("citations") or ()),
    )


def _profile(r: dict) -> Profile:
    return Profile(
        version=r["version"],
        profile=r["profile"],
        months=tuple(r["months"]),
        memory_ids=tuple(r["memory_ids"]),
        inputs_hash=r["inputs_hash"],
        model=r["model"],
        prompt_version=r["prompt_version"],
        run_id=r["run_id"],
        created_at=r["created_at"],
        citations=tuple(r.get("citations") or ()),
    )


# ---------------------------------------------------------------- load_context's first parts

PROFILE_SHARE = 0.30  # of load_context's byte budget
MONTH_SHARE = 0.15


def context_prefix(db: Database, budget_bytes: int, *, conn: Connection | None = None) -> str:
    """What load_context shows before the memory index (seed 001's prompt: the global summary,
    then the recent past): the newest profile and the latest month's summary, each cut to its
    own share of the budget, read in one query (on ``conn`` when given). Empty when
    `pmem summarize` has not run."""
    if conn is None:
        with db.connection() as own:
            return context_prefix(db, budget_bytes, conn=own)
    row = conn.execute(
        """SELECT p.version, p.profile, m.month, m.sentiment, m.keywords, m.summary
             FROM (SELECT 1) one
             LEFT JOIN LATERAL (SELECT version, profile FROM profile_versions
                                 ORDER BY version DESC LIMIT 1) p ON true
             LEFT JOIN LATERAL (SELECT month, sentiment, keywords, summary FROM month_summaries
                                 ORDER BY month DESC, version DESC LIMIT 1) m ON true"""
    ).fetchone()
    assert row is not None
    p_version, profile, month, sentiment, keywords, summary = row
    out = []
    if p_version is not None:
        out.append(
            _clip_block(
                f"# profile (version {p_version}; get_profile() for all of it)\n{profile}",
                int(budget_bytes * PROFILE_SHARE),
            )
        )
    if month is not None:
        out.append(
            _clip_block(
                f"# latest month: {month} (sentiment {sentiment:+.2f}; keywords: {', '.join(keywords)}; "
                f"get_month_summary(month) for any month)\n{summary}",
                int(budget_bytes * MONTH_SHARE),
            )
        )
    return "".join(out)


def _clip_block(text: str, limit: int) -> str:
    data = (text.rstrip() + "\n").encode()
    if len(data) <= limit:
        return data.decode()
    return data[: max(0, limit - 5)].decode("utf-8", errors="ignore").rstrip() + " …\n"
