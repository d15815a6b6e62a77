"""Pub/sub over WebSocket, Skiff beside nats-server: ``python -m bench.websocket [--quick] [--msgs N] [--runs N]``.

Theory of operation: both servers get the same ``websocket { no_tls: true }`` block next to the usual benchmark
command line.  One run = 1 publisher and 1 subscriber, each its own WebSocket connection, 128-byte messages
(like ``core.pubsub``): the subscriber subscribes and confirms with PING/PONG, then the publisher sends every PUB
as fast as it can, in binary frames of 500 PUBs; the figure is messages received per second from the first
publish to the last message received.  Runs alternate between the servers (Skiff, nats-server, nats-server,
Skiff...), the medians are printed with their ratio, as in bench/run.py.

The client is raw sockets in two threads (the work is in C: sendall, recv, bytes.count), not nats-py over aiohttp,
which would measure the client.  Client frames carry the mask key 0000, which leaves the payload as it is (a valid
mask: RFC 6455 only asks for an unpredictable key against proxies, not present on loopback).  The subscriber parses
the frame headers and counts the ``\\n`` of the payloads: a message ``MSG ws 1 128\\r\\n<128 x>\\r\\n`` has two.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import threading
import time

from bench.servers import BenchServer, free_port

SIZE = 128
PER_FRAME = 500
KEY = "dGhlIHNhbXBsZSBub25jZQ=="


def _frame(payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        hdr = struct.pack("!BB", 0x82, 0x80 | n)
    elif n < 65536:
        hdr = struct.pack("!BBH", 0x82, 0x80 | 126, n)
    else:
        hdr = struct.pack("!BBQ", 0x82, 0x80 | 127, n)
    return hdr + b"\0\0\0\0" + payload


def _connect(port: int, timeout: float) -> tuple[socket.socket, bytes]:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise RuntimeError("closed during the upgrade")
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(head.split(b"\r\n")[0].decode())
    return s, rest


class _Counter:
    """Counts ``\\n`` in the payloads of server frames (unmasked, uncompressed), across any split."""

    def __init__(self) -> None:
        self.hdr = b""
        self.rem = 0
        self.newlines = 0
        self.text = bytearray()  # payload bytes kept while ``keep`` (the handshake phase)
        self.keep = True

    def feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        while pos < end:
            if self.rem:
                n = min(self.rem, end - pos)
                self.newlines += data.count(b"\n", pos, pos + n)
                if self.keep:
                    self.text += data[pos:pos + n]
                pos += n
                self.rem -= n
                continue
            hdr = self.hdr + data[pos:pos + 10]
            need = 2
            if len(hdr) >= 2:
                n = hdr[1] & 0x7F
                need = 2 + (2 if n == 126 else 8 if n == 127 else 0)
            if len(hdr) < need:
                self.hdr = hdr
                return
            n = hdr[1] & 0x7F
            if n == 126:
                n = struct.unpack_from("!H", hdr, 2)[0]
            elif n == 127:
                n = struct.unpack_from("!Q", hdr, 2)[0]
            pos += need - len(self.hdr)
            self.hdr = b""
            self.rem = n


def pubsub_once(port: int, msgs: int, timeout: float = 60.0) -> dict:
    sub, rest = _connect(port, timeout)
    pub, _ = _connect(port, timeout)
    try:
        counter = _Counter()
        counter.feed(rest)
        sub.sendall(_frame(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB ws 1\r\nPING\r\n'))
        pub.sendall(_frame(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nPING\r\n'))
        while b"PONG\r\n" not in counter.text:
            counter.feed(sub.recv(65536))
        counter.keep = False
        counter.newlines = 0
        one = b"PUB ws %d\r\n" % SIZE + b"x" * SIZE + b"\r\n"
        batch = _frame(one * PER_FRAME)
        frames = msgs // PER_FRAME
        want = 2 * frames * PER_FRAME
        err: list[BaseException] = []

        def publish() -> None:
            try:
                for _ in range(frames):
                    pub.sendall(batch)
            except BaseException as e:  # noqa: BLE001 - reported by the caller
                err.append(e)

        t0 = time.perf_counter()
        th = threading.Thread(target=publish, daemon=True)
        th.start()
        deadline = time.monotonic() + timeout
        while counter.newlines < want:
            if time.monotonic() > deadline:
                raise RuntimeError(f"timeout: {counter.newlines // 2} of {want // 2} messages")
            d = sub.recv(1 << 20)
            if not d:
                raise RuntimeError(f"subscriber closed after {counter.newlines // 2} messages")
            counter.feed(d)
        t1 = time.perf_counter()
        th.join(timeout)
        if err:
            raise err[0]
        return {"msgs": want // 2, "seconds": t1 - t0, "rate": want / 2 / (t1 - t0)}
    finally:
        sub.close()
        pub.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.websocket", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 run of 50k messages per server")
    ap.add_argument("--msgs", type=int, default=0, help="messages per run (default 200k, 50k with --quick)")
    ap.add_argument("--runs", type=int, default=0, help="runs per server (default 3, 1 with --quick)")
    args = ap.parse_args(argv)
    msgs = args.msgs or (50_000 if args.quick else 200_000)
    runs = args.runs or (1 if args.quick else 3)
    servers: dict[str, tuple[BenchServer, int]] = {}
    rates: dict[str, list[float]] = {"skiff": [], "nats-server": []}
    try:
        for kind in rates:
            ws_port = free_port()
            srv = BenchServer(kind)
            conf = os.path.join(srv.tmp, "ws.conf")
            with open(conf, "w") as f:
                f.write(f'websocket {{\n  listen: "127.0.0.1:{ws_port}"\n  no_tls: true\n}}\n')
            srv.extra_args = ["-c", conf]
            if not srv.start():
                print(f"{kind}: {srv.error}", file=sys.stderr)
                return 1
            servers[kind] = (srv, ws_port)
        order = ["skiff", "nats-server"]
        for i in range(runs):
            for kind in (order if i % 2 == 0 else order[::-1]):
                r = pubsub_once(servers[kind][1], msgs)
                rates[kind].append(r["rate"])
                print(f"run {i + 1} {kind}: {r['rate']:,.0f} msg/s ({r['msgs']} in {r['seconds']:.2f} s)",
                      file=sys.stderr)
    finally:
        for srv, _ in servers.values():
            srv.cleanup()
    sk, ns = statistics.median(rates["skiff"]), statistics.median(rates["nats-server"])
    print("| workload | Skiff | nats-server | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| WebSocket 1 pub + 1 sub, 128 B | {sk / 1000:.0f}k msg/s | {ns / 1000:.0f}k msg/s | {sk / ns:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
