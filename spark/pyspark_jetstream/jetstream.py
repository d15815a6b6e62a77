"""JetStream on the small client: API requests, reading a sequence range, pipelined publishing with PubAcks.

Theory of operation
-------------------
**API.**  ``$JS.API.*`` requests are plain NATS requests with JSON bodies; a reply with an ``error`` member becomes
:class:`ApiError` carrying nats-server's ``code`` / ``err_code`` (protocol/errors.py holds the same table on the
server side).  With a ``domain`` the prefix is ``$JS.<domain>.API`` (nats.go ``jetstream.WithDomain``).

**Reading a range** ``[first, last]`` of stream sequences (:func:`read_range`).  The task creates an *ephemeral*
consumer: ``deliver_policy=by_start_sequence`` at ``first``, ``ack_policy=none`` (nothing to acknowledge: a retried
task simply reads again), ``mem_storage`` (its state is worthless after the task), an ``inactive_threshold`` so the
server removes it if the task dies, and the query's filter subjects.  It then pulls with ``no_wait`` requests,
two in flight, each asking for at most the number of sequences still left in the range, so the server never sends
much past ``last``.  Every delivery's reply subject is the ack subject ``$JS.ACK.<stream>.<consumer>.<delivered>.
<sseq>.<cseq>.<ts>.<pending>`` (or the 12-token form with domain and account hash, ADR-15), which gives the stream
sequence, the store timestamp and the number of matching messages still pending - no header parsing needed.

The range is complete - no gaps, no duplicates - when one of these holds:

* a message with ``sseq >= last`` arrived (messages arrive in stream order; anything above ``last`` is dropped);
* a message arrived with ``pending == 0``, or the create reply said ``num_pending == 0``: nothing matching exists
  after it *now*, and every sequence up to ``last`` existed when the range was planned, so the rest were deleted;
* a ``404 No Messages`` answered a ``no_wait`` pull: same reasoning - unless the last delivery still said
  ``pending > 0``, which means the server ended the pull before the end of what it has; then the task pulls again
  (if a pull round brings nothing new, the 404 is believed).

Messages deleted from the stream are simply absent.  ``ack_policy=none`` means nothing is ever redelivered, so a
sequence is never seen twice.  The consumer is deleted at the end (``finally``); if the task was killed the
inactive threshold cleans up.

``read_range_direct`` does the same with batched Direct Get (``$JS.API.DIRECT.GET.<stream>`` with ``seq``,
``batch`` and ``next_by_subj``; ADR-31, nats-server 2.11+) for streams with ``allow_direct``: no consumer at all.
The server appends ``Nats-Stream``/``Nats-Sequence``/... headers to each reply and ends a batch with ``204 EOB``.

**Publishing** (:class:`Publisher`): each message is a request to the stream's subject with a reply inbox, up to
``max_in_flight`` unanswered at once; ``wait()`` collects every PubAck and raises on the first error.  The
``Nats-Msg-Id`` header makes a re-publish within the stream's ``duplicate_window`` a no-op acknowledged with
``"duplicate": true`` (nats-server stream.go ``processJetStreamMsg``), which is what makes retried writes exact.
"""
from __future__ import annotations

import asyncio
import collections
import datetime
import json
from dataclasses import dataclass

from skiff.protocol.jsapi.timefmt import parse_time

from .client import Connection, NatsError

__all__ = ["ApiError", "ConnectionLost", "JetStream", "StoredMsg", "read_range", "read_range_direct", "Publisher", "DataLossError"]


class ApiError(NatsError):
    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(f"{description} (code={code}, err_code={err_code})")
        self.code = code
        self.err_code = err_code
        self.description = description


class ConnectionLost(NatsError):
    """The connection broke, or stopped answering PINGs, while a read waited for deliveries."""


class DataLossError(NatsError):
    """Messages the query needs were removed from the stream (retention limits, purge) before it read them."""


# nats-server JSStreamNotFoundErr / JSConsumerNotFoundErr
ERR_STREAM_NOT_FOUND = 10059
ERR_CONSUMER_NOT_FOUND = 10014
ERR_NO_MESSAGE_FOUND = 10037


@dataclass(slots=True)
class StoredMsg:
    subject: str
    seq: int
    time_ns: int
    hdr: bytes
    data: bytes


class JetStream:
    def __init__(self, conn: Connection, domain: str | None = None, timeout: float = 10.0) -> None:
        self.conn = conn
        self.prefix = f"$JS.{domain}.API" if domain else "$JS.API"
        self.timeout = timeout

    async def api(self, subject: str, body: dict | None = None) -> dict:
        payload = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        msg = await self.conn.request(f"{self.prefix}.{subject}", payload, timeout=self.timeout)
        resp = json.loads(msg.data)
        err = resp.get("error")
        if err:
            raise ApiError(err.get("code", 0), err.get("err_code", 0), err.get("description", "unknown error"))
        return resp

    async def stream_info(self, stream: str) -> dict:
        return await self.api(f"STREAM.INFO.{stream}")

    async def seq_at_time(self, stream: str, unix_ms: int) -> int | None:
        """The sequence of the first message stored at or after ``unix_ms``, None when there is none.

        STREAM.MSG.GET with ``start_time`` (nats-server jetstream_api.go jsMsgGetRequest, 2.11+; the store's
        GetSeqFromTime); 10037 no message found means every message is older."""
        t = datetime.datetime.fromtimestamp(unix_ms / 1000, datetime.timezone.utc)
        try:
            r = await self.api(f"STREAM.MSG.GET.{stream}",
                               {"start_time": t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z", "no_hdr": True})
        except ApiError as e:
            if e.err_code == ERR_NO_MESSAGE_FOUND:
                return None
            raise
        return int(r["message"]["seq"])

    async def create_consumer(self, stream: str, config: dict) -> dict:
        return await self.api(f"CONSUMER.CREATE.{stream}", {"stream_name": stream, "config": config})

    async def delete_consumer(self, stream: str, name: str) -> None:
        try:
            await self.api(f"CONSUMER.DELETE.{stream}.{name}")
        except ApiError as e:
            if e.err_code != ERR_CONSUMER_NOT_FOUND:
                raise


def ack_metadata(reply: str) -> tuple[int, int, int]:
    """(stream sequence, timestamp ns, pending) from a JetStream ack subject (ADR-15, both token layouts)."""
    t = reply.split(".")
    if len(t) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        return int(t[5]), int(t[7]), int(t[8])
    if len(t) >= 11:  # $JS.ACK.<domain>.<acc hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>...
        return int(t[7]), int(t[9]), int(t[10])
    raise NatsError(f"not a JetStream ack subject: {reply!r}")


def status_of(hdr: bytes) -> int:
    """The status code of a header block (``NATS/1.0 404 No Messages`` -> 404), 0 when there is none."""
    if len(hdr) > 12 and hdr[8:9] == b" " and hdr[9:12].isdigit():
        return int(hdr[9:12])
    return 0


class _Deliveries:
    """The part of ``asyncio.Queue`` a read uses (put_nowait, get, get_nowait, empty), for one consumer task: a
    deque and at most one waiter.  Every delivered message passes through it, and asyncio.Queue's bookkeeping for
    many getters and a maximum size cost a third of the reader's own time per message."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque = collections.deque()
        self._waiter: asyncio.Future | None = None

    def put_nowait(self, item) -> None:
        self._items.append(item)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def get(self):
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()

    def get_nowait(self):
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.popleft()

    def empty(self) -> bool:
        return not self._items


async def _next_delivery(conn: Connection, queue: _Deliveries, timeout: float, what: str):
    """The next item of a delivery queue that is also watching the connection (:meth:`Connection.watch`).

    A broken connection raises its own error at once; a silent one (no FIN: a dead peer, a cut network) is told
    from a silent server by a PING after ``timeout``."""
    try:
        m = await asyncio.wait_for(queue.get(), timeout)
    except asyncio.TimeoutError:
        try:
            await conn.flush(timeout)
        except (NatsError, asyncio.TimeoutError) as e:
            reason = conn.error or e or f"no PONG within {timeout}s"
            raise ConnectionLost(f"the connection to the server is lost ({reason}) while {what}") from None
        raise NatsError(f"nothing received for {timeout}s while {what} (the connection itself is alive)") from None
    if isinstance(m, Exception):
        raise ConnectionLost(f"{m} while {what}") from m
    return m


async def read_range(js: JetStream, stream: str, first: int, last: int, filters: list[str],
                     chunk: int = 2000, pull_timeout: float = 10.0):
    """Yield lists of :class:`StoredMsg` for stream sequences ``first..last`` (inclusive) in order."""
    if last < first:
        return
    config = {
        "deliver_policy": "by_start_sequence",
        "opt_start_seq": first,
        "ack_policy": "none",
        "replay_policy": "instant",
        "mem_storage": True,
        "num_replicas": 1,
        "inactive_threshold": 60_000_000_000,  # 60 s: the server cleans up after a task that died
    }
    if len(filters) == 1:
        config["filter_subject"] = filters[0]
    elif filters:
        config["filter_subjects"] = list(filters)
    info = await js.create_consumer(stream, config)
    name = info["name"]
    lost = False
    conn = js.conn
    inbox = conn.new_inbox()
    queue = _Deliveries()
    sid = conn.subscribe(inbox + ".*", queue.put_nowait)  # one reply subject per pull: <inbox>.<pull number>
    conn.watch(queue.put_nowait)  # a broken connection puts its error in the queue
    next_subject = f"{js.prefix}.CONSUMER.MSG.NEXT.{stream}.{name}"
    what = f"reading {stream} with consumer {name}"
    try:
        if info.get("num_pending", 0) == 0:
            return
        # Flow: ``asked - got`` messages are requested and not yet delivered.  At most ``last - seen`` messages
        # of the range are still to come, so a new pull asks for no more than that minus what is outstanding.
        asked = got = 0
        seen = first - 1
        done = False
        last_pending = info.get("num_pending", 0)
        live: set[str] = set()  # reply subjects of the pulls of the current round
        pulls = round_got = 0

        def pull() -> None:
            nonlocal asked, pulls
            batch = min(chunk, last - seen - (asked - got))
            if batch > 0:
                pulls += 1
                reply = f"{inbox}.{pulls}"
                live.add(reply)
                conn.publish(next_subject, b'{"batch":%d,"no_wait":true}' % batch, reply)
                asked += batch

        pull()
        pull()
        while not done:
            m = await _next_delivery(conn, queue, pull_timeout, what)
            out: list[StoredMsg] = []
            while True:
                if isinstance(m, Exception):
                    raise ConnectionLost(f"{m} while {what}") from m
                if m.reply:
                    got += 1
                    sseq, ts, pending = ack_metadata(m.reply)
                    last_pending = pending
                    if sseq > last:
                        done = True
                    elif sseq > seen:
                        seen = sseq
                        out.append(StoredMsg(m.subject, sseq, ts, m.hdr, m.data))
                        if sseq >= last or pending == 0:
                            done = True
                else:
                    code = status_of(m.hdr)
                    if code == 404:
                        # A no_wait pull found nothing more to deliver: the rest of the range was deleted.  Unless
                        # the last delivery said more is pending and messages arrived since this round of pulls
                        # began: then the server ended the pull early (Skiff did at 1024-message delivery passes
                        # until 3b02826) and a new round of pulls is right.  A round that brings nothing is
                        # believed; 404s of pulls from earlier rounds are stale and ignored.
                        if m.subject in live:
                            live.clear()
                            if last_pending > 0 and got > round_got:
                                round_got = got
                                asked = got
                            else:
                                done = True
                    elif code == 409 and b"Consumer Deleted" in m.hdr:
                        raise NatsError(f"consumer {name} on {stream} was deleted while reading")
                    elif code in (408, 409):
                        # a pull that ended without being filled: the next pull covers it
                        live.discard(m.subject)
                        asked = got
                    elif code == 100:
                        pass  # idle heartbeat
                    else:
                        raise NatsError(f"unexpected status from consumer {name}: {m.hdr[:80]!r}")
                if done or queue.empty():
                    break
                m = queue.get_nowait()
            if out:
                yield out
            if not done and asked - got <= chunk:
                pull()  # keep about two pulls' worth of messages requested
    except ConnectionLost:
        lost = True
        raise
    finally:
        conn.unwatch(queue.put_nowait)
        conn.unsubscribe(sid)
        if conn.error is None and not lost:  # else the inactive threshold removes the consumer
            try:
                await js.delete_consumer(stream, name)
            except NatsError:
                pass  # the inactive threshold removes it


_DIRECT_KEYS = {b"Nats-Stream", b"Nats-Subject", b"Nats-Sequence", b"Nats-Time-Stamp", b"Nats-Num-Pending",
                b"Nats-Last-Sequence", b"Nats-UpTo-Sequence"}
_ts_cache: list = [b"", 0]  # (seconds part of the last RFC3339 stamp, its Unix ns): stamps share seconds in a run


def _time_ns(value: bytes) -> int:
    """Unix ns of a ``Nats-Time-Stamp`` (RFC3339, UTC ``Z`` as nats-server writes it; others via parse_time)."""
    head = value[:19]
    if len(value) > 20 and value[19:20] in (b".", b"Z") and value.endswith(b"Z"):
        if head != _ts_cache[0]:
            _ts_cache[0] = head
            _ts_cache[1] = parse_time(head.decode() + "Z").unix_ns
        frac = value[20:-1] if value[19:20] == b"." else b""
        return _ts_cache[1] + (int(frac.ljust(9, b"0")[:9]) if frac else 0)
    return parse_time(value.decode()).unix_ns


def split_direct_headers(hdr: bytes) -> tuple[str, int, int, int, bytes]:
    """(subject, seq, time ns, num pending, original header block) of a Direct Get reply.

    nats-server appends its ``Nats-*`` reply headers to the stored block; the other lines are the message's own
    and are kept byte for byte."""
    lines = hdr.split(b"\r\n")
    own = {}
    kept = []
    for line in lines[1:]:
        if not line:
            continue
        k, _, v = line.partition(b":")
        if k in _DIRECT_KEYS:
            own[k] = v.strip()
        else:
            kept.append(line)
    ts = _time_ns(own[b"Nats-Time-Stamp"]) if b"Nats-Time-Stamp" in own else 0
    original = b"NATS/1.0\r\n" + b"\r\n".join(kept) + b"\r\n\r\n" if kept else b""
    return (own.get(b"Nats-Subject", b"").decode("utf-8", "surrogateescape"), int(own.get(b"Nats-Sequence", 0)), ts,
            int(own.get(b"Nats-Num-Pending", -1)), original)


async def read_range_direct(js: JetStream, stream: str, first: int, last: int, filters: list[str],
                            chunk: int = 1000, timeout: float = 10.0):
    """Like :func:`read_range` with batched Direct Get (one filter subject at most)."""
    if len(filters) > 1:
        raise ValueError("direct get reads take one filter subject at most")
    conn = js.conn
    inbox = conn.new_inbox()
    queue = _Deliveries()
    sid = conn.subscribe(inbox, queue.put_nowait)
    conn.watch(queue.put_nowait)
    subject = f"{js.prefix}.DIRECT.GET.{stream}"
    what = f"reading {stream} with direct get"
    seq = first
    try:
        while seq <= last:
            req = {"seq": seq, "batch": min(chunk, last - seq + 1)}
            if filters:
                req["next_by_subj"] = filters[0]
            conn.publish(subject, json.dumps(req).encode(), inbox)
            out: list[StoredMsg] = []
            finished = False
            while True:
                m = await _next_delivery(conn, queue, timeout, what)
                code = status_of(m.hdr)
                if code == 204:  # EOB: this batch is over
                    break
                if code == 404:  # nothing at or after seq
                    finished = True
                    break
                if code:
                    raise NatsError(f"direct get on {stream}: {m.hdr[:80]!r}")
                subj, s, ts, pending, orig = split_direct_headers(m.hdr)
                if s > last:
                    finished = True
                    continue
                if s >= seq:
                    out.append(StoredMsg(subj, s, ts, orig, m.data))
                    seq = s + 1
                if pending == 0 or s >= last:
                    finished = True
            if out:
                yield out
            if finished:
                break
    finally:
        conn.unwatch(queue.put_nowait)
        conn.unsubscribe(sid)


class Publisher:
    """Pipelined JetStream publishing: many messages in flight, then every PubAck checked.

    The hot path costs no future and no coroutine per message: :meth:`send` writes the request (its reply subject
    is this publisher's inbox plus a counter) and returns; PubAcks arrive on one subscription and are checked as
    they come, in the read callback; only when ``max_in_flight`` are unanswered (or the socket pushes back) does
    the caller await :meth:`room`.  The first failed PubAck (an API error, a 503 no-responders status, a PubAck
    from another stream than ``expected_stream``) is raised by the next :meth:`send`, :meth:`room` or
    :meth:`wait`; so is the connection's own error when it breaks."""

    def __init__(self, conn: Connection, max_in_flight: int = 2048, timeout: float = 30.0,
                 expected_stream: str | None = None) -> None:
        self.conn = conn
        self.max_in_flight = max_in_flight
        self.timeout = timeout
        self.expected_stream = expected_stream
        self._expected = expected_stream.encode() if expected_stream else None
        self.published = 0
        self.duplicates = 0
        self._sent = 0
        self._received = 0
        self._failure: Exception | None = None
        self._waiter: asyncio.Future | None = None
        self._wake_at = 0  # wake the waiter when this few (or fewer) PubAcks are outstanding
        self._inbox = conn.new_inbox()
        self._sid = conn.subscribe(self._inbox + ".*", self._on_ack)
        conn.watch(self._on_conn_error)

    @property
    def in_flight(self) -> int:
        return self._sent - self._received

    @property
    def full(self) -> bool:
        """True when the caller should ``await room()`` before sending more."""
        return self._sent - self._received >= self.max_in_flight or self.conn.write_paused or \
            self._failure is not None

    def send(self, subject: str, data: bytes, hdr: bytes = b"") -> None:
        """Publish one message without waiting (check :attr:`full` after)."""
        if self._failure is not None:
            raise self._failure
        self._sent += 1
        self.conn.publish(subject, data, f"{self._inbox}.{self._sent}", hdr)

    async def publish(self, subject: str, data: bytes, hdr: bytes = b"") -> None:
        self.send(subject, data, hdr)
        if self.full:
            await self.room()

    async def room(self) -> None:
        """Wait until at most half of ``max_in_flight`` PubAcks are outstanding and the socket takes more."""
        if self.in_flight >= self.max_in_flight:
            await self._wait_until(self.max_in_flight // 2)
        await self.conn.drain()
        if self._failure is not None:
            raise self._failure

    async def wait(self) -> None:
        """Wait for every outstanding PubAck; raise on the first failure."""
        await self._wait_until(0)
        if self._failure is not None:
            raise self._failure

    def close(self) -> None:
        self.conn.unwatch(self._on_conn_error)
        self.conn.unsubscribe(self._sid)

    async def _wait_until(self, outstanding: int) -> None:
        # a deadline that moves with progress: fail only after ``timeout`` seconds without any PubAck
        while self._failure is None and self.in_flight > outstanding:
            before = self._received
            self._wake_at = outstanding
            self._waiter = self.conn.loop.create_future()
            try:
                await asyncio.wait_for(self._waiter, self.timeout)
            except asyncio.TimeoutError:
                if self._received == before:
                    self._failure = NatsError(f"no PubAck within {self.timeout}s")
            finally:
                self._waiter = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _on_conn_error(self, error: Exception) -> None:
        if self._failure is None:
            self._failure = NatsError(f"no PubAck: {error}")
        self._wake()

    def _on_ack(self, msg) -> None:
        self._received += 1
        if self._failure is None:
            d = msg.data
            # fast path, the usual PubAck: {"stream":"<name>","seq":<n>} (anything else - an error, a duplicate,
            # whose flag nats-server writes by hand as ',"duplicate": true}' - goes through json)
            if d[:11] == b'{"stream":"' and b'"error"' not in d and b'"duplicate"' not in d and \
                    (self._expected is None or d[11:d.find(b'"', 11)] == self._expected):
                self.published += 1
            elif status_of(msg.hdr) == 503:
                self._failure = NatsError("no stream listens on the subject of this message (503 no responders)")
            else:
                self._check(json.loads(d))
        if self._waiter is not None and (self._sent - self._received <= self._wake_at or self._failure is not None):
            self._wake()

    def _check(self, ack: dict) -> None:
        err = ack.get("error")
        if err:
            self._failure = ApiError(err.get("code", 0), err.get("err_code", 0), err.get("description", ""))
        elif self.expected_stream and ack.get("stream") != self.expected_stream:
            self._failure = NatsError(f"message stored in stream {ack.get('stream')!r}, not "
                                      f"{self.expected_stream!r}")
        else:
            self.published += 1
            if ack.get("duplicate"):
                self.duplicates += 1
