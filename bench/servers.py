"""The two servers under test, started the same way on loopback ports.

Theory of operation: a :class:`BenchServer` is one server process of one kind (``skiff`` or ``nats-server``)
with its own temp directory (file store, config, log).  Both kinds take the same nats-server command line
(``-a -p -js -sd -m``, or ``-c`` with a ``jetstream { store_dir, sync_interval }`` block), so a *profile* (the
settings of a workload) is written once and given to both.  Readiness is the server's INFO line on the client
port.  Memory is read from ``/proc/<pid>/status``: ``VmRSS`` now and ``VmHWM`` (peak); writing ``5`` to
``/proc/<pid>/clear_refs`` resets the peak, so one server can be reused across workloads and still report the
peak of each one.  A server that cannot start is recorded with its reason; the workloads report that reason in
its cells instead of figures.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from bench.commands import child_kwargs
# Ports and the two servers' command lines are the test harness's (one definition for tests and benchmark).
from tests.harness import command_for as default_command
from tests.harness import free_port, free_ports, nats_server_binary  # noqa: F401
from tests.harness import proc_cpu_seconds, server_env

KINDS = ("skiff", "nats-server")
LABELS = {"skiff": "Skiff", "nats-server": "nats-server"}

# Settings both servers get.  "default": JetStream on, file storage in the temp dir (nats-server's default
# sync_interval, 2 min).  "sync_always": fsync after every write (`sync_interval: always`).
PROFILES = {
    "default": None,
    "sync_always": "jetstream {{\n  store_dir: {store_dir}\n  sync_interval: always\n}}\n",
    # "accounts": as "default", plus one account with two users (bench/workloads.py auth_workloads), each user's
    # password its name: "open" without permissions, "perms" with publish allow/deny that let bench.core.pub through.
    "accounts": (
        "jetstream {{\n  store_dir: {store_dir}\n}}\n"
        "accounts {{\n  BENCH {{\n    users [\n"
        "      {{ user: open, password: open }}\n"
        "      {{ user: perms, password: perms,\n"
        "         permissions {{ publish {{ allow: [\"bench.>\"], deny: [\"bench.no.>\"] }} }} }}\n"
        "    ]\n  }}\n}}\n"
    ),
}




def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM of a process in KiB (empty when it is gone)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


@dataclass
class BenchServer:
    kind: str
    profile: str = "default"
    command: list[str] | None = None
    port: int = 0
    http_port: int = 0
    proc: subprocess.Popen | None = None
    error: str | None = None
    tmp: str = ""
    started_at: float = 0.0
    ready_at: float = 0.0
    extra_args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix=f"skiff-bench-{self.kind}-")
        port, http_port = free_ports(2)
        self.port = self.port or port
        self.http_port = self.http_port or (http_port if http_port != self.port else free_ports(2)[1])
        if self.command is None:
            self.command = default_command(self.kind)

    @property
    def label(self) -> str:
        return LABELS.get(self.kind, self.kind)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def url_as(self, user: str) -> str:
        """The client URL with a user of the "accounts" profile (its password is its name)."""
        return f"nats://{user}:{user}@127.0.0.1:{self.port}"

    @property
    def store_dir(self) -> str:
        return os.path.join(self.tmp, "store")

    @property
    def log_path(self) -> str:
        return os.path.join(self.tmp, "server.log")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc and self.proc.poll() is None else None

    def argv(self) -> list[str]:
        argv = list(self.command) + ["-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.http_port)]
        template = PROFILES[self.profile]
        if template is not None:
            conf = os.path.join(self.tmp, "server.conf")
            with open(conf, "w") as f:
                f.write(template.format(store_dir=_conf_string(self.store_dir)))
            # the file's jetstream block turns JetStream on and names the store (-sd as well is a
            # "Duplicate 'store_dir'" error for nats-server)
            return argv + ["-c", conf] + self.extra_args
        return argv + ["-js", "-sd", self.store_dir] + self.extra_args

    def start(self, timeout: float = 20.0, poll: float = 0.01) -> bool:
        """Start and wait for the INFO line (``ready_at``); on failure keep the reason in ``self.error``."""
        # Bytecode cached as on a user's machine: with PYTHONDONTWRITEBYTECODE every start would compile every module
        # again (0.10-0.17 s), which the start-up and restart rows would measure (tests/harness.py server_env).
        env = server_env()
        try:
            with open(self.log_path, "ab") as log:
                self.started_at = time.monotonic()
                self.proc = subprocess.Popen(
                    self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    cwd=self.tmp, env=env, **child_kwargs(),
                )
        except OSError as e:
            self.error = f"server failed to start: {e}"
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.error = f"server exited with {self.proc.returncode}: {self.log_tail(3)}"
                return False
            if _answers_info(self.port):
                self.ready_at = time.monotonic()
                self.error = None
                return True
            time.sleep(poll)
        self.error = f"server not ready after {timeout:.0f}s: {self.log_tail(3)}"
        self.kill()
        return False

    def log_tail(self, lines: int = 5) -> str:
        try:
            with open(self.log_path, "rb") as f:
                text = f.read()[-4000:].decode(errors="replace")
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])

    def rss_kib(self) -> int | None:
        return proc_status(self.pid).get("VmRSS") if self.pid else None

    def peak_rss_kib(self) -> int | None:
        return proc_status(self.pid).get("VmHWM") if self.pid else None

    def cpu_seconds(self) -> float | None:
        """User + system CPU the server process (all its threads) used so far, or None when it is gone."""
        return proc_cpu_seconds(self.pid) if self.pid else None

    def reset_peak(self) -> None:
        if self.pid:
            try:
                with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass  # old kernel or no permission: the peak then spans earlier workloads too

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after ``timeout``."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """SIGKILL the server and anything it started."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
            self.proc.wait()

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def describe(self) -> str:
        return shlex.join(self.argv())


def _conf_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _answers_info(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.settimeout(2)
            return s.recv(5) == b"INFO "
    except OSError:
        return False


def server_version(kind: str, command: list[str] | None = None) -> str:
    """`--version` of a server command (best effort, for the report)."""
    cmd = list(command or default_command(kind)) + ["--version"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, env=server_env())
        text = (out.stdout or out.stderr).strip().splitlines()
        if not text or out.returncode != 0:
            return f"unknown (exit {out.returncode})"
        return text[0].split(": ", 1)[-1]  # "nats-server: v2.15.1" -> "v2.15.1"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
