"""Run one load-generator command with a hard timeout and read its JSON line.

Every command runs in its own session so that a timeout kills it and anything it started (SIGKILL to the
process group); nothing a workload starts can outlive it.  The result is the parsed last JSON line of stdout
when it says ``"ok": true``; otherwise a one-line reason (the program's own ``error``, a timeout, or the exit
status with the tail of stderr) that the report prints as ``error: <reason>``.

Every process the benchmark starts (servers included) also asks the kernel to SIGKILL it when the orchestrator
dies (``PR_SET_PDEATHSIG``), so even a ``kill -9`` of the orchestrator leaves no server behind.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def child_kwargs() -> dict:
    """Popen arguments for every child: its own session (killable as a group), killed with the orchestrator."""
    kw: dict = {"start_new_session": True}
    if sys.platform.startswith("linux"):
        kw["preexec_fn"] = _die_with_parent
    return kw


@dataclass
class Outcome:
    result: dict | None
    error: str | None
    argv: list[str]

    @property
    def ok(self) -> bool:
        return self.result is not None


def last_json_line(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass


def run(argv: list[str], timeout: float) -> Outcome:
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                text=True, **child_kwargs())
    except OSError as e:
        return Outcome(None, f"cannot run {os.path.basename(argv[0])}: {e}", argv)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.communicate()
        return Outcome(None, f"timeout after {timeout:.0f}s", argv)
    doc = last_json_line(out)
    if doc is not None and doc.get("ok"):
        return Outcome(doc, None, argv)
    if doc is not None and doc.get("error"):
        return Outcome(None, str(doc["error"]), argv)
    tail = " | ".join(err.strip().splitlines()[-2:]) if err else ""
    return Outcome(None, f"exit {proc.returncode}{': ' + tail if tail else ''}", argv)
