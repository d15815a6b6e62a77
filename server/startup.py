"""What the ``skiff`` process says and checks while it starts, in nats-server's words.

* :func:`banner_lines`, :func:`jetstream_lines`: the start-up banner (nats-server ``Server.Start`` and
  ``EnableJetStream``): version, name, node, id, the configuration file, and JetStream's limits and store directory.
* :func:`check_listen_port`, :func:`listen_error`: Go's ``net.Listen`` errors, which nats-server quotes
  (``Error listening on port: 127.0.0.1:99999, "listen tcp: address 99999: invalid port"``).  Python would take a
  port above 65535 modulo 65536 on some paths, so the range is checked before anything binds.
* :func:`check_store_dir`: nats-server ``EnableJetStream``'s checks of the storage directory, with its messages.
* :func:`write_ports_file`, :func:`remove_ports_file`: ``--ports_file_dir`` (nats-server ``logPorts``).
"""
from __future__ import annotations

import errno
import json
import math
import os
import socket
import sys

from skiff.protocol.jsapi.timefmt import format_go_duration

from .version import API_LEVEL, SKIFF_VERSION, VERSION

# Go's syscall error strings (zerrors_linux_*.go) for the errors a listener or mkdir can meet.  Python's strerror
# capitalises them and words a few differently.
_GO_ERRNO = {
    errno.EADDRINUSE: "address already in use",
    errno.EADDRNOTAVAIL: "cannot assign requested address",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "no such file or directory",
    errno.ENOTDIR: "not a directory",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on device",
    errno.EEXIST: "file exists",
    errno.EAFNOSUPPORT: "address family not supported by protocol",
}


def go_strerror(e: OSError) -> str:
    if e.errno in _GO_ERRNO:
        return _GO_ERRNO[e.errno]
    text = e.strerror or str(e)
    return text[:1].lower() + text[1:]


def join_host_port(host: str, port: int) -> str:
    """Go's ``net.JoinHostPort``: IPv6 literals in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bind_port(port: int) -> int:
    return 0 if port == -1 else port


def check_listen_port(port: int) -> str | None:
    """Go's error for a port ``net.Listen`` refuses before binding, or ``None``."""
    p = _bind_port(port)
    if not 0 <= p <= 65535:
        return f"listen tcp: address {p}: invalid port"
    return None


def listen_error(host: str, port: int, e: BaseException) -> str:
    """The text of Go's ``net.Listen("tcp", host:port)`` error for what Python raised."""
    hp = join_host_port(host, _bind_port(port))
    if isinstance(e, socket.gaierror):
        return f"listen tcp: lookup {host}: no such host"
    if isinstance(e, OSError) and e.errno is not None:
        return f"listen tcp {hp}: bind: {go_strerror(e)}"
    return f"listen tcp {hp}: {e}"


def ipv4_listen_socket(host: str, port: int) -> socket.socket | None:
    """A bound, non-blocking TCP socket with SO_REUSEADDR for an IPv4 literal (``0.0.0.0``, ``127.0.0.1``), or
    ``None`` for anything else (a name, IPv6, the empty host: the loop's create_server resolves and binds those).

    Given to ``create_server(sock=...)``, it spares the address lookup that uvloop runs in libuv's thread pool:
    four threads started at every start, ~0.5 MiB of the idle RSS, for an address that needs no
    lookup.  Bind errors are the OSError create_server would raise (same errno), so the start-up messages hold.
    """
    try:
        socket.inet_pton(socket.AF_INET, host)
    except (OSError, TypeError):
        return None
    if "." not in host or host.count(".") != 3:  # inet_pton accepts only dotted quads, but say it plainly
        return None
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setblocking(False)
        s.bind((host, port))
    except BaseException:
        s.close()
        raise
    return s


def client_listen_fatal(host: str, port: int, err: str) -> str:
    # nats-server AcceptLoop: s.Fatalf("Error listening on port: %s, %q", hp, e)
    return f"Error listening on port: {join_host_port(host, _bind_port(port))}, {json.dumps(err)}"


def monitor_listen_fatal(err: str) -> str:
    # nats-server Start: "Can't start monitoring: " + startMonitoring's "can't listen to the monitor port: %v"
    return f"Can't start monitoring: can't listen to the monitor port: {err}"


def check_store_dir(store_dir: str) -> str | None:
    """nats-server ``EnableJetStream``: create the directory, or make sure it is a writable directory.
    Returns the error nats-server reports after ``Can't start JetStream: ``, or ``None``."""
    path = os.path.join(store_dir, "jetstream")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            return f"could not create storage directory - mkdir {e.filename or path}: {go_strerror(e)}"
        return None
    except OSError:
        st = None  # Go: a stat error other than "does not exist" leaves stat nil
    if st is None or not os.path.isdir(path):
        return "storage directory is not a directory"
    try:
        # nats-server os.CreateTemp(storeDir, "_test_"); tempfile would import shutil, bz2 and lzma (~7 ms)
        name = os.path.join(path, f"_test_{os.getpid()}_{os.urandom(6).hex()}")
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(name)
    except OSError:
        return "storage directory is not writable"
    return None


def node_hash(name: str) -> str:
    """nats-server ``getHash``: 8 characters of base62 over the SHA-256 of the server name."""
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "".join(digits[b % 62] for b in _sha256(name.encode()).digest()[:8])


def _sha256(data: bytes):
    """SHA-256 from the interpreter's own implementation (what hashlib falls back to without OpenSSL): this runs at
    every start, and importing hashlib loads OpenSSL's digests, ~0.6 MiB of resident memory."""
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # Python 3.12+
        except ImportError:  # pragma: no cover - a build without them
            from hashlib import sha256
    return sha256(data)


def friendly_bytes(n: int) -> str:
    """nats-server ``friendlyBytes``."""
    if n < 1024:
        return f"{n} B"
    exp = int(math.log(n) / math.log(1024))
    return "%.2f %sB" % (n / 1024 ** exp, "KMGTPE"[exp - 1])


def banner_lines(server) -> list[tuple[str, str]]:
    """(level, line) of the banner nats-server's Server.Start logs before anything listens."""
    opts = server.options
    lines = [("info", "Starting nats-server"),
             ("info", f"  Version:  {VERSION}"),
             ("info", f"  Git:      [skiff {SKIFF_VERSION}]"),
             ("debug", f"  Go build: python{sys.version.split()[0]}"),
             ("info", f"  Name:     {server.server_name}")]
    if opts.jetstream:
        lines.append(("info", f"  Node:     {node_hash(server.server_name)}"))
    lines.append(("info", f"  ID:       {server.server_id}"))
    if opts.config_file:
        cd = f"({opts.config_digest})" if opts.config_digest else ""
        lines.append(("info", f"Using configuration file: {opts.config_file} {cd}"))
    return lines


TEMP_STORE_WARNING = "Temporary storage directory used, data could be lost on system reboot"


def temp_store_base(opts) -> str:
    """nats-server's store directory for ``-js`` without ``store_dir`` (jetstream.go EnableJetStream): Go's
    os.TempDir() ($TMPDIR or /tmp) + ``nats`` for the dynamic configuration, os.TempDir() itself when both
    max_memory_store and max_file_store are set (then the configuration is taken as it is)."""
    tmp = os.environ.get("TMPDIR") or "/tmp"
    if (opts.max_memory_store or 0) > 0 and (opts.max_file_store or 0) > 0:
        return tmp
    return os.path.join(tmp, "nats")


def jetstream_lines(js, opts) -> list[str]:
    """The JetStream block of nats-server ``EnableJetStream`` (with the ASCII-art banner)."""
    lines = ["Starting JetStream",
             "    _ ___ _____ ___ _____ ___ ___   _   __  __",
             " _ | | __|_   _/ __|_   _| _ \\ __| /_\\ |  \\/  |",
             "| || | _|  | | \\__ \\ | | |   / _| / _ \\| |\\/| |",
             " \\__/|___| |_| |___/ |_| |_|_\\___/_/ \\_\\_|  |_|",
             "",
             "         https://docs.nats.io/jetstream",
             "",
             "---------------- JETSTREAM ----------------"]
    if getattr(opts, "jetstream_strict", True):
        lines.append("  Strict:          true")
    lines += [f"  Max Memory:      {friendly_bytes(js.max_memory)}",
              f"  Max Storage:     {friendly_bytes(js.max_storage)}",
              f'  Store Directory: "{js.store_dir}"']
    if getattr(opts, "jetstream_domain", ""):
        lines.append(f"  Domain:          {opts.jetstream_domain}")
    lines += [f"  API Level:       {API_LEVEL}",
              "-------------------------------------------",
              # nats-server EnableJetStream's deferred Noticef, with Go's time.Duration text ("1.537134ms")
              f"Took {format_go_duration(max(js.start_took_ns, 1))} to start JetStream"]
    return lines


# ------------------------------------------------------------------ --ports_file_dir

def ports_file_path(directory: str) -> str:
    """``<executable>_<pid>.ports`` as nats-server names it (``filepath.Base(os.Args[0])``).  Run as
    ``python -m skiff.server`` the executable is ``__main__.py``; Skiff calls it ``skiff`` then."""
    exe = os.path.basename(sys.argv[0] or "skiff")
    if exe.endswith(".py") or exe in ("", "-c", "-m"):
        exe = "skiff"
    return os.path.join(directory, f"{exe}_{os.getpid()}.ports")


def _urls(scheme: str, host: str, port: int) -> list[str]:
    if host in ("0.0.0.0", "::", ""):
        hosts = interface_addresses()
    else:
        hosts = [host]
    return [f"{scheme}://{join_host_port(h, port)}" for h in hosts]


def interface_addresses() -> list[str]:
    """Every address of every interface, in interface order, IPv4 first (Go's net.Interfaces then Addrs, as
    nats-server resolveHostPorts lists them for a listener on 0.0.0.0).  Linux only; elsewhere the loopback."""
    v4: dict[str, list[str]] = {}
    v6: dict[str, list[tuple[int, str]]] = {}  # (scope, address): global addresses before link-local
    try:
        import array
        import fcntl
        import struct

        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            buf = array.array("B", b"\0" * 40 * 64)
            addr, _ = buf.buffer_info()
            n = struct.unpack("iL", fcntl.ioctl(s.fileno(), 0x8912, struct.pack("iL", len(buf), addr)))[0]
            raw = buf.tobytes()[:n]
            for i in range(0, n, 40):
                name = raw[i:i + 16].split(b"\0", 1)[0].decode()
                v4.setdefault(name, []).append(socket.inet_ntoa(raw[i + 20:i + 24]))
        finally:
            s.close()
    except (ImportError, OSError, ValueError):  # not Linux (no fcntl, no SIOCGIFCONF) or an odd name: fallback below
        pass
    try:
        with open("/proc/net/if_inet6") as f:
            for line in f:
                hexaddr, _idx, _plen, scope, _flags, name = line.split()
                v6.setdefault(name, []).append((int(scope, 16), socket.inet_ntop(socket.AF_INET6,
                                                                                  bytes.fromhex(hexaddr))))
    except OSError:
        pass
    order = []
    try:
        order = [name for _, name in sorted(socket.if_nameindex())]
    except OSError:
        order = list(dict.fromkeys(list(v4) + list(v6)))
    out = [a for name in order for a in v4.get(name, []) + [a for _, a in sorted(v6.get(name, []))]]
    return out or ["127.0.0.1"]


def write_ports_file(directory: str, server) -> tuple[str, str | None]:
    """Write the ports file; returns (path, error text or None)."""
    opts = server.options
    tls = server.tls_context is not None
    info: dict[str, list[str]] = {"nats": _urls("tls" if tls else "nats", opts.host, server.port)}
    if server.http_port:
        scheme = "https" if opts.https_port else "http"
        info["monitoring"] = _urls(scheme, opts.http_host or opts.host, server.http_port)
    path = ports_file_path(directory)
    try:
        with open(path, "w") as f:
            f.write(json.dumps(info, separators=(",", ":")))
    except OSError as e:
        return path, f"Error writing ports file ({path}): open {path}: {go_strerror(e)}"
    return path, None


def remove_ports_file(path: str) -> str | None:
    try:
        os.remove(path)
    except OSError as e:
        return f"Error cleaning up ports file {path}: remove {path}: {go_strerror(e)}"
    return None
