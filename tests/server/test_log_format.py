"""skiff/log.py replaced structlog (issue #13: ~13 ms and ~2 MiB of every start).  Its lines must be the bytes the
structlog pipeline wrote, in every format the logging options select (-D, -V, -T, --logtime_utc, --log_json): each
test logs the same events through both and compares.  The pipeline is rebuilt here as server/log.py configured it
before (git 807a8cf), on structlog itself (a test dependency now)."""
from __future__ import annotations

import datetime
import io
import json
import logging
import re
import sys

import pytest

from skiff import log as skiff_log
from skiff.server import log as logmod

structlog = pytest.importorskip("structlog")

pytestmark = pytest.mark.skiff_only

_LEVELS = {"debug": "DBG", "info": "INF", "warning": "WRN", "error": "ERR", "critical": "FTL", "exception": "ERR",
           "trace": "TRC", "fatal": "FTL"}


# ---- the structlog pipeline of server/log.py at 807a8cf (only the sink differs: it keeps the lines)
class _Lines:
    def __init__(self):
        self.lines = []

    def msg(self, line):
        self.lines.append(line)

    info = debug = warning = error = critical = exception = fatal = log = msg

    def __call__(self, *args):
        return self


def _old_pipeline(debug, trace, logtime, json_logs, utc, pid):
    def stamp():
        if not logtime:
            return ""
        t = datetime.datetime.now().timestamp()
        d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc) if utc else datetime.datetime.fromtimestamp(t)
        return d.strftime("%Y/%m/%d %H:%M:%S.%f ")

    def render_line(method, msg, extra):
        level = _LEVELS.get(method, method[:3].upper())
        cid = extra.pop("cid", None)
        addr = extra.pop("addr", None)
        if cid is not None:
            msg = (f"{addr} - " if addr else "") + f"cid:{cid} - {msg}"
        if extra:
            msg += " - " + ", ".join(f"{k}: {v}" for k, v in extra.items())
        return f"[{pid}] {stamp()}[{level}] {msg}"

    def nats_console(_, method, event):
        msg = str(event.pop("event", ""))
        event.pop("logger", None)
        if event.pop("_trace", False):
            method = "trace"
        exc = event.pop("exc_info", None)
        line = render_line(method, msg, event)
        if exc:
            import traceback

            if exc is True:
                exc = sys.exc_info()
            if isinstance(exc, BaseException):
                exc = (type(exc), exc, exc.__traceback__)
            if exc and exc[0] is not None:
                line += "\n" + "".join(traceback.format_exception(*exc)).rstrip()
        return line

    def json_level(_, method, event):
        if event.pop("_trace", False):
            method = "trace"
        event["level"] = {"critical": "fatal", "exception": "error"}.get(method, method)
        return event

    def drop_debug(_, method, event):
        if method == "debug" and not event.get("_trace"):
            raise structlog.DropEvent
        return event

    if json_logs:
        processors = [json_level]
        if logtime:
            processors.append(structlog.processors.TimeStamper(fmt="iso", utc=True))
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors = [nats_console]
    if trace and not debug:
        processors.insert(0, drop_debug)
    sink = _Lines()
    structlog.configure(processors=processors,
                        wrapper_class=structlog.make_filtering_bound_logger(
                            logging.DEBUG if (debug or trace) else logging.INFO),
                        logger_factory=sink, cache_logger_on_first_use=False)
    return sink


class _Opaque:
    def __repr__(self):
        return "<opaque thing>"


def _events(get_logger, trace_line):
    """Every call shape the server and the stores use, and structlog's aliases."""
    log = get_logger("skiff.test")
    log.info("Server is ready")
    log.info("Client connection created", cid=5, addr="127.0.0.1:53211")
    log.warning("Readiness", cid=7)
    log.error("JetStream stream stop failed", stream="ORDERS", error="disk full")
    log.debug("Client connection closed", cid=9, addr="[::1]:4222", reason="Client Closed")
    log.debug("plain debug line")
    trace_line("127.0.0.1:1 - cid:1 - <<- [PING]")
    log.critical("Error starting server: boom")
    log.fatal("fatal alias")
    log.warn("warn alias", n=3)
    log.msg("msg alias")
    log.info("interpolated %s and %d", "text", 42)
    log.info("by name %(a)s", {"a": "b"})
    log.info("odd values", obj=_Opaque(), raw=b"\x00x", none=None, seq=[1, "two"], flag=True, ratio=0.5)
    log.info("unicode ü and a \"quote\"", subject="a.b.>")
    try:
        raise ValueError("provider exploded")
    except ValueError as e:
        log.exception("Monitoring endpoint /varz failed")
        log.error("with an exception object", exc_info=e)
        log.error("with a tuple", exc_info=sys.exc_info(), stream="S")
    log.exception("exception outside an except block")
    log.error("exc_info False", exc_info=False)


def _both(tmp_path, monkeypatch, debug=False, trace=False, logtime=False, json_logs=False, utc=False):
    """(old lines, new lines) for the same events under the same options."""
    pid = 4242
    monkeypatch.setattr(skiff_log.os, "getpid", lambda: pid)
    old = _old_pipeline(debug, trace, logtime, json_logs, utc, pid)
    # trace lines as the connection code writes them: only with -V (server/core/trace.py checks TRACE first)
    _events(structlog.get_logger, lambda line: trace and structlog.get_logger("skiff.trace").debug(line, _trace=True))
    structlog.reset_defaults()
    path = tmp_path / "new.log"
    logmod.configure(debug=debug, trace=trace, logtime=logtime, log_file=str(path), json_logs=json_logs,
                     logtime_utc=utc)
    try:
        _events(logmod.get_logger, lambda line: logmod.TRACE and logmod.trace(line))
    finally:
        logmod.configure()
    return "\n".join(old.lines) + "\n", path.read_text()


@pytest.mark.parametrize("debug", [False, True], ids=["", "D"])
@pytest.mark.parametrize("trace", [False, True], ids=["", "V"])
@pytest.mark.parametrize("json_logs", [False, True], ids=["lines", "json"])
def test_same_bytes_as_the_structlog_pipeline(tmp_path, monkeypatch, debug, trace, json_logs):
    old, new = _both(tmp_path, monkeypatch, debug=debug, trace=trace, json_logs=json_logs)
    assert new == old
    assert ("[TRC]" in new or '"level": "trace"' in new) == trace
    assert ("plain debug line" in new) == debug


_LINE_STAMP = re.compile(r"^\[4242\] (\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6}) ", re.M)


@pytest.mark.parametrize("utc", [False, True], ids=["local", "utc"])
def test_time_stamps_as_before(tmp_path, monkeypatch, utc):
    """With time stamps (-T, --logtime_utc) only the instants differ: same format, same clock (local or UTC)."""
    old, new = _both(tmp_path, monkeypatch, logtime=True, utc=utc)
    assert _LINE_STAMP.sub("[4242] T ", new) == _LINE_STAMP.sub("[4242] T ", old)
    stamps = [datetime.datetime.strptime(s, "%Y/%m/%d %H:%M:%S.%f") for s in _LINE_STAMP.findall(new)]
    now = datetime.datetime.now(datetime.timezone.utc) if utc else datetime.datetime.now()
    assert stamps and all(abs((now.replace(tzinfo=None) - s).total_seconds()) < 60 for s in stamps)


def test_json_time_stamps_as_before(tmp_path, monkeypatch):
    old, new = _both(tmp_path, monkeypatch, logtime=True, json_logs=True)
    old_objs = [json.loads(line) for line in io.StringIO(old)]
    new_objs = [json.loads(line) for line in io.StringIO(new)]
    assert [list(o) for o in new_objs] == [list(o) for o in old_objs]  # the same keys in the same order
    for o, n in zip(old_objs, new_objs):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z", n.pop("timestamp"))
        o.pop("timestamp")
        assert n == o


def test_capture_logs_sees_events_not_lines():
    with skiff_log.capture_logs() as logs:
        skiff_log.get_logger("skiff.storage").error("BLOCK CHECKSUM MISMATCH", block="3.blk", seq=7)
        skiff_log.get_logger("skiff.storage").debug("a debug event")
    assert logs == [{"block": "3.blk", "seq": 7, "event": "BLOCK CHECKSUM MISMATCH", "log_level": "error"},
                    {"event": "a debug event", "log_level": "debug"}]


def test_unconfigured_lines_follow_the_current_stderr(monkeypatch):
    """An embedded server (no runner, nothing configured) writes nats-server's lines, INF and up, to whatever
    ``sys.stderr`` is at the time: pytest swaps it per test and closes the old one."""
    monkeypatch.setitem(skiff_log._state, "sink", None)
    monkeypatch.setitem(skiff_log._state, "debug", False)
    monkeypatch.setitem(skiff_log._state, "trace", False)
    monkeypatch.setitem(skiff_log._state, "json", False)
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    log = skiff_log.get_logger("skiff.server")
    log.info("Server is ready")
    log.debug("not without -D")
    assert re.fullmatch(r"\[\d+\] \S+ \S+ \[INF\] Server is ready\n", first.getvalue())
    first.close()
    monkeypatch.setattr(sys, "stderr", second)
    log.warning("still logging", stream="S")
    assert re.fullmatch(r"\[\d+\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} \[WRN\] still logging - stream: S\n",
                        second.getvalue())
