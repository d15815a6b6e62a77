"""One route: a connection to another server of the cluster (nats-server route.go; wave2-notes section 5).

Handshake.  Both sides send INFO.  The side that dialed (``solicited``) also sends CONNECT at once; the accepting side
checks it (cluster authorization, cluster name) before anything else.  When the remote INFO has arrived (and, on the
accepting side, the CONNECT), the route is registered with the cluster (``Cluster.add_route``), which refuses a
second route to the same server, then both sides send ``RS+`` for all their interest.

Skiff presents itself as a server without route pooling and without compression, as nats-server before 2.10: its
INFO has no ``route_pool_size`` and no ``compression``, so a nats-server peer keeps one connection to it and sends
every account on it, with the account name in each line (route.go addRoute, ``noPool``).

Interest.  Each ``RS+`` becomes a ``Subscription`` with ``route`` set, in the named account's Sublist, so that the
server's ``route()`` finds local and remote interest in one lookup.  A message matching route subscriptions is sent
once per route, with the names of the queue groups it should be given to (``Server._forward``).  A message that
came from a route is delivered to local subscribers only: the cluster is a full mesh and never forwards twice.
"""
from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from skiff.protocol import encoder
from skiff.protocol.parser import Connect, Err, Info, Ok, Ping, Pong, ProtocolError
from skiff.protocol.route import RouteParser, RSub, RUnsub, rmsg_head, rs_minus, rs_plus

from .subscription import Subscription

if TYPE_CHECKING:  # pragma: no cover
    from .cluster import Cluster

# nats-server closed-connection reasons (client.go ClosedState.String) a route may end with.
ROUTE_CLOSED = "Route Closed"
DUPLICATE_ROUTE = "Duplicate Route"
CLUSTER_NAME_CONFLICT = "Cluster Name Conflict"
AUTH_VIOLATION = "Authentication Failure"
AUTH_TIMEOUT = "Authentication Timeout"
PROTOCOL_VIOLATION = "Protocol Violation"
WRONG_PORT = "Incorrect Port"
STALE_CONNECTION = "Stale Connection"
SERVER_SHUTDOWN = "Server Shutdown"


class RouteSub(Subscription):
    """A remote server's interest, as its RS+ announced it."""

    __slots__ = ("account", "weight")


class RouteConnection(asyncio.Protocol):
    kind = "Router"
    # What Server.route() reads of a message's origin: a route never asks for no-responders, and what it brings
    # is never forwarded to another route.
    is_route = True
    no_responders = False
    echo = True

    def __init__(self, cluster: "Cluster", solicited: bool = False, url: str = "", implicit: bool = False) -> None:
        self.cluster = cluster
        self.server = cluster.server
        self.cid = self.server.next_cid()
        self.solicited = solicited
        self.implicit = implicit  # learnt from another route's gossip, not configured
        self.url = url
        self.parser = RouteParser(self.server.options.max_payload * 64)
        self.transport: asyncio.Transport | None = None
        self.out: list[bytes] = []
        self.closed = False
        self.close_reason = ""
        self.registered = False
        self.remote_id = ""
        self.remote_name = ""
        self.remote_info: dict = {}
        self.connect_received = solicited  # the accepting side waits for CONNECT
        self.headers = True
        self.subs: dict[tuple[str, str, str], RouteSub] = {}
        self._prefixes: dict[tuple[str, str], bytes] = {}  # (account, subject) -> b"RMSG <acc> <subject> "
        self._sublists: dict[str, object] = {}  # account name -> its Sublist (on_rmsg)
        self.host, self.port = "", 0
        self.in_msgs = self.in_bytes = self.out_msgs = self.out_bytes = 0
        self.start_ns = self.server.clock.time_ns()
        self.pings_out = 0
        self.rtt_ns = 0
        self._ping_sent_at = 0.0
        self.last_activity_ns = self.start_ns
        self.retry = False  # reconnect even if implicit (both sides kept the other's connection: route.go)
        self._timer = None
        self._ping_timer = None

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("", 0)
        self.host, self.port = peer[0], peer[1]
        srv = self.server
        cl = self.cluster
        cl.pending.add(self)
        if self.solicited:
            self.send(cl.connect_proto(self.url))
        elif cl.options.username:
            # With cluster authorization, a CONNECT must come within its timeout (2 s by default, as nats-server).
            self._timer = srv.clock.call_later(cl.options.auth_timeout or 2.0, self._auth_timeout)
        self.send(cl.info_proto())
        self._ping_timer = srv.clock.call_later(srv.first_ping_delay(), self._ping_tick)
        self.flush()
        srv.log_debug("Route connection created", cid=self.cid, addr=f"{self.host}:{self.port}",
                      solicited=self.solicited)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_activity_ns = self.server.clock.time_ns()
        self.parser.parse(data, self)
        self.server.flush_pending()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close_reason = self.close_reason or ROUTE_CLOSED
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
        if self.transport.is_closing():
            return
        self.transport.write(data)

    def pending_bytes(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def send_msg(self, account: str, subject: str, reply: str, queues: list[str] | tuple, hdr_len: int,
                 data: bytes) -> None:
        if not self.registered:
            return
        if hdr_len and not self.headers:
            data = data[hdr_len:]
            hdr_len = 0
        if not self.out:
            self.server.mark_pending(self)
        size = len(data)
        if queues or hdr_len or reply:
            head = rmsg_head(account, subject, reply, queues, hdr_len, size)
        else:
            # "RMSG <acc> <subject> " once per subject (a stream of messages on one subject is the common case)
            key = (account, subject)
            prefix = self._prefixes.get(key)
            if prefix is None:
                if len(self._prefixes) > 4096:
                    self._prefixes.clear()
                prefix = self._prefixes[key] = f"RMSG {account} {subject} ".encode("utf-8", "surrogateescape")
            head = prefix + b"%d\r\n" % size
        self.out += (head, data, b"\r\n")
        self.out_msgs += 1
        self.out_bytes += size

    # ------------------------------------------------------------------ input
    def on_rmsg(self, account: str, subject: str, reply: str, queues: tuple, hdr_len: int, data: bytes) -> None:
        self.in_msgs += 1
        self.in_bytes += len(data)
        if not self.registered:
            return  # nats-server takes a message before the route's INFO and drops it (checked with 2.15.1)
        sl = self._sublists.get(account)
        if sl is None:
            acc = self.server.accounts.get(account)
            if acc is None:
                # route.go processInboundRoutedMsg: a message for an unknown account is dropped (debug log).
                self.server.log_debug("Unknown account for routed message", account=account, subject=subject)
                return
            sl = self._sublists[account] = acc.sublist
        self.server.deliver_routed(self, sl, subject, reply, queues, hdr_len, data)

    def on_route_op(self, op: Any) -> None:
        if not self.connect_received and not isinstance(op, Connect) and self.cluster.options.username:
            # Anything but CONNECT first, with authorization on: nats-server's answer (checked with 2.15.1).
            self.send(encoder.err("Authorization Violation"))
            return self.close(AUTH_VIOLATION)
        if isinstance(op, RSub):
            return self._remote_sub(op)
        if isinstance(op, RUnsub):
            return self._remote_unsub(op)
        if isinstance(op, Ping):
            self.send(encoder.PONG)
            return
        if isinstance(op, Pong):
            self.pings_out = 0
            if self._ping_sent_at:
                self.rtt_ns = int((self.server.clock.monotonic() - self._ping_sent_at) * 1e9)
                self._ping_sent_at = 0.0
            return
        if isinstance(op, Info):
            return self._info(op.raw)
        if isinstance(op, Connect):
            return self._connect(op.raw)
        if isinstance(op, Err):
            self.server.log_error("Route error", remote=self.remote_id or f"{self.host}:{self.port}",
                                  error=op.text.decode("utf-8", "replace"))
            self.cluster.remote_error(self, op.text.decode("utf-8", "replace"))
            self.close(ROUTE_CLOSED)
            return
        if isinstance(op, Ok):
            return
        if isinstance(op, ProtocolError):
            return self._protocol_error(op)

    def _protocol_error(self, op: ProtocolError) -> None:
        if op.err:
            self.send(encoder.err(op.err))
        self.server.log_error("Route protocol error", cid=self.cid, error=op.err or op.detail)
        self.close(PROTOCOL_VIOLATION)

    def _connect(self, data: bytes) -> None:
        """processRouteConnect: a client on the route port, wrong credentials and another cluster are refused."""
        if self.solicited or self.connect_received:
            return
        try:
            proto = json.loads(data)
            if not isinstance(proto, dict):
                raise ValueError
        except ValueError:
            return self._protocol_error(ProtocolError("", "bad route CONNECT"))
        if proto.get("lang"):  # clients send lang, routes do not (ErrClientConnectedToRoutePort)
            self.send(encoder.err("attempted to connect to route port"))
            return self.close(WRONG_PORT)
        if not self.cluster.authorize(proto.get("user") or "", proto.get("pass") or ""):
            self.send(encoder.err("Authorization Violation"))
            return self.close(AUTH_VIOLATION)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.cluster.check_name(self, str(proto.get("cluster") or ""), bool(proto.get("cluster_dynamic"))):
            return
        self.connect_received = True
        self.remote_id = str(proto.get("name") or "")
        self.headers = proto.get("headers") is True
        self._maybe_register()

    def _info(self, data: bytes) -> None:
        try:
            info = json.loads(data)
            if not isinstance(info, dict):
                raise ValueError
        except ValueError:
            return self._protocol_error(ProtocolError("", "bad route INFO"))
        if self.registered or self.remote_info:
            # An INFO on a working route: another server's, gossiped (an implicit route to make), or an update.
            self.cluster.async_info(self, info)
            return
        rid = str(info.get("server_id") or "")
        if rid == self.server.server_id:
            self.remote_id = rid
            return self.close(DUPLICATE_ROUTE)  # a route to ourselves (route.go "Detect route to self")
        if not self.cluster.check_name(self, str(info.get("cluster") or ""), bool(info.get("cluster_dynamic"))):
            return
        if not self.solicited and info.get("server_name") == self.server.server_name:
            self.server.log_error("Remote server has a duplicate name", name=info.get("server_name"))
            return self.close("Duplicate Server Name")
        self.remote_info = info
        self.remote_id = rid
        self.remote_name = str(info.get("server_name") or "")
        if self.solicited:
            self.headers = info.get("headers") is True
        self._maybe_register()

    def _maybe_register(self) -> None:
        if self.registered or not self.remote_info or not self.connect_received or self.closed:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.cluster.add_route(self):
            self.close(DUPLICATE_ROUTE)

    # ------------------------------------------------------------------ interest
    def _remote_sub(self, op: RSub) -> None:
        if not self.registered:
            # The other side registered first and this side is refusing or closing the route (a cluster name
            # being settled, a duplicate): its interest comes again on the route that stays.
            return
        acc = self.server.accounts.get(op.account)
        if acc is None:
            self.server.log_debug("Unknown account for remote subscription", account=op.account, subject=op.subject)
            return
        key = (op.account, op.subject, op.queue)
        sub = self.subs.get(key)
        if sub is not None:  # a queue weight update
            sub.weight = op.weight
            return
        sub = RouteSub(None, op.subject, op.queue, f"R{self.cid}", None, True)
        sub.route = self
        sub.account = op.account
        sub.weight = op.weight
        sub.sublist = acc.sublist
        self.subs[key] = sub
        self.server.add_subscription(sub)

    def _remote_unsub(self, op: RUnsub) -> None:
        sub = self.subs.pop((op.account, op.subject, op.queue), None)
        if sub is not None:
            self.server.remove_subscription(sub)

    def send_all_interest(self) -> None:
        """sendSubsToRoute: every account's interest, once per subject (and per queue group with its weight)."""
        for acc, subject, queue, weight in self.cluster.local_interest():
            self.send(rs_plus(acc, subject, queue, weight))

    def send_interest(self, account: str, subject: str, queue: str, weight: int) -> None:
        if self.registered:
            self.send(rs_plus(account, subject, queue, weight) if weight else rs_minus(account, subject, queue))

    # ------------------------------------------------------------------ timers
    def _auth_timeout(self) -> None:
        self._timer = None
        if not self.closed and not self.connect_received:
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
    def close(self, reason: str = ROUTE_CLOSED) -> None:
        if self.closed:
            return
        self.close_reason = reason
        if self.transport is not None:
            self.flush()
            self.transport.close()
        self._teardown()

    def _teardown(self) -> None:
        if self.closed and not self.subs and not self.registered and self not in self.cluster.pending:
            return
        self.closed = True
        for t in (self._timer, self._ping_timer):
            if t is not None:
                t.cancel()
        self._timer = self._ping_timer = None
        subs = list(self.subs.values())
        self.subs.clear()
        for sub in subs:
            self.server.remove_subscription(sub)
        self.cluster.route_closed(self)
        self.server.log_debug("Route connection closed", cid=self.cid, reason=self.close_reason)
