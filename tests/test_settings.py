"""core.settings reads the environment and the `.env` files as pydantic-settings did (the read
path no longer imports pydantic-settings: ADR 0027): the same values, the same priority, the
same names in any case, the same validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import core.settings as cs

FIELDS_ENV = (
    "PMEM_DATA_DIR",
    "DATABASE_URL",
    "PMEM_DATABASE_URL",
    "PMEM_DB_NAME",
    "PMEM_LLM",
    "LLM",
    "PMEM_COMMIT_BUDGET",
    "PMEM_MAX_CONCURRENCY",
    "PMEM_MEMORY_URL",
    "PMEM_MEMORY_TOKEN",
    "PMEM_UPGRADE_BACKUP",
    "PMEM_RUNS_DIR",
    "PMEM_QUIET_SECONDS",
    "PMEM_BATCH_MAX_CHARS",
)


def _reference() -> type:
    """The settings class as it was, on pydantic-settings (still installed: Prefect needs it)."""
    from pydantic_settings import BaseSettings, DotEnvSettingsSource, SettingsConfigDict

    fields = {n: (f.annotation, f) for n, f in cs.Settings.model_fields.items()}

    class Reference(BaseSettings):
        model_config = SettingsConfigDict(
            env_prefix="PMEM_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
        )
        __annotations__ = {n: a for n, (a, _) in fields.items()}
        locals().update({n: f for n, (_, f) in fields.items()})

        @classmethod
        def settings_customise_sources(
            cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
        ):  # type: ignore[no-untyped-def]
            dotenv = DotEnvSettingsSource(settings_cls, env_file=cs._dotenv_files())
            return init_settings, env_settings, dotenv, file_secret_settings

    return Reference


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in FIELDS_ENV:
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(cs, "_working_dir_dotenv", True)
    return tmp_path


def _both(**given: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    ours = cs.Settings(**given).model_dump()
    ref = _reference()(**given).model_dump()
    return ours, ref


def test_defaults_and_the_environment_match_pydantic_settings(
    place: Path, monkeypatch: pytest.MonkeyPatch
):
    ours, ref = _both()
    assert ours == ref
    monkeypatch.setenv("PMEM_DATA_DIR", str(place / "data"))
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/db")
    monkeypatch.setenv("pmem_db_name", "lower_case_name")  # any case
    monkeypatch.setenv("LLM", "openai:gpt-x")
    monkeypatch.setenv("PMEM_UPGRADE_BACKUP", "off")
    monkeypatch.setenv("PMEM_RUNS_DIR", str(place / "runs"))
    monkeypatch.setenv("PMEM_MAX_CONCURRENCY", "7")
    ours, ref = _both()
    assert ours == ref
    assert ours["db_name"] == "lower_case_name" and ours["upgrade_backup"] is False
    assert ours["database_url"] == "postgresql://u@h/db" and ours["max_concurrency"] == 7
    assert ours["data_dir"] == (place / "data").resolve() and ours["llm"] == "openai:gpt-x"


def test_dotenv_files_rank_below_the_environment_and_the_working_dir_above_the_data_dir(
    place: Path, monkeypatch: pytest.MonkeyPatch
):
    data = place / "data"
    data.mkdir()
    (data / "config.env").write_text(
        "PMEM_DB_NAME=from_config\nPMEM_LLM=from_config\nPMEM_QUIET_SECONDS=5\n"
    )
    Path(".env").write_text(
        f"PMEM_DATA_DIR={data}\nPMEM_LLM=from_cwd\nPMEM_MEMORY_URL=http://x\nUNRELATED=1\n"
    )
    ours, ref = _both()
    assert ours == ref
    assert (ours["db_name"], ours["llm"], ours["quiet_seconds"]) == ("from_config", "from_cwd", 5.0)
    monkeypatch.setenv("PMEM_LLM", "from_env")
    ours, ref = _both(db_name="given")  # values passed in win over everything
    assert ours == ref
    assert (ours["llm"], ours["db_name"], ours["memory_url"]) == ("from_env", "given", "http://x")
    monkeypatch.setattr(
        cs, "_working_dir_dotenv", False
    )  # pmem serve: the working dir's .env is off
    ours, ref = _both()
    assert ours == ref and ours["memory_url"] is None and ours["llm"] == "from_env"


def test_invalid_values_are_refused_as_before(place: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PMEM_COMMIT_BUDGET", "lots")
    with pytest.raises(ValidationError, match="300/600s"):
        cs.Settings()
    monkeypatch.setenv("PMEM_COMMIT_BUDGET", "10/60s")
    monkeypatch.setenv("PMEM_MAX_CONCURRENCY", "99")
    with pytest.raises(ValidationError, match="max_concurrency"):
        cs.Settings()
    assert cs.Settings(max_concurrency=2).budget == (10, 60.0)
