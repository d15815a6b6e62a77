"""What a connection to another server is, whatever its kind (core/route.py routes, core/leafnode.py leaf nodes).

A link speaks ``protocol/route.py`` (``RouteParser``: INFO/CONNECT/PING/PONG and the interest and message forms),
queues its output like a client connection (one write per loop turn, ``Server.mark_pending``), keeps the other
server's interest as ``RouteSub`` subscriptions in an account's Sublist, pings on the server's ``ping_interval``
(``-ERR 'Stale Connection'`` after ``ping_max`` unanswered), and when it goes tells its owner (``_gone``).
Subclasses do the handshake and the message forms of their kind.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

from skiff.protocol import encoder

from .subscription import Subscription

STALE_CONNECTION = "Stale Connection"
SLOW_CONSUMER_WRITE_DEADLINE = "Slow Consumer (Write Deadline)"
#: nats-server's default write_deadline (DEFAULT_FLUSH_DEADLINE): a link whose output has not drained for this long
#: is closed, so that a stuck peer cannot make this server buffer without end (client.go handleWriteTimeout).
LINK_WRITE_DEADLINE = 10.0
#: what the transport holds before pause_writing (and the deadline timer) starts
LINK_WRITE_HIGH = 1 << 20
AUTH_TIMEOUT = "Authentication Timeout"
SERVER_SHUTDOWN = "Server Shutdown"


class RouteSub(Subscription):
    """A remote server's interest, as its RS+ / LS+ announced it."""

    __slots__ = ("account", "weight")


class Link(asyncio.Protocol):
    # What Server.route() reads of a message's origin: a link never asks for no-responders.
    is_route = False
    no_responders = False
    echo = True
    closed_reason = "Client Closed"  # nats-server's reason when the other side closes

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

    # ------------------------------------------------------------------ asyncio.Protocol
    def _made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=LINK_WRITE_HIGH)
        self.host, self.port = (transport.get_extra_info("peername") or ("", 0))[:2]
        self._ping_timer = self.server.clock.call_later(self.server.first_ping_delay(), self._ping_tick)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_activity_ns = self.server.clock.time_ns()
        self.parser.parse(data, self)
        self.server.flush_pending()

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
    @staticmethod
    def _json(data: bytes) -> dict | None:
        """An INFO or CONNECT body, or None when it is not a JSON object."""
        try:
            doc = json.loads(data)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def _pong(self) -> None:
        self.pings_out = 0
        if self._ping_sent_at:
            self.rtt_ns = int((self.server.clock.monotonic() - self._ping_sent_at) * 1e9)
            self._ping_sent_at = 0.0

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
