"""Who uses which name of which product module: the public surface, read from the code.

A name of a product module is *used outside* when another file (product code, tests or
benches) imports it, reads it as `module.name`, or names it in a dotted string or in
`setattr`/`getattr`/`patch.object`-style calls. The repository rules compare that with each
module's `__all__` and each package's `__all__` (the modules it offers other packages).
"""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.paths import ROOT

PACKAGES = ("state", "channels", "adapters")
CONSUMERS = ("state", "channels", "adapters", "tests", "bench")
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
# `module:name.attr`, as entry points and tests.injected_bugs name a function
ENTRY = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):([A-Za-z_]\w*)(?:\.\w+)*$")
ATTRIBUTE_CALLS = {"setattr", "getattr", "hasattr", "delattr", "object"}


@functools.cache
def parse(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once per test process (no test changes a source
    file, and none changes a tree)."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def consumer_files() -> list[Path]:
    return sorted(p for top in CONSUMERS for p in (ROOT / top).rglob("*.py"))


def package_of(module: str, modules: dict[str, Path]) -> str:
    """The package a module belongs to: itself for a package's `__init__`."""
    if modules[module].name == "__init__.py":
        return module
    return module.rsplit(".", 1)[0] if "." in module else module


@dataclass
class Usage:
    """(module, name) pairs used from other files, and by whom."""

    names: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))

    def add(self, module: str, name: str, user: str) -> None:
        if module != user:
            self.names[(module, name)].add(user)


def top_level_definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    """Names a module defines at its top level (in plain, `if` and `try` blocks)."""
    found: dict[str, ast.stmt] = {}

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found.setdefault(node.name, node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            found.setdefault(name.id, node)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                found.setdefault(node.target.id, node)
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
    visit(tree.body)
    return found


def _chain(node: ast.AST) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None when the base is not a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


class Reader:
    def __init__(self, modules: dict[str, Path], usage: Usage) -> None:
        self.modules = modules
        self.usage = usage
        self.defined: dict[str, dict[str, ast.stmt]] = {}

    def resolve(self, module: str, attrs: list[str], user: str) -> None:
        """Follow `module.attr.attr…` through submodules; record the first non-module name."""
        for attr in attrs:
            sub = f"{module}.{attr}"
            self.usage.add(module, attr, user)
            if sub not in self.modules:
                return
            module = sub

    def dotted_string(self, text: str, user: str) -> None:
        """`"a.b.name"` in a patch target; `"state.sqlite"`, a file name, is no use of a name."""
        parts = text.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if module in self.modules:
                if f"{module}.{parts[cut]}" in self.modules \
                        or parts[cut] in self.definitions(module):
                    self.resolve(module, parts[cut:], user)
                return

    def definitions(self, module: str) -> dict[str, ast.stmt]:
        if module not in self.defined:
            self.defined[module] = top_level_definitions(parse(self.modules[module]))
        return self.defined[module]

    def read(self, source: str, user: str) -> None:
        self.read_tree(ast.parse(source), user)

    def read_tree(self, tree: ast.Module, user: str) -> None:
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] not in PACKAGES:
                        continue
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module not in self.modules:
                    continue
                for alias in node.names:
                    self.usage.add(node.module, alias.name, user)
                    full = f"{node.module}.{alias.name}"
                    if full in self.modules:
                        aliases[alias.asname or alias.name] = full
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                chain = _chain(node)
                if chain and chain[0] in aliases:
                    self.resolve(aliases[chain[0]], chain[1:], user)
            elif isinstance(node, ast.Call):
                self._attribute_call(node, aliases, user)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if DOTTED.match(node.value):
                    self.dotted_string(node.value, user)
                elif entry := ENTRY.match(node.value):
                    # a bug injected into a private function (tests.injected_bugs) is no use
                    if entry.group(1) in self.modules and public(entry.group(2)):
                        self.usage.add(entry.group(1), entry.group(2), user)
                elif "import " in node.value:
                    self._code_string(node.value, user)

    def _attribute_call(self, node: ast.Call, aliases: dict[str, str], user: str) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in ATTRIBUTE_CALLS or len(node.args) < 2:
            return
        target, attr = node.args[0], node.args[1]
        chain = _chain(target)
        if chain and chain[0] in aliases and isinstance(attr, ast.Constant) \
                and isinstance(attr.value, str):
            module = aliases[chain[0]]
            for part in chain[1:]:
                module = f"{module}.{part}"
            if module in self.modules:
                self.usage.add(module, attr.value, user)

    def _code_string(self, text: str, user: str) -> None:
        try:
            self.read(text, user)
        except SyntaxError:
            return


@functools.cache
def used_outside() -> Usage:
    """Every (module, name) some other file uses (read once per test process: do not change
    what it returns)."""
    modules = product_modules()
    usage = Usage()
    reader = Reader(modules, usage)
    for path in consumer_files():
        user = module_name(path) if module_name(path) in modules else path.as_posix()
        reader.read_tree(parse(path), user)
    for line in (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines():
        match = re.search(r'"([\w.]+):(\w+)"', line)
        if match and match.group(1) in modules:
            usage.add(match.group(1), match.group(2), "pyproject.toml")
    return usage


def declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = ast.literal_eval(node.value)
            return list(value)
    return None


def is_exception_class(node: ast.stmt) -> bool:
    """Errors a module raises are part of what its callers meet, used by name or not."""
    return isinstance(node, ast.ClassDef) and any(
        (isinstance(base, ast.Name) and base.id.endswith(("Error", "Exception")))
        or (isinstance(base, ast.Attribute) and base.attr.endswith(("Error", "Exception")))
        for base in node.bases)


def public(name: str) -> bool:
    return not name.startswith("_")


def iter_modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for name, path in product_modules().items():
        yield name, path, parse(path)


def modules_used_across(usage: Usage, modules: dict[str, Path]) -> dict[str, dict[str, set[str]]]:
    """Package -> its child modules other packages reach -> the product modules reaching them.

    Product module `U` reaching `a.b.c` needs `c` in `a.b`'s `__all__` and `b` in `a`'s, for
    every such package `U` is not inside itself: a package's modules are its own business.
    """
    needed: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for (module, name), users in usage.names.items():
        reached = [module] + ([f"{module}.{name}"] if f"{module}.{name}" in modules else [])
        for target in reached:
            for user in users:
                if user not in modules:
                    continue
                parts = target.split(".")
                for cut in range(1, len(parts)):
                    package = ".".join(parts[:cut])
                    if user != package and not user.startswith(package + "."):
                        needed[package][parts[cut]].add(user)
    return needed


def top_level_imports(tree: ast.Module) -> set[str]:
    """Names a module binds by `from … import` at its top level: what it could re-export."""
    return {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}


def crossing(usage: Usage, modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(module, name) pairs a product module of another package uses: a package's surface as
    the rest of the product meets it (tests and benches left out). A module, reached as a
    name, is a way in, not a name of the surface."""
    return {(module, name) for (module, name), users in usage.names.items()
            if f"{module}.{name}" not in modules
            and any(user in modules and package_of(user, modules) != package_of(module, modules)
                    for user in users)}
