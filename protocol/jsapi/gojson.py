"""JSON the way nats-server's Go code reads and writes it.

Theory of operation
-------------------
nats-server decodes every JetStream API request with ``encoding/json``'s ``Decoder`` and ``DisallowUnknownFields``
(``server/jetstream_api.go`` ``unmarshalRequest``), and answers with ``json.Marshal`` of Go structs.  Clients only
ever see the result, but they see it exactly: the 10025 ``invalid JSON: ...`` description carries Go's error text,
and a config echoed back has Go's field order and ``omitempty`` choices.  This module reproduces both from one
description of each Go struct:

* :class:`GoType` describes a Go type (``int64``, ``time.Duration``, ``[]string``, ``*server.StreamSource`` ...).
  :class:`GoModel` is a plain record class whose fields carry a :class:`Go` marker (type and ``omitempty``); the
  struct spec (:class:`StructSpec`, in Go field order) is built from the model when the class is created.
* :func:`decode` turns request bytes into a dict of the fields present (then set on the model), with Go's
  semantics: several JSON values in one payload are decoded one after the other into the same struct (``{}{"a":1}``
  is valid); whitespace-only input decodes nothing; keys match field names exactly or else case-insensitively;
  ``null`` leaves a value alone (clears pointers, slices and maps); integers must be integer literals in range;
  custom ``UnmarshalJSON`` types (enums) see the raw text and fail with their own messages.  The first error in
  document order wins, which is what the oracle shows for every mix of unknown-field / type / enum errors tried.
* Syntax errors are found by Python's C scanner; only then :func:`go_syntax_error` walks the bytes like Go's scanner
  to produce Go's message and byte offset (``invalid character '}' looking for beginning of value at offset 9``,
  ``unexpected EOF``, ``invalid escape sequence `\\x` in string at offset 12``).
* :func:`encode` writes ``json.Marshal`` output: fields in struct order, ``omitempty`` zero values dropped, map keys
  sorted, ``<``, ``>``, ``&``, U+2028, U+2029 escaped as ``\\u003c`` ... (Go's HTML-safe default), no spaces.

Approximations (documented, none seen by a client doing anything sensible): the raw text a custom ``UnmarshalJSON``
sees for a *string* is rebuilt from the decoded string, so an enum written with escapes (``"\\u006cimits"``) is
accepted where Go rejects it; Unicode case folding of keys is Python's ``casefold`` rather than Go's simple folding;
when two JSON values are sent in one payload, slices of structs are replaced rather than merged element-wise.
"""
from __future__ import annotations

import copy
import json
import re
import sys
import types
import typing
from typing import Any, Callable, ClassVar

from ..marshal import html_safe
from ..record import NamedTuple, Record  # NamedTuple: typing's, without its annotation checks (start-up)
from .timefmt import GoTime, TimeParseError, format_time, parse_time

__all__ = [
    "GoType", "Go", "GoModel", "StructSpec", "FieldSpec", "GoDecodeError", "decode", "decode_into", "encode",
    "go_quote", "go_syntax_error", "go_check_valid", "loads", "MAX_NESTING_DEPTH", "STRING", "BOOL", "INT", "INT64", "INT32",
    "UINT64", "UINT8", "UINT16", "DURATION", "TIME", "OMIT", "enum_type", "slice_of", "map_of", "ptr_to", "json_dumps_go",
]


class GoDecodeError(ValueError):
    """The text Go's decoder would return (without the ``invalid JSON: `` prefix nats-server adds)."""


# --- Go types -----------------------------------------------------------------------------------------------------

# The four description classes below are plain classes, not dataclasses: creating a dataclass costs ~0.5 ms, at
# every start.  GoType compares by identity (it was a dataclass with eq=False).
class GoType:
    __slots__ = ("kind", "name", "lo", "hi", "elem", "spec", "parse", "zero", "model")

    def __init__(self, kind: str, name: str, lo: int = 0, hi: int = 0, elem: "GoType | None" = None,
                 spec: "StructSpec | None" = None, parse: Callable[[str], Any] | None = None, zero: Any = None,
                 model: Any = None) -> None:
        self.kind = kind  # string bool int time enum struct slice map ptr
        self.name = name  # as Go prints it in "of type X"
        self.lo = lo
        self.hi = hi
        self.elem = elem
        self.spec = spec
        # enums: raw JSON text -> canonical value (raises GoDecodeError); canonical -> JSON value; zero value
        self.parse = parse
        self.zero = zero
        self.model = model  # struct: the GoModel class (for lazy spec lookup)

    def __repr__(self) -> str:
        return f"GoType({self.kind!r}, {self.name!r})"

    def struct_spec(self) -> "StructSpec":
        if self.spec is not None:
            return self.spec
        return self.model.__go_spec__


STRING = GoType("string", "string")
BOOL = GoType("bool", "bool")
INT = GoType("int", "int", -(1 << 63), (1 << 63) - 1)
INT64 = GoType("int", "int64", -(1 << 63), (1 << 63) - 1)
INT32 = GoType("int", "int32", -(1 << 31), (1 << 31) - 1)
UINT64 = GoType("int", "uint64", 0, (1 << 64) - 1)
UINT8 = GoType("int", "uint8", 0, 255)
UINT16 = GoType("int", "uint16", 0, 65535)
DURATION = GoType("int", "time.Duration", -(1 << 63), (1 << 63) - 1)
TIME = GoType("time", "time.Time")


def slice_of(elem: GoType) -> GoType:
    return GoType("slice", "[]" + elem.name, elem=elem)


def map_of(elem: GoType) -> GoType:
    return GoType("map", "map[string]" + elem.name, elem=elem)


def ptr_to(elem: GoType) -> GoType:
    # Go names the pointed-to type in type errors (observed: "of type server.StreamSource" for *StreamSource).
    return GoType("ptr", elem.name, elem=elem)


def enum_type(name: str, parse: Callable[[str], Any], zero: Any) -> GoType:
    """A Go int type with custom (Un)MarshalJSON; ``parse`` gets the raw JSON text of the value."""
    return GoType("enum", name, parse=parse, zero=zero)


class Go(NamedTuple):
    """Field marker: the Go type (inferred from the annotation when omitted) and ``omitempty``."""

    type: GoType | None = None
    omitempty: bool = False
    name: str | None = None  # JSON name when it differs from the attribute


OMIT = Go(omitempty=True)


class FieldSpec:
    __slots__ = ("attr", "json", "type", "omitempty")

    def __init__(self, attr: str, json: str, type: GoType, omitempty: bool) -> None:  # noqa: A002 - Go's word
        self.attr = attr
        self.json = json
        self.type = type
        self.omitempty = omitempty

    def __repr__(self) -> str:
        return f"FieldSpec({self.attr!r}, {self.json!r}, {self.type!r}, {self.omitempty!r})"


class StructSpec:
    __slots__ = ("go_name", "fields", "exact", "folded")

    def __init__(self, go_name: str, fields: list[FieldSpec]) -> None:
        self.go_name = go_name  # e.g. "StreamConfig" (messages print "server.StreamConfig" for values, bare for paths)
        self.fields = fields
        self.exact: dict[str, FieldSpec] = {}
        self.folded: dict[str, FieldSpec] = {}
        for f in self.fields:
            self.exact[f.json] = f
            self.folded.setdefault(f.json.casefold(), f)

    def lookup(self, key: str) -> FieldSpec | None:
        f = self.exact.get(key)
        if f is None:
            f = self.folded.get(key.casefold())
        return f


def _infer(tp: Any, marker: Go | None) -> GoType:
    if marker is not None and marker.type is not None:
        return marker.type
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        args = typing.get_args(tp)
        inner_marker = next((a for a in args[1:] if isinstance(a, Go)), None)
        return _infer(args[0], inner_marker or marker)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = _infer(args[0], None)
        if inner.kind in ("slice", "map", "ptr"):
            return inner
        return ptr_to(inner)
    if tp is str:
        return STRING
    if tp is bool:
        return BOOL
    if tp is GoTime:
        return TIME
    if origin is list:
        return slice_of(_infer(typing.get_args(tp)[0], None))
    if origin is dict:
        return map_of(_infer(typing.get_args(tp)[1], None))
    if isinstance(tp, type) and issubclass(tp, GoModel):
        return GoType("struct", "server." + tp.__go_name__, model=tp)
    raise TypeError(f"cannot infer a Go type for {tp!r}; annotate with Go(TYPE)")


class ModelError(ValueError):
    """A GoModel built with a field it does not have (the server's own mistake, never a client's)."""


def _converter(t: GoType) -> Callable[[Any], Any] | None:
    """How a value the decoder produced becomes the field's value: nested structs arrive as dicts of attributes
    and become their GoModel (also inside slices, maps and pointers); every other kind is kept as it is."""
    k = t.kind
    if k == "ptr":
        return _converter(t.elem)
    if k == "struct" and t.model is not None:
        model = t.model
        return lambda v: model(**v) if isinstance(v, dict) else v
    if k in ("slice", "map"):
        inner = _converter(t.elem)
        if inner is None:
            return None
        if k == "slice":
            return lambda v: [inner(x) for x in v] if isinstance(v, list) else v
        return lambda v: {key: inner(x) for key, x in v.items()} if isinstance(v, dict) else v
    return None


class _Lazy:
    """A GoModel class attribute (``__go_spec__`` ...) that builds the class's field tables on first access."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, cls: type) -> Any:
        cls._go_build()
        return cls.__dict__[self.name]


_LAZY_ATTRS = {name: _Lazy(name) for name in ("__go_spec__", "__go_init__", "__go_attrs__")}


class GoModel(Record):
    """A plain record that mirrors one Go struct (JSON names = attribute names unless ``Go(name=)``).

    Fields are the annotated class attributes (base classes first), their class values the defaults.  This was a
    pydantic model; pydantic only re-validated what :func:`decode` had already decoded and checked with Go's rules,
    and its import and schema building were about half of the server's start-up time.  Keyword
    construction (unknown names refused) is here; ``model_validate``, ``model_copy``, ``model_dump`` and equality
    are ``protocol.record.Record``'s, shared with the server's options."""

    _error = ModelError

    __go_name__: ClassVar[str] = ""
    __go_spec__: ClassVar[StructSpec]
    # (attribute, default, default needs a copy, converter) in field order
    __go_init__: ClassVar[tuple[tuple[str, Any, bool, Callable[[Any], Any] | None], ...]]
    __go_attrs__: ClassVar[frozenset[str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__go_name__" not in cls.__dict__:
            cls.__go_name__ = cls.__name__
        # The field tables are built when the class is first used (evaluating the annotations of every model at
        # import was a few ms of each start, for models a server without that request never needs).
        for name in _LAZY_ATTRS:
            setattr(cls, name, _LAZY_ATTRS[name])

    @classmethod
    def _go_build(cls) -> None:
        own = cls.__dict__.get("__annotations__", {})
        scope = vars(sys.modules[cls.__module__])
        base = next(b for b in cls.__mro__[1:] if issubclass(b, GoModel))
        fields: list[FieldSpec] = list(base.__go_spec__.fields) if base is not GoModel else []
        init = list(base.__go_init__) if base is not GoModel else []
        for attr, tp in own.items():
            if attr.startswith("__"):
                continue
            if isinstance(tp, str):  # from __future__ import annotations: evaluated in the model's module
                tp = eval(tp, scope)  # noqa: S307 - the module's own annotation text
            marker = None
            if typing.get_origin(tp) is typing.Annotated:
                marker = next((a for a in typing.get_args(tp)[1:] if isinstance(a, Go)), None)
            gt = _infer(tp, marker)
            fields = [f for f in fields if f.attr != attr]
            fields.append(FieldSpec(attr, (marker.name if marker and marker.name else attr), gt,
                                    bool(marker and marker.omitempty)))
            default = cls.__dict__.get(attr)
            init = [e for e in init if e[0] != attr]
            init.append((attr, default, isinstance(default, (list, dict, GoModel)), _converter(gt)))
        cls.__go_spec__ = StructSpec(cls.__go_name__, fields)
        cls.__go_init__ = tuple(init)
        cls.__go_attrs__ = frozenset(e[0] for e in init)

    def __init__(self, **values: Any) -> None:
        d = self.__dict__
        if values:
            for key in values:
                if key not in self.__go_attrs__:
                    raise ModelError(f"{type(self).__name__}: unknown field {key!r}")
            for attr, default, mutable, conv in self.__go_init__:
                if attr in values:
                    v = values[attr]
                    d[attr] = v if conv is None or v is None else conv(v)
                else:
                    d[attr] = _copy_default(default) if mutable else default
        else:
            for attr, default, mutable, _ in self.__go_init__:
                d[attr] = _copy_default(default) if mutable else default

    @classmethod
    def _field_names(cls) -> frozenset[str]:
        return cls.__go_attrs__

    # -- wire helpers -------------------------------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: bytes | str, *, strict: bool = True, root: str | None = None, unmarshal: bool = False):
        """Decode request bytes like nats-server's ``unmarshalRequest`` (a ``Decoder``), or with ``unmarshal``
        like a plain ``json.Unmarshal``; raises :class:`GoDecodeError` with Go's text.  ``root`` is the struct
        name Go prints in field paths (``""`` where nats-server unmarshals through a pointer to a pointer)."""
        values = decode(data, cls.__go_spec__, root=cls.__go_name__ if root is None else root, strict=strict,
                        unmarshal=unmarshal, go_name=cls.__go_name__)
        return cls(**values)

    def to_json(self) -> str:
        """``json.Marshal`` of the Go struct: nats-server's field order and omitempty choices."""
        return encode(self, type(self).__go_spec__)


def _copy_default(v: Any) -> Any:
    if isinstance(v, GoModel):
        return v.model_copy(deep=True)
    return copy.copy(v)


# --- Go %q ----------------------------------------------------------------------------------------------------------

_SHORT = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _quote_rune(c: str, quote: str) -> str:
    if c == quote or c == "\\":
        return "\\" + c
    if c in _SHORT:
        return _SHORT[c]
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # a raw invalid byte kept by surrogateescape
        return f"\\x{o - 0xDC00:02x}"
    if c.isprintable() or c == " ":
        return c
    if o < 0x80:
        return f"\\x{o:02x}"
    if o < 0x10000:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


def go_quote(s: str) -> str:
    """Go's ``strconv.Quote`` / ``%q`` of a string."""
    return '"' + "".join(_quote_rune(c, '"') for c in s) + '"'


def _quote_char(c: str) -> str:
    """encoding/json's quoteChar: a rune in single quotes."""
    if c == "'":
        return "'\\''"
    if c == '"':
        return "'\"'"
    return "'" + "".join(_quote_rune(ch, "'") for ch in c) + "'"


# --- syntax errors --------------------------------------------------------------------------------------------------

_WS = b" \t\r\n"


class _Syntax(Exception):
    pass


class _EOF(Exception):
    pass


def _rune_at(data: bytes, i: int) -> tuple[str, int]:
    """The character starting at byte i (U+FFFD-free: an invalid byte is shown as \\xNN) and its byte length."""
    b = data[i]
    if b < 0x80:
        return chr(b), 1
    for n in (2, 3, 4):
        try:
            return data[i : i + n].decode("utf-8"), n
        except UnicodeDecodeError:
            continue
    return chr(0xDC00 + b), 1


# Go's scanner refuses nesting deeper than this (encoding/json scanner.go maxNestingDepth).
MAX_NESTING_DEPTH = 10000


def _scan_value(data: bytes, start: int, *, top_level_tail: bool) -> tuple[str, int]:
    """Scan one JSON value from ``start`` like Go's scanner, iteratively (any depth, no Python recursion).

    Returns ``(message, end)``: ``""`` and the byte after the value when it is well formed; otherwise Go's text
    without offset (``"unexpected EOF"`` when input ran out) and the offset Go reports (byte after the bad one).
    With ``top_level_tail`` anything but whitespace after the value is ``after top-level value`` (checkValid).
    """
    n = len(data)

    def err(what: str, i: int) -> _Syntax:
        ch, ln = _rune_at(data, i)
        return _Syntax(f"invalid character {_quote_char(ch)} {what}", i + ln)

    def ws(i: int) -> int:
        while i < n and data[i] in _WS:
            i += 1
        return i

    def string(i: int) -> int:
        while True:
            if i >= n:
                raise _EOF
            c = data[i]
            if c == 0x22:
                return i + 1
            if c == 0x5C:
                if i + 1 >= n:
                    raise _EOF
                e = data[i + 1]
                if e in b'"\\/bfnrt':
                    i += 2
                    continue
                if e == 0x75:  # u
                    hexpart = data[i + 2 : i + 6]
                    if len(hexpart) < 4:
                        raise _EOF
                    if all(h in b"0123456789abcdefABCDEF" for h in hexpart):
                        i += 6
                        continue
                    seq = data[i : i + 6].decode("utf-8", "replace")
                    raise _Syntax(f"invalid escape sequence `{seq}` in string", i + 6)
                ch, ln = _rune_at(data, i + 1)
                raise _Syntax(f"invalid escape sequence `\\{ch}` in string", i + 1 + ln)
            if c < 0x20:
                raise err("in string", i)
            i += 1

    def number(i: int) -> int:
        if data[i] == 0x2D:
            i += 1
            if i >= n:
                raise _EOF
            if not 0x30 <= data[i] <= 0x39:
                raise err("in numeric literal", i)
        if data[i] == 0x30:
            i += 1
        else:
            while i < n and 0x30 <= data[i] <= 0x39:
                i += 1
        if i < n and data[i] == 0x2E:
            i += 1
            if i >= n:
                raise _EOF
            if not 0x30 <= data[i] <= 0x39:
                raise err("in numeric literal", i)
            while i < n and 0x30 <= data[i] <= 0x39:
                i += 1
        if i < n and data[i] in b"eE":
            i += 1
            if i < n and data[i] in b"+-":
                i += 1
            if i >= n:
                raise _EOF
            if not 0x30 <= data[i] <= 0x39:
                raise err("in numeric literal", i)
            while i < n and 0x30 <= data[i] <= 0x39:
                i += 1
        return i

    # stack of open containers: b"{" or b"["; ``expect`` says what the scanner looks for next.
    stack: list[int] = []
    i = start
    try:
        while True:
            # -- a value begins
            i = ws(i)
            if i >= n:
                raise _EOF
            c = data[i]
            if c == 0x7B or c == 0x5B:  # { [
                if len(stack) >= MAX_NESTING_DEPTH:
                    raise _Syntax("exceeded max depth", i + 1)
                stack.append(c)
                i = ws(i + 1)
                if i >= n:
                    raise _EOF
                if c == 0x7B:
                    if data[i] == 0x7D:
                        stack.pop()
                        i += 1
                    else:
                        i = _key(data, i, ws, string, err)
                        continue
                elif data[i] == 0x5D:
                    stack.pop()
                    i += 1
                else:
                    continue
            elif c == 0x22:
                i = string(i + 1)
            elif c == 0x2D or 0x30 <= c <= 0x39:
                i = number(i)
            else:
                for lit in (b"true", b"false", b"null"):
                    if c == lit[0]:
                        for k in range(1, len(lit)):
                            if i + k >= n:
                                raise _EOF
                            if data[i + k] != lit[k]:
                                raise err(f"in literal {lit.decode()} (expecting {_quote_char(chr(lit[k]))})", i + k)
                        i += len(lit)
                        break
                else:
                    raise err("looking for beginning of value", i)
            # -- a value ended: close containers or move to the next element
            while True:
                if not stack:
                    if top_level_tail:
                        j = ws(i)
                        if j < n:
                            raise err("after top-level value", j)
                    return "", i
                i = ws(i)
                if i >= n:
                    raise _EOF
                c = data[i]
                if stack[-1] == 0x7B:
                    if c == 0x2C:
                        i = _key(data, ws(i + 1), ws, string, err)
                        break
                    if c == 0x7D:
                        stack.pop()
                        i += 1
                        continue
                    raise err("after object key:value pair", i)
                if c == 0x2C:
                    i += 1
                    break
                if c == 0x5D:
                    stack.pop()
                    i += 1
                    continue
                raise err("after array element", i)
    except _EOF:
        return "unexpected EOF", n
    except _Syntax as e:
        return e.args[0], e.args[1]


def _key(data: bytes, i: int, ws, string, err) -> int:
    """An object key and its colon; returns the index where the value starts."""
    if i >= len(data):
        raise _EOF
    if data[i] != 0x22:
        raise err("looking for beginning of object key string", i)
    i = ws(string(i + 1))
    if i >= len(data):
        raise _EOF
    if data[i] != 0x3A:
        raise err("after object key", i)
    return i + 1


def go_syntax_error(data: bytes, start: int = 0) -> tuple[str, int]:
    """Scan one JSON value from ``start`` like Go's ``Decoder`` (nats-server's ``unmarshalRequest``).

    Returns ``(message, end)``: message is ``""`` if the value is well formed (``end`` = byte after it), else the
    text nats-server sends (``"... at offset N"``, or ``"unexpected EOF"``).
    """
    msg, end = _scan_value(data, start, top_level_tail=False)
    if msg and msg != "unexpected EOF":
        return f"{msg} at offset {end}", len(data)
    return msg, end


def go_check_valid(data: bytes) -> str:
    """``json.Unmarshal``'s checkValid over the whole input: ``""`` or Go's error text (no offset, EOF is
    ``unexpected end of JSON input``, trailing data is ``after top-level value``)."""
    msg, _ = _scan_value(data, 0, top_level_tail=True)
    return "unexpected end of JSON input" if msg == "unexpected EOF" else msg


# --- decoding -------------------------------------------------------------------------------------------------------

class _Num(str):
    """A JSON number kept as its literal text (Go reports it verbatim: ``number 1e3``)."""


class _Obj(list):
    """A JSON object as its (key, value) pairs in document order."""


class _Bad(Exception):
    pass


def _bad_constant(name: str) -> Any:
    raise _Bad(name)


_DECODER = json.JSONDecoder(parse_float=_Num, parse_int=_Num, parse_constant=_bad_constant, object_pairs_hook=_Obj)
_WS_RE = re.compile(r"[ \t\r\n]*")
_SURR = re.compile("[\ud800-\udfff]")


def _kind(v: Any) -> str:
    if isinstance(v, _Num):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, _Obj):
        return "object"
    if isinstance(v, list):
        return "array"
    return "null"


def _raw_scalar(v: Any) -> str:
    if isinstance(v, _Num):
        return str(v)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v, ensure_ascii=False)


def _raw(v: Any) -> str:
    """The JSON text of a decoded value (see the module docstring for the string approximation).

    Iterative: a custom UnmarshalJSON may be handed a value nested thousands of levels deep (Go allows 10000).
    """
    if not isinstance(v, list):
        return _raw_scalar(v)
    out: list[str] = []
    # stack of (container, next index); objects are _Obj lists of (key, value) pairs
    stack: list[list] = [[v, 0]]
    out.append("{" if isinstance(v, _Obj) else "[")
    while stack:
        top = stack[-1]
        cont, idx = top
        if idx >= len(cont):
            out.append("}" if isinstance(cont, _Obj) else "]")
            stack.pop()
            continue
        if idx:
            out.append(",")
        top[1] = idx + 1
        item = cont[idx]
        if isinstance(cont, _Obj):
            k, item = item
            out.append(json.dumps(k, ensure_ascii=False) + ":")
        if isinstance(item, list):
            out.append("{" if isinstance(item, _Obj) else "[")
            stack.append([item, 0])
        else:
            out.append(_raw_scalar(item))
    return "".join(out)


def _clean(s: str) -> str:
    # Go replaces invalid UTF-8 bytes and lone surrogate escapes with U+FFFD.
    if s.isascii():
        return s
    return _SURR.sub("\ufffd", s)


class _Ctx:
    __slots__ = ("root", "strict")

    def __init__(self, root: str, strict: bool) -> None:
        self.root = root
        self.strict = strict


def _type_err(v: Any, t: GoType, path: str, in_field: bool, with_num: bool = False) -> GoDecodeError:
    what = _kind(v)
    if with_num:
        what += " " + str(v)
    if not path:
        return GoDecodeError(f"json: cannot unmarshal {what} into Go value of type {t.name}")
    where = "Go struct field " if in_field else ""
    return GoDecodeError(f"json: cannot unmarshal {what} into {where}{path} of type {t.name}")


def _dec(v: Any, t: GoType, cur: Any, path: str, in_field: bool, ctx: _Ctx) -> Any:
    k = t.kind
    if k == "enum":
        return t.parse(_raw(v))  # custom UnmarshalJSON sees every value, null included
    if v is None:
        if k in ("ptr", "slice", "map"):
            return None
        return cur
    if k == "string":
        if isinstance(v, str) and not isinstance(v, _Num):
            return _clean(v)
        raise _type_err(v, t, path, in_field)
    if k == "bool":
        if isinstance(v, bool):
            return v
        raise _type_err(v, t, path, in_field)
    if k == "int":
        if isinstance(v, _Num):
            if "." in v or "e" in v or "E" in v or (t.lo == 0 and v[0] == "-"):  # ParseUint refuses "-0"
                raise _type_err(v, t, path, in_field, with_num=True)
            iv = int(v)
            if not t.lo <= iv <= t.hi:
                raise _type_err(v, t, path, in_field, with_num=True)
            return iv
        raise _type_err(v, t, path, in_field)
    if k == "time":
        if isinstance(v, str) and not isinstance(v, _Num):
            try:
                return parse_time(v)
            except TimeParseError as e:
                raise GoDecodeError(str(e)) from None
        raise _type_err(v, t, path, in_field)
    if k == "ptr":
        return _dec(v, t.elem, cur, path, in_field, ctx)
    if k == "struct":
        if not isinstance(v, _Obj):
            raise _type_err(v, t, path, in_field)
        return _dec_struct(v, t.struct_spec(), cur if isinstance(cur, dict) else {}, path, ctx)
    if k == "slice":
        if not isinstance(v, list) or isinstance(v, _Obj):
            raise _type_err(v, t, path, in_field)
        out = []
        for i, item in enumerate(v):
            out.append(_dec(item, t.elem, _zero_py(t.elem), f"{path}.{i}", False, ctx))
        return out
    if k == "map":
        if not isinstance(v, _Obj):
            raise _type_err(v, t, path, in_field)
        out = dict(cur) if isinstance(cur, dict) else {}
        for key, item in v:
            key = _clean(key)
            out[key] = _dec(item, t.elem, out.get(key, _zero_py(t.elem)), f"{path}.{key}", True, ctx)
        return out
    raise AssertionError(k)


def _zero_py(t: GoType) -> Any:
    return {"string": "", "bool": False, "int": 0}.get(t.kind)


def _dec_struct(pairs: _Obj, spec: StructSpec, cur: dict, path: str, ctx: _Ctx) -> dict:
    for key, v in pairs:
        f = spec.lookup(key)
        if f is None:
            if ctx.strict:
                raise GoDecodeError(f"json: unknown field {go_quote(_clean(key))}")
            continue
        # Go names the field by the key as written (errorContext.FieldStack holds the document key).
        sub = f"{path}.{_clean(key)}" if path else f"{ctx.root}.{_clean(key)}"
        val = _dec(v, f.type, cur.get(f.attr), sub, True, ctx)
        if val is None:
            cur.pop(f.attr, None)
        else:
            cur[f.attr] = val
    return cur


def decode_into(data: bytes | str, root_type: GoType, *, root: str, strict: bool = True,
                unmarshal: bool = False) -> Any:
    """Decode every JSON value in ``data`` into one Go value of ``root_type`` (Go ``Decoder`` loop), or with
    ``unmarshal`` exactly one value as ``json.Unmarshal`` does (whole input checked first, no offsets in errors).

    Go nests up to 10000 levels; Python's C scanner stops near 1000.  A value deeper than that is checked by the
    iterative scanner first (Go's own depth and syntax errors) and decoded again with room on the Python stack.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    try:
        return _decode_values(data, root_type, root, strict, unmarshal, deep=False)
    except RecursionError:
        pass
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + 3 * MAX_NESTING_DEPTH)
    try:
        return _decode_values(data, root_type, root, strict, unmarshal, deep=True)
    finally:
        sys.setrecursionlimit(old)


def _decode_values(data: bytes, root_type: GoType, root: str, strict: bool, unmarshal: bool, deep: bool) -> Any:
    text = data.decode("utf-8", "surrogateescape")
    ctx = _Ctx(root, strict)
    cur: Any = {} if root_type.kind == "struct" else _zero_py(root_type)
    if unmarshal:
        msg = go_check_valid(data) if deep else ""
        if not msg:
            try:
                v, end = _DECODER.raw_decode(text, _WS_RE.match(text, 0).end())
                if _WS_RE.match(text, end).end() != len(text):
                    raise ValueError("trailing data")
            except (ValueError, _Bad):
                msg = go_check_valid(data) or "unexpected end of JSON input"
        if msg:
            raise GoDecodeError(msg)
        return _dec_root(v, root_type, cur, ctx)
    i = _WS_RE.match(text, 0).end()
    while i < len(text):
        if deep:  # Go's depth limit and syntax errors before Python's scanner sees the value
            msg, _ = go_syntax_error(data, len(text[:i].encode("utf-8", "surrogateescape")))
            if msg:
                raise GoDecodeError(msg)
        try:
            v, end = _DECODER.raw_decode(text, i)
        except (ValueError, _Bad):
            msg, _ = go_syntax_error(data, len(text[:i].encode("utf-8", "surrogateescape")))
            raise GoDecodeError(msg or "unexpected EOF") from None
        if isinstance(v, _Num):
            # Python stops a number where Go's scanner goes on ("1." is unexpected EOF in Go, 1 in Python)
            msg, _ = go_syntax_error(data, len(text[:i].encode("utf-8", "surrogateescape")))
            if msg:
                raise GoDecodeError(msg)
        cur = _dec_root(v, root_type, cur, ctx)
        i = _WS_RE.match(text, end).end()
    return cur


def _dec_root(v: Any, root_type: GoType, cur: Any, ctx: _Ctx) -> Any:
    if root_type.kind == "struct":
        if isinstance(v, _Obj):
            return _dec_struct(v, root_type.struct_spec(), cur, "", ctx)
        if v is not None:
            raise GoDecodeError(f"json: cannot unmarshal {_kind(v)} into Go value of type {root_type.name}")
        return cur
    return _dec(v, root_type, cur, "", False, ctx)


def decode(data: bytes | str, spec: StructSpec, *, root: str, strict: bool = True, unmarshal: bool = False,
           go_name: str | None = None) -> dict:
    """Decode request bytes into a dict of the struct's present fields (attribute names)."""
    return decode_into(data, GoType("struct", "server." + (go_name or root), spec=spec), root=root, strict=strict,
                       unmarshal=unmarshal)


def loads(data: bytes | str) -> Any:
    """``json.loads`` for client input (CONNECT, ...): values nested as deep as Go's decoder accepts (10000 levels)
    decode, anything deeper or malformed is ``ValueError`` with Go's text, never ``RecursionError``.  Bytes are read
    as UTF-8 with invalid sequences replaced by U+FFFD, as Go's decoder does inside strings (outside them they are
    a syntax error either way)."""
    if not isinstance(data, str):
        data = bytes(data).decode("utf-8", "replace")
    try:
        return json.loads(data)
    except RecursionError:
        pass
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
    msg = go_check_valid(raw)
    if msg:
        raise ValueError(msg)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + 3 * MAX_NESTING_DEPTH)
    try:
        return json.loads(data)
    finally:
        sys.setrecursionlimit(old)


# --- encoding -------------------------------------------------------------------------------------------------------

def json_dumps_go(value: Any) -> str:
    """A JSON string/number/literal (or a list of strings) written like Go (HTML-safe escapes, no spaces)."""
    s = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, (str, list)):  # a list of strings only: its JSON punctuation holds none of these
        s = html_safe(s)
        if not s.isascii():
            s = _SURR.sub("\ufffd", s)
    return s


def _is_empty(v: Any, t: GoType) -> bool:
    k = t.kind
    if k == "string":
        return v == "" or v is None
    if k == "bool":
        return not v
    if k == "int":
        return not v
    if k == "enum":
        return v is None or v == t.zero
    if k in ("slice", "map"):
        return not v
    if k == "ptr":
        return v is None
    return False  # struct and time.Time values are never "empty" for omitempty


def _enc(v: Any, t: GoType) -> str:
    k = t.kind
    if k == "string":
        return json_dumps_go(v or "")
    if k == "bool":
        return "true" if v else "false"
    if k == "int":
        return str(int(v or 0))
    if k == "enum":
        return json_dumps_go(t.zero if v is None else v)
    if k == "time":
        return '"' + format_time(v if v is not None else GoTime.zero()) + '"'
    if k == "ptr":
        if v is None:
            return "null"
        return _enc(v, t.elem)
    if k == "struct":
        spec = t.struct_spec()
        return encode(v, spec)
    if k == "slice":
        if v is None:
            return "null"
        if t.elem.kind == "string":  # one json.dumps for the whole list (stream subjects: thousands of them)
            return json_dumps_go([x or "" for x in v])
        return "[" + ",".join(_enc(x, t.elem) for x in v) + "]"
    if k == "map":
        if v is None:
            return "null"
        return "{" + ",".join(json_dumps_go(key) + ":" + _enc(v[key], t.elem) for key in sorted(v)) + "}"
    raise AssertionError(k)


def encode(obj: Any, spec: StructSpec) -> str:
    """``json.Marshal`` of a struct given as a GoModel instance or a dict of attribute values."""
    get = obj.get if isinstance(obj, dict) else (lambda a, _d=None: getattr(obj, a, _d))
    parts = []
    for f in spec.fields:
        v = get(f.attr)
        if f.omitempty and _is_empty(v, f.type):
            continue
        parts.append(json_dumps_go(f.json) + ":" + _enc(v, f.type))
    return "{" + ",".join(parts) + "}"
