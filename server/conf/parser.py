"""The structure of nats-server's configuration files: keys, maps, arrays, includes and variables.

Theory of operation
-------------------
A recursive-descent parser over :class:`~server.conf.scanner.Scanner` that follows nats-server's grammar
(``conf/lex.go`` and ``conf/parse.go``):

* A file is a sequence of ``key value`` entries.  The separator is ``=``, ``:`` or just white space; an entry
  ends at a new line, ``;``, ``,`` or a comment (``#`` or ``//`` to the end of the line).  The whole file may be
  wrapped in ``{ }`` so that JSON is a valid configuration.
* Keys are bare words or quoted (``"key"``, ``'key'``).  Values are scalars (see ``scanner.py``), maps
  ``{ key value ... }`` and arrays ``[ v, v ]`` (commas or new lines between items).  Inside maps and arrays new
  lines are free; at the top level the value must start on the key's line once a separator was written.
* ``include path`` (a keyword only when followed by white space) parses another file, relative to the directory
  of the including file, on its own (it does not see the includer's variables) and merges its keys into the
  current map.
* ``$NAME`` looks ``NAME`` up among the keys already defined in the enclosing maps, innermost first (block
  scope), then in the environment; an environment value is parsed as a value of the language, so ``PORT=4222``
  gives an integer.  A definition that a reference used is marked ``used_variable`` so the options layer does
  not call it an unknown field.  References to ``$2a$...`` are bcrypt hashes and stay literal strings.

Every value comes back as a :class:`~server.conf.values.Token` carrying its file, line and column; errors are
:class:`~server.conf.errors.ConfigError` naming ``file:line:col``.  Deliberate differences from nats-server are
where it has undefined behaviour or a plain bug: a key with no value inside a map and an unknown size suffix
are errors; include cycles are detected instead of overflowing the stack; ``[1, 2]`` is accepted.
"""
from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from skiff.server.conf.errors import ConfigError
from skiff.server.conf.scanner import (
    BOOL,
    DATETIME,
    EOF,
    FLOAT,
    INTEGER,
    KEY_SEPARATORS,
    NL,
    STRING,
    VARIABLE,
    Scalar,
    Scanner,
)
from skiff.server.conf.values import BOOL_WORDS, Token, integer_value, plain

MAX_INCLUDE_DEPTH = 32
_ENV_KEY = "pk"  # nats-server parses an environment value as the text "pk=<value>"


def go_join(directory: str, name: str) -> str:
    """Go's ``filepath.Join(dir, name)``: the name is always appended, even when it starts with '/'."""
    return os.path.normpath(f"{directory}/{name}" if directory else name)


class Parser:
    def __init__(
        self,
        text: str,
        file: str | None = None,
        *,
        env_refs: set[str] | None = None,
        include_chain: tuple[str, ...] = (),
    ):
        self.sc = Scanner(text, file)
        self.file = file
        self.base_dir = os.path.dirname(file) if file else "."
        self.base_dir = self.base_dir or "."
        self.ctxs: list[dict[str, Token] | list[Token]] = []
        self.env_refs = env_refs if env_refs is not None else set()
        self.include_chain = include_chain

    # -- entry ----------------------------------------------------------------------------------------------

    def parse(self) -> dict[str, Token]:
        root: dict[str, Token] = {}
        self.ctxs = [root]
        try:
            self._document(root)
        except RecursionError:
            raise self.sc.error("configuration is nested too deeply") from None
        return root

    def _document(self, root: dict[str, Token]) -> None:
        sc = self.sc
        depth = 0  # top-level braces: '{ "port": 4222 }' is a valid configuration
        while True:
            sc.skip_space()
            c = sc.peek()
            if c == EOF:
                return  # nats-server accepts an unclosed top-level '{' too
            if c == "{":
                sc.advance()
                depth += 1
                continue
            if c == "}":
                if depth > 0:
                    sc.advance()
                    depth -= 1
                    continue
                if not sc.text[sc.pos + 1 :].strip():
                    return  # a trailing '}' is allowed (JSON-like files)
                # Otherwise nats-server reads it as the first character of a key ("}port"); so do we.
            if sc.at_comment():
                sc.skip_comment()
                continue
            if c == "/":
                raise sc.error("Unexpected '/' (comments start with '#' or '//')")
            key, line, col, is_include = self._key(in_map=False)
            if sc.peek() == EOF and not key:
                return
            if is_include:
                self._include(root, line, col)
            else:
                sc.skip_space()
                if sc.peek() == EOF:
                    raise ConfigError(f"config is invalid: key '{key}' has no value", self.file, line, col)
                if sc.peek() in KEY_SEPARATORS:
                    sc.advance()
                root[key] = self._at_key(self._value(), line, col)
            depth = self._top_value_end(depth)

    def _top_value_end(self, depth: int) -> int:
        sc = self.sc
        sc.skip_ws()
        while sc.peek() == "/" and sc.peek(1) != "/":
            # nats-server's lexTopValueEnd falls through from a lone '/' to its white-space case
            sc.advance()
            sc.skip_ws()
        c = sc.peek()
        if sc.at_comment():
            sc.skip_comment()
        elif c in (EOF, "\n", "\r", ";", ","):
            sc.advance()
        elif c == "}":
            sc.advance()
            depth = max(depth - 1, 0)
        else:
            raise sc.error(
                f"Expected a top-level value to end with a new line, comment or EOF, but got '{c}' instead."
            )
        return depth

    # -- keys -----------------------------------------------------------------------------------------------

    def _key(self, in_map: bool) -> tuple[str, int, int, bool]:
        """(key, line, col, is_include_keyword) with the cursor after the key."""
        sc = self.sc
        line, col = sc.line, sc.col
        c = sc.peek()
        if c in KEY_SEPARATORS:
            raise sc.error(f"Unexpected key separator '{c}'")
        if in_map and c == "]":
            raise sc.error("Unexpected array end ']' processing map.")
        if c in ('"', "'"):
            sc.advance()
            if not in_map and sc.peek() == EOF:
                return "", line, col, False  # nats-server ends the file quietly at a lone trailing quote
            eof = "Unexpected EOF processing quoted map key." if in_map else "Unexpected EOF."
            return sc.read_until_quote(c, eof), line, col, False
        start = sc.pos
        sc.advance()
        while True:
            c = sc.peek()
            if c == EOF:
                if in_map:
                    raise sc.error("Unexpected EOF processing map key.")
                break
            if c.isspace():
                key = sc.text[start : sc.pos]
                return key, line, col, key.lower() == "include"
            if c in KEY_SEPARATORS:
                break
            sc.advance()
        return sc.text[start : sc.pos], line, col, False

    # -- values ---------------------------------------------------------------------------------------------

    @staticmethod
    def _at_key(tok: Token, line: int, col: int) -> Token:
        # As nats-server's pedantic parser: a map entry reports the position of its key.
        tok.line, tok.col = line, col
        return tok

    def _value(self) -> Token:
        sc = self.sc
        sc.skip_ws()
        line, col = sc.line, sc.col
        c = sc.peek()
        if c == "[":
            sc.advance()
            return Token(self._array(), self.file, line, col)
        if c == "{":
            sc.advance()
            outer, sc.in_array = sc.in_array, False
            try:
                return Token(self._map(), self.file, line, col)
            finally:
                sc.in_array = outer
        return self._scalar(sc.scalar())

    def _scalar(self, s: Scalar) -> Token:
        if s.kind == STRING:
            value: Any = s.text
        elif s.kind == BOOL:
            value = BOOL_WORDS[s.text.lower()]
        elif s.kind == INTEGER:
            try:
                value = integer_value(s.text)
            except ValueError as e:
                raise ConfigError(str(e), self.file, s.line, s.col) from None
        elif s.kind == FLOAT:
            value = float(s.text)
        elif s.kind == DATETIME:
            try:
                value = datetime.strptime(s.text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
            except ValueError:
                raise ConfigError(
                    f"expected Zulu formatted DateTime, but got '{s.text}'", self.file, s.line, s.col
                ) from None
        elif s.kind == VARIABLE:
            value = self._lookup(s)
        else:  # pragma: no cover - the scanner has no other kinds
            raise ConfigError(f"unknown value kind {s.kind}", self.file, s.line, s.col)
        return Token(value, self.file, s.line, s.col)

    def _array(self) -> list[Token]:
        sc = self.sc
        items: list[Token] = []
        self.ctxs.append(items)
        while True:
            sc.skip_space()
            c = sc.peek()
            if sc.at_comment():
                sc.skip_comment()
                continue
            if c == ",":
                raise sc.error("Unexpected array value terminator ','.")
            if c == "]":
                sc.advance()
                break
            if c == EOF:
                raise sc.error("Unexpected EOF processing array.")
            outer, sc.in_array = sc.in_array, True
            try:
                items.append(self._value())
            finally:
                sc.in_array = outer
            if self._item_end("]", "array"):
                break
        self.ctxs.pop()
        return items

    def _map(self) -> dict[str, Token]:
        sc = self.sc
        entries: dict[str, Token] = {}
        self.ctxs.append(entries)
        while True:
            sc.skip_space()
            c = sc.peek()
            if c == EOF:
                raise sc.error("Unexpected EOF processing map.")
            if c == "}":
                sc.advance()
                break
            if sc.at_comment():
                sc.skip_comment()
                continue
            key, line, col, is_include = self._key(in_map=True)
            if is_include:
                self._include(entries, line, col)
            else:
                sc.skip_space()
                if sc.peek() in KEY_SEPARATORS:
                    sc.advance()
                    sc.skip_space()
                c = sc.peek()
                if c == ",":
                    raise sc.error("Unexpected map value terminator ','.")
                if c == "}" or c == EOF:
                    raise ConfigError(f"key '{key}' has no value", self.file, line, col)
                entries[key] = self._at_key(self._value(), line, col)
            if self._item_end("}", "map"):
                break
        self.ctxs.pop()
        return entries

    def _item_end(self, closer: str, what: str) -> bool:
        """After a map entry or array item: True when ``closer`` ended the container."""
        sc = self.sc
        sc.skip_ws()
        c = sc.peek()
        if sc.at_comment():
            sc.skip_comment()
            return False
        if c == closer:
            sc.advance()
            return True
        # A lone '/' ends an item too: nats-server's lexer falls through from its comment case.
        if c in NL or c in (",", "/") or (c == ";" and what == "map"):
            sc.advance()
            return False
        shown = "EOF" if c == EOF else c
        article = "an" if what == "array" else "a"
        raise sc.error(
            f'Expected {article} {what} value terminator "," or {article} {what} terminator "{closer}", '
            f"but got '{shown}' instead."
        )

    # -- variables ------------------------------------------------------------------------------------------

    def _lookup(self, s: Scalar) -> Any:
        name = s.text
        if name.startswith("2a$"):
            return "$" + name  # a bcrypt hash written without quotes, not a reference
        for ctx in reversed(self.ctxs):
            if isinstance(ctx, dict) and name in ctx:
                tok = ctx[name]
                tok.used_variable = True
                return tok.value
        if name in self.env_refs:
            raise ConfigError(
                f"variable reference for '{name}' on line {s.line} could not be parsed: "
                f"variable reference cycle for '{name}'",
                self.file,
                s.line,
                s.col,
            )
        if name not in os.environ:
            raise ConfigError(f"variable reference for '{name}' on line {s.line} can not be found", self.file, s.line, s.col)
        self.env_refs.add(name)
        try:
            sub = Parser(f"{_ENV_KEY}={os.environ[name]}", None, env_refs=self.env_refs)
            try:
                parsed = sub.parse()
            except ConfigError as e:
                raise ConfigError(
                    f"variable reference for '{name}' on line {s.line} could not be parsed: {e.reason}",
                    self.file,
                    s.line,
                    s.col,
                ) from None
        finally:
            self.env_refs.discard(name)
        if _ENV_KEY not in parsed:
            raise ConfigError(f"variable reference for '{name}' on line {s.line} can not be found", self.file, s.line, s.col)
        return parsed[_ENV_KEY].value

    # -- includes -------------------------------------------------------------------------------------------

    def _include(self, ctx: dict[str, Token], line: int, col: int) -> None:
        sc = self.sc
        sc.skip_ws()
        name = sc.include_path()
        path = go_join(self.base_dir, name)
        real = os.path.realpath(path)
        if real in self.include_chain or len(self.include_chain) >= MAX_INCLUDE_DEPTH:
            raise ConfigError(f"error parsing include file '{name}', include cycle", self.file, line, col)
        chain = self.include_chain + ((os.path.realpath(self.file),) if self.file else ())
        if real in chain:
            raise ConfigError(f"error parsing include file '{name}', include cycle", self.file, line, col)
        try:
            text = read_text(path)
        except ConfigError as e:
            raise ConfigError(f"error parsing include file '{name}', {e.reason}", self.file, line, col) from None
        sub = Parser(text, path, include_chain=chain)
        try:
            entries = sub.parse()
        except ConfigError as e:
            e.reason = f"{e.reason} (in file included from {self.file or '<string>'}:{line})"
            e.args = (str(e),)
            raise
        ctx.update(entries)


def read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(f"error opening config file: {e.strerror or e}: {path}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file is not valid UTF-8 (byte offset {e.start})", path) from None


def parse_tokens(text: str, file: str | None = None) -> dict[str, Token]:
    """Parse configuration text into a tree of tokens (values with positions)."""
    return Parser(text, file).parse()


def parse_file_tokens(path: str) -> dict[str, Token]:
    """Parse a configuration file into a tree of tokens; includes are relative to its directory."""
    return Parser(read_text(path), path).parse()


def parse(text: str, file: str | None = None) -> dict[str, Any]:
    """Parse configuration text into plain Python values (dict, list, str, int, float, bool, datetime)."""
    return plain(parse_tokens(text, file))


def parse_file(path: str) -> dict[str, Any]:
    """Parse a configuration file into plain Python values."""
    return plain(parse_file_tokens(path))
