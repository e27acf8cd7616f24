"""A bash command line as a flat list of simple commands, each with its words after quote
removal, its redirections and here-documents, and the pipe it reads from.

Not a shell: it reads what bash would run closely enough to judge it. Commands inside `$( )`,
backticks, `<( )` and subshells are listed too (a substitution's value is unknown, so the word
keeps a `$(…)` marker). Whatever it cannot read (an unbalanced quote or parenthesis, nesting
too deep, too much input) is reported in `Script.problem`; `parse_script` never raises.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "MAX_DEPTH", "SUBSTITUTION", "SimpleCommand", "Unreadable", "decode_escapes",
    "parse_script",
]


MAX_DEPTH: Final = 8
_MAX_COMMANDS: Final = 2000
_MAX_TEXT: Final = 1_000_000
SUBSTITUTION: Final = "$(…)"  # the value of a word part that a command substitution produces

_OPERATORS: Final = ("&&", "||", ";;&", ";;", ";&", "|&", "&", ";", "|", "(", ")", "\n")
_REDIRECTIONS: Final = ("<<<", "<<-", "<<", "&>>", "&>", ">>", ">&", "<&", ">|", "<>", ">", "<")
_RESERVED: Final = frozenset({"!", "{", "}", "do", "done", "then", "else", "elif", "if", "fi",
                               "while", "until", "time", "esac", "coproc", "[[", "]]"})
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)", re.DOTALL)
_ANSI_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b",
                        "E": "\x1b", "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"',
                        "?": "?"}


class Unreadable(Exception):
    """The text is not a command line this reader understands."""


@dataclass(frozen=True, slots=True)
class _Redirect:
    """One redirection: `op` as written, `target` the file word, fd, or here-document body."""

    op: str
    target: str

    @property
    def is_file(self) -> bool:
        """True when `target` names a file (not an fd duplication, not a document)."""
        if self.op in ("<<", "<<-", "<<<"):
            return False
        return not (self.op in (">&", "<&") and (self.target.isdigit() or self.target == "-"))


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command: its words (assignments first removed) and what feeds it."""

    words: tuple[str, ...]
    assignments: tuple[tuple[str, str], ...] = ()
    redirects: tuple[_Redirect, ...] = ()
    upstream: SimpleCommand | None = None  # the command whose output it reads through a pipe
    alternatives: tuple[str, ...] = ()  # literal words inside the program word's substitutions
    depth: int = 0
    inner: tuple[str, ...] = ()  # the words of the commands inside any of its substitutions

    @property
    def stdin(self) -> str | None:
        """The text of its last here-document or here-string, if any."""
        docs = [r.target for r in self.redirects if r.op in ("<<", "<<-", "<<<")]
        return docs[-1] if docs else None


@dataclass(frozen=True, slots=True)
class _Script:
    """The simple commands of a command line in the order they appear, or why it is unreadable."""

    commands: tuple[SimpleCommand, ...]
    problem: str | None = None


@dataclass(slots=True)
class _Word:
    text: str = ""
    inner: list[str] = field(default_factory=list)  # words of commands in its substitutions
    started: bool = False


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "op", "redir"
    text: str
    inner: tuple[str, ...] = ()


@dataclass(slots=True)
class _Pending:
    index: int  # of the redirection token whose target is the document
    delimiter: str
    strip_tabs: bool
    expand: bool


def parse_script(text: str, depth: int = 0) -> _Script:
    """The simple commands of `text`; never raises."""
    if len(text) > _MAX_TEXT:
        return _Script((), f"the command is longer than {_MAX_TEXT} characters")
    if depth > MAX_DEPTH:
        return _Script((), "commands are nested too deeply")
    reader = _Reader(text, depth)
    try:
        tokens = reader.tokens(inside=False)
        if reader.pos < len(text):
            raise Unreadable("a ')' closes nothing")
        reader.structure(tokens)
    except Unreadable as exc:
        _salvage(reader)
        return _Script(tuple(reader.commands), str(exc))
    except RecursionError:
        return _Script(tuple(reader.commands), "commands are nested too deeply")
    return _Script(tuple(reader.commands))


def _salvage(reader: _Reader) -> None:
    """The commands before the point the reader gave up at (the guard still judges them)."""
    tokens = [t for t in reader.partial if t.kind != "redir"]
    with contextlib.suppress(Unreadable, RecursionError):
        reader.structure(tokens)


class _Reader:
    def __init__(self, text: str, depth: int) -> None:
        self.text = text
        self.pos = 0
        self.depth = depth
        self.commands: list[SimpleCommand] = []
        self.pending: list[_Pending] = []
        self.documents: dict[int, str] = {}
        self.partial: list[_Token] = []  # the top level's tokens so far

    # -- tokens ---------------------------------------------------------------------------

    def tokens(self, *, inside: bool) -> list[_Token]:
        """Tokens up to the end, or (inside a substitution) up to its unmatched `)`."""
        out: list[_Token] = []
        if not inside:
            self.partial = out
        parens = 0
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c in " \t":
                self.pos += 1
            elif c == "\\" and text.startswith("\\\n", self.pos):
                self.pos += 2
            elif c == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif c == "\n":
                self.pos += 1
                out.append(_Token("op", "\n"))
                self._read_documents(out)
            elif c in "<>" and text.startswith("(", self.pos + 1):
                self.pos += 2
                out.append(_Token("word", SUBSTITUTION, tuple(self._substitution())))
            elif (op := self._operator()) is not None:
                if op == "(":
                    parens += 1
                elif op == ")":
                    if inside and parens == 0:
                        return out
                    parens = max(0, parens - 1)  # a `case` pattern's `)` closes nothing
                self.pos += len(op)
                out.append(_Token("op", op))
            elif (redirect := self._redirection()) is not None:
                out.append(redirect)
                if redirect.text in ("<<", "<<-"):
                    self._heredoc_delimiter(out)
            else:
                word = self._word()
                out.append(_Token("word", word.text, tuple(word.inner)))
        if inside:
            raise Unreadable("a '$(' is never closed")
        if parens:
            raise Unreadable("a '(' is never closed")
        self._read_documents(out)
        return out

    def _operator(self) -> str | None:
        return next((op for op in _OPERATORS if self.text.startswith(op, self.pos)), None)

    def _redirection(self) -> _Token | None:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        op = next((r for r in _REDIRECTIONS if self.text.startswith(r, self.pos)), None)
        if op is None:
            self.pos = start
            return None
        self.pos += len(op)
        return _Token("redir", op)

    def _heredoc_delimiter(self, out: list[_Token]) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1
        start = self.pos
        word = self._word()
        if not word.started:
            raise Unreadable("a here-document has no delimiter")
        quoted = any(q in self.text[start:self.pos] for q in "'\"\\")
        self.pending.append(_Pending(len(out) - 1, word.text, out[-1].text == "<<-", not quoted))

    def _read_documents(self, out: list[_Token]) -> None:
        """Read the bodies of the here-documents started on the line that just ended."""
        for doc in self.pending:
            lines: list[str] = []
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                line = self.text[self.pos:end]
                self.pos = min(end + 1, len(self.text))
                if (line.lstrip("\t") if doc.strip_tabs else line) == doc.delimiter:
                    break
                lines.append(line)
            body = "".join(f"{line}\n" for line in lines)
            inner = self._substitutions_in(body) if doc.expand else []
            self.documents[doc.index] = body
            out[doc.index] = _Token("redir", out[doc.index].text, tuple(inner))
        self.pending.clear()

    def _substitutions_in(self, body: str) -> list[str]:
        """Run the command substitutions of an unquoted here-document body."""
        words: list[str] = []
        if "$(" not in body and "`" not in body:
            return words
        sub = _Reader(body, self.depth + 1)
        i = 0
        while i < len(body):
            if body.startswith("$((", i):
                i += 3
            elif body.startswith("$(", i) or body[i] == "`":
                sub.pos = i + (2 if body[i] == "$" else 1)
                words += sub._substitution() if body[i] == "$" else sub._backtick()
                i = sub.pos
            else:
                i += 2 if body[i] == "\\" else 1
        self.commands += sub.commands
        return words

    # -- words ----------------------------------------------------------------------------

    def _word(self) -> _Word:
        word = _Word()
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c in " \t\n;&|()<>":
                break
            word.started = True
            if c == "\\":
                if text[self.pos + 1:self.pos + 2] != "\n":  # a line continuation joins
                    word.text += text[self.pos + 1:self.pos + 2]
                self.pos += 2
            elif c == "'":
                end = text.find("'", self.pos + 1)
                if end < 0:
                    raise Unreadable("a single quote is never closed")
                word.text += text[self.pos + 1:end]
                self.pos = end + 1
            elif c == '"':
                self.pos += 1
                self._double_quoted(word)
            elif c == "`":
                self.pos += 1
                word.inner += self._backtick()
                word.text += SUBSTITUTION
            elif c == "$":
                self._dollar(word, quoted=False)
            else:
                word.text += c
                self.pos += 1
        return word

    def _double_quoted(self, word: _Word) -> None:
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c == '"':
                self.pos += 1
                return
            if c == "\\" and text[self.pos + 1:self.pos + 2] in ('"', "\\", "$", "`", "\n"):
                word.text += text[self.pos + 1].replace("\n", "")
                self.pos += 2
            elif c == "`":
                self.pos += 1
                word.inner += self._backtick()
                word.text += SUBSTITUTION
            elif c == "$":
                self._dollar(word, quoted=True)
            else:
                word.text += c
                self.pos += 1
        raise Unreadable("a double quote is never closed")

    def _dollar(self, word: _Word, *, quoted: bool) -> None:
        text, pos = self.text, self.pos
        if text.startswith("$((", pos):
            end = _matching(text, pos + 1, "(", ")")
            word.inner += self._substitutions_in(text[pos + 3:end - 1])
            word.text += "$((…))"
            self.pos = end + 1
        elif text.startswith("$(", pos):
            self.pos += 2
            word.inner += self._substitution()
            word.text += SUBSTITUTION
        elif text.startswith("${", pos):
            end = _matching(text, pos + 1, "{", "}")
            word.inner += self._substitutions_in(text[pos + 2:end])  # `${x:-$(cmd)}` runs cmd
            word.text += text[pos:end + 1]
            self.pos = end + 1
        elif text.startswith("$'", pos) and not quoted:
            self.pos += 2
            word.text += self._ansi_c()
        elif text.startswith('$"', pos) and not quoted:
            self.pos += 2
            self._double_quoted(word)
        else:
            name = _NAME.match(text, pos + 1)
            end = name.end() if name else min(pos + 2, len(text))
            special = text[pos + 1:end]
            if not name and special and special not in "?$!#*@-0123456789":
                end = pos + 1  # a lone `$` is literal
            word.text += text[pos:end]
            self.pos = end

    def _ansi_c(self) -> str:
        """The value of `$'…'` (after `$'`): backslash escapes decoded."""
        out: list[str] = []
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c == "'":
                self.pos += 1
                return "".join(out)
            if c != "\\":
                out.append(c)
                self.pos += 1
                continue
            esc = text[self.pos + 1:self.pos + 2]
            self.pos += 2
            if not esc:
                break
            if esc in _ANSI_ESCAPES:
                out.append(_ANSI_ESCAPES[esc])
            elif esc in "xuU":
                size = {"x": 2, "u": 4, "U": 8}[esc]
                digits = re.match(rf"[0-9A-Fa-f]{{1,{size}}}", text[self.pos:])
                if digits:
                    out.append(chr(min(int(digits.group(), 16), 0x10FFFF)))
                    self.pos += digits.end()
                else:
                    out.append("\\" + esc)
            elif esc.isdigit():
                digits = re.match(r"[0-7]{1,3}", text[self.pos - 1:])
                size = digits.end() if digits else 1
                out.append(chr(int(digits.group(), 8)) if digits else esc)
                self.pos += size - 1
            else:
                out.append("\\" + esc)
        raise Unreadable("a $'…' quote is never closed")

    def _substitution(self) -> list[str]:
        """Parse a `$( … )` body (after `$(`) as commands; the words of its commands."""
        if self.depth + 1 > MAX_DEPTH:
            raise Unreadable("commands are nested too deeply")
        sub = _Reader(self.text, self.depth + 1)
        sub.pos = self.pos
        tokens = sub.tokens(inside=True)
        sub.structure(tokens)
        self.pos = sub.pos + 1  # past its `)`
        self.commands += sub.commands
        return [w for command in sub.commands for w in command.words]

    def _backtick(self) -> list[str]:
        """Parse a backtick body (after the opening backtick) as commands."""
        end = self.pos
        while True:
            end = self.text.find("`", end)
            if end < 0:
                raise Unreadable("a backtick is never closed")
            if self.text[end - 1] != "\\":
                break
            end += 1
        body = self.text[self.pos:end].replace("\\`", "`")
        self.pos = end + 1
        script = parse_script(body, self.depth + 1)
        if script.problem:
            raise Unreadable(script.problem)
        self.commands += script.commands
        return [w for command in script.commands for w in command.words]

    # -- commands -------------------------------------------------------------------------

    def structure(self, tokens: list[_Token]) -> None:
        """Group tokens into simple commands, noting which command pipes into which."""
        words: list[_Token] = []
        redirects: list[_Redirect] = []
        upstream: SimpleCommand | None = None
        i = 0
        while i <= len(tokens):
            token = tokens[i] if i < len(tokens) else _Token("op", "\n")
            if token.kind == "word":
                words.append(token)
            elif token.kind == "redir":
                target = self.documents.get(i)
                if target is None:
                    if i + 1 >= len(tokens) or tokens[i + 1].kind != "word":
                        raise Unreadable(f"the redirection {token.text} has no target")
                    i += 1
                    target = tokens[i].text
                redirects.append(_Redirect(token.text, target))
            else:
                command = self._finish(words, redirects, upstream)
                words, redirects = [], []
                upstream = command if token.text in ("|", "|&") else None
            i += 1

    def _finish(self, words: list[_Token], redirects: list[_Redirect],
                upstream: SimpleCommand | None) -> SimpleCommand | None:
        while words and words[0].text in _RESERVED and not words[0].inner:
            words = words[1:]  # `then rm x`, `do rm x`, `! rm x`, `{ rm x`: the command is `rm x`
        if not words and not redirects:
            return None
        if len(self.commands) >= _MAX_COMMANDS:
            raise Unreadable(f"the command line has more than {_MAX_COMMANDS} commands")
        assignments: list[tuple[str, str]] = []
        rest = list(words)
        while rest and (match := _ASSIGNMENT.fullmatch(rest[0].text)):
            assignments.append((match.group(1), match.group(2)))
            rest.pop(0)
        alternatives = rest[0].inner if rest else ()
        inner = tuple(w for token in words for w in token.inner)
        command = SimpleCommand(tuple(w.text for w in rest), tuple(assignments),
                                tuple(redirects), upstream, tuple(alternatives), self.depth,
                                inner)
        self.commands.append(command)
        return command


def _matching(text: str, start: int, opening: str, closing: str) -> int:
    """The index of the `closing` that matches the `opening` at `start` (quotes skipped)."""
    level, i, double = 0, start, False
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"' and opening == "{":
            double = not double  # `${1?"try 'x' first"}`: a quote inside a double quote
        elif c == "'" and opening == "{" and not double:
            end = text.find("'", i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        elif double:
            pass
        elif c == opening:
            level += 1
        elif c == closing:
            level -= 1
            if level == 0:
                return i
        i += 1
    raise Unreadable(f"a '{opening}' is never closed")


def decode_escapes(text: str) -> str:
    """What `printf` or `echo -e` print for `text`: `\\xHH`, `\\NNN`, `\\n` ... decoded."""
    try:
        return text.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return text
