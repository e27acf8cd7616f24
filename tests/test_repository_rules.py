"""Repository checks: mutating SQL only in the state layer and domain stores; layer imports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.paths import ROOT
from tests.surface import parse

PACKAGES = ("state", "channels", "adapters")

# The one module that writes each domain table (ARCHITECTURE section 1). `state/` owns the rest.
TABLE_OWNERS = {
    "human_decisions": "channels/decisions/records.py",
    "human_decision_resolutions": "channels/decisions/resolution.py",
    "human_decision_submissions": "channels/decisions/resolution.py",
    "workflow_definitions": "channels/decisions/runs.py",
    "runs": "channels/decisions/runs.py",
    "node_attempts": "channels/decisions/runs.py",
    "run_bindings": "channels/decisions/runs.py",
    "turn_intents": "channels/decisions/turn_intents.py",
    "channels": "channels/store.py",
    "channel_cursors": "channels/store.py",
    "channel_inbox": "channels/inbox.py",
    "channel_messages": "channels/messages.py",
    "channel_message_parts": "channels/messages.py",
    "notifications": "channels/notifications/records.py",
}
DOMAIN_STORES = set(TABLE_OWNERS.values())
WRITTEN_TABLE = re.compile(
    r"\b(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|REPLACE\s+INTO|UPDATE|DELETE\s+FROM)\s+(?!SET\b)(\w+)")
MAX_MODULE_LINES = 500
# Layers, lowest first: a module may import its own layer and the ones below it.
LAYERS = ("state", "channels", "adapters")

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
    tree = parse(path)
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
    tree = parse(path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_each_domain_table_is_written_only_by_its_owner() -> None:
    offenders = []
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("state/"):
            continue
        for line, text in code_strings(path):
            for table in WRITTEN_TABLE.findall(text):
                if TABLE_OWNERS.get(table) != rel:
                    offenders.append(f"{rel}:{line}: writes {table}")
    assert offenders == []


def test_the_table_owners_exist_and_write_what_they_own() -> None:
    written: dict[str, set[str]] = {}
    for rel in DOMAIN_STORES:
        for _, text in code_strings(ROOT / rel):
            for table in WRITTEN_TABLE.findall(text):
                written.setdefault(rel, set()).add(table)
    assert {t for tables in written.values() for t in tables} == set(TABLE_OWNERS)


def layer_of(module: str) -> int | None:
    top = module.split(".")[0]
    return LAYERS.index(top) if top in LAYERS else None


def test_the_layer_scanner_sees_every_kind_of_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import adapters.cli\nfrom adapters import cli\n"
                      "def f():\n    from channels.telegram import poll\n")
    assert imported_modules(sample) == {"adapters.cli", "adapters", "channels.telegram"}


def test_imports_point_one_way_adapters_channels_state() -> None:
    offenders = []
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        own = layer_of(rel.replace("/", "."))
        assert own is not None
        for module in imported_modules(path):
            target = layer_of(module)
            if target is not None and target > own:
                offenders.append(f"{rel}: imports {module}")
    assert offenders == []


def test_no_string_imports_below_the_command_line() -> None:
    """importlib or __import__ would hide an upward import from the check above."""
    offenders = []
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("adapters/"):
            continue
        names = imported_modules(path)
        text = path.read_text()
        if "importlib" in names or "__import__(" in text:
            offenders.append(rel)
    assert offenders == []


def test_no_product_module_is_longer_than_500_lines() -> None:
    long = {}
    for path in python_files():
        count = len(path.read_text().splitlines())
        if count > MAX_MODULE_LINES:
            long[path.relative_to(ROOT).as_posix()] = count
    assert long == {}


def test_no_module_imports_another_modules_private_names() -> None:
    """A name another module needs is part of its owner's interface: public, not `_name`."""
    offenders = []
    for path in python_files():
        tree = parse(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.split(".")[0] in LAYERS:
                offenders += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}"
                              for a in node.names if a.name.startswith("_")]
    assert offenders == []


# Inside `channels/`, the channels built on decisions (Pi, Telegram, the gate) sit above them:
# `decisions` never imports them (the resolution's follow-ups live in `decisions` itself).
CHANNELS_ABOVE_DECISIONS = ("channels.pi", "channels.telegram", "channels.gate")


def test_decisions_import_none_of_the_channels_built_on_them() -> None:
    offenders = [f"{path.relative_to(ROOT)}: {name}"
                 for path in python_files()
                 if path.relative_to(ROOT).as_posix().startswith("channels/decisions/")
                 for name in sorted(imported_modules(path))
                 if name.startswith(CHANNELS_ABOVE_DECISIONS)]
    assert offenders == []


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph() -> dict[str, set[str]]:
    """Product module -> the product modules it imports (type-checking imports too): `from
    a.b import c` counts as `a.b.c` when that is a module, else as `a.b`."""
    modules = {module_name(path): path for path in python_files()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    edges.add(full if full in modules else node.module)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def test_no_module_imports_form_a_circle() -> None:
    graph = module_graph()
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    # A package's __init__ that re-exports its modules is not a circle with them.
    real = [c for c in circles if not any(m == c[0].rsplit(".", 1)[0] for m in c[1:])]
    assert real == []


def package_of(module: str) -> str:
    """A module's package two levels down (`channels.telegram.poll` -> `channels.telegram`);
    a root module (`channels.store`) is its own."""
    return ".".join(module.split(".")[:2])


def test_the_channels_root_holds_at_most_eight_modules() -> None:
    """What every channel shares stays at the root; the rest is grouped in packages."""
    loose = sorted(p.name for p in (ROOT / "channels").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 8, loose


def test_no_two_packages_import_each_other() -> None:
    """Packages too point one way: `channels.config` below `channels.telegram`, never both
    ways (a file-level check misses two modules of each package importing the other's)."""
    graph = module_graph()
    edges = {(package_of(a), package_of(b)) for a, targets in graph.items() for b in targets
             if package_of(a) != package_of(b)}
    both = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    assert both == []


def test_the_readmes_layout_names_every_module() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## How the code is laid out")
    layout = readme[start:readme.index("\n## ", start + 1)]
    unnamed = [path.relative_to(ROOT).as_posix() for path in python_files()
               if path.name != "__init__.py"
               and not re.search(rf"\b{re.escape(path.stem)}\b", layout)]
    assert unnamed == []


_TESTS_IMPORT = re.compile(r"\b(?:import\s+tests\b|from\s+tests\b)")


def bench_imports_of_tests(path: Path) -> list[str]:
    """What a bench file takes from tests/: an import statement, or one written in a string
    (a `python -c` launcher runs it in a child)."""
    found = sorted(m for m in imported_modules(path) if m == "tests" or m.startswith("tests."))
    found += [f"line {line}: {text!r}" for line, text in code_strings(path)
              if _TESTS_IMPORT.search(text)]
    return found


def test_the_bench_scanner_sees_every_way_to_import_tests(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('import tests.unpaced\nfrom tests import paths\n'
                      'def f():\n    from tests.unpaced import CLI_UNPACED\n'
                      'ARGV = ["python", "-c", "import tests.unpaced as u; u.main()"]\n'
                      'OK = "the tests pass; import testsuite"\n')
    assert bench_imports_of_tests(sample) == [
        "tests", "tests.unpaced", "line 5: 'import tests.unpaced as u; u.main()'"]


def test_benches_import_nothing_from_tests() -> None:
    """bench/ stands alone (issue 26 item 3): the suite's helpers change with the suite."""
    offenders = {path.relative_to(ROOT).as_posix(): found
                 for path in sorted((ROOT / "bench").rglob("*.py"))
                 if (found := bench_imports_of_tests(path))}
    assert offenders == {}
