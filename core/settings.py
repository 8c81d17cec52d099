"""One settings object, from environment variables and `.env` files.

Where configuration comes from, strongest first: the values passed to ``Settings(...)``; the
environment; the `.env` in the working directory (the CLI's documented convenience: `cd` to the
project and run `pmem …`); the data dir's own ``config.env`` (0600, inside the private data dir);
the defaults. A field is read from ``PMEM_<NAME>`` (any case), or from its aliases
(``DATABASE_URL``, ``LLM``); the `.env` files use the same names (python-dotenv parses them).
Values are validated by pydantic as the field's type.

The settings are a plain pydantic model with that small loader (``_from_sources``), not
pydantic-settings: its import (every settings source, cloud secret stores included) cost a
fresh `pmem search` about a tenth of its one-second budget (ADR 0027);
``tests/test_settings.py`` holds the loader to pydantic-settings' behaviour for these fields.

`pmem serve` is started by an AI client in whatever folder the client chose (a cloned repository,
a download folder): a `.env` there must not redirect the database (`DATABASE_URL`) or the
memory API (`PMEM_MEMORY_URL`). ``ignore_working_dir_dotenv()`` (called by `pmem serve` before
anything reads settings) turns the working directory's `.env` off for the whole process: serve
reads the environment the client passes and the data dir's ``config.env`` only.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

ENV_PREFIX = "PMEM_"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB_NAME = "pmem"
DATA_DIR_CONFIG = "config.env"

# Every folder pmem writes under the data dir, and under its runs folder, in one place: the
# writers build their paths from these names and `pmem runs gc` reads them (it removes run files
# only, never one of these folders; tests/test_owner_cmds.py checks that no writer names another).
DATA_FOLDERS: dict[str, str] = {
    "pgdata": "the embedded PostgreSQL (store/embedded.py)",
    "prefect": "the managed Prefect server's home (flows/prefect_server.py)",
    "runs": "run files: a backfill's batches, drafts and review pages (state/files.py)",
    "exports": "the inbox the monthly re-import reads (flows/reimport.py)",
    "backups": "the dump taken before a schema migration, data of another PostgreSQL (store/db.py)",
    "cache": "the local embedder's model files (providers/embeddings/usem3_embedder.py)",
    "demo": "`pmem runs demo`'s own run files (cli/status_cmds.py)",
    "requests": "a running backfill's --redraft keys and --exclude rules, by id (state/requests.py)",
}
# folders under the runs folder that are not a backfill's run (runs/<run id>/)
CONCEPT_CACHE = "concepts"  # the concept extractor's answer per memory (flows/concepts.py)
SUMMARY_RUN_PREFIX = (
    "summarize-"  # a summary run: its month files, its run state (flows/summarize.py)
)
RUNS_FOLDERS: dict[str, str] = {
    CONCEPT_CACHE: "what a model answered per memory: `pmem concepts rebuild` reuses it (kept)",
    SUMMARY_RUN_PREFIX
    + "*": "a summary run (kept while unfinished; removed when finished long ago)",
}
_working_dir_dotenv = True


def ignore_working_dir_dotenv() -> None:
    """From now on, no Settings in this process reads a `.env` from the working directory."""
    global _working_dir_dotenv
    _working_dir_dotenv = False


def working_dir_dotenv() -> bool:
    return _working_dir_dotenv


def _dotenv_files() -> tuple[Path, ...]:
    """The `.env` files to read, weakest first: the data dir's config.env, then (unless turned
    off) the working directory's `.env`. The data dir is the environment's, else the working
    `.env`'s (when allowed), else the default."""
    import os

    from dotenv import dotenv_values

    cwd_env = Path(".env")
    data_dir = os.environ.get("PMEM_DATA_DIR")
    if not data_dir and _working_dir_dotenv and cwd_env.is_file():
        data_dir = dotenv_values(cwd_env).get("PMEM_DATA_DIR") or None
    folder = Path(data_dir).expanduser() if data_dir else PROJECT_ROOT / ".pmem"
    files = [folder / DATA_DIR_CONFIG]
    if _working_dir_dotenv:
        files.append(cwd_env)
    return tuple(files)


def parse_budget(text: str) -> tuple[int, float]:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)\s*s?\s*", text)
    if not m:
        raise ValueError(f"budget must look like '300/600s', got {text!r}")
    return int(m.group(1)), float(m.group(2))


class Settings(BaseModel):
    model_config = ConfigDict(
        extra="ignore", validate_default=True, validate_by_name=True, validate_by_alias=True
    )

    data_dir: Path = Field(default=PROJECT_ROOT / ".pmem")
    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "PMEM_DATABASE_URL")
    )
    db_name: str = DEFAULT_DB_NAME
    llm: str = Field(default="extractive", validation_alias=AliasChoices("PMEM_LLM", "LLM"))
    batch_max_conversations: int = Field(default=4, ge=1)
    batch_max_chars: int = Field(default=120_000, ge=1_000)
    commit_budget: str = "300/600s"
    max_wait_seconds: float = 600.0
    max_concurrency: int = Field(default=3, ge=1, le=32)
    quiet_seconds: float = 60.0  # a quiet stretch after a 429 before concurrency climbs back
    memory_url: str | None = None  # the memory API over HTTP; unset = in process
    memory_token: str | None = None  # its bearer token (`pmem token create NAME`)
    client_name: str = "pmem-backfill"
    # the person's names in chat histories and logs ("name1,name2"; `--me` overrides it)
    me: str | None = None
    # back the database up before an upgrade's migrations (<data dir>/backups; off: no backup)
    upgrade_backup: bool = True
    # where runs/ lives (default <data dir>/runs); `pmem demo` keeps its own
    runs_folder: Path | None = Field(default=None, validation_alias=AliasChoices("PMEM_RUNS_DIR"))
    # where the backfill's batch files live for every worker (docs/scale-out.md): any fsspec URL
    # (an object store), or a folder every worker reaches; a local one is the runs folder itself
    runs_url: str | None = None
    # a worker's hold on the batches it drafts and commits (PMEM_LEASE_SECONDS): renewed while
    # it works, taken over by another worker once it runs out (a worker killed, asleep)
    lease_seconds: float = Field(default=120.0, gt=0)
    # how many flow runs a pool run fans out to (0: one per worker online in the pool)
    pool_fanout: int = Field(default=0, ge=0, le=64)

    def __init__(self, **values: Any) -> None:
        super().__init__(**_from_sources(type(self), values))

    @field_validator("data_dir", mode="after")
    @classmethod
    def _absolute(cls, v: Path) -> Path:
        return v.expanduser().resolve()

    @field_validator("commit_budget")
    @classmethod
    def _budget_ok(cls, v: str) -> str:
        parse_budget(v)
        return v

    @cached_property
    def budget(self) -> tuple[int, float]:
        return parse_budget(self.commit_budget)

    @property
    def runs_dir(self) -> Path:
        local = local_runs_url(self.runs_url)
        if local is not None:
            return local
        return (
            self.runs_folder.expanduser().resolve() if self.runs_folder else self.data_dir / "runs"
        )

    @property
    def pgdata_dir(self) -> Path:
        return self.data_dir / "pgdata"

    @property
    def prefect_home(self) -> Path:
        return self.data_dir / "prefect"

    @property
    def inbox_dir(self) -> Path:
        return self.data_dir / "exports"

    @property
    def embedded(self) -> bool:
        return not self.database_url


def local_runs_url(url: str | None) -> Path | None:
    """PMEM_RUNS_URL as a local folder (a plain path or ``file://``), else None (unset, or a
    remote fsspec URL such as ``s3://bucket/runs``)."""
    if not url or not url.strip():
        return None
    url = url.strip()
    if url.startswith("file://"):
        url = url.removeprefix("file://")
    elif "://" in url:
        return None
    return Path(url).expanduser().resolve()


def get_settings() -> Settings:
    return Settings()


def _names(name: str, field: Any) -> tuple[str, ...]:
    """The variable names a field is read from: its aliases, else ``PMEM_<NAME>``."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(c) for c in alias.choices)
    if isinstance(alias, str):
        return (alias,)
    return (ENV_PREFIX + name,)


def _from_sources(cls: type[BaseModel], given: dict[str, Any]) -> dict[str, Any]:
    """Every field's raw value by field name: ``given`` (by name or alias) over the environment
    over the `.env` files (the later file wins), names matched in any case; a field found
    nowhere keeps its default."""
    import os

    layers: list[dict[str, str]] = []
    files = [f for f in _dotenv_files() if f.is_file()]
    if files:
        from dotenv import dotenv_values

        for f in files:
            layers.append(
                {
                    k.lower(): v
                    for k, v in dotenv_values(f, encoding="utf-8").items()
                    if v is not None
                }
            )
    layers.append({k.lower(): v for k, v in os.environ.items()})
    out: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        names = _names(name, field)
        for layer in layers:  # weakest first: a later layer overwrites
            hit = next((layer[n.lower()] for n in names if n.lower() in layer), None)
            if hit is not None:
                out[name] = hit
        for key in (name, *names):
            if key in given:
                out[name] = given[key]
                break
    return out


# ------------------------------------------------------------------ the time zone in use

TZ_ENV = "PMEM_TZ"


def zone_ok(name: str) -> bool:
    """Whether ``name`` is an IANA time zone this machine knows."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def time_zone() -> tuple[str, str]:
    """The one time zone every reading of times defaults to (recall's calendar, summaries, chat
    histories, markers, the dates `pmem status` prints), and where it came from: ``PMEM_TZ``,
    else ``$TZ``, else the system's (``/etc/localtime``), else UTC. Returns (IANA name, origin)."""
    import os

    for env in (TZ_ENV, "TZ"):
        name = (os.environ.get(env) or "").strip().lstrip(":")
        if name and zone_ok(name):
            return name, env
        if name and env == TZ_ENV:
            from core.errors import ConfigError

            raise ConfigError(
                f"unknown time zone {name!r} in {TZ_ENV}",
                hint="use an IANA name such as Asia/Tokyo",
            )
    try:
        target = str(Path("/etc/localtime").resolve())
    except OSError:
        target = ""
    if "zoneinfo/" in target:
        name = target.split("zoneinfo/", 1)[1]
        if zone_ok(name):
            return name, "system"
    return "UTC", "default"


def local_zone() -> tzinfo:
    """``time_zone()`` as a tzinfo."""
    from zoneinfo import ZoneInfo

    return ZoneInfo(time_zone()[0])
