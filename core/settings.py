"""One settings object, from environment variables and `.env` (pydantic-settings)."""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB_NAME = "pmem"


def parse_budget(text: str) -> tuple[int, float]:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)\s*s?\s*", text)
    if not m:
        raise ValueError(f"budget must look like '300/600s', got {text!r}")
    return int(m.group(1)), float(m.group(2))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PMEM_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
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
    client_name: str = "pmem-backfill"

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
        return self.data_dir / "runs"

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


def get_settings() -> Settings:
    return Settings()
