"""Repository checks: mutating SQL only in the state layer and domain stores; layer imports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("state", "channels", "adapters")

# Files that own tables and may therefore write them (ARCHITECTURE section 1).
DOMAIN_STORES = {
    "channels/decisions.py",
    "channels/runs.py",
    "channels/store.py",
}

MUTATING_SQL = re.compile(
    r"\b(INSERT\s+(OR\s+\w+\s+)?INTO|REPLACE\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM"
    r"|CREATE\s+(UNIQUE\s+)?(TABLE|INDEX|TRIGGER|VIEW)|DROP\s+(TABLE|INDEX|TRIGGER|VIEW)"
    r"|ALTER\s+TABLE|BEGIN(\s+(IMMEDIATE|EXCLUSIVE|DEFERRED))?\b|COMMIT\b|ROLLBACK\b"
    r"|SAVEPOINT\b|VACUUM\b|PRAGMA\s+\w+\s*=)"
)


def python_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants that are not docstrings."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_the_scanner_recognises_mutating_sql() -> None:
    for sql in ["INSERT INTO t VALUES (1)", "UPDATE runs SET x = 1", "DELETE FROM t",
                "BEGIN IMMEDIATE", "COMMIT", "CREATE TABLE x (a)", "PRAGMA user_version = 3"]:
        assert MUTATING_SQL.search(sql), sql
    for text in ["SELECT * FROM t", "update the README", "committed", "PRAGMA user_version"]:
        assert not MUTATING_SQL.search(text), text


def test_no_mutating_sql_outside_the_state_layer_and_domain_stores() -> None:
    offenders = []
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("state/") or rel in DOMAIN_STORES:
            continue
        for line, text in code_strings(path):
            if MUTATING_SQL.search(text):
                offenders.append(f"{rel}:{line}: {text[:60]!r}")
    assert offenders == []


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_state_imports_nothing_from_channels_or_adapters() -> None:
    for path in (ROOT / "state").rglob("*.py"):
        bad = {m for m in imported_modules(path) if m.split(".")[0] in ("channels", "adapters")}
        assert bad == set(), path


def test_only_the_cli_of_channels_imports_adapters() -> None:
    for path in (ROOT / "channels").rglob("*.py"):
        if path.name == "cli.py" or path.name.endswith("_cli.py"):
            continue
        bad = {m for m in imported_modules(path) if m.split(".")[0] == "adapters"}
        assert bad == set(), path
