"""Repository rule: no product module reads a test-only environment variable (issue 20 item 4).

A test or a bench changes the product's clock or pacing through a launcher of its own
(tests/shifted_clock.py, tests/unpaced.py), never through a switch the product reads: a
variable left in an operator's environment must not change what cron does. Any environment
variable name with TEST in it, written in a product module, is one.
"""

from __future__ import annotations

import ast
import re

from tests.paths import ROOT

PACKAGES = ("state", "channels", "adapters")
# What an environment variable's name looks like: capitals, digits and underscores.
_VARIABLE_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def variable_names_with_test(source: str, filename: str = "<module>") -> list[tuple[int, str]]:
    """(line, name) of every environment-variable-like string with TEST in it."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source, filename))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and _VARIABLE_NAME.fullmatch(node.value) and "TEST" in node.value
    ]


def test_the_scanner_sees_a_test_variable_read_in_every_spelling() -> None:
    source = (
        'import os\n'
        'UNPACED_ENV = "PIW_CHANNELS_TEST_UNPACED"\n'
        'a = os.environ.get(UNPACED_ENV)\n'
        'b = os.getenv("PIW_TEST_CLOCK_OFFSET_MS")\n'
        'c = os.environ["MY_TESTING_SWITCH"]\n'
        'd = "a TEST sentence, not a name"\n'
        'e = os.environ.get("PI_WORKFLOWS_CONFIG_DIR")\n'
    )
    assert [name for _, name in variable_names_with_test(source)] == [
        "PIW_CHANNELS_TEST_UNPACED", "PIW_TEST_CLOCK_OFFSET_MS", "MY_TESTING_SWITCH"]


def test_no_product_module_reads_a_test_only_environment_variable() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, name in variable_names_with_test(path.read_text(), str(path))
    ]
    assert offenders == []
