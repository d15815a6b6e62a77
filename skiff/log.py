"""The one logger every layer writes to, and its line formats: ``get_logger(name).info("event", key=value)``.

Theory of operation: a log call is an *event*, the message plus its keyword fields.  It is dropped at once when its
level is off, else rendered into one line, nats-server's (``logger/log.go``)::

    [pid] 2026/11/21 20:27:47.154919 [INF] Listening for client connections on 127.0.0.1:4222

or, with ``json``, one JSON object, and written to the sink: stderr or an appended file with nats-server's size-limit
rotation.  ``server/log.py`` sets the options from nats-server's flags (:func:`configure`); until then (a server
embedded in a test, a store used on its own) the defaults are in force: the line format on stderr, ``[INF]`` and up.
storage/ logs through here too, which is why this sits at the package root: storage never imports server/
(DESIGN.md).

Context passed as keyword arguments is rendered the way nats-server writes it, never as ``key=value``: ``cid``
(with ``addr``) becomes the ``127.0.0.1:53211 - cid:5 - `` prefix of client lines, other fields follow the message
as `` - stream: ORDERS, error: ...``.  In JSON the fields stay keys, ``event`` after them, then ``level``,
``timestamp`` (ISO 8601, UTC) and ``exception``.

This replaces structlog, which cost every start ~13 ms and ~2 MiB for the one call shape Skiff uses.
The calls keep structlog's meaning and the lines are the bytes its pipeline wrote (tests/server/test_log_format.py
compares them): ``warn`` is ``warning``, ``fatal`` is ``critical``, ``msg`` is ``info``, ``exception`` is ``error``
with ``exc_info=True``, positional arguments are ``%``-interpolated into the message.

A log line that cannot be written (a closed pipe, a full disk) is dropped: logging must never stop the server, and
in particular must not keep it from stopping on SIGTERM (nats-server, a Go program, would die of SIGPIPE instead).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager

_LEVELS = {"debug": "DBG", "info": "INF", "warning": "WRN", "error": "ERR", "critical": "FTL", "trace": "TRC"}
_JSON_LEVELS = {"critical": "fatal"}


class _Sink:
    """Where log lines go: stderr or an appended file, with nats-server's size-limit rotation.

    stderr is looked up at each line, not kept: a server embedded in a test writes to the stderr of the test that
    runs (pytest swaps ``sys.stderr`` per test and closes the old one)."""

    def __init__(self, path: str | None = None, size_limit: int = 0) -> None:
        self.path = path or ""
        self.limit = size_limit if size_limit > 0 else 0
        self.lock = threading.Lock()
        self.broken = False
        if self.path:
            self.file = open(self.path, "a", buffering=1, encoding="utf-8", errors="replace")
            self.size = self.file.tell()
        else:
            self.file = None
            self.size = 0

    def msg(self, line: str) -> None:
        if self.broken:
            return
        with self.lock:
            f = self.file or sys.stderr
            try:
                f.write(line + "\n")
                f.flush()
            except (OSError, ValueError) as e:
                # A closed pipe or file: drop this and every later line rather than fail the caller.
                self.broken = True
                if self.file is None and isinstance(e, OSError):
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
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass


def _silence_stderr() -> None:
    """After EPIPE on stderr: point fd 2 at /dev/null so that nothing else (warnings, the interpreter's exit flush)
    trips on it again."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 2)
        os.close(fd)
    except OSError:
        pass


# The options in force (configure); "sink" is None until the first line or configure.
_state = {"sink": None, "logtime": True, "utc": False, "json": False, "pid": os.getpid(), "debug": False,
          "trace": False, "capture": None}


def configure(debug: bool = False, trace: bool = False, logtime: bool = True, log_file: str | None = None,
              json_logs: bool = False, logtime_utc: bool = False, log_size_limit: int = 0) -> None:
    """(Re)configure: ``debug`` lets ``[DBG]`` lines through and ``trace`` ``[TRC]`` ones (independent, as in
    nats-server), ``logtime=False`` drops the time stamp, ``logtime_utc`` prints it in UTC.  A log file already open
    is closed once the new one is in place.  Raises ``OSError`` when the file cannot be opened."""
    old = _state["sink"]
    sink = _Sink(log_file, log_size_limit)
    _state.update(sink=sink, logtime=logtime, utc=logtime_utc, json=json_logs, pid=os.getpid(), debug=bool(debug),
                  trace=bool(trace))
    if old is not None and old is not sink:
        old.close()


def _stamp() -> str:
    if not _state["logtime"]:
        return ""
    ns = time.time_ns()
    sec = ns // 1_000_000_000
    t = time.gmtime(sec) if _state["utc"] else time.localtime(sec)
    return time.strftime("%Y/%m/%d %H:%M:%S", t) + ".%06d " % (ns // 1000 % 1_000_000)


def _render_line(method: str, msg: str, extra: dict) -> str:
    level = _LEVELS.get(method, method[:3].upper())
    cid = extra.pop("cid", None)
    addr = extra.pop("addr", None)
    if cid is not None:
        msg = (f"{addr} - " if addr else "") + f"cid:{cid} - {msg}"
    if extra:
        msg += " - " + ", ".join(f"{k}: {v}" for k, v in extra.items())
    return f"[{_state['pid']}] {_stamp()}[{level}] {msg}"


def _exc_tuple(exc):
    """``exc_info`` as given (True: the exception being handled, an exception, a tuple) -> a tuple or None."""
    if isinstance(exc, BaseException):
        return (type(exc), exc, exc.__traceback__)
    if isinstance(exc, tuple) and len(exc) == 3:
        return exc if exc[0] is not None else None
    if exc:
        exc = sys.exc_info()
        return exc if exc[0] is not None else None
    return None


def _format_exc(exc: tuple) -> str:
    import traceback

    text = "".join(traceback.format_exception(*exc))
    return text[:-1] if text.endswith("\n") else text


def _line(method: str, event: dict) -> str:
    msg = str(event.pop("event", ""))
    if event.pop("_trace", False):
        method = "trace"
    exc = _exc_tuple(event.pop("exc_info", None))
    line = _render_line(method, msg, event)
    if exc:
        line += "\n" + _format_exc(exc).rstrip()
    return line


def _json(method: str, event: dict) -> str:
    import json

    if event.pop("_trace", False):
        method = "trace"
    event["level"] = _JSON_LEVELS.get(method, method)
    if _state["logtime"]:
        import datetime  # only here: the line format's stamp needs nothing but time

        event["timestamp"] = datetime.datetime.now(tz=datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    exc = _exc_tuple(event.pop("exc_info", None))
    if exc:
        event["exception"] = _format_exc(exc)
    return json.dumps(event, default=repr)


def _emit(method: str, event, args: tuple, kw: dict) -> None:
    if args:  # %-interpolation, a single non-empty mapping by name (structlog's _maybe_interpolate)
        event = event % (args[0] if len(args) == 1 and isinstance(args[0], dict) and args[0] else args)
    kw["event"] = event
    capture = _state["capture"]
    if capture is not None:
        kw["log_level"] = method
        capture.append(kw)
        return
    sink = _state["sink"]
    if sink is None:
        configure()
        sink = _state["sink"]
    sink.msg(_json(method, kw) if _state["json"] else _line(method, kw))


class Logger:
    """What :func:`get_logger` returns; the name is in no line (nats-server's lines carry none)."""

    __slots__ = ("name",)

    def __init__(self, name: str = "") -> None:
        self.name = name

    def debug(self, event, *args, **kw) -> None:
        # Trace lines are debug calls marked _trace (server/log.py trace; its callers check -V first): either flag
        # lets them through, plain debug lines need -D.
        if _state["debug"] or (_state["trace"] and kw.get("_trace")) or _state["capture"] is not None:
            _emit("debug", event, args, kw)

    def info(self, event, *args, **kw) -> None:
        _emit("info", event, args, kw)

    def warning(self, event, *args, **kw) -> None:
        _emit("warning", event, args, kw)

    def error(self, event, *args, **kw) -> None:
        _emit("error", event, args, kw)

    def exception(self, event, *args, **kw) -> None:
        kw.setdefault("exc_info", True)
        _emit("error", event, args, kw)

    def critical(self, event, *args, **kw) -> None:
        _emit("critical", event, args, kw)

    warn = warning
    fatal = critical
    msg = info


def get_logger(name: str = "") -> Logger:
    return Logger(name)


@contextmanager
def capture_logs():
    """The events logged inside the block, as dicts (the fields, ``event`` and ``log_level``), instead of lines:
    what tests read (the shape of structlog.testing.capture_logs, which it replaces).  Debug events included."""
    entries: list[dict] = []
    saved = _state["capture"]
    _state["capture"] = entries
    try:
        yield entries
    finally:
        _state["capture"] = saved
