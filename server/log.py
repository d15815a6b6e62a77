"""Logging through structlog, configured from nats-server's options.

Console output looks like nats-server's (`[pid] 2026/11/21 20:27:47.154919 [INF] message key=value`), or one JSON
object per line with ``log_json``.  ``-D`` enables debug lines, ``-V`` protocol trace lines (logged at debug level
with ``trace=True``), ``-T=false`` drops the time stamp, ``-l FILE`` writes to a file.
"""
from __future__ import annotations

import logging
import os
import sys
import time

import structlog

_LEVELS = {"debug": "DBG", "info": "INF", "warning": "WRN", "error": "ERR", "critical": "FTL"}


def _nats_console(logtime: bool):
    pid = os.getpid()

    def render(_, method: str, event: dict) -> str:
        level = _LEVELS.get(method, method[:3].upper())
        msg = event.pop("event", "")
        event.pop("logger", None)
        extra = " ".join(f"{k}={v}" for k, v in event.items())
        if logtime:
            t = time.time()
            stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + ".%06d " % int((t % 1) * 1e6)
        else:
            stamp = ""
        return f"[{pid}] {stamp}[{level}] {msg}" + (f" {extra}" if extra else "")

    return render


def configure(debug: bool = False, trace: bool = False, logtime: bool = True, log_file: str | None = None,
              json_logs: bool = False) -> None:
    level = logging.DEBUG if (debug or trace) else logging.INFO
    out = open(log_file, "a", buffering=1) if log_file else sys.stderr
    processors = [structlog.processors.add_log_level] if json_logs else []
    if json_logs:
        if logtime:
            processors.append(structlog.processors.TimeStamper(fmt="iso", utc=True))
        processors.append(structlog.processors.JSONRenderer())
    else:
        processors.append(_nats_console(logtime))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str):
    return structlog.get_logger(name)
