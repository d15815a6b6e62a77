"""nats-server's configuration file syntax, parsed in Python.

``parse(text)`` / ``parse_file(path)`` give plain Python values; ``parse_tokens`` / ``parse_file_tokens`` give
:class:`Token` trees that remember file, line and column for error messages.  Every problem is a
:class:`ConfigError` whose text starts with ``file:line:col``.  See ``parser.py`` for the grammar.
"""
from skiff.server.conf.errors import ConfigError
from skiff.server.conf.parser import parse, parse_file, parse_file_tokens, parse_tokens
from skiff.server.conf.values import Token, format_duration, parse_duration, plain

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
