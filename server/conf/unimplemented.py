"""The entry type of the tables of what Skiff does not implement (server/conf/support.py), and the command-line
flags' table.

A start from flags alone (no configuration file) checks its flags against :data:`FLAGS` and needs nothing else of
the configuration machinery: this module is what server/cli.py imports, support.py (the configuration file's
tables) re-exports it (issue #13, start-up: support.py is ~4 M instructions of every start).
"""
from __future__ import annotations

from typing import Any, Callable

from skiff.protocol.record import NamedTuple  # typing's, without its annotation checks (start-up)

REFUSE = "refuse"
WARN = "warn"


class Unimplemented(NamedTuple):  # not a frozen dataclass: ~0.5 ms less of every start
    level: str  # REFUSE or WARN
    what: str  # what nats-server does with the key, that Skiff does not
    harmless: Callable[[Any], bool] | None = None  # values equal to Skiff's own behaviour: accepted silently

    def accepts(self, value: Any) -> bool:
        return self.harmless is not None and self.harmless(value)


def _empty(v: Any) -> bool:
    return v in ({}, [], "", None)


def _false(v: Any) -> bool:
    return v is False


def _zero(v: Any) -> bool:
    return v == 0 and not isinstance(v, bool)


def _all_false(v: Any) -> bool:
    return isinstance(v, dict) and all(x is False for x in v.values())


def _entries(*rows: tuple[tuple[str, ...], Unimplemented]) -> dict[str, Unimplemented]:
    out: dict[str, Unimplemented] = {}
    for names, entry in rows:
        for n in names:
            out[n] = entry
    return out


_TRACE_VERBOSE = ("tracing the server's internal system client too (Skiff traces client connections, as with "
                  "trace)")

#: command-line flags (server/opts.go ConfigureOptions) Skiff does not implement: flag -> entry.
#: ``--cluster_advertise``, ``--no_advertise`` and ``--connect_retries`` are not here: without ``--cluster`` they
#: have no effect in nats-server either (checked with the 2.15.1 binary: nothing in varz, INFO or the log), and
#: ``--cluster`` itself is refused.  ``--routes`` without ``--cluster`` is nats-server's own error (cli.py).
FLAGS = _entries(
    (("profile",), Unimplemented(REFUSE, "the Go profiling (pprof) port", _zero)),
    (("syslog",), Unimplemented(REFUSE, "logging to syslog (the log would go to stderr)", _false)),
    (("remote_syslog",), Unimplemented(REFUSE, "logging to a remote syslog (the log would go to stderr)", _empty)),
    (("VV", "DVV"), Unimplemented(WARN, _TRACE_VERBOSE, _false)),
)


def refusal(key: str, entry: Unimplemented) -> str:
    """The start-up error: the key, and that Skiff refuses rather than ignores it."""
    return f'"{key}" is not implemented by Skiff: {entry.what}'


def warning(key: str, entry: Unimplemented) -> str:
    """The start-up warning for a key no client can see the effect of."""
    return f'"{key}" is not implemented by Skiff and is ignored: {entry.what}'
