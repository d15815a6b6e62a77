"""A plain record: the part of pydantic's ``BaseModel`` API Skiff kept when it stopped using pydantic.

Two kinds of record share it: the JetStream API models (``protocol.jsapi.gojson.GoModel``, fields described by Go
types and decoded with Go's rules) and the server's options (``server.options``, fields checked from their
annotations).  Each builds its instances its own way; what they have in common is here:

* the values live in the instance ``__dict__``, one entry per field, in field order;
* ``model_validate(dict)``, ``model_copy(update=, deep=)`` (``update`` set as given, not converted, as pydantic's),
  ``model_dump(exclude=)`` (nested records as dicts), equality by type and fields, unhashable (mutable), and a
  ``repr`` that lists the fields.

A subclass says which names are fields (``_field_names``) and which exception a programming error raises
(``_error``: a wrong field name or a value that is not a dict is the server's own mistake, never a client's).
"""
from __future__ import annotations

import copy
from typing import Any, ClassVar, Collection


class Record:
    _error: ClassVar[type[Exception]] = TypeError
    _repr_skip: ClassVar[frozenset[str]] = frozenset()  # fields too long or too private to print

    @classmethod
    def _field_names(cls) -> Collection[str]:
        raise NotImplementedError

    @classmethod
    def model_validate(cls, data: Any) -> Any:
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise cls._error(f"{cls.__name__}: expected a dict, got {type(data).__name__}")
        return cls(**data)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy (nested values shared unless ``deep``) with ``update`` set as given."""
        cls = type(self)
        new = object.__new__(cls)
        new.__dict__.update(copy.deepcopy(self.__dict__) if deep else self.__dict__)
        if update:
            fields = cls._field_names()
            for key in update:
                if key not in fields:
                    raise cls._error(f"{cls.__name__}: unknown field {key!r}")
            new.__dict__.update(update)
        return new

    def model_dump(self, *, exclude: Collection[str] = frozenset()) -> dict[str, Any]:
        """The fields as plain values (nested records as dicts), in field order."""
        fields = self._field_names()
        return {attr: _plain(v) for attr, v in self.__dict__.items() if attr in fields and attr not in exclude}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic's models

    def _repr_args(self) -> list[str]:
        skip = self._repr_skip
        return [f"{k}={v!r}" for k, v in self.__dict__.items() if k not in skip]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self._repr_args())})"


def _plain(v: Any) -> Any:
    if isinstance(v, Record):
        return v.model_dump()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


class Fields:
    """What ``@dataclass`` gave a plain record class, for the classes defined while a server starts: equality by
    class and fields (as a dataclass's, fields compared as a tuple), no hash (mutable), and a ``repr`` that lists the
    fields.  The subclass names its fields in ``_fields`` (in order; also its ``__slots__`` where it has slots) and
    writes its own ``__init__``, as fast as the generated one: ``dataclass()`` generates and execs the code of each
    class at import, ~2.4 M instructions a class (issue #13, start-up)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = self._fields
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._fields)})"


# typing.NamedTuple without its type checks of the annotations: with ``from __future__ import annotations`` each is a
# string that typing compiles (ForwardRef), ~1 M instructions a class, ~20 M of every server start (issue #13).
# The class made is the same: collections.namedtuple with the annotated fields (defaults from the class body), the
# annotations as written, and the body's methods, properties and docstring (typing.NamedTupleMeta, less Generic).
_NT_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                            "_make", "_replace", "_asdict", "_source"})
_NT_SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})


class _NamedTupleMeta(type):
    def __new__(mcls, typename: str, bases: tuple, ns: dict) -> type:
        import collections

        if bases != (_NamedTupleBase,):
            raise TypeError("can only inherit from a NamedTuple type")
        names = ns.get("__annotations__", {})
        defaults: list[str] = []
        for name in names:
            if name in ns:
                defaults.append(name)
            elif defaults:
                raise TypeError(f"Non-default namedtuple field {name} cannot follow default field"
                                f"{'s' if len(defaults) > 1 else ''} {', '.join(defaults)}")
        cls = collections.namedtuple(typename, list(names), defaults=[ns[n] for n in defaults],
                                     module=ns["__module__"])
        cls.__annotations__ = dict(names)
        for key, value in ns.items():
            if key in _NT_PROHIBITED:
                raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
            if key not in _NT_SPECIAL and key not in cls._fields:
                setattr(cls, key, value)
        return cls


_NamedTupleBase = type.__new__(_NamedTupleMeta, "NamedTuple", (), {})


def NamedTuple(typename: str, fields: Any = None, /, **kw: Any) -> Any:  # noqa: N802  (typing's name)
    """``class X(NamedTuple): ...`` as with typing's (only the class form is used)."""
    raise TypeError("use the class form: class X(NamedTuple)")


NamedTuple.__mro_entries__ = lambda bases: (_NamedTupleBase,)  # type: ignore[attr-defined]
