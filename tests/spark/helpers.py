"""Test-side JetStream administration through nats-py (an independent client: the connector under test never
checks itself).  Async functions for the client tests, ``sync(...)`` wrappers for the Spark tests."""
from __future__ import annotations

import asyncio
import itertools
import json
import os

import nats

_unique = itertools.count()

# The options of every JVM the Spark tests start (the suite's session, the kill -9 drivers, the discovery tests'
# drivers, executors, master and worker): short-lived JVMs, where the optimising JIT tier costs more than it saves,
# the serial collector, and no bytecode verification of the class path's classes (Spark's own jars; the JDK's are
# never verified).  Java CPU of one job in a fresh session (tests/spark/kill9_driver.py's jobs, 4,000 rows, not
# slowed, 3 alternating runs): batch write 12.9 -> 11.2 s, streaming query 16.6 -> 14.7 s without verification.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
               "-XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote")


def unique(base: str = "S") -> str:
    return f"{base}{os.getpid() % 10000}N{next(_unique)}"


class Admin:
    def __init__(self, nc) -> None:
        self.nc = nc

    @classmethod
    async def connect(cls, url: str) -> "Admin":
        return cls(await nats.connect(url, connect_timeout=3, allow_reconnect=False))

    async def close(self) -> None:
        await self.nc.close()

    async def api(self, suffix: str, body=None, timeout: float = 5.0) -> dict:
        data = json.dumps(body).encode() if body is not None else b""
        msg = await self.nc.request("$JS.API." + suffix, data, timeout=timeout)
        return json.loads(msg.data)

    async def create(self, name: str, **cfg) -> dict:
        cfg.setdefault("subjects", [f"{name}.>"])
        cfg.setdefault("storage", "memory")
        r = await self.api(f"STREAM.CREATE.{name}", {"name": name, **cfg})
        assert "error" not in r, r
        return r

    async def info(self, name: str) -> dict:
        r = await self.api(f"STREAM.INFO.{name}")
        assert "error" not in r, r
        return r

    async def publish(self, subject: str, data: bytes, headers: dict | None = None) -> dict:
        msg = await self.nc.request(subject, data, timeout=5.0, headers=headers)
        ack = json.loads(msg.data)
        assert "error" not in ack, ack
        return ack

    async def publish_many(self, items) -> list[int]:
        """Publish (subject, data[, headers]) items pipelined; return the stream sequences in order."""
        futs = []
        for it in items:
            subject, data = it[0], it[1]
            hdrs = it[2] if len(it) > 2 else None
            futs.append(self.nc.request(subject, data, timeout=10.0, headers=hdrs))
        seqs = []
        for m in await asyncio.gather(*futs):
            ack = json.loads(m.data)
            assert "error" not in ack, ack
            seqs.append(ack["seq"])
        return seqs

    async def delete_msg(self, stream: str, seq: int) -> None:
        r = await self.api(f"STREAM.MSG.DELETE.{stream}", {"seq": seq})
        assert r.get("success"), r

    async def consumer_names(self, stream: str) -> list[str]:
        r = await self.api(f"CONSUMER.NAMES.{stream}", {})
        return r.get("consumers") or []

    async def messages(self, stream: str) -> list[tuple[int, str, bytes, dict]]:
        """Every stored message as (seq, subject, data, headers) through STREAM.MSG.GET, seq by seq."""
        info = await self.info(stream)
        st = info["state"]
        out = []
        for seq in range(max(st["first_seq"], 1), st["last_seq"] + 1):
            r = await self.api(f"STREAM.MSG.GET.{stream}", {"seq": seq})
            if "error" in r:
                continue
            m = r["message"]
            import base64

            data = base64.b64decode(m.get("data", ""))
            hdrs = {}
            if m.get("hdrs"):
                raw = base64.b64decode(m["hdrs"]).decode()
                for line in raw.split("\r\n")[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        hdrs.setdefault(k, []).append(v.strip())
            out.append((m["seq"], m["subject"], data, hdrs))
        return out


def sync(url: str, fn):
    """Run ``await fn(admin)`` on a fresh connection, from synchronous (Spark) test code."""

    async def go():
        a = await Admin.connect(url)
        try:
            return await fn(a)
        finally:
            await a.close()

    return asyncio.run(go())


async def raw_hpub(url: str, subject: str, hdr: bytes, data: bytes) -> None:
    """Publish one message with a raw header block (nats-py cannot repeat a header key) over a plain socket."""
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    await reader.readline()  # INFO
    writer.write(b'CONNECT {"verbose":false,"headers":true}\r\n')
    writer.write(b"HPUB %s %d %d\r\n%s%s\r\nPING\r\n" % (subject.encode(), len(hdr), len(hdr) + len(data), hdr, data))
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), 5)
    assert line == b"PONG\r\n", line
    writer.close()


class Proxy:
    """A loopback TCP proxy the test can cut (close both sides) or freeze (stop forwarding, keep sockets open)."""

    def __init__(self, upstream_port: int, cut_on: bytes | None = None) -> None:
        self.upstream_port = upstream_port
        self.frozen = False
        self.writers: list = []
        self.server = None
        #: cut every connection (a reset, as a killed server gives) the first time a client sends these bytes
        self.cut_on = cut_on

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"nats://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _handle(self, cr, cw):
        ur, uw = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.writers += [cw, uw]

        async def pipe(r, w):
            try:
                while data := await r.read(65536):
                    while self.frozen:
                        await asyncio.sleep(3600)
                    if self.cut_on is not None and r is cr and self.cut_on in data:
                        self.cut_on = None
                        self.cut()
                        return
                    w.write(data)
                    await w.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                w.close()

        asyncio.ensure_future(pipe(cr, uw))
        asyncio.ensure_future(pipe(ur, cw))

    def cut(self) -> None:
        for w in self.writers:
            w.transport.abort()

    async def close(self) -> None:
        """Stop listening and cut what is open: to a client, the server at this address went away."""
        self.server.close()
        self.cut()


async def stored_data(url: str, stream: str) -> list[bytes]:
    """The data of every message of ``stream``, read with an ephemeral pull consumer (nats-py): one request per
    batch, for streams too long to fetch message by message."""
    nc = await nats.connect(url, connect_timeout=3, allow_reconnect=False)
    try:
        from nats.js.api import AckPolicy, ConsumerConfig

        js = nc.jetstream()
        info = await js.stream_info(stream)
        want = info.state.messages
        sub = await js.pull_subscribe(f"{stream}.>", stream=stream, config=ConsumerConfig(ack_policy=AckPolicy.NONE))
        out: list[bytes] = []
        while len(out) < want:
            out += [m.data for m in await sub.fetch(min(1000, want - len(out)), timeout=10)]
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()
