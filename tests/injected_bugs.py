"""Run the real `piw-channels` in a child process with one function replaced by a bug.

`PIW_TEST_INJECT_BUG=module:Attr.path` replaces that function (sync or async) with one that
raises `RuntimeError("injected bug")`; the rest of the program is the real one. Tests use it
to see how a process tells an operator about a bug it hit (test-only: the product never reads
this variable).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
from collections.abc import Iterator
from typing import Any

BUG_ENV = "PIW_TEST_INJECT_BUG"
BUG_TEXT = "injected bug"
CLI_WITH_BUG = [sys.executable, "-c", "import tests.injected_bugs as b; b.main()"]


def _raiser(original: Any) -> Any:
    if inspect.iscoroutinefunction(original):
        async def broken_async(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(BUG_TEXT)
        return broken_async

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(BUG_TEXT)
    return broken


def _owner(target: str) -> tuple[Any, str]:
    module_name, _, path = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


def inject(target: str) -> None:
    """Replace `module:Attr.path` by a function that raises."""
    owner, name = _owner(target)
    setattr(owner, name, _raiser(getattr(owner, name)))


@contextlib.contextmanager
def injected(target: str) -> Iterator[None]:
    """`inject` for the length of a run in this process, then the real function again."""
    owner, name = _owner(target)
    original = getattr(owner, name)
    setattr(owner, name, _raiser(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def main() -> None:
    from adapters.cli.main import main as cli_main
    from tests.shifted_clock import install

    install()  # a test may shift this child's clock too
    target = os.environ.get(BUG_ENV)
    if target:
        inject(target)
    cli_main()
