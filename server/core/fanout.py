"""Fan-out: a message to every interested subscription, and the once-per-read output flush (nats-server
client.go processMsgResults / deliverMsg / flushClients, route.go processInboundRoutedMsg).

``Fanout`` is a part of ``Server`` (server.py holds its life cycle, listeners and subscriptions): every client
connection feeds operations to ``route()``, which looks the subject up in the ``Sublist`` (cached), appends a
MSG/HMSG frame to each interested connection's output list, and hands messages for internal subscriptions (the
JetStream API, acks, flow control) to their callbacks in-line.  Connections that received output are remembered in
``_pending`` and written once when the current read has been handled (``begin_read`` / ``flush_pending``), or on
the next loop turn for output that came from a timer.
"""
from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Any

from skiff.protocol import encoder
from skiff.protocol.encoder import msg_parts
from skiff.protocol.jsapi.subjects import ACK_PRE

from .permissions import REPLY_PRUNE_LIMIT

if TYPE_CHECKING:
    from .client import ClientConnection
    from .subscription import Subscription

_random = random.random
_RESERVED_REPLIES = (ACK_PRE, "_R_.")  # reply subjects a client may not use (_client_may_publish)


class Fanout:
    """Routing and output batching of ``Server`` (its attributes: ``_pending``, ``_flush_scheduled``, ``sublist``,
    ``jetstream``, ``_other_engines``, ``clock``)."""

    #: server/core/spin.py: set by the standalone server's runner only (never inside a test's own event loop).
    spinner: Any = None

    # ------------------------------------------------------------------ output batching
    def begin_read(self) -> None:
        """A connection starts handling a read; its output is written by the ``flush_pending`` at its end, so
        ``mark_pending`` need not schedule a flush of its own for the next loop turn (one loop callback less per
        request and reply, issue #13)."""
        self._flush_scheduled = True

    def mark_pending(self, conn: ClientConnection) -> None:
        self._pending.append(conn)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush_pending)

    def flush_pending(self) -> None:
        """Write every connection that got output since the last flush, once (nats-server flushClients)."""
        try:
            js = self.jetstream
            if js is not None and js.has_pending:
                js.flush()  # stores hand appends to the OS, then their PubAcks are queued
            if self._other_engines:  # JetStream of further accounts
                for js in self._other_engines:
                    if js.has_pending:
                        js.flush()
        finally:
            # Cleared only now: the PubAcks just queued join this pass instead of scheduling another loop callback
            # for themselves (one per JetStream publish, measured on KV put).
            self._flush_scheduled = False
        pending = self._pending
        if not pending:
            return
        self._pending = []
        for conn in pending:
            conn.flush()
        if self.spinner is not None:  # the standalone server polls for the next request a moment (spin.py)
            self.spinner.arm()

    # ------------------------------------------------------------------ routing
    def route(self, origin: ClientConnection | None, subject: str, reply: str, hdr_len: int, data: bytes,
              msg_subject: str | None = None, sublist: Any = None) -> bool:
        """Deliver one message to every interested subscription. Returns whether anyone got it.

        ``msg_subject`` is the subject written in the frame when it differs from the one routed on: JetStream
        delivers a stored message to a deliver subject or pull inbox with the message's own subject in the MSG line.

        A frame is ``head`` + sid + ``tail`` + payload + CRLF, where head (``MSG <subject> ``) and tail
        (`` [reply] <size>\\r\\n``) are built once per message and shared by every receiver, so a fan-out costs
        a few list appends per receiver and no formatting."""
        if sublist is None:
            # A client publishes in its own account; the server (origin None) in the JetStream account.
            if origin is None:
                sublist = self.sublist
            else:
                # What _client_may_publish refuses ($NRG. subjects, $JS.ACK. and _R_. replies), without its call
                # for every other "$" subject or "_INBOX." reply: each ack is a PUB to $JS.ACK.<...> (5% of a push
                # consumer's server, sampled), each request has an _INBOX reply (3% of JS async publish).
                if (subject[0] == "$" and subject.startswith("$NRG.")) or (
                        reply and reply[0] in "$_" and reply.startswith(_RESERVED_REPLIES)):
                    if not self._client_may_publish(origin, subject, reply):
                        return False
                sublist = origin.sublist
                if subject[0] == "$" and subject.startswith(ACK_PRE) and msg_subject is None:
                    # An ack (one per delivery of a push consumer): when one subscription (the engine's $JS.ACK.>)
                    # is all any ack subject can match (Sublist.ack_only), straight to it, as the loop below would,
                    # without the match.  A subject with an empty token matches nothing (sublist.go): the long way.
                    ack = sublist.ack_only
                    if ack is None:
                        ack = sublist.find_ack_only()
                    if ack and ".." not in subject and subject[-1] != ".":
                        sublist.hits += 1
                        ack.callback(ack, subject, reply, hdr_len, data, origin)
                        return True
        r = sublist.cache.get(subject)
        if r is None:
            r = sublist.match(subject)
        else:
            sublist.hits += 1
        plain, queues = r
        if not plain and not queues:
            if reply and origin is not None and origin.no_responders:
                self.no_responders(subject, reply, origin)
            return False
        head = tail = None
        size = 0
        delivered = False  # an internal subscriber or a route took it (a client delivery leaves ``head`` set)
        msubj = msg_subject or subject
        # Remote servers to forward to: the first route (or leaf connection) with plain interest in ``rt1``, the
        # common case, without a dict; any other in ``routes``, route -> queue groups it should serve.
        rt1 = routes = None
        for sub in plain:
            conn = sub.conn
            if conn is None:
                rt = sub.route
                if rt is not None:
                    if rt1 is None:
                        rt1 = rt
                        racc = sub.account  # every route subscription of this Sublist names its account
                    elif rt is not rt1:
                        if routes is None:
                            routes = {}
                        routes.setdefault(rt, [])
                    continue
                if origin is not None or sub.server_msgs:
                    if sub.msg_subject:  # wants the frame's subject too (a delivery's stored subject)
                        sub.callback(sub, subject, reply, hdr_len, data, origin, msg_subject)
                    else:
                        sub.callback(sub, subject, reply, hdr_len, data, origin)
                    delivered = True
                continue
            if conn is origin and not conn.echo:
                continue
            if conn.deny_delivery and conn.perms.deliver_denied(msubj):
                continue
            if head is None:  # built once, for the first receiver: from here on the message counts as delivered
                size = len(data)
                head, tail = msg_parts(msubj, reply, hdr_len, size)
            if sub.max_msgs or conn.replies is not None or (hdr_len and not conn.headers):
                self._deliver(sub, conn, head, tail, hdr_len, data, reply)
            elif not conn.closed:
                # _deliver in-line for the common subscriber (no max, no response tracking, headers as sent):
                # a call less per delivery on the 1 pub + 1 sub path.
                out = conn.out
                if not out:
                    self.mark_pending(conn)
                out += (head, sub.sid_b, tail, data, b"\r\n")
                conn.out_bytes += size
                conn.out_msgs += 1
                sub.delivered += 1
        for members in queues:
            # The member _pick would try first (its random start); when that is a plain local client able to
            # take the message, it is the pick, without the call.  Anything else goes through _pick from the
            # same start, so the choice is exactly _pick's.
            n = len(members)
            start = int(_random() * n) if n > 1 else 0  # random.randrange costs 4x as much, per queue message
            sub = members[start]
            conn = sub.conn
            if conn is None or conn.closed or conn is origin or conn.deny_delivery:
                sub = self._pick(members, origin, msubj, True, start)
                if sub is None:
                    continue
                conn = sub.conn
                if conn is None:
                    if sub.route is not None:  # a remote server's member: that server picks which one
                        if routes is None:
                            routes = {}
                        racc = sub.account
                        routes.setdefault(sub.route, []).append(sub.queue)
                        continue
                    sub.callback(sub, subject, reply, hdr_len, data, origin)
                    delivered = True
                    continue
            if head is None:
                size = len(data)
                head, tail = msg_parts(msubj, reply, hdr_len, size)
            if sub.max_msgs or conn.replies is not None or (hdr_len and not conn.headers):
                self._deliver(sub, conn, head, tail, hdr_len, data, reply)
            else:  # not closed: checked above, or by _pick
                out = conn.out
                if not out:
                    self.mark_pending(conn)
                out += (head, sub.sid_b, tail, data, b"\r\n")
                conn.out_bytes += size
                conn.out_msgs += 1
                sub.delivered += 1
        if rt1 is not None and routes is None:
            # One route (or leaf connection) with plain interest, the common case.  Never back where it came from;
            # what came from a route goes to leaf connections only.  The remote matches the routed subject.
            if rt1 is not origin and (origin is None or not origin.is_route or not rt1.is_route):
                rt1.send_msg(racc, subject, reply, (), hdr_len, data)
                return True
        elif routes is not None:
            from_route = origin is not None and origin.is_route
            if rt1 is not None and rt1 not in routes:  # else it goes with its queue groups
                if not (rt1 is origin or (from_route and rt1.is_route)):
                    rt1.send_msg(racc, subject, reply, (), hdr_len, data)
                    delivered = True
            for rt, qs in routes.items():
                if rt is origin or (from_route and rt.is_route):
                    continue
                rt.send_msg(racc, subject, reply, qs, hdr_len, data)
                delivered = True
        return delivered or head is not None

    def deliver_routed(self, link: Any, sublist: Any, subject: str, reply: str, queues: tuple, hdr_len: int,
                       data: bytes) -> None:
        """A message from another server: a route or a leaf connection (``link``).  Local subscribers get it; so
        do the leaf connections with interest, and the routes too when it came from a leaf (never what came from
        a route: the cluster is a full mesh).  Queue groups get it only if the sender named them, one member each
        (route.go processInboundRoutedMsg, leafnode.go processInboundLeafMsg, client.go processMsgResults)."""
        r = sublist.cache.get(subject)
        if r is None:
            r = sublist.match(subject)
        else:
            sublist.hits += 1
        plain, qgroups = r
        head = tail = links = None
        for sub in plain:
            conn = sub.conn
            if conn is None:
                rt = sub.route
                if rt is None:
                    sub.callback(sub, subject, reply, hdr_len, data, link)
                elif rt is not link and not (link.is_route and rt.is_route):
                    if links is None:
                        links, racc = {}, sub.account
                    links.setdefault(rt, [])
                continue
            if conn.deny_delivery and conn.perms.deliver_denied(subject):
                continue
            if head is None:
                size = len(data)
                head, tail = msg_parts(subject, reply, hdr_len, size)
            if sub.max_msgs or conn.replies is not None or (hdr_len and not conn.headers):
                self._deliver(sub, conn, head, tail, hdr_len, data, reply)
            elif not conn.closed:
                # _deliver in-line for the common subscriber, as in route(): a call less per routed message.
                out = conn.out
                if not out:
                    self.mark_pending(conn)
                out += (head, sub.sid_b, tail, data, b"\r\n")
                conn.out_bytes += size
                conn.out_msgs += 1
                sub.delivered += 1
        if queues:
            for members in qgroups:
                if members[0].queue not in queues:
                    continue
                sub = self._pick(members, link, subject, routes_ok=not link.is_route)
                if sub is None:
                    continue
                if sub.conn is None:
                    if sub.route is not None:
                        if links is None:
                            links, racc = {}, sub.account
                        links.setdefault(sub.route, []).append(sub.queue)
                    else:
                        sub.callback(sub, subject, reply, hdr_len, data, link)
                    continue
                if head is None:
                    head, tail = msg_parts(subject, reply, hdr_len, len(data))
                self._deliver(sub, sub.conn, head, tail, hdr_len, data, reply)
        if links is not None:
            for rt, qs in links.items():
                rt.send_msg(racc, subject, reply, qs, hdr_len, data)

    @staticmethod
    def _pick(members: list[Subscription], origin: ClientConnection | None, subject: str,
              routes_ok: bool = True, start: int = -1, passed: Any = None) -> Subscription | None:
        """The queue member to get a message: tried from a random start, the first one able to take it
        (nats-server processMsgResults: a member whose deliverMsg fails, for no echo or a subscribe deny, is
        passed over for the next).  A remote server's members take their turn like local ones (one entry per
        route: nats-server weighs it by the member count the RS+ gave, sublist.go addNodeToResults), unless the
        message came from a route; a leaf connection's members only when nobody else can take it, and never the
        leaf connection the message came from.  ``start``: the random start route() already drew.  ``passed``:
        called with each local member passed over and why (a message trace's egress errors, core/msgtrace.py)."""
        n = len(members)
        if start < 0:
            start = int(_random() * n) if n > 1 else 0  # random.randrange costs 4x as much, per queue message
        leaf = None
        for i in range(n):
            sub = members[(start + i) % n]
            conn = sub.conn
            if conn is None:
                rt = sub.route
                if rt is not None:
                    if rt.is_route:
                        if routes_ok:
                            return sub
                    elif leaf is None and rt is not origin:
                        leaf = sub
                    continue
                if origin is None and not sub.server_msgs:
                    continue
                return sub
            if conn.closed or (conn is origin and not conn.echo):
                if passed is not None:
                    passed(sub, conn, "no echo" if conn is origin and not conn.echo else "closed")
                continue
            if conn.deny_delivery and conn.perms.deliver_denied(subject, sub.queue):
                if passed is not None:
                    passed(sub, conn, "deny")
                continue
            return sub
        return leaf

    def _deliver(self, sub: Subscription, conn: ClientConnection, head: bytes, tail: bytes, hdr_len: int,
                 data: bytes, reply: str = "") -> None:
        if conn.closed:
            return
        out = conn.out
        if not out:
            self.mark_pending(conn)
        if hdr_len and not conn.headers:
            # A client without header support gets the payload only, and the size is counted again.
            data = data[hdr_len:]
            head = b"MSG " + head.split(b" ", 2)[1] + b" "
            tail = tail.rsplit(b" ", 2)[0] + b" %d\r\n" % len(data)
        out += (head, sub.sid_b, tail, data, b"\r\n")
        conn.out_bytes += len(data)
        conn.out_msgs += 1
        sub.delivered += 1
        if reply and conn.replies is not None:
            self._track_response(conn, reply)
        if sub.max_msgs and sub.delivered >= sub.max_msgs:
            conn.remove_sub(sub)

    def _track_response(self, conn: ClientConnection, reply: str) -> None:
        """allow_responses: remember the reply subject the client may now answer on, unless its publish
        permissions allow it anyway (nats-server deliverMsg)."""
        perms = conn.perms
        if perms.can_publish(reply):
            return
        replies = conn.replies
        now = self.clock.monotonic()
        replies[reply] = [now, 0]
        if len(replies) > REPLY_PRUNE_LIMIT:
            perms.prune_responses(replies, now)

    @staticmethod
    def _client_may_publish(origin: ClientConnection, subject: str, reply: str) -> bool:
        """Subjects and reply subjects reserved to the servers (nats-server processInboundClientMsg): a client may
        not publish on ``$NRG.`` (RAFT traffic), nor use a ``$JS.ACK.`` or ``_R_.`` (service import response)
        reply subject, which would let a responder ack another consumer's messages or answer someone else's
        request.  Each gets nats-server's -ERR and the message is dropped."""
        if subject.startswith("$NRG."):
            origin.send(encoder.err(f'Permissions Violation for Publish to "{subject}"'))
            return False
        if reply.startswith(_RESERVED_REPLIES):
            origin.send(encoder.err(f'Permissions Violation for Publish with Reply of "{reply}"'))
            return False
        return True

    def no_responders(self, subject: str, reply: str, origin: ClientConnection) -> None:
        """``NATS/1.0 503`` to the requester's own first matching plain subscription on the reply subject, for
        clients that asked for it in CONNECT (nats-server processInboundClientMsg; jetstream-notes 1.7)."""
        plain, _ = origin.sublist.match(reply)
        for sub in plain:
            if sub.conn is origin:
                hdr = b"NATS/1.0 503\r\nNats-Subject: " + subject.encode("utf-8", "surrogateescape") + b"\r\n\r\n"
                head, tail = msg_parts(reply, "", len(hdr), len(hdr))
                self._deliver(sub, origin, head, tail, len(hdr), hdr)
                return

    def publish(self, subject: str, data: bytes = b"", reply: str = "", hdr: bytes = b"") -> bool:
        """Publish from inside the server (API replies, advisories, deliveries)."""
        return self.route(None, subject, reply, len(hdr), hdr + data if hdr else data)
