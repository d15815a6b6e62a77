"""A small asyncio NATS client on :mod:`.wire`: connect, publish, subscribe, request, flush.  No reconnects here:
a read task reconnects a level up (reader.py), where it knows from which sequence to go on.

Theory of operation
-------------------
The data source needs a client in three places - the driver-side planner (one STREAM.INFO), a read task (one
ephemeral consumer, pulled until its sequence range is done) and a write task (many publishes in flight, then all
PubAcks) - each short-lived and owned by one Spark task.  So this client is deliberately small: one TCP connection,
no reconnect inside the connection: a broken connection fails everything waiting on it.  A read task then opens
a new connection and goes on from the sequence after the last one it handed to Spark (reader.py); a write task
fails and Spark retries it (its message ids make the retry exact).

* ``Connection.connect`` tries the servers in order, reads ``INFO``, sends ``CONNECT`` (headers and no_responders
  on, credentials when given) and a ``PING``; the matching ``PONG`` (or ``-ERR``) decides success, the same
  handshake nats.go does with ``verbose`` off.
* TLS as nats.go does it (nats.go ``processConnectInit`` / ``makeTLSConn``): the plain ``INFO`` first, then the
  handshake on the same socket when the server requires TLS or the client asked for it (an ``SSLContext``, or a
  ``tls://`` URL); asking for TLS from a server that offers none (neither ``tls_required`` nor ``tls_available``)
  is an error, never a silent plain-text connection.  ``handshake_first`` (nats-server ``tls { handshake_first }``)
  does the handshake before any byte of NATS.
* Authentication: user/password, token, an nkey (``nkey`` + the server's ``nonce`` signed with the seed, ``sig``
  in base64url without padding) or a user JWT with its seed (``jwt`` + ``sig``, from a ``.creds`` file: ADR-14,
  nats-server client.go ``processConnect``).
* A reader task feeds the socket into :class:`~.wire.ServerParser` and dispatches: ``MSG``/``HMSG`` to the
  subscription's callback by sid, ``PING`` answered with ``PONG``, each ``PONG`` completes the oldest ``flush``,
  ``-ERR`` fails everything pending (nats-server closes the connection after most of them).
* Requests share one wildcard inbox subscription (``_INBOX.<id>.*``), the token after the prefix picks the
  waiting future: the "new style" request of nats.go, one SUB for the connection's whole life.
* When the connection breaks, everything waiting learns it at once and with the connection's own error: pending
  flushes and requests fail, and the callbacks registered with :meth:`Connection.watch` (a read task's delivery
  queue) are called, so a reader is not left waiting for a delivery timeout and blaming the consumer.
* Writes go into an in-memory buffer that is written to the transport once per loop iteration (or when it is
  large), so a pipelined publisher produces few big writes; ``drain()`` waits for transport back-pressure.
"""
from __future__ import annotations

import asyncio
import base64
import itertools
import re
import secrets
import ssl
from typing import Callable
from urllib.parse import urlsplit

from skiff.protocol import client_wire as wire

__all__ = ["Connection", "ConnectError", "NatsError", "NoRespondersError", "parse_servers"]

_VERSION = "0.1.0"


class NatsError(Exception):
    """A connection-level failure: cannot connect, authorization, -ERR, closed, timeout."""


class ConnectError(NatsError):
    """No server of the list took the connection.  ``transient``: every attempt failed as a server that is down
    or restarting does (refused, timed out, closed), none was refused by a server (authorization, TLS)."""

    def __init__(self, text: str, transient: bool) -> None:
        super().__init__(text)
        self.transient = transient


class NoRespondersError(NatsError):
    """A request found nobody subscribed (503 status with no_responders): e.g. JetStream is not enabled."""


def parse_servers(servers: str) -> list[tuple[str, int, str | None, str | None, bool]]:
    """``nats://user:pass@host:4222,tls://host2`` -> [(host, port, user, password, tls)] (user/password None when
    absent; tls True for a ``tls://`` URL, which asks for TLS as nats.go does)."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" not in item:
            item = "nats://" + item
        u = urlsplit(item)
        if u.scheme not in ("nats", "tcp", "tls"):
            raise ValueError(f"unsupported server URL scheme {u.scheme!r} in {item!r} (nats://, tls:// or tcp://)")
        out.append((u.hostname or "127.0.0.1", u.port or 4222, u.username, u.password, u.scheme == "tls"))
    if not out:
        raise ValueError("no server given")
    return out


_CREDS_BLOCK = re.compile(r"-{3,}[^\n]*-{3,}\r?\n(.+?)\r?\n\s*-{3,}[^\n]*-{3,}", re.S)


def read_creds(path: str) -> tuple[str, bytes]:
    """(user JWT, nkey seed) of a ``.creds`` file: the first two ``-----BEGIN ...-----`` blocks, as nats.go's
    ``userFromFile`` / ``nkeyPairFromSeedFile`` read them."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    blocks = [b.strip() for b in _CREDS_BLOCK.findall(text)]
    if len(blocks) < 2 or not blocks[0].startswith("ey") or not blocks[1].startswith("SU"):
        raise ValueError(f"{path} is not a NATS credentials file (a user JWT block, then a user nkey seed block)")
    return blocks[0], blocks[1].encode()


def read_seed(path: str) -> bytes:
    """The user nkey seed of a seed file: its first line that starts with ``SU`` (nats.go ``NkeyOptionFromSeed``)."""
    with open(path, "rb") as f:
        for line in f.read().decode("utf-8", "replace").splitlines():
            if line.strip().startswith("SU"):
                return line.strip().encode()
    raise ValueError(f"{path} holds no user nkey seed (a line starting with SU)")


def _sign_nonce(seed: bytes, nonce: str) -> tuple[str, str]:
    """(public key, base64url signature of the nonce without padding)."""
    import nkeys  # a dependency of Skiff (the server verifies nkey users with it)

    kp = nkeys.from_seed(bytearray(seed))
    try:
        sig = base64.urlsafe_b64encode(kp.sign(nonce.encode())).rstrip(b"=").decode()
        return kp.public_key.decode(), sig
    finally:
        kp.wipe()


def _nuid() -> str:
    return secrets.token_hex(11)


class Connection(asyncio.Protocol):
    """One client connection.  Create with ``await Connection.connect(...)``."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._parser = wire.ServerParser()
        self._subs: dict[int, Callable[[wire.Msg], None]] = {}
        self._sid = itertools.count(1)
        self._pongs: list[asyncio.Future] = []
        self._out: list[bytes] = []
        self._out_size = 0
        self._flush_scheduled = False
        self._closed: asyncio.Future | None = None
        self._error: Exception | None = None
        self._paused: asyncio.Future | None = None
        self.info: dict = {}
        self._info_fut: asyncio.Future | None = None
        self._inbox_prefix = ""
        self._requests: dict[str, asyncio.Future] = {}
        self._req_id = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchers: list[Callable[[Exception], None]] = []
        self.server_index = 0  # which URL of the ``servers`` list this connection went to

    # --- asyncio.Protocol ---------------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            events = self._parser.feed(data)
        except wire.WireError as e:
            self._fail(NatsError(str(e)))
            self._transport.close()
            return
        for ev in events:
            if type(ev) is wire.Msg:
                cb = self._subs.get(ev.sid)
                if cb is not None:
                    cb(ev)
            elif type(ev) is wire.Ping:
                self._write(wire.PONG)
            elif type(ev) is wire.Pong:
                if self._pongs:
                    f = self._pongs.pop(0)
                    if not f.done():
                        f.set_result(None)
            elif type(ev) is wire.Info:
                self.info = ev.fields
                if self._info_fut is not None and not self._info_fut.done():
                    self._info_fut.set_result(ev.fields)
            elif type(ev) is wire.Err:
                self._fail(NatsError(f"server error: {ev.text}"))

    def connection_lost(self, exc) -> None:
        self._fail(NatsError(f"connection closed{': ' + str(exc) if exc else ''}"))
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        if self._paused is None:
            self._paused = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._paused is not None:
            if not self._paused.done():
                self._paused.set_result(None)
            self._paused = None

    # --- connecting ---------------------------------------------------------------------------------------

    @classmethod
    async def connect(cls, servers: str, *, user: str | None = None, password: str | None = None,
                      token: str | None = None, name: str = "pyspark-jetstream", timeout: float = 5.0,
                      tls: ssl.SSLContext | None = None, tls_handshake_first: bool = False,
                      jwt: str | None = None, nkey_seed: bytes | None = None, first: int = 0) -> "Connection":
        """``tls``: the context to use (CA, client certificate); a ``tls://`` URL or a server that requires TLS
        without one uses the system's default context.  ``nkey_seed`` alone: nkey authentication; with ``jwt``:
        a user JWT (a ``.creds`` file).  The servers are tried in their order starting at index ``first`` (and
        wrapping round), so a reconnect can begin with the server after the one that went away; the connection's
        ``server_index`` says which one answered."""
        errors = []
        transient = True
        urls = parse_servers(servers)
        first %= len(urls)
        for index in list(range(first, len(urls))) + list(range(first)):
            host, port, url_user, url_pass, url_tls = urls[index]
            try:
                conn = await cls._connect_one(host, port, user or url_user, password or url_pass, token, name,
                                              timeout, tls, url_tls or tls is not None, tls_handshake_first, jwt,
                                              nkey_seed)
                conn.server_index = index
                return conn
            except (OSError, NatsError, asyncio.TimeoutError) as e:
                # TimeoutError's text is empty: say what timed out
                reason = str(e) or (f"timed out after {timeout}s" if isinstance(e, (asyncio.TimeoutError,
                                                                                   TimeoutError))
                                    else type(e).__name__)
                errors.append(f"{host}:{port}: {reason}")
                # nobody listening, a timeout, a connection closed during the handshake: a server that may be
                # back in a moment; a refusal (an -ERR such as Authorization Violation, a TLS failure) stays
                transient = transient and not isinstance(e, ssl.SSLError) and (
                    isinstance(e, (OSError, asyncio.TimeoutError)) or str(e).startswith("connection closed"))
        raise ConnectError("could not connect to any server: " + "; ".join(errors), transient)

    @classmethod
    async def _connect_one(cls, host, port, user, password, token, name, timeout, tls, want_tls, handshake_first,
                           jwt, nkey_seed) -> "Connection":
        loop = asyncio.get_running_loop()
        conn = cls()
        conn._loop = loop
        conn._closed = loop.create_future()
        conn._info_fut = loop.create_future()
        if handshake_first:
            ctx = tls or ssl.create_default_context()
            await asyncio.wait_for(loop.create_connection(lambda: conn, host, port, ssl=ctx, server_hostname=host),
                                   timeout)
        else:
            await asyncio.wait_for(loop.create_connection(lambda: conn, host, port), timeout)
        try:
            info = await asyncio.wait_for(asyncio.shield(conn._info_fut), timeout)
            if not handshake_first:
                if want_tls and not (info.get("tls_required") or info.get("tls_available")):
                    raise NatsError("secure connection not available: TLS was asked for (a tls option or a "
                                    "tls:// URL) and the server offers none")
                if want_tls or info.get("tls_required"):
                    conn._transport = await asyncio.wait_for(
                        loop.start_tls(conn._transport, conn, tls or ssl.create_default_context(),
                                       server_hostname=host), timeout)
            opts = {"verbose": False, "pedantic": False, "tls_required": want_tls or handshake_first,
                    "lang": "python-pyspark-jetstream", "version": _VERSION, "protocol": 1, "headers": True,
                    "no_responders": True, "echo": True, "name": name}
            if user is not None:
                opts["user"] = user
                opts["pass"] = password or ""
            if token is not None:
                opts["auth_token"] = token
            if nkey_seed is not None:
                nonce = info.get("nonce")
                if not nonce:
                    raise NatsError("the server sent no nonce to sign: it has no nkey or JWT users")
                public, opts["sig"] = _sign_nonce(nkey_seed, nonce)
                if jwt is not None:
                    opts["jwt"] = jwt
                else:
                    opts["nkey"] = public
            conn._write(wire.connect(opts))
            await conn.flush(timeout)
        except BaseException:
            conn._transport.close()
            raise
        conn._inbox_prefix = f"_INBOX.{_nuid()}"
        conn._subs[next(conn._sid)] = conn._on_response
        conn._write(wire.sub(conn._inbox_prefix + ".*", 1))
        return conn

    # --- output -------------------------------------------------------------------------------------------

    def _write(self, frame: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._out.append(frame)
        self._out_size += len(frame)
        if self._out_size >= 256 * 1024:
            self._flush_out()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_out)

    def _flush_out(self) -> None:
        self._flush_scheduled = False
        if self._out and self._transport is not None and not self._transport.is_closing():
            self._transport.write(b"".join(self._out))
        self._out.clear()
        self._out_size = 0

    @property
    def write_paused(self) -> bool:
        """The transport's write buffer is over its high-water mark (``drain()`` would wait)."""
        return self._paused is not None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    async def drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark."""
        if self._paused is not None:
            await self._paused
        if self._error is not None:
            raise self._error

    def publish(self, subject: str, payload: bytes = b"", reply: str = "", hdr: bytes = b"") -> None:
        self._write(wire.pub(subject, payload, reply, hdr))

    async def flush(self, timeout: float = 5.0) -> None:
        """PING and wait for the PONG: everything written before has been processed by the server."""
        fut = self._loop.create_future()
        self._pongs.append(fut)
        self._write(wire.PING)
        await asyncio.wait_for(fut, timeout)

    # --- subscriptions and requests -----------------------------------------------------------------------

    def subscribe(self, subject: str, callback: Callable[[wire.Msg], None], queue: str = "") -> int:
        sid = next(self._sid)
        self._subs[sid] = callback
        self._write(wire.sub(subject, sid, queue))
        return sid

    def unsubscribe(self, sid: int) -> None:
        if self._subs.pop(sid, None) is not None and self._error is None:
            self._write(wire.unsub(sid))

    def new_inbox(self) -> str:
        return f"_INBOX.{_nuid()}"

    def _on_response(self, msg: wire.Msg) -> None:
        token = msg.subject[len(self._inbox_prefix) + 1:]
        fut = self._requests.pop(token, None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def request_future(self, subject: str, payload: bytes = b"", hdr: bytes = b"") -> tuple[str, asyncio.Future]:
        """Publish a request; return (token, future of its first response).  Many may be pending at once."""
        token = str(next(self._req_id))
        fut = self._loop.create_future()
        self._requests[token] = fut
        self.publish(subject, payload, f"{self._inbox_prefix}.{token}", hdr)
        return token, fut

    def watch(self, callback: Callable[[Exception], None]) -> None:
        """Call ``callback(error)`` once when the connection fails (at once if it already has)."""
        if self._error is not None:
            callback(self._error)
        else:
            self._watchers.append(callback)

    def unwatch(self, callback: Callable[[Exception], None]) -> None:
        try:
            self._watchers.remove(callback)
        except ValueError:
            pass

    def forget(self, token: str) -> None:
        """Stop waiting for the response of a request (after a timeout)."""
        self._requests.pop(token, None)

    async def request(self, subject: str, payload: bytes = b"", hdr: bytes = b"", timeout: float = 5.0) -> wire.Msg:
        token, fut = self.request_future(subject, payload, hdr)
        try:
            msg = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise NatsError(f"request to {subject} timed out after {timeout}s") from None
        finally:
            self._requests.pop(token, None)
        if not msg.data and msg.hdr.startswith(b"NATS/1.0 503"):
            raise NoRespondersError(f"no responders for {subject}")
        return msg

    # --- teardown -----------------------------------------------------------------------------------------

    def _fail(self, exc: Exception) -> None:
        if self._error is None:
            self._error = exc
        for f in self._pongs:
            if not f.done():
                f.set_exception(exc)
        self._pongs.clear()
        for f in self._requests.values():
            if not f.done():
                f.set_exception(exc)
        self._requests.clear()
        if self._info_fut is not None and not self._info_fut.done():
            self._info_fut.set_exception(exc)
        if self._paused is not None and not self._paused.done():
            self._paused.set_exception(exc)
        watchers, self._watchers = self._watchers, []
        for cb in watchers:
            cb(self._error)

    @property
    def error(self) -> Exception | None:
        return self._error

    async def close(self) -> None:
        if self._transport is None:
            return
        if self._error is None:
            try:
                self._flush_out()
                await self.flush(2.0)
            except (NatsError, asyncio.TimeoutError):
                pass
        self._transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._closed), 2.0)
        except asyncio.TimeoutError:
            pass

