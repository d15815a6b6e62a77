"""nats-server's configuration file syntax, parsed in Python.

``parse(text)`` / ``parse_file(path)`` give plain Python values; ``parse_tokens`` / ``parse_file_tokens`` give
:class:`Token` trees that remember file, line and column for error messages.  Every problem is a
:class:`ConfigError` whose text starts with ``file:line:col``.  See ``parser.py`` for the grammar.
"""
from skiff.server.conf.errors import ConfigError

# The parser is loaded by the first configuration, not by every start: a server started with flags only never needs
# it.  ``from skiff.server.conf import parse`` works as before (PEP 562).
_LAZY = {"parse": "parser", "parse_file": "parser", "parse_file_tokens": "parser", "parse_tokens": "parser",
         "Token": "values", "format_duration": "values", "parse_duration": "values", "plain": "values"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "Token",
    "format_duration",
    "parse",
    "parse_duration",
    "parse_file",
    "parse_file_tokens",
    "parse_tokens",
    "plain",
]
