"""Delivering a traced message (ADR-41; nats-server client.go processMsgResults / deliverMsg with a msgTrace): the
entry points the connections call for a message that asks for a trace, and the delivery itself, which does what
``Fanout.route`` / ``Fanout.deliver_routed`` do with an event per step.  What a trace is (its headers, its events,
how one starts and is sent) is msgtrace.py; the module docstring there tells the whole story.
"""
from __future__ import annotations

from typing import Any

from skiff.protocol import encoder
from skiff.protocol.encoder import msg_parts

from .msgtrace import (
    CLIENT, CLIENT_CLOSED, DISABLED, LEAF, NO_ECHO, ROUTER, SUB_DENY, TRACE_DEST, MsgTrace, has_parent, set_header,
    start_trace, trace_headers,
)

_PASSED = {"no echo": NO_ECHO, "deny": SUB_DENY, "closed": CLIENT_CLOSED}  # Fanout._pick's reasons


# ---------------------------------------------------------------------- entry points
def _client_may_trace_to(origin: Any, account: Any):
    """allowedToPublishOnMsgTraceDest for a client: its publish permissions, and no ``_GR_.`` or (outside the system
    account) ``$NRG.`` destination; refused, the client gets the publish violation and the message is dropped."""
    def allowed(dest: str) -> bool:
        perms = origin.perms
        ok = not dest.startswith("_GR_.")
        if ok and dest.startswith("$NRG."):
            system = origin.server.system
            ok = system is not None and account is system.account
        if ok and perms is not None:
            ok = perms.can_publish(dest)
        if not ok:
            origin.send(encoder.err(f'Permissions Violation for Publish to "{dest}"'))
        return ok
    return allowed


def _client_trace(srv: Any, origin: Any, subject: str, hdr_len: int, data: bytes) -> "MsgTrace | bool | tuple | None":
    """:func:`_start` for a client's message; None when its header block asks for no trace after all."""
    found = trace_headers(bytes(data[:hdr_len]))
    if found is None:
        return None
    return start_trace(srv, found, hdr_len, data, origin.account, CLIENT, origin.cid, origin.name, subject,
                  _client_may_trace_to(origin, origin.account))


def route_traced(srv: Any, origin: Any, subject: str, reply: str, hdr_len: int, data: bytes) -> bool | None:
    """``Fanout.route`` for a client's message with a ``Nats-Trace-Dest`` header: whether anyone got it, or None
    when it is not traced after all (the caller routes it as usual)."""
    t = _client_trace(srv, origin, subject, hdr_len, data)
    if t is None or t is False:
        return None
    if t is True:
        return False
    if t.__class__ is tuple:
        hdr_len, data = t
        return srv.route(origin, subject, reply, hdr_len, data)
    account = origin.account
    delivered = _deliver(srv, t, origin, account.name, account.sublist, subject, reply, None, hdr_len, data)
    if not delivered and reply and origin.no_responders:
        srv.no_responders(subject, reply, origin)
    t.send()
    return delivered


def publish_denied(srv: Any, origin: Any, subject: str, hdr_len: int, data: bytes) -> bool:
    """A traced message its client may not publish: the violation is the ingress event's error and the event goes
    out (pubPermissionViolation with a msgTrace).  False when it is not traced (the caller sends the violation)."""
    t = _client_trace(srv, origin, subject, hdr_len, data)
    if t is True:
        return True  # the destination's violation was the answer; the message goes no further
    if t is None or t is False or t.__class__ is tuple:
        return False
    text = f'Permissions Violation for Publish to "{subject}"'
    t.ingress["error"] = text
    origin.send(encoder.err(text))
    t.send()
    return True


def deliver_routed_traced(srv: Any, link: Any, account: Any, subject: str, reply: str, queues: tuple,
                          hdr_len: int, data: bytes) -> bool:
    """``deliver_routed`` for a traced message from a route or leaf connection (``account``: the Account it came in);
    False when it is not traced after all (the caller delivers it)."""
    found = trace_headers(bytes(data[:hdr_len]))
    if found is None or account is None:  # (the link's caller dropped a message of an unknown account already)
        return False
    kind = ROUTER if link.is_route else LEAF
    t = start_trace(srv, found, hdr_len, data, account, kind, link.cid, link.remote_name or link.remote_id, subject,
               None)
    if t is True:
        return True
    if t is False:
        return False
    if t.__class__ is tuple:
        hdr_len, data = t
        srv.deliver_routed(link, account.sublist, subject, reply, queues, hdr_len, data)
        return True
    _deliver(srv, t, link, account.name, account.sublist, subject, reply, queues, hdr_len, data)
    t.send()
    return True


def link_traced(srv: Any, link: Any, account: Any, subject: str, reply: str, queues: tuple, hdr_len: int,
                data: bytes, asked: bool) -> bool:
    """A route's or leaf connection's message that may be traced: ``asked``, its header block holds
    ``Nats-Trace-Dest`` (the parser said so), else it may hold a ``traceparent`` for the account's destination.
    True when it was delivered here, traced."""
    if not asked and not has_parent(data, hdr_len):
        return False
    return deliver_routed_traced(srv, link, account, subject, reply, queues, hdr_len, data)


# ---------------------------------------------------------------------- delivery
def _deliver(srv: Any, t: MsgTrace, origin: Any, acc_name: str, sublist: Any, subject: str, reply: str,
             queues: tuple | None, hdr_len: int, data: bytes) -> bool:
    """What ``Fanout.route`` (``queues`` None: a client's message) or ``Fanout.deliver_routed`` (a message from a
    route or leaf connection, ``queues`` the groups it names) do, with an event for each step.  nats-server's
    processMsgResults and deliverMsg."""
    from_link = queues is not None
    from_route = origin is not None and origin.is_route  # what came from a route goes to leaf connections only
    plain, qgroups = sublist.match(subject)
    only = t.only
    head = tail = None
    delivered = False
    links: dict[Any, list[str]] = {}

    def to_client(sub: Any, conn: Any) -> None:
        nonlocal head, tail, delivered
        if conn.closed:
            t.egress(conn, sub, CLIENT_CLOSED)
            return
        t.egress(conn, sub)
        delivered = True
        if not only:
            if head is None:
                head, tail = msg_parts(subject, reply, hdr_len, len(data))
            srv._deliver(sub, conn, head, tail, hdr_len, data, reply)

    def passed(sub: Any, conn: Any, why: str) -> None:  # a queue member skipped (deliverMsg failed for it)
        t.egress(conn, sub, _PASSED[why])

    for sub in plain:
        conn = sub.conn
        if conn is None:
            rt = sub.route
            if rt is not None:
                if rt is not origin and not (from_route and rt.is_route):
                    links.setdefault(rt, [])
            elif _internal(srv, t, sub, origin, subject, reply, hdr_len, data):
                delivered = True
            continue
        if conn is origin and not conn.echo:
            t.egress(conn, sub, NO_ECHO)
            continue
        if conn.deny_delivery and conn.perms.deliver_denied(subject):
            t.egress(conn, sub, SUB_DENY)
            continue
        to_client(sub, conn)
    for members in qgroups:
        if from_link and members[0].queue not in queues:
            continue
        sub = srv._pick(members, origin, subject, routes_ok=not from_route, passed=passed)
        if sub is None:
            continue
        conn = sub.conn
        if conn is None:
            if sub.route is not None:
                links.setdefault(sub.route, []).append(sub.queue)
            elif _internal(srv, t, sub, origin, subject, reply, hdr_len, data):
                delivered = True
            continue
        to_client(sub, conn)
    for rt, qs in links.items():
        # Routes and leaf connections get it even when it is trace-only: the next server traces it too (unless it
        # cannot: forward says so).
        fwd = t.forward(rt, data, hdr_len)
        if fwd is not None:
            rt.send_msg(acc_name, subject, reply, qs, *fwd)
            delivered = True
    return delivered


def deliver_traced(srv: Any, t: MsgTrace, origin: Any, account: Any, subject: str, reply: str, hdr_len: int,
                   data: bytes, shadow: Any = None) -> bool:
    """A traced message into another account, past an import that allows it (core/accounts.py): its deliveries there
    are events of the same trace (``shadow``: the subscription subject an egress names, for a stream import)."""
    saved, t.shadow = t.shadow, shadow
    try:
        return _deliver(srv, t, origin, account.name, account.sublist, subject, reply, None, hdr_len, data)
    finally:
        t.shadow = saved


def _internal(srv: Any, t: MsgTrace, sub: Any, origin: Any, subject: str, reply: str, hdr_len: int,
              data: bytes) -> bool:
    """An internal subscription: a stream that captures the subject, an import's forwarder, or a server handler."""
    cb = sub.callback
    owner = getattr(cb, "__self__", None)
    traced = getattr(owner, "trace_inbound", None)
    if traced is not None and getattr(cb, "__name__", "") == "_inbound":
        traced(t, subject, reply, hdr_len, data)  # a stream (jetstream/stream_publish.py)
        return True
    crossing = getattr(cb, "trace_import", None) or getattr(owner, "trace_import", None)
    if crossing is not None:
        # An import (core/accounts.py), or what nats-server serves through one (the JetStream API, the system
        # account's per-account services): its event, then the trace goes on where allow_trace lets it (``follow``),
        # else it stops here.
        typ, fields, follow = crossing(subject)
        t.add(typ, **fields)
        if follow is not None:
            return follow(t, subject, reply, hdr_len, data, origin)
        if t.only:
            return typ == "se"  # processMsgResults counts a skipped stream export as delivered, not a service import
        if typ == "si":
            hdr_len, data = set_header(data, hdr_len, TRACE_DEST, DISABLED)
    # Any other internal subscription (a consumer's acks and pull requests) runs even for a trace-only message, as
    # nats-server's deliverMsg calls every internal callback (sub.icb) whatever the trace mode.
    if sub.msg_subject:  # it takes the frame's subject too (Fanout.route): none, for a published message
        cb(sub, subject, reply, hdr_len, data, origin, None)
    else:
        cb(sub, subject, reply, hdr_len, data, origin)
    return True
