"""The bash reader: simple commands with their words, as bash would split them; never raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels.config.gate import DEFAULT_POLICY
from channels.gate.commands import SUBSTITUTION, parse_script
from channels.gate.policy import Protected, judge
from channels.gate.walk import walk
from channels.gate.wrappers import string_literals
from tests.channels.gate.conftest import ON

WORDS = [
    ("ls -la", [["ls", "-la"]]),
    ("a && b || c; d & e | f |& g", [["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"]]),
    ("echo 'a b' \"c d\" e\\ f", [["echo", "a b", "c d", "e f"]]),
    ("echo \"a $HOME b\"", [["echo", "a $HOME b"]]),
    ("echo $'a\\tb' $'\\x41\\101\\u00e9'", [["echo", "a\tb", "AAé"]]),
    ("'pi'w-channels x", [["piw-channels", "x"]]),
    ("echo a#b # a comment", [["echo", "a#b"]]),
    ("echo a \\\n b", [["echo", "a", "b"]]),
    ("X=1 Y=2 cmd a", [["cmd", "a"]]),
    ("echo $(date) `id`", [["date"], ["id"], ["echo", SUBSTITUTION, SUBSTITUTION]]),
    ("echo \"$(a \"b c\")\"", [["a", "b c"], ["echo", SUBSTITUTION]]),
    ("echo $((1 + 2)) ${X:-y}", [["echo", "$((…))", "${X:-y}"]]),
    ("(a; b) && { c; }", [["a"], ["b"], ["c"]]),
    ("if a; then b; else c; fi", [["a"], ["b"], ["c"]]),
    ("cat > out 2>&1 < in", [["cat"]]),
    ("cat <<EOF\nbody $(x)\nEOF\nafter", [["x"], ["cat"], ["after"]]),
    ("cat <<'EOF'\nbody $(x)\nEOF", [["cat"]]),
    ("cat <<-EOF\n\tbody\n\tEOF\nafter", [["cat"], ["after"]]),
    ("case $x in a) b ;; esac", [["case", "$x", "in", "a"], ["b"]]),
    ("""case ${1?"missing; try \\`$0 --help' for help"} in a) b;; esac""",
     [["case", """${1?"missing; try \\`$0 --help' for help"}""", "in", "a"], ["b"]]),
]


@pytest.mark.parametrize(("text", "words"), WORDS, ids=[t for t, _ in WORDS])
def test_commands_are_split_into_their_words(text: str, words: list[list[str]]) -> None:
    script = parse_script(text)
    assert script.problem is None
    assert [list(c.words) for c in script.commands] == words


def test_redirections_and_documents_are_kept() -> None:
    script = parse_script("cat > out 2>&1 < in <<< 'hi'")
    [command] = script.commands
    assert [(r.op, r.target, r.is_file) for r in command.redirects] == [
        (">", "out", True), (">&", "1", False), ("<", "in", True), ("<<<", "hi", False)]
    assert command.stdin == "hi"
    [document] = parse_script("sh <<EOF\nrm -rf x\nEOF\n").commands
    assert document.stdin == "rm -rf x\n"


def test_a_pipe_links_each_command_to_the_one_before() -> None:
    first, second, third = parse_script("curl x | tee y | sh").commands
    assert first.upstream is None and second.upstream == first and third.upstream == second


@pytest.mark.parametrize(("text", "problem"), [
    ("echo 'a", "a single quote is never closed"),
    ('echo "a', "a double quote is never closed"),
    ("echo $(a", "a '$(' is never closed"),
    ("echo `a", "a backtick is never closed"),
    ("(a; b", "a '(' is never closed"),
    ("cat >", "the redirection > has no target"),
    ("echo $'a", "a $'…' quote is never closed"),
    ("echo " + "$(" * 40 + ")" * 40, "commands are nested too deeply"),
])
def test_what_cannot_be_read_is_reported_not_raised(text: str, problem: str) -> None:
    assert parse_script(text).problem == problem


def test_interpreters_and_wrappers_are_unwrapped() -> None:
    found = walk("sudo env A=1 timeout 5 python3 -c 'print(1)'", cwd=Path("/p"), home=Path("/h"))
    assert [ex.words[0] for ex in found.execs] == ["sudo", "env", "timeout", "python3"]
    assert found.code == ["print(1)"]


def test_string_literals_fold_concatenations() -> None:
    assert string_literals("f(['a', 'b' + 'c', \"d\" 'e'])") == ["a", "bc", "de"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_the_reader_never_raises_on_any_text(text: str) -> None:
    script = parse_script(text)
    assert script.problem is None or isinstance(script.problem, str)


_PIECES = [*"ab $()`'\"\\|&;<>{}#\n=-*~/", "<<EOF\n", "EOF\n", "$'", "sh -c ", "kill ", "rm -rf "]
_SHELLISH = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(_SHELLISH)
def test_judge_never_raises_and_asks_for_what_it_cannot_read(text: str) -> None:
    home = Path("/nonexistent/home")
    protected = Protected(home / "db", home / "cfg", ())
    result = judge(ON, "bash", {"command": text}, cwd=Path("/nonexistent/p"), home=home,
                   protected=protected)
    assert result.action in ("allow", "ask", "block")
    assert result.rule != "gate: error", result.reason
    if walk(text, cwd=Path("/nonexistent/p"), home=home).problems and result.action != "block":
        assert (result.action, result.rule) == ("ask", "bash: unreadable")
    off = judge(DEFAULT_POLICY, "bash", {"command": text}, cwd=Path("/nonexistent/p"),
                home=home, protected=protected)
    assert off.action in ("allow", "block") and off.rule != "gate: error"
