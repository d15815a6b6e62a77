"""One route: a connection to another server of the cluster (nats-server route.go; wave2-notes section 5).

Handshake.  Both sides send INFO.  The side that dialed (``solicited``) also sends CONNECT at once; the accepting side
checks it (cluster authorization, cluster name) before anything else.  When the remote INFO has arrived (and, on the
accepting side, the CONNECT), the route is registered with the cluster (``Cluster.add_route``), which refuses a
second route to the same server, then both sides send ``RS+`` for all their interest.

Pooling (nats-server 2.10+, route.go addRoute; ``cluster { pool_size, accounts }``).  With ``pool_size: N`` (N >= 1)
Skiff's route INFO carries ``route_pool_size: N`` and it keeps up to max(N, remote's) connections to every server
that offers pooling too: the dialing side sends its INFO only once it has the other's, with ``route_pool_idx``, the
slot it took (the first free one), and dials the next connection after the first PONG until the pool is full; the
accepting side puts the connection in the slot the INFO names.  An account's interest and messages use the slot
``fnv1a32(name) % N`` (computeRoutePoolIdx); lines still carry the account name.  An account of ``accounts`` (and
the system account, which nats-server pins by default) gets a connection of its own to every server, announced by
``route_account`` in the dialing side's INFO; its lines carry no account name (``RouteParser.bind_account``).  A
remote without ``route_pool_size`` (nats-server with ``pool_size: -1``, or before 2.10) gets one connection that
carries every account, and a dedicated route to it is refused ("Not possible to have a dedicated route ...", not
dialed again); when that one connection closes, the pool and every pinned account's route are dialed again
(removeRoute), so that a remote that comes back with pooling gets them all.
``pool_size`` is 3 unless set (nats-server's DEFAULT_ROUTE_POOL_SIZE); with ``pool_size: -1`` Skiff is such a server.

Interest.  Each ``RS+`` becomes a ``Subscription`` with ``route`` set, in the named account's Sublist, so that the
server's ``route()`` finds local and remote interest in one lookup.  A message matching route subscriptions is sent
once per route, with the names of the queue groups it should be given to (``Server._forward``).  A message that
came from a route is delivered to local subscribers only: the cluster is a full mesh and never forwards twice.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from skiff.protocol import encoder
from skiff.protocol.parser import Connect, Err, Info, Ok, Ping, Pong, ProtocolError
from skiff.protocol.route import RouteParser, RSub, RUnsub, rmsg_head, rs_minus, rs_plus

from .link import (
    AUTO_THRESHOLDS, NOT_SUPPORTED, OFF, PROTOCOL_VIOLATION, S2_AUTO, Link, announced_proto, needs_compression,
)

if TYPE_CHECKING:  # pragma: no cover
    from .cluster import Cluster

# nats-server closed-connection reasons (client.go ClosedState.String) a route may end with.
ROUTE_CLOSED = "Route Closed"
DUPLICATE_ROUTE = "Duplicate Route"
CLUSTER_NAME_CONFLICT = "Cluster Name Conflict"
WRONG_PORT = "Incorrect Port"
MISSING_ACCOUNT = "Missing Account"
ROUTE_REMOVED = "Route Removed"


class RouteConnection(Link):
    kind = "Router"
    log_name = "Route"
    is_route = True  # what a route brings is never forwarded to another route (Server.route, deliver_routed)
    closed_reason = ROUTE_CLOSED

    def __init__(self, cluster: "Cluster", solicited: bool = False, url: str = "", implicit: bool = False,
                 account: str = "") -> None:
        super().__init__(cluster.server, RouteParser(cluster.server.options.max_payload * 64))
        self.account = ""  # the account of a dedicated route (route_account), "" on a pooled one
        self.pool_idx = -1  # the slot in the remote's pool (route.go c.route.poolIdx)
        self.no_pool = False  # the remote does not pool: this one route carries every account
        self.no_reconnect = False  # refused for good (a dedicated route to a server that cannot have one)
        self.pool_more = False  # dial the pool's next connection at the first PONG (route.go startNewRoute)
        self.info_delayed = False  # the dialing side's INFO waits for the other's (routeShouldDelayInfo)
        self._comp_negotiated = False
        if account:
            self._bind(account)
        self.cluster = cluster
        self.solicited = solicited
        self.implicit = implicit  # learnt from another route's gossip, not configured
        self.url = url
        self.remote_info: dict = {}
        self.connect_received = solicited  # the accepting side waits for CONNECT
        self.headers = True
        self._prefixes: dict[tuple[str, str], bytes] = {}  # (account, subject) -> b"RMSG <acc> <subject> "
        # the last plain message's subject, account and size, and its head (send_msg)
        self._last_subject = self._last_account = None
        self._last_size, self._last_head = -1, b""
        self._sublists: dict[str, object] = {}  # account name -> its Sublist (on_rmsg)
        self.retry = False  # reconnect even if implicit (both sides kept the other's connection: route.go)

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._made(transport)
        srv = self.server
        cl = self.cluster
        cl.pending.add(self)
        if self.solicited:
            cl.dialed(self.url, self.account)
            self.send(cl.connect_proto(self.url))
        elif cl.options.username:
            # With cluster authorization, a CONNECT must come within its timeout (2 s by default, as nats-server).
            self._timer = srv.clock.call_later(cl.options.auth_timeout or 2.0, self._auth_timeout)
        if self.solicited and ((cl.pooled and not self.account) or needs_compression(cl.compression)):
            # The dialing side of a pooled route sends its INFO once it knows its slot, and with compression
            # once it knows the other's mode (route.go createRoute: delayInfo).
            self.info_delayed = True
        else:
            self.send(cl.info_proto(account=self.account))
        self.flush()
        srv.log_debug("Route connection created", cid=self.cid, addr=f"{self.host}:{self.port}",
                      solicited=self.solicited)

    def send_msg(self, account: str, subject: str, reply: str, queues: list[str] | tuple, hdr_len: int,
                 data: bytes) -> None:
        if reply or queues or hdr_len or not self.registered:
            return self._send_other(account, subject, reply, queues, hdr_len, data)
        # The head of the previous message again: a stream of messages on one subject, of one size, is the common
        # case, and the parser hands the same subject str over while it repeats (protocol/_speedups.c), so
        # identity checks find it without hashing or formatting.
        out = self.out
        if not out:
            self.server.mark_pending(self)
        size = len(data)
        if subject is self._last_subject and size == self._last_size and account is self._last_account:
            head = self._last_head
        else:
            head = self._head(account, subject, size)
        out += (head, data, b"\r\n")
        self.out_msgs += 1
        self.out_bytes += size

    def _send_other(self, account: str, subject: str, reply: str, queues: list[str] | tuple, hdr_len: int,
                    data: bytes) -> None:
        """send_msg for a message with a reply, queue groups or headers (client.go msgHeaderForRouteOrLeaf)."""
        if not self.registered:
            return
        if hdr_len and not self.headers:
            data = data[hdr_len:]
            hdr_len = 0
        if not self.out:
            self.server.mark_pending(self)
        size = len(data)
        self.out += (rmsg_head("" if self.account else account, subject, reply, queues, hdr_len, size), data,
                     b"\r\n")
        self.out_msgs += 1
        self.out_bytes += size

    def _head(self, account: str, subject: str, size: int) -> bytes:
        """``RMSG <acc> <subject> <size>\\r\\n`` (without the account on a dedicated route), from a prefix kept per
        (account, subject); remembered as the last head."""
        key = (account, subject)
        prefix = self._prefixes.get(key)
        if prefix is None:
            if len(self._prefixes) > 4096:
                self._prefixes.clear()
            line = f"RMSG {subject} " if self.account else f"RMSG {account} {subject} "
            prefix = self._prefixes[key] = line.encode("utf-8", "surrogateescape")
        head = prefix + b"%d\r\n" % size
        self._last_subject, self._last_account, self._last_size, self._last_head = subject, account, size, head
        return head

    # ------------------------------------------------------------------ input
    def on_rmsg(self, account: str, subject: str, reply: str, queues: tuple, hdr_len: int, data: bytes,
                traced: bool = False) -> None:
        self.in_msgs += 1
        self.in_bytes += len(data)
        sl = self._sublists.get(account)  # filled while the route is registered (_gone empties it)
        if sl is None:
            sl = self._sublist_of(account, subject)
            if sl is None:
                return
        if hdr_len and (traced or self.server.accounts.trace_dests):  # a trace asked for, or a traceparent may be
            from .msgtrace_delivery import link_traced

            if link_traced(self.server, self, self.server.accounts.get(account), subject, reply, queues, hdr_len,
                           data, traced):
                return
        self.server.deliver_routed(self, sl, subject, reply, queues, hdr_len, data)

    def on_traced_rmsg(self, *msg: Any) -> None:
        """A message whose header block asks for a trace (the parser tells it apart): core/msgtrace_delivery.py."""
        self.on_rmsg(*msg, traced=True)

    def _sublist_of(self, account: str, subject: str) -> Any:
        """The Sublist of a routed message's account, kept in ``_sublists``; None: the message is dropped."""
        if not self.registered:
            return None  # nats-server takes a message before the route's INFO and drops it (checked with 2.15.1)
        acc = self.server.accounts.lookup(account)
        if acc is None:
            # route.go processInboundRoutedMsg: a message for an unknown account is dropped (debug log).
            self.server.log_debug("Unknown account for routed message", account=account, subject=subject)
            return None
        sl = self._sublists[account] = acc.sublist
        return sl

    def on_route_op(self, op: Any) -> None:
        if not self.connect_received and not isinstance(op, Connect):
            # Anything but CONNECT first, even bytes that are no operation at all, gets nats-server's answer
            # (parser.go checks authorization before the operation), with or without cluster authorization.
            return self._auth_violation()
        if isinstance(op, RSub):
            return self._remote_sub(op)
        if isinstance(op, RUnsub):
            return self._remote_unsub(op)
        if isinstance(op, Ping):
            self.send(encoder.PONG)
            return
        if isinstance(op, Pong):
            self._pong()
            if self.pool_more:
                self.pool_more = False
                self.cluster.fill_pool(self)
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

    def _connect(self, data: bytes) -> None:
        """processRouteConnect: a client on the route port, wrong credentials and another cluster are refused."""
        if self.solicited or self.connect_received:
            return
        proto = self._json(data, "CONNECT")
        if proto is None:
            return
        if proto.get("lang"):  # clients send lang, routes do not (ErrClientConnectedToRoutePort)
            self.send(encoder.err("attempted to connect to route port"))
            return self.close(WRONG_PORT)
        if not self.cluster.authorize(proto.get("user") or "", proto.get("pass") or ""):
            return self._auth_violation()
        self._cancel_timer()
        if not self.cluster.check_name(self, str(proto.get("cluster") or ""), bool(proto.get("cluster_dynamic"))):
            return
        self.connect_received = True
        self.remote_id = str(proto.get("name") or "")
        self.headers = proto.get("headers") is True
        self._maybe_register()

    def _info(self, data: bytes) -> None:
        info = self._json(data, "INFO")
        if info is None:
            return
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
        if not self._negotiate(info):
            return  # compression starts: the INFO that counts comes next, compressed
        if not self.solicited and info.get("route_account"):
            self._bind(str(info["route_account"]))
        self.remote_info = info
        self.remote_id = rid
        self.remote_name = str(info.get("server_name") or "")
        self.remote_proto = announced_proto(info.get("proto"))
        if self.solicited:
            self.headers = info.get("headers") is True
        self._maybe_register()

    def _maybe_register(self) -> None:
        if self.registered or not self.remote_info or not self.connect_received or self.closed:
            return
        self._cancel_timer()
        if not self.cluster.add_route(self):
            self.close(DUPLICATE_ROUTE)

    def _negotiate(self, info: dict) -> bool:
        """route.go processRouteInfo / negotiateRouteCompression on the first INFO: False when compression was
        agreed, this side's INFO sent and the switch made (the next INFO is the one to act on)."""
        mode = self.cluster.compression
        theirs = info.get("compression")
        theirs = theirs if isinstance(theirs, str) else ""
        if not needs_compression(mode):
            self.compression = NOT_SUPPORTED if not theirs or mode == NOT_SUPPORTED else OFF
            return True
        if self._comp_negotiated:
            return True
        self._comp_negotiated = True
        try:
            cm = self.agreed_compression(mode, theirs)
        except ValueError:
            self.refuse(f'unsupported route compression mode "{theirs}"')
            return False
        self.compression = cm
        if not needs_compression(cm):
            return True
        proto = self.cluster.info_proto(account=self.account, compression=self.cluster.info_compression(cm))
        if self.solicited:  # sent before this side compresses; the accepting side's after
            self.send(proto)
            self.start_compression()
        else:
            self.start_compression()
            self.send(proto)
        return False

    def auto_thresholds(self) -> Any:
        cl = self.cluster
        return (cl.options.compression_rtts or AUTO_THRESHOLDS) if cl.compression == S2_AUTO else None

    def _bind(self, account: str) -> None:
        self.account = account
        self.parser.bind_account(account)
        self._prefixes = {}  # the RMSG lines lose their account name
        self._last_subject = self._last_account = None

    def refuse(self, err: str, reason: str = PROTOCOL_VIOLATION) -> None:
        """route.go addRoute's errors: sent and logged, the route closed (a Protocol Violation, mostly)."""
        self.send(encoder.err(err))
        self.server.log_error("Route error", remote=self.remote_id, error=err)
        self.close(reason)

    # ------------------------------------------------------------------ interest
    def _remote_sub(self, op: RSub) -> None:
        if not self.registered:
            # The other side registered first and this side is refusing or closing the route (a cluster name
            # being settled, a duplicate): its interest comes again on the route that stays.
            return
        if op.account in self.cluster.transitioning and not self.account and not self.no_pool:
            return  # moved to a dedicated route by the remote's reload (route.go processRemoteSub)
        acc = self.server.accounts.lookup(op.account)
        if acc is None:
            self.server.log_debug("Unknown account for remote subscription", account=op.account, subject=op.subject)
            return
        self._add_remote_sub((op.account, op.subject, op.queue), op.account, acc.sublist, op.subject, op.queue,
                             op.weight, "R")

    def _remote_unsub(self, op: RUnsub) -> None:
        self._remove_remote_sub((op.account, op.subject, op.queue))

    def send_all_interest(self) -> None:
        """sendSubsToRoute: every account's interest, once per subject (and per queue group with its weight)."""
        for acc, subject, queue, weight in self.cluster.local_interest():
            if self.cluster.carries(self, acc):
                self.send(rs_plus("" if self.account else acc, subject, queue, weight))

    def send_interest(self, account: str, subject: str, queue: str, weight: int) -> None:
        if self.registered:
            if self.account:
                account = ""
            self.send(rs_plus(account, subject, queue, weight) if weight else rs_minus(account, subject, queue))

    # ------------------------------------------------------------------ closing
    def _known(self) -> bool:
        return self in self.cluster.pending

    def _gone(self) -> None:
        self._sublists.clear()  # what is still parsed of this read is dropped (on_rmsg)
        self.cluster.route_closed(self)
        self.server.log_debug("Route connection closed", cid=self.cid, reason=self.close_reason)
