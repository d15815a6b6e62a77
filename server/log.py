"""Logging through structlog, configured from nats-server's options, in nats-server's line format.

Plain lines look like nats-server's (``logger/log.go``)::

    [pid] 2026/11/21 20:27:47.154919 [INF] Listening for client connections on 127.0.0.1:4222

with the labels ``[INF] [DBG] [TRC] [WRN] [ERR] [FTL]``.  ``-D`` enables ``[DBG]``, ``-V`` enables ``[TRC]`` (and
not ``[DBG]``: the two flags are independent, as in nats-server), ``-T=false`` drops the time stamp,
``--logtime_utc`` prints it in UTC, ``-l FILE`` appends to a file (``--log_size_limit`` rotates it as nats-server
does: the full file is renamed ``FILE.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn``).  ``--log_json`` (Skiff's own) writes one JSON
object per line instead, with the structured fields kept as keys.

Context passed as keyword arguments is rendered the way nats-server writes it, never as ``key=value``: ``cid``
(with ``addr``) becomes the ``127.0.0.1:53211 - cid:5 - `` prefix of client lines, other fields follow the message
as `` - stream: ORDERS, error: ...``.

A log line that cannot be written (a closed pipe, a full disk) is dropped: logging must never stop the server, and
in particular must not keep it from stopping on SIGTERM (nats-server, a Go program, would die of SIGPIPE instead).
"""
from __future__ import annotations

import datetime
import logging
import os
import sys
import threading
import time

import structlog

_LEVELS = {"debug": "DBG", "info": "INF", "warning": "WRN", "error": "ERR", "critical": "FTL", "exception": "ERR",
           "trace": "TRC", "fatal": "FTL"}

# Whether -V is on; read by the connection code before it builds a trace line (cheap, no call).
TRACE = False
MAX_TRACED_MSG_LEN = 0


class _Sink:
    """Where log lines go: stderr or an appended file, with nats-server's size-limit rotation."""

    def __init__(self, path: str | None = None, size_limit: int = 0) -> None:
        self.path = path or ""
        self.limit = size_limit if size_limit > 0 else 0
        self.lock = threading.Lock()
        self.broken = False
        if self.path:
            self.file = open(self.path, "a", buffering=1, encoding="utf-8", errors="replace")
            self.size = self.file.tell()
        else:
            self.file = sys.stderr
            self.size = 0

    def msg(self, line: str) -> None:
        if self.broken:
            return
        with self.lock:
            try:
                self.file.write(line + "\n")
                self.file.flush()
            except (OSError, ValueError):
                # A closed pipe or file: drop this and every later line rather than fail the caller.
                self.broken = True
                if self.file is sys.stderr:
                    _silence_stderr()
                return
            if self.limit:
                self.size += len(line) + 1
                if self.size > self.limit:
                    self._rotate()

    def _rotate(self) -> None:
        # nats-server logger/log.go fileLogger.Write: rename to <file>.<date and time with nanoseconds>, reopen,
        # and say so as the first line of the new file.
        now = time.time_ns()
        t = time.localtime(now // 1_000_000_000)
        bak = f"{self.path}." + time.strftime("%Y.%m.%d.%H.%M.%S", t) + ".%09d" % (now % 1_000_000_000)
        try:
            self.file.close()
            os.rename(self.path, bak)
            self.file = open(self.path, "a", buffering=1, encoding="utf-8", errors="replace")
        except OSError:
            self.broken = True
            return
        line = _render_line("info", f'Rotated log, backup saved as "{bak}"', {})
        self.file.write(line + "\n")
        self.size = len(line) + 1

    def close(self) -> None:
        if self.file is not sys.stderr:
            try:
                self.file.close()
            except OSError:
                pass

    # structlog's logger protocol: every method writes the rendered line.
    info = debug = warning = error = critical = exception = fatal = log = msg

    def __call__(self, *args):  # structlog's LoggerFactory protocol
        return self


def _silence_stderr() -> None:
    """After EPIPE on stderr: point fd 2 at /dev/null so that nothing else (warnings, the interpreter's exit flush)
    trips on it again."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 2)
        os.close(fd)
    except OSError:
        pass


_state = {"sink": None, "logtime": True, "utc": False, "json": False, "pid": os.getpid()}


def _stamp() -> str:
    if not _state["logtime"]:
        return ""
    t = time.time()
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc) if _state["utc"] else \
        datetime.datetime.fromtimestamp(t)
    return d.strftime("%Y/%m/%d %H:%M:%S.%f ")


def _render_line(method: str, msg: str, extra: dict) -> str:
    level = _LEVELS.get(method, method[:3].upper())
    cid = extra.pop("cid", None)
    addr = extra.pop("addr", None)
    if cid is not None:
        msg = (f"{addr} - " if addr else "") + f"cid:{cid} - {msg}"
    if extra:
        msg += " - " + ", ".join(f"{k}: {v}" for k, v in extra.items())
    return f"[{_state['pid']}] {_stamp()}[{level}] {msg}"


def _nats_console(_, method: str, event: dict) -> str:
    msg = str(event.pop("event", ""))
    event.pop("logger", None)
    if event.pop("_trace", False):
        method = "trace"
    exc = event.pop("exc_info", None)
    line = _render_line(method, msg, event)
    if exc:
        import traceback

        if exc is True:
            exc = sys.exc_info()
        if isinstance(exc, BaseException):
            exc = (type(exc), exc, exc.__traceback__)
        if exc and exc[0] is not None:
            line += "\n" + "".join(traceback.format_exception(*exc)).rstrip()
    return line


def _json_level(_, method: str, event: dict) -> dict:
    if event.pop("_trace", False):
        method = "trace"
    event["level"] = {"critical": "fatal", "exception": "error"}.get(method, method)
    return event


def configure(debug: bool = False, trace: bool = False, logtime: bool = True, log_file: str | None = None,
              json_logs: bool = False, logtime_utc: bool = False, log_size_limit: int = 0,
              max_traced_msg_len: int = 0) -> None:
    """(Re)configure logging.  A log file already open is closed once the new one is in place (SIGHUP reload,
    SIGUSR1 reopen).  Raises ``OSError`` when the file cannot be opened."""
    global TRACE, MAX_TRACED_MSG_LEN
    old = _state["sink"]
    sink = _Sink(log_file, log_size_limit)
    _state.update(sink=sink, logtime=logtime, utc=logtime_utc, json=json_logs, pid=os.getpid(),
                  debug=debug, trace=trace, log_file=log_file or "", log_size_limit=log_size_limit)
    TRACE = bool(trace)
    MAX_TRACED_MSG_LEN = max_traced_msg_len if max_traced_msg_len > 0 else 0
    if json_logs:
        processors: list = [_json_level]
        if logtime:
            processors.append(structlog.processors.TimeStamper(fmt="iso", utc=True))
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors = [_nats_console]
    # Trace lines are logged at debug level with _trace=True (see trace()), so the level filter lets debug calls
    # through when either flag is on and _drop_debug removes plain debug lines when only -V is on.
    level = logging.DEBUG if (debug or trace) else logging.INFO
    if trace and not debug:
        processors.insert(0, _drop_debug)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=sink,
        cache_logger_on_first_use=False,
    )
    if old is not None and old is not sink:
        old.close()


def _drop_debug(_, method: str, event: dict) -> dict:
    if method == "debug" and not event.get("_trace"):
        raise structlog.DropEvent
    return event


def reopen() -> None:
    """SIGUSR1 (``--signal reopen``): reopen the log file, for logrotate (nats-server ReOpenLogFile)."""
    if not _state.get("log_file"):
        get_logger("skiff").info("File log re-open ignored, not a file logger")
        return
    configure(debug=_state["debug"], trace=_state["trace"], logtime=_state["logtime"], log_file=_state["log_file"],
              json_logs=_state["json"], logtime_utc=_state["utc"], log_size_limit=_state["log_size_limit"],
              max_traced_msg_len=MAX_TRACED_MSG_LEN)
    get_logger("skiff").info("File log re-opened")


_trace_log = structlog.get_logger("skiff.trace")


def trace(line: str) -> None:
    """A ``[TRC]`` line (callers check :data:`TRACE` first, so a server without -V pays nothing)."""
    _trace_log.debug(line, _trace=True)


def fatal(msg: str) -> None:
    """An ``[FTL]`` line; the caller then exits with status 1, as nats-server's Fatalf does."""
    get_logger("skiff").critical(msg)


def get_logger(name: str):
    return structlog.get_logger(name)
