"""The JetStream API error table, as data.

Theory of operation
-------------------
nats-server keeps every JetStream API error in ``server/errors.json``: a constant name (``JSStreamNotFoundErr``),
an HTTP-like ``code`` (400, 404, 500, 503 ...), a unique ``error_code`` (10059 ...) and a description that may hold
``{placeholder}`` slots (``{err}``, ``{seq}``, ``{limit}`` ...).  Its generated ``NewJS...Error(...)`` functions
replace each slot with the string form of an argument.  We load the same file (``protocol/data/errors.json``, package
data) once, with the first error built (not at import: ~6 M instructions of every server start, issue #13), and
build :data:`ERRORS`, keyed by constant name.  Nothing else in Skiff writes API error JSON by
hand: callers say ``ApiError.of("JSStreamNotFoundErr")`` or ``ApiError.of("JSStreamCreateErrF", err="...")``.

Formatting follows nats-server's ``toReplacerArgs``: strings are inserted as they are, an :class:`ApiError` passed as a
value is inserted as its Go ``Error()`` text (``"<description> (<err_code>)"``), anything else through ``str``.
Durations should be passed already formatted (``format_go_duration``) because Go prints ``time.Duration`` with ``%v``.

nats-server's ``Unless(err)`` option ("if the wrapped error is already an API error, return it unchanged") is
:meth:`ApiError.unless`.

An :class:`ApiError` is both a value (frozen, comparable, ``to_dict()`` for the wire) and an ``Exception`` so that
deep validation code may raise it and the API layer catch it.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

from .record import NamedTuple  # typing's, without its annotation checks (start-up)

__all__ = ["ErrorDef", "ERRORS", "ApiError", "BY_ERR_CODE"]

_PLACEHOLDER = r"\{(\w+)\}"  # compiled by re (and cached there) with the first error that has values


class ErrorDef(NamedTuple):  # not a frozen dataclass: ~0.5 ms less of every start
    """One row of nats-server's errors.json."""

    constant: str
    code: int
    err_code: int
    description: str

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(re.findall(_PLACEHOLDER, self.description))


def _load() -> dict[str, ErrorDef]:
    # Beside this file first, as it is in a checkout and in an installed wheel: importlib.resources costs ~3 ms
    # of imports at every start, and is needed only when the package is not plain files (a zip).
    try:
        with open(os.path.join(os.path.dirname(__file__), "data", "errors.json"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        from importlib import resources

        text = resources.files(__package__ or "protocol").joinpath("data/errors.json").read_text(encoding="utf-8")
    raw = json.loads(text)
    table: dict[str, ErrorDef] = {}
    for row in raw:
        table[row["constant"]] = ErrorDef(row["constant"], int(row["code"]), int(row["error_code"]), row["description"])
    return table


_ERRORS: dict[str, ErrorDef] | None = None


def _errors() -> dict[str, ErrorDef]:
    global _ERRORS
    if _ERRORS is None:
        _ERRORS = globals()["ERRORS"] = _load()
    return _ERRORS


def __getattr__(name: str) -> Any:
    """``ERRORS``: every error nats-server knows, keyed by its Go constant name; ``BY_ERR_CODE``: the same rows keyed
    by ``err_code`` (unique in nats-server's table).  Both built on first use (PEP 562)."""
    if name == "ERRORS":
        return _errors()
    if name == "BY_ERR_CODE":
        by_code = globals()["BY_ERR_CODE"] = {d.err_code: d for d in _errors().values()}
        return by_code
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, ApiError):
        return value.go_error()
    if isinstance(value, BaseException):
        return str(value)
    if isinstance(value, bool):  # Go's %v of a bool
        return "true" if value else "false"
    return str(value)


class ApiError(Exception):
    """A JetStream API error as it goes on the wire: ``{"code":..,"err_code":..,"description":..}``."""

    __slots__ = ("code", "err_code", "description", "constant", "go_returned")

    def __init__(self, code: int, err_code: int, description: str, constant: str = "") -> None:
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description
        self.constant = constant
        # When nats-server answers with this ApiError but its function returns a plain error of its own (a stream's
        # "last sequence mismatch: 5 vs 4"), that error's text: a message trace reports it (core/msgtrace.py).
        self.go_returned = ""

    @classmethod
    def of(cls, constant: str, /, **values: Any) -> "ApiError":
        """Build the error named ``constant``, filling ``{name}`` slots from ``values``.

        Missing values leave their slot untouched, exactly like Go's ``strings.Replacer`` with no pair for it.
        Unknown constants raise ``KeyError`` (a typo is a bug, caught by the test that scans the code base).
        """
        d = (_ERRORS or _errors())[constant]
        desc = d.description
        if values and "{" in desc:
            desc = re.sub(_PLACEHOLDER, lambda m: _as_text(values[m.group(1)]) if m.group(1) in values else m.group(0),
                          desc)
        return cls(d.code, d.err_code, desc, constant)

    @classmethod
    def unless(cls, constant: str, err: Any, /, **values: Any) -> "ApiError":
        """nats-server's ``NewJS...Error(err, Unless(err))``: an ApiError passes through unchanged."""
        if isinstance(err, ApiError):
            return err
        if "err" not in values:
            values["err"] = err
        return cls.of(constant, **values)

    def go_error(self) -> str:
        """Go's ``(*ApiError).Error()``: the text used when the error is wrapped into another description."""
        return f"{self.description} ({self.err_code})"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "err_code": self.err_code, "description": self.description}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApiError):
            return NotImplemented
        return (self.code, self.err_code, self.description) == (other.code, other.err_code, other.description)

    def __hash__(self) -> int:
        return hash((self.code, self.err_code, self.description))

    def __repr__(self) -> str:
        name = f"{self.constant}: " if self.constant else ""
        return f"ApiError({name}{self.code}/{self.err_code} {self.description!r})"

    __str__ = go_error
