"""Logging configured from nats-server's options; the logger and its formats are skiff/log.py's.

Plain lines look like nats-server's (``logger/log.go``)::

    [pid] 2026/11/21 20:27:47.154919 [INF] Listening for client connections on 127.0.0.1:4222

with the labels ``[INF] [DBG] [TRC] [WRN] [ERR] [FTL]``.  ``-D`` enables ``[DBG]``, ``-V`` enables ``[TRC]`` (and
not ``[DBG]``: the two flags are independent, as in nats-server), ``-T=false`` drops the time stamp,
``--logtime_utc`` prints it in UTC, ``-l FILE`` appends to a file (``--log_size_limit`` rotates it as nats-server
does: the full file is renamed ``FILE.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn``).  ``--log_json`` (Skiff's own) writes one JSON
object per line instead, with the structured fields kept as keys.
"""
from __future__ import annotations

from skiff import log as _log
from skiff.log import get_logger  # noqa: F401  (the server's modules take their logger from here)

# Whether -V is on; read by the connection code before it builds a trace line (cheap, no call).
TRACE = False
MAX_TRACED_MSG_LEN = 0

_options: dict = {}


def configure(debug: bool = False, trace: bool = False, logtime: bool = True, log_file: str | None = None,
              json_logs: bool = False, logtime_utc: bool = False, log_size_limit: int = 0,
              max_traced_msg_len: int = 0) -> None:
    """(Re)configure logging.  A log file already open is closed once the new one is in place (SIGHUP reload,
    SIGUSR1 reopen).  Raises ``OSError`` when the file cannot be opened."""
    global TRACE, MAX_TRACED_MSG_LEN
    _log.configure(debug=debug, trace=trace, logtime=logtime, log_file=log_file, json_logs=json_logs,
                   logtime_utc=logtime_utc, log_size_limit=log_size_limit)
    _options.update(debug=debug, trace=trace, logtime=logtime, log_file=log_file or "", json_logs=json_logs,
                    logtime_utc=logtime_utc, log_size_limit=log_size_limit)
    TRACE = bool(trace)
    MAX_TRACED_MSG_LEN = max_traced_msg_len if max_traced_msg_len > 0 else 0


def reopen() -> None:
    """SIGUSR1 (``--signal reopen``): reopen the log file, for logrotate (nats-server ReOpenLogFile)."""
    if not _options.get("log_file"):
        get_logger("skiff").info("File log re-open ignored, not a file logger")
        return
    configure(**_options, max_traced_msg_len=MAX_TRACED_MSG_LEN)
    get_logger("skiff").info("File log re-opened")


_trace_log = get_logger("skiff.trace")


def trace(line: str) -> None:
    """A ``[TRC]`` line (callers check :data:`TRACE` first, so a server without -V pays nothing)."""
    _trace_log.debug(line, _trace=True)


def fatal(msg: str) -> None:
    """An ``[FTL]`` line; the caller then exits with status 1, as nats-server's Fatalf does."""
    get_logger("skiff").critical(msg)
