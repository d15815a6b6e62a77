"""Character-level reading of nats-server's configuration syntax: a cursor and the scalar values.

Theory of operation
-------------------
:class:`Scanner` is a cursor over the text that knows its line and column.  The structural grammar (keys, maps,
arrays, includes, variables) lives in ``parser.py``; this module reads the pieces whose exact rules come from
nats-server's lexer (``conf/lex.go``) and hands back ``Scalar(kind, text, line, col)``:

* ``'single'`` quoted strings are raw; ``"double"`` quoted ones (and unquoted ones) know the escapes
  ``\\xHH \\t \\n \\r \\" \\\\`` and nothing else.
* An unquoted word ends at a new line, space, tab, ``;``, ``,``, ``]`` or ``}`` (a ``'`` ends it too and is
  eaten).  ``true/false/yes/no/on/off`` (any case) are booleans and ``$NAME`` is a variable reference.
  ``#`` inside a word is part of the word.
* A value that starts with a digit is an integer when it ends right after its digits (and an optional size
  suffix ``k kb ki kib ... e eb``), a float with one ``.``, an address string with two (``127.0.0.1:4222``),
  a Zulu date ``2016-05-04T18:53:41Z``, and otherwise an unquoted string (``4222abc``, ``10ms``).
  nats-server's lexer does not let ``]`` end a number, so it rejects ``[1, 2]`` ("Expected an array value
  terminator"); Skiff lets ``]`` end a number inside an array and reads ``[1, 2]`` as two integers (elsewhere
  ``2]`` stays the string nats-server makes of it).
* ``(`` starts a raw block that ends at a ``)`` alone on its line.
"""
from __future__ import annotations

from dataclasses import dataclass

from skiff.server.conf.errors import ConfigError

EOF = ""
NL = ("\n", "\r")
WS = (" ", "\t")
KEY_SEPARATORS = ("=", ":")
DIGITS = "0123456789"
NUMBER_SUFFIXES = "kKmMgGtTpPeE"
# What may follow an integer (nats-server lexNumberOrDateOrStringOrIP); inside arrays ']' too (module docstring).
NUMBER_END = (EOF, "\n", "\r", "}", ";", ",", " ", "\t")
NUMBER_END_IN_ARRAY = NUMBER_END + ("]",)
STRING_END = (EOF, "\n", "\r", ";", ",", "]", "}", " ", "\t")

STRING, BOOL, INTEGER, FLOAT, DATETIME, VARIABLE = "string", "bool", "integer", "float", "datetime", "variable"


@dataclass(frozen=True)
class Scalar:
    kind: str
    text: str
    line: int
    col: int


def _shown(c: str) -> str:
    return "EOF" if c == EOF else c.replace("\n", "\\n").replace("\r", "\\r")


class Scanner:
    def __init__(self, text: str, file: str | None = None):
        self.text = text
        self.file = file
        self.pos = 0
        self.line = 1
        self.line_start = 0
        self.in_array = False  # set by the parser while it reads an array item

    # -- cursor ---------------------------------------------------------------------------------------------

    @property
    def col(self) -> int:
        return self.pos - self.line_start + 1

    def peek(self, ahead: int = 0) -> str:
        i = self.pos + ahead
        return self.text[i] if i < len(self.text) else EOF

    def advance(self) -> str:
        if self.pos >= len(self.text):
            return EOF
        c = self.text[self.pos]
        self.pos += 1
        if c == "\n":
            self.line += 1
            self.line_start = self.pos
        return c

    def error(self, reason: str, line: int | None = None, col: int | None = None) -> ConfigError:
        return ConfigError(reason, self.file, self.line if line is None else line, self.col if col is None else col)

    def skip_ws(self) -> None:
        """Spaces and tabs only."""
        while self.peek() in WS and self.peek() != EOF:
            self.advance()

    def skip_space(self) -> None:
        """Any white space, new lines included (Go's unicode.IsSpace)."""
        while self.peek() != EOF and self.peek().isspace():
            self.advance()

    def at_comment(self) -> bool:
        c = self.peek()
        return c == "#" or (c == "/" and self.peek(1) == "/")

    def skip_comment(self) -> None:
        """From ``#`` or ``//`` up to, not including, the end of the line."""
        while self.peek() not in (EOF, "\n", "\r"):
            self.advance()

    def read_until_quote(self, quote: str, eof_reason: str) -> str:
        """Raw text up to ``quote`` (consumed), no escapes: single-quoted strings, quoted keys, include paths."""
        start = self.pos
        while True:
            c = self.peek()
            if c == EOF:
                raise self.error(eof_reason)
            if c == quote:
                text = self.text[start : self.pos]
                self.advance()
                return text
            self.advance()

    # -- scalars --------------------------------------------------------------------------------------------

    def scalar(self) -> Scalar:
        """Read one non-container value at the cursor (leading spaces already skipped)."""
        line, col = self.line, self.col
        c = self.peek()
        if c == "'":
            self.advance()
            return Scalar(STRING, self.read_until_quote("'", "Unexpected EOF."), line, col)
        if c == '"':
            self.advance()
            return Scalar(STRING, self._double_quoted(), line, col)
        if c == "-":
            self.advance()
            return self._negative_number(line, col)
        if c == "(":
            self.advance()
            return Scalar(STRING, self._block(), line, col)
        if c != EOF and c in DIGITS:
            return self._number(line, col)
        if c == ".":
            raise self.error("Floats must start with a digit")
        if c in NL:
            raise self.error("Expected value but found new line")
        return self._unquoted(self.pos, [], line, col)

    def _escape(self) -> str:
        """After a backslash: one escaped character (``\\xHH`` may yield a raw byte, see ``_join``)."""
        line, col = self.line, self.col - 1  # errors point at the backslash
        c = self.advance()
        simple = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
        if c in simple and c != EOF:
            return simple[c]
        if c == "x":
            hexdigits = ""
            for _ in range(2):
                d = self.advance()
                if d in NL or d == EOF:
                    raise self.error("Expected two hexadecimal digits after '\\x', but hit end of line", line, col)
                hexdigits += d
            if any(h not in "0123456789abcdefABCDEF" for h in hexdigits):
                raise self.error(
                    f"Expected two hexadecimal digits after '\\x', but got '{hexdigits}'", line, col
                )
            b = int(hexdigits, 16)
            # Bytes >= 0x80 become surrogate escapes so that a UTF-8 sequence written as \xe2\x82\xac
            # turns into one character when the pieces are joined.
            return chr(b) if b < 0x80 else chr(0xDC00 + b)
        raise self.error(
            f"Invalid escape character '{_shown(c)}'. Only the following escape characters are allowed: "
            "\\xXX, \\t, \\n, \\r, \\\", \\\\.",
            line,
            col,
        )

    @staticmethod
    def _join(parts: list[str]) -> str:
        s = "".join(parts)
        if any("\udc80" <= ch <= "\udcff" for ch in s):
            s = s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        return s

    def _double_quoted(self) -> str:
        parts: list[str] = []
        start = self.pos
        while True:
            c = self.peek()
            if c == EOF:
                raise self.error("Unexpected EOF.")
            if c == "\\":
                parts.append(self.text[start : self.pos])
                self.advance()
                parts.append(self._escape())
                start = self.pos
                continue
            if c == '"':
                parts.append(self.text[start : self.pos])
                self.advance()
                return self._join(parts)
            self.advance()

    def _unquoted(self, start: int, parts: list[str], line: int, col: int) -> Scalar:
        """An unquoted word whose first character is at ``start`` (the cursor may already be past it)."""
        escaped = bool(parts)
        while True:
            c = self.peek()
            if c == "\\":
                parts.append(self.text[start : self.pos])
                self.advance()
                parts.append(self._escape())
                start = self.pos
                escaped = True
                continue
            if c in STRING_END:
                parts.append(self.text[start : self.pos])
                text = self._join(parts)
                if escaped:
                    return Scalar(STRING, text, line, col)
                if text.lower() in ("true", "false", "yes", "no", "on", "off"):
                    return Scalar(BOOL, text, line, col)
                if text.startswith("$"):
                    return Scalar(VARIABLE, text[1:], line, col)
                return Scalar(STRING, text, line, col)
            if c == "'":
                parts.append(self.text[start : self.pos])
                self.advance()
                return Scalar(STRING, self._join(parts), line, col)
            self.advance()

    def _digits(self) -> None:
        while self.peek() != EOF and self.peek() in DIGITS:
            self.advance()

    def _number(self, line: int, col: int) -> Scalar:
        start = self.pos
        self._digits()
        c = self.peek()
        if c == "-":
            if self.pos - start != 4:
                raise self.error("All ISO8601 dates must be in full Zulu form.")
            return self._date(start, line, col)
        if c == ".":
            self.advance()
            return self._fraction(start, line, col)
        if c != EOF and c in NUMBER_SUFFIXES:
            self.advance()
            return self._suffixed(start, line, col)
        if c in self._number_end():
            return Scalar(INTEGER, self.text[start : self.pos], line, col)
        # Anything else turns the whole value into an unquoted string ("4222abc"); the character that
        # decided it is taken as it is, as nats-server's lexer does.
        self.advance()
        return self._unquoted(start, [], line, col)

    def _negative_number(self, line: int, col: int) -> Scalar:
        start = self.pos - 1
        c = self.peek()
        if c == EOF or c not in DIGITS:
            if c == ".":
                raise self.error("Floats must start with a digit, not '.'.")
            raise self.error(f"Expected a digit but got '{_shown(c)}'.")
        self._digits()
        c = self.peek()
        if c == ".":
            self.advance()
            return self._fraction(start, line, col)
        if c != EOF and c in NUMBER_SUFFIXES:
            self.advance()
            return self._suffixed(start, line, col)
        return Scalar(INTEGER, self.text[start : self.pos], line, col)

    def _suffixed(self, start: int, line: int, col: int) -> Scalar:
        """After digits and a size letter: ``b``/``i`` letters may follow (``1MB``, ``4KiB``)."""
        while self.peek() != EOF and self.peek() in "bBiI":
            self.advance()
        if self.peek() in self._number_end():
            return Scalar(INTEGER, self.text[start : self.pos], line, col)
        return self._unquoted(start, [], line, col)  # "10ms", "1Mx", "1e5": a string (as nats-server 2.15)

    def _number_end(self) -> tuple[str, ...]:
        return NUMBER_END_IN_ARRAY if self.in_array else NUMBER_END

    def _fraction(self, start: int, line: int, col: int) -> Scalar:
        """After digits and a '.': a float, or an address (``127.0.0.1:4222``) when a second '.' comes."""
        c = self.peek()
        if c == EOF or c not in DIGITS:
            raise self.error(f"Floats must have a digit after the '.', but got '{_shown(c)}' instead.")
        self._digits()
        if self.peek() == ".":
            while self.peek() != EOF and self.peek() in DIGITS + ".:-":
                self.advance()
            return Scalar(STRING, self.text[start : self.pos], line, col)
        return Scalar(FLOAT, self.text[start : self.pos], line, col)

    def _date(self, start: int, line: int, col: int) -> Scalar:
        self.advance()  # the '-' after the year
        for expected in "00-00T00:00:00Z":
            c = self.peek()
            if expected == "0":
                if c == EOF or c not in DIGITS:
                    raise self.error(f"Expected digit in ISO8601 datetime, but found '{_shown(c)}' instead.")
            elif c != expected:
                raise self.error(f"Expected '{expected}' in ISO8601 datetime, but found '{_shown(c)}' instead.")
            self.advance()
        return Scalar(DATETIME, self.text[start : self.pos], line, col)

    def _block(self) -> str:
        """After '(': raw text up to a ')' that stands alone on its line (the text keeps its last new line)."""
        start = self.pos
        while True:
            c = self.advance()
            if c == EOF:
                raise self.error("Unexpected EOF processing block.")
            if c == ")" and self.pos >= 2 and self.text[self.pos - 2] == "\n" and self.peek() in ("\n", EOF):
                return self.text[start : self.pos - 1]

    def include_path(self) -> str:
        """The operand of ``include`` (spaces after the keyword already skipped)."""
        c = self.peek()
        if c in ("'", '"'):
            self.advance()
            what = "quoted" if c == "'" else "double quoted"
            return self.read_until_quote(c, f"Unexpected EOF in {what} include")
        problems = {"[": "start of an array", "{": "start of a map", "(": "start of a block", "\\": "escape sequence"}
        if c in problems:
            raise self.error(f"Expected include value but found {problems[c]}")
        if c != EOF and (c in DIGITS or c == "-"):
            raise self.error("Expected include value but found start of a number")
        if c in NL:
            raise self.error("Expected include value but found new line")
        start = self.pos
        while True:
            c = self.peek()
            if c in (EOF, "\n", "\r", ";", "}", " ", "\t"):
                return self.text[start : self.pos]
            if c == "'":
                text = self.text[start : self.pos]
                self.advance()
                return text
            self.advance()
