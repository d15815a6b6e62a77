"""What a connection to another server is, whatever its kind (core/route.py routes, core/leafnode.py leaf nodes).

A link speaks ``protocol/route.py`` (``RouteParser``: INFO/CONNECT/PING/PONG and the interest and message forms),
queues its output like a client connection (one write per loop turn, ``Server.mark_pending``), keeps the other
server's interest as ``RouteSub`` subscriptions in an account's Sublist, pings on the server's ``ping_interval``
(``-ERR 'Stale Connection'`` after ``ping_max`` unanswered), and when it goes tells its owner (``_gone``).
Subclasses do the handshake and the message forms of their kind.

Compression (nats-server 2.10+, server.go selectCompressionMode; route.go negotiateRouteCompression).  Once both
ends have agreed on a mode, everything a link writes is an S2 stream (storage/s2stream.py: Snappy blocks that S2
readers take) and everything it reads is decoded from one.  The switch happens at an INFO: the parser stops right
after it (``RouteParser.pause``) and the rest of that read is already compressed.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

from skiff.protocol import encoder
from skiff.protocol.parser import ProtocolError

from .subscription import Subscription

STALE_CONNECTION = "Stale Connection"
SLOW_CONSUMER_WRITE_DEADLINE = "Slow Consumer (Write Deadline)"
#: nats-server's default write_deadline (DEFAULT_FLUSH_DEADLINE): a link whose output has not drained for this long
#: is closed, so that a stuck peer cannot make this server buffer without end (client.go handleWriteTimeout).
LINK_WRITE_DEADLINE = 10.0
#: what the transport holds before pause_writing (and the deadline timer) starts
LINK_WRITE_HIGH = 1 << 20
AUTH_TIMEOUT = "Authentication Timeout"
#: server.go compression modes
NOT_SUPPORTED, OFF, ACCEPT, S2_AUTO = "not supported", "off", "accept", "s2_auto"
S2_UNCOMPRESSED, S2_FAST, S2_BETTER, S2_BEST = "s2_uncompressed", "s2_fast", "s2_better", "s2_best"
#: defaultCompressionS2AutoRTTThresholds: up to 10 ms uncompressed, 50 ms fast, 100 ms better, then best
AUTO_THRESHOLDS = (0.010, 0.050, 0.100)
_LEVELS = (S2_UNCOMPRESSED, S2_FAST, S2_BETTER, S2_BEST)


def needs_compression(mode: str) -> bool:
    """server.go needsCompression: the mode negotiates (anything but off and not supported)."""
    return mode not in ("", OFF, NOT_SUPPORTED)


def select_compression(ours: str, theirs: str) -> str:
    """server.go selectCompressionMode (``ours`` needs compression); ValueError for a mode nats-server does not
    know."""
    if theirs in ("", NOT_SUPPORTED):
        return NOT_SUPPORTED
    if theirs == OFF:
        return OFF
    if theirs == ACCEPT:
        return OFF if ours == ACCEPT else ours
    if theirs in (S2_AUTO, S2_UNCOMPRESSED, S2_FAST, S2_BETTER, S2_BEST):
        if ours == ACCEPT:
            return S2_FAST if theirs == S2_AUTO else theirs
        return ours
    raise ValueError(theirs)


def auto_level(rtt: float, thresholds: Any = AUTO_THRESHOLDS) -> str:
    """server.go selectS2AutoModeBasedOnRTT: the level of the first threshold ``rtt`` (seconds) is within (a 0
    threshold is a level not used); beyond them all, best when there are 3 or more, else the last one's."""
    for i, limit in enumerate(thresholds):
        if rtt <= limit:
            return _LEVELS[min(i, 3)]
    n = len(thresholds)
    return S2_BEST if n >= 3 else _LEVELS[max(n - 1, 0)]


SERVER_SHUTDOWN = "Server Shutdown"
AUTH_VIOLATION = "Authentication Failure"
PROTOCOL_VIOLATION = "Protocol Violation"


def announced_proto(value: Any) -> int:
    """An announced protocol version (a JSON number; anything else counts as 0, the oldest)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class LinkSet:
    """What one kind of link (core/cluster.py routes, core/leafnode.py leaf connections) keeps around its
    connections: the listener, the dialing tasks, the links still in their handshake (``pending``), and the stop that
    ends them all.  A subclass says which links are registered (``registered_links``)."""

    def __init__(self, server: Any, options: Any) -> None:
        self.server = server
        self.options = options
        self.pending: set = set()  # connected, handshake not finished
        self.port = 0
        self.running = False
        self._listener: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    def registered_links(self) -> list:
        raise NotImplementedError

    def _spawn(self, coro: Any) -> asyncio.Task:
        """A task of this set (dialing, a reload's changes), cancelled by stop()."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        self.running = False
        if self._listener is not None:
            self._listener.close()
        for t in list(self._tasks):
            t.cancel()
        for link in self.registered_links() + list(self.pending):
            link.close(SERVER_SHUTDOWN)
        self.server.flush_pending()
        if self._listener is not None:
            try:
                await asyncio.wait_for(self._listener.wait_closed(), 2)
            except (asyncio.TimeoutError, OSError):
                pass


class RouteSub(Subscription):
    """A remote server's interest, as its RS+ / LS+ announced it."""

    __slots__ = ("account", "weight")


class Link(asyncio.Protocol):
    # What Server.route() reads of a message's origin: a link never asks for no-responders.
    is_route = False
    no_responders = False
    echo = True
    closed_reason = "Client Closed"  # nats-server's reason when the other side closes
    log_name = "Link"  # how log lines name the kind: "Route", "Leafnode"

    def __init__(self, server: Any, parser: Any) -> None:
        self.server = server
        self.cid = server.next_cid()
        self.parser = parser
        self.transport: asyncio.Transport | None = None
        self.out: list[bytes] = []
        self.closed = False
        self.close_reason = ""
        self.registered = False
        self.remote_id = self.remote_name = ""
        # The server-to-server protocol the other side announced (a route's INFO "proto", a leaf hub's INFO "proto",
        # a leaf spoke's CONNECT "protocol"): 3 and up understands message tracing (core/msgtrace.py).
        self.remote_proto = 0
        self.subs: dict[tuple, RouteSub] = {}
        self.host, self.port = "", 0
        self.in_msgs = self.in_bytes = self.out_msgs = self.out_bytes = 0
        self.start_ns = self.last_activity_ns = server.clock.time_ns()
        self.pings_out = 0
        self.rtt_ns = 0
        self._ping_sent_at = 0.0
        self._timer = None  # the authorization timer of an accepted link
        self._ping_timer = None
        self._wd_timer = None  # the write deadline, while the transport is full
        self.compression = NOT_SUPPORTED  # the negotiated mode (/routez, /leafz)
        self._s2_out = None  # S2Writer once this side writes compressed
        self._s2_in = None  # S2Decoder once the other side does

    # ------------------------------------------------------------------ asyncio.Protocol
    def agreed_compression(self, mode: str, theirs: str) -> str:
        """The compression both ends use (route.go/leafnode.go selectCompressionMode); ``s2_auto`` becomes a level
        from the RTT, the time since this connection began before any PING (computeRTT), by this side's thresholds;
        every later PONG picks it again (``_pong``).  ValueError for a mode it cannot agree on."""
        cm = select_compression(mode, theirs)
        if cm == S2_AUTO:
            if not self.rtt_ns and not self._ping_sent_at:  # no PING yet: the RTT is the time since the start
                self.rtt_ns = self.server.clock.time_ns() - self.start_ns
            cm = auto_level(self.rtt_ns / 1e9, self.auto_thresholds() or AUTO_THRESHOLDS)
        return cm

    def auto_thresholds(self) -> Any:
        """The RTT thresholds of this side's ``s2_auto``, None when its mode is another (the subclass knows)."""
        return None

    def _made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=LINK_WRITE_HIGH)
        self.host, self.port = (transport.get_extra_info("peername") or ("", 0))[:2]
        self._ping_timer = self.server.clock.call_later(self.server.first_ping_delay(), self._ping_tick)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_activity_ns = self.server.clock.time_ns()
        self._parse(data)
        self.server.flush_pending()

    def _parse(self, data: bytes) -> None:
        if self._s2_in is not None:
            from skiff.storage.s2stream import S2Error

            try:
                data = b"".join(self._s2_in.feed(data))
            except S2Error as e:
                self.server.log_error(f"{self.kind} compression error", cid=self.cid, error=str(e))
                return self.close("Protocol Violation")
        self.parser.parse(data, self)
        if self.parser.paused and not self.closed:
            # The INFO that switched the other side to compression: what follows it is compressed.
            rest = self.parser.resume()
            from skiff.storage.s2stream import S2Decoder

            self._s2_in = S2Decoder()
            if rest:
                self._parse(rest)

    def start_compression(self, read: bool = True) -> None:
        """From now on this side writes an S2 stream (and, with ``read``, reads one after the current INFO)."""
        from skiff.storage.s2stream import S2Writer

        self.flush()
        self._s2_out = S2Writer()
        if read:
            self.parser.pause()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close_reason = self.close_reason or self.closed_reason
        self._teardown()

    # ------------------------------------------------------------------ output
    def send(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.out:
            self.server.mark_pending(self)
        self.out.append(data)

    def flush(self) -> None:
        out = self.out
        if not out or self.transport is None:
            return
        data = b"".join(out)
        out.clear()
        if self._s2_out is not None:
            data = self._s2_out.encode(data)
        if not self.transport.is_closing():
            self.transport.write(data)

    def pending_bytes(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def pause_writing(self) -> None:
        """The peer is not reading: it has LINK_WRITE_DEADLINE seconds to take the backlog."""
        if self._wd_timer is None and not self.closed:
            self._wd_timer = self.server.clock.call_later(LINK_WRITE_DEADLINE, self._write_deadline)

    def resume_writing(self) -> None:
        if self._wd_timer is not None:
            self._wd_timer.cancel()
            self._wd_timer = None

    def _write_deadline(self) -> None:
        self._wd_timer = None
        if self.closed:
            return
        self.server.log_error("Slow Consumer Detected: WriteDeadline exceeded", cid=self.cid, kind=self.kind,
                              remote=self.remote_name, pending=self.pending_bytes())
        self.close_reason = SLOW_CONSUMER_WRITE_DEADLINE
        self.out.clear()
        if self.transport is not None:
            self.transport.abort()  # a plain close would wait for the backlog the peer does not read
        self._teardown()

    # ------------------------------------------------------------------ input helpers
    def _auth_violation(self) -> None:
        """nats-server's answer to a link that is not authorized (yet): -ERR, then close."""
        self.send(encoder.err("Authorization Violation"))
        self.close(AUTH_VIOLATION)

    def _protocol_error(self, op: ProtocolError) -> None:
        """A ``ProtocolError`` from the parser (or a CONNECT/INFO that is no JSON object): its -ERR if it has one,
        then close."""
        if op.err:
            self.send(encoder.err(op.err))
        self.server.log_error(f"{self.log_name} protocol error", cid=self.cid, error=op.err or op.detail)
        self.close(PROTOCOL_VIOLATION)

    def _json(self, data: bytes, op: str) -> dict | None:
        """The body of an INFO or CONNECT (``op``); one that is not a JSON object is a protocol error: the link
        is closed and None returned."""
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            self._protocol_error(ProtocolError("", f"bad {self.log_name.lower()} {op}"))
            return None
        return doc

    def _pong(self) -> None:
        self.pings_out = 0
        if self._ping_sent_at:
            self.rtt_ns = int((self.server.clock.monotonic() - self._ping_sent_at) * 1e9)
            self._ping_sent_at = 0.0
            if needs_compression(self.compression) and self._s2_out is not None:
                # client.go processPong / updateS2AutoCompressionLevel: s2_auto picks its level again from every
                # RTT.  Skiff's one encoder writes every level alike (docs/parity.md): the level is what /routez and
                # /leafz show.
                thresholds = self.auto_thresholds()
                if thresholds is not None:
                    self.compression = auto_level(self.rtt_ns / 1e9, thresholds)

    def _add_remote_sub(self, key: tuple, account: str, sublist: Any, subject: str, queue: str, weight: int,
                        prefix: str) -> None:
        """An RS+/LS+: a new RouteSub in ``sublist``, or a queue group's new weight."""
        sub = self.subs.get(key)
        if sub is not None:
            sub.weight = weight
            return
        sub = RouteSub(None, subject, queue, f"{prefix}{self.cid}", None, True)
        sub.route = self
        sub.account = account
        sub.weight = weight
        sub.sublist = sublist
        self.subs[key] = sub
        self.server.add_subscription(sub)

    def _remove_remote_sub(self, key: tuple) -> None:
        sub = self.subs.pop(key, None)
        if sub is not None:
            self.server.remove_subscription(sub)

    # ------------------------------------------------------------------ timers
    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _auth_timeout(self) -> None:
        self._timer = None
        if not self.closed and not self.registered:
            self.send(encoder.err("Authentication Timeout"))
            self.close(AUTH_TIMEOUT)

    def _ping_tick(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        srv = self.server
        if self.pings_out + 1 > srv.options.ping_max:
            self.send(encoder.err("Stale Connection"))
            self.close(STALE_CONNECTION)
            return
        self.pings_out += 1
        self._ping_sent_at = srv.clock.monotonic()
        self.send(encoder.PING)
        srv.flush_pending()
        self._ping_timer = srv.clock.call_later(srv.options.ping_interval, self._ping_tick)

    # ------------------------------------------------------------------ closing
    def close(self, reason: str = "") -> None:
        if self.closed:
            return
        self.close_reason = reason or self.closed_reason
        if self.transport is not None:
            self.flush()
            self.transport.close()
        self._teardown()

    def _teardown(self) -> None:
        if self.closed and not self.subs and not self.registered and not self._known():
            return
        self.closed = True
        for t in (self._timer, self._ping_timer, self._wd_timer):
            if t is not None:
                t.cancel()
        self._timer = self._ping_timer = self._wd_timer = None
        subs = list(self.subs.values())
        self.subs.clear()
        for sub in subs:
            self.server.remove_subscription(sub)
        self._gone()

    def _known(self) -> bool:
        """Whether the owner still lists this link (pending or registered)."""
        raise NotImplementedError

    def _gone(self) -> None:
        """Tell the owner (Cluster, LeafNodes) that this link is closed."""
        raise NotImplementedError
