"""A small raw NATS client for the lab: every byte on the wire is ours, so a campaign can send what nats-py
would refuse (malformed requests, reply subjects aimed at ``$JS.API``) and see every ``-ERR`` the server sends.

Theory of operation: :class:`Conn` owns one asyncio stream pair and a reader task.  The reader parses what a
server sends (``INFO``, ``MSG``, ``HMSG``, ``PING``, ``PONG``, ``+OK``, ``-ERR``), answers ``PING``, resolves
``flush()`` futures in order on ``PONG``, and hands messages to the subscription's queue.  ``request()`` uses
one wildcard inbox subscription per connection (``_INBOX.<id>.*``), like the clients do.  Nothing here retries
or reconnects: a closed connection is a fact the campaign reports.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
from dataclasses import dataclass, field


@dataclass
class Msg:
    subject: str
    reply: str
    data: bytes
    headers: bytes = b""
    sid: int = 0

    @property
    def status(self) -> str:
        """``503`` / ``404`` / ``408`` ... from a ``NATS/1.0 <code>`` header block (empty when none)."""
        if not self.headers.startswith(b"NATS/1.0"):
            return ""
        first = self.headers.split(b"\r\n", 1)[0].split()
        return first[1].decode() if len(first) > 1 else ""

    def header(self, name: str) -> str | None:
        for line in self.headers.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == name.lower().encode():
                return v.strip().decode(errors="replace")
        return None

    def json(self):
        return json.loads(self.data)


@dataclass
class Sub:
    sid: int
    subject: str
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    cb: object = None


def port_of(url: str | int) -> int:
    if isinstance(url, int):
        return url
    return int(str(url).rsplit(":", 1)[1])


class Conn:
    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.info: dict = {}
        self.errors: list[str] = []
        self.subs: dict[int, Sub] = {}
        self._sids = itertools.count(1)
        self._pongs: list[asyncio.Future] = []
        self._inbox = "_INBOX." + os.urandom(8).hex()
        self._inbox_sid = 0
        self._replies: dict[str, asyncio.Future] = {}
        self._tokens = itertools.count(1)
        self._task: asyncio.Task | None = None
        self.closed = asyncio.Event()

    @classmethod
    async def connect(cls, url: str | int, *, user: str | None = None, password: str | None = None,
                      name: str = "lab", timeout: float = 5.0, headers: bool = True, echo: bool = True) -> "Conn":
        c = cls()
        c.reader, c.writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port_of(url), limit=1 << 24), timeout)
        line = await asyncio.wait_for(c.reader.readline(), timeout)
        if not line.startswith(b"INFO "):
            raise ConnectionError(f"no INFO: {line[:80]!r}")
        c.info = json.loads(line[5:])
        opts = {"verbose": False, "pedantic": False, "headers": headers, "no_responders": headers, "protocol": 1,
                "echo": echo, "name": name, "lang": "python-lab", "version": "0"}
        if user is not None:
            opts.update(user=user, **{"pass": password or ""})
        c.writer.write(b"CONNECT " + json.dumps(opts).encode() + b"\r\n")
        c._task = asyncio.get_running_loop().create_task(c._read_loop())
        await c.flush(timeout)
        return c

    # ------------------------------------------------------------------ writing
    def write(self, data: bytes) -> None:
        if self.closed.is_set() or self.writer.transport.is_closing():
            self.closed.set()
            return
        self.writer.write(data)

    def pub(self, subject: str, data: bytes = b"", reply: str = "", headers: bytes = b"") -> None:
        r = f" {reply}" if reply else ""
        if headers:
            self.write(f"HPUB {subject}{r} {len(headers)} {len(headers) + len(data)}\r\n".encode()
                       + headers + data + b"\r\n")
        else:
            self.write(f"PUB {subject}{r} {len(data)}\r\n".encode() + data + b"\r\n")

    def sub(self, subject: str, queue: str = "", cb=None) -> Sub:
        sid = next(self._sids)
        s = Sub(sid, subject, cb=cb)
        self.subs[sid] = s
        self.write(f"SUB {subject}{' ' + queue if queue else ''} {sid}\r\n".encode())
        return s

    def unsub(self, sid: int) -> None:
        self.subs.pop(sid, None)
        self.write(f"UNSUB {sid}\r\n".encode())

    async def flush(self, timeout: float = 5.0) -> bool:
        """PING and wait for the PONG: everything written before was processed.  False on timeout/close."""
        if self.closed.is_set():
            return False
        fut = asyncio.get_running_loop().create_future()
        self._pongs.append(fut)
        self.write(b"PING\r\n")
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except (asyncio.TimeoutError, ConnectionError):
            return False

    async def drain(self) -> None:
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            pass

    async def request(self, subject: str, data: bytes = b"", timeout: float = 2.0, headers: bytes = b"",
                      reply: str | None = None) -> Msg | None:
        """One request; None when nothing came back in time (or the connection closed)."""
        if not self._inbox_sid:
            self._inbox_sid = self.sub(self._inbox + ".*").sid
        token = str(next(self._tokens))
        fut = asyncio.get_running_loop().create_future()
        self._replies[token] = fut
        self.pub(subject, data, reply or f"{self._inbox}.{token}", headers)
        try:
            return await asyncio.wait_for(fut, timeout)
        except (asyncio.TimeoutError, ConnectionError):
            return None
        finally:
            self._replies.pop(token, None)

    def inbox(self) -> str:
        """A fresh reply subject under this connection's inbox (its messages resolve ``request_future``)."""
        if not self._inbox_sid:
            self._inbox_sid = self.sub(self._inbox + ".*").sid
        return f"{self._inbox}.{next(self._tokens)}"

    def expect(self, reply: str) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._replies[reply.rsplit(".", 1)[1]] = fut
        return fut

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
        if self.writer:
            self.writer.close()
            try:
                await asyncio.wait_for(self.writer.wait_closed(), 1)
            except (Exception, asyncio.CancelledError):
                pass
        self.closed.set()

    # ------------------------------------------------------------------ reading
    async def _read_loop(self) -> None:
        r = self.reader
        try:
            while True:
                line = await r.readuntil(b"\r\n")
                op = line[:4].upper()
                if op == b"MSG ":
                    parts = line[4:-2].decode().split()
                    size = int(parts[-1])
                    payload = (await r.readexactly(size + 2))[:-2]
                    reply = parts[2] if len(parts) == 4 else ""
                    self._deliver(Msg(parts[0], reply, payload, b"", int(parts[1])))
                elif op == b"HMSG":
                    parts = line[5:-2].decode().split()
                    hsize, total = int(parts[-2]), int(parts[-1])
                    body = (await r.readexactly(total + 2))[:-2]
                    reply = parts[2] if len(parts) == 5 else ""
                    self._deliver(Msg(parts[0], reply, body[hsize:], body[:hsize], int(parts[1])))
                elif op == b"PING":
                    self.write(b"PONG\r\n")
                elif op == b"PONG":
                    if self._pongs:
                        f = self._pongs.pop(0)
                        if not f.done():
                            f.set_result(True)
                elif op == b"-ERR":
                    self.errors.append(line[5:-2].decode(errors="replace"))
                elif op == b"INFO":
                    self.info = json.loads(line[5:])
        except (asyncio.IncompleteReadError, ConnectionError, OSError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            self.closed.set()
            for f in self._pongs:
                if not f.done():
                    f.set_exception(ConnectionError("closed"))
            for f in self._replies.values():
                if not f.done():
                    f.set_exception(ConnectionError("closed"))

    def _deliver(self, m: Msg) -> None:
        if m.sid == self._inbox_sid:
            f = self._replies.get(m.subject.rsplit(".", 1)[1])
            if f is not None and not f.done():
                f.set_result(m)
            return
        s = self.subs.get(m.sid)
        if s is None:
            return
        if s.cb is not None:
            s.cb(m)
        else:
            s.queue.put_nowait(m)


async def js_api(c: Conn, api: str, body=None, timeout: float = 5.0) -> dict | None:
    """A ``$JS.API.<api>`` request; the decoded reply, ``{"_raw": ...}`` when it is not JSON, None on no reply."""
    data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    m = await c.request("$JS.API." + api, data, timeout)
    if m is None:
        return None
    try:
        return json.loads(m.data)
    except ValueError:
        return {"_raw": m.data[:200].decode(errors="replace"), "_status": m.status}


async def publish_acked(c: Conn, subject: str, payloads, *, window: int = 256, timeout: float = 10.0,
                        on_ack=None) -> tuple[int, int]:
    """Publish ``payloads`` with reply subjects, at most ``window`` unacknowledged: (acked, errors).

    ``on_ack(index, reply_json)`` sees every PubAck as it arrives (the crash lab records them before a kill)."""
    sem = asyncio.Semaphore(window)
    acked = errors = 0
    pending: set[asyncio.Future] = set()

    def done(i: int, f: asyncio.Future) -> None:
        nonlocal acked, errors
        sem.release()
        pending.discard(f)
        if f.cancelled() or f.exception() is not None:
            errors += 1
            return
        m = f.result()
        try:
            doc = json.loads(m.data)
        except ValueError:
            doc = {"error": {"description": m.status or "non-JSON"}}
        if "error" in doc:
            errors += 1
        else:
            acked += 1
        if on_ack is not None:
            on_ack(i, doc)

    for i, data in enumerate(payloads):
        try:  # a server that stops acking (a stalled store) ends the run instead of hanging it
            await asyncio.wait_for(sem.acquire(), timeout)
        except asyncio.TimeoutError:
            break
        if c.closed.is_set() or c.writer.transport.is_closing():
            break
        reply = c.inbox()
        f = c.expect(reply)
        pending.add(f)
        f.add_done_callback(lambda f, i=i: done(i, f))
        c.pub(subject, data, reply)
        if i % 64 == 0:
            await c.drain()
    if pending:
        await asyncio.wait(list(pending), timeout=timeout)
    return acked, errors
