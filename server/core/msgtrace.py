"""Message tracing (ADR-41; nats-server msgtrace.go): a message published with a ``Nats-Trace-Dest: <subject>``
header makes every server it passes through publish a trace event to that subject.

Theory of operation
-------------------
A traced message is rare, so the hot paths never look for it: the parsers do, in C where the accelerator is built
(protocol/parser.py, protocol/route.py), and hand a message whose header block holds ``Nats-Trace-Dest:`` to
``on_traced_pub`` / ``on_traced_rmsg`` instead of ``on_pub`` / ``on_rmsg``.  A client's goes through every check of
``ClientConnection._pub`` to ``route_traced``, another server's to ``link_traced`` (msgtrace_delivery.py).  These
decide, as nats-server's ``initMsgTrace`` does, whether the message is traced at all (a ``trace disabled`` value, an
invalid destination, a ``Nats-Trace-Origin-Account`` header: not traced; a destination the publisher may not publish
to: a violation, and the message is dropped), then deliver it themselves, the way ``route`` / ``deliver_routed``
would, recording one event per step:

* ``in``: who published it (client, route or leaf connection), in which account, on which subject;
* ``eg``: each delivery: a client subscription, or a route or leaf connection the message is forwarded to (with the
  ``Nats-Trace-Hop`` header it gets there, so that the next server's event can be tied to this one), or why not
  (no echo, a subscribe deny, a closed client);
* ``js``: a stream that captured it, with what the stream did (stored, no interest, or the error);
* ``se`` / ``si``: a stream export or service import it crossed.  Without ``allow_trace`` (a stream import's, a service
  export's) tracing stops at the account boundary: a trace-only message goes no further, a delivered one goes on
  untraced (a service import also marks the header ``trace disabled``).  With it the trace follows the message
  into the other account (core/accounts.py ``_traced_republish``).

The event (``MsgTraceEvent``: the server's ServerInfo, the request's trace headers and size, the number of hops, the
events) is published in the message's account on the destination when the message is done, from the server, as
``sendInternalAccountSysMsg`` does; a request header ``Accept-Encoding`` asking for gzip or snappy compresses it.

``Nats-Trace-Only: true`` (or ``1``, ``on``) traces without delivering: clients and streams are not given the
message (a stream runs its checks and answers only an error; nats-server processJetStreamMsg returns before storing),
routes and leaf connections still get it, because the next server must trace it too and will not deliver it either.

A ``traceparent`` header (W3C trace context) with its sampled flag starts a trace in an account with a trace
destination (``msg_trace`` / ``trace_dest`` in the config, ``trace`` in an account JWT): the first server samples it
(``sampling`` percent; one it does not pick goes on marked ``trace disabled``), the event goes to the account's
destination.  The connections of such an account look for the header (ClientConnection._pub, the route and leaf
connections' ``on_rmsg``); no other connection pays for it.
"""
from __future__ import annotations

import random
from typing import Any

from skiff.protocol import headers
from skiff.protocol.jsapi.timefmt import format_time
from skiff.protocol.marshal import dumps
from skiff.protocol.subjects import is_valid_literal_subject

TRACE_DEST = "Nats-Trace-Dest"
TRACE_HOP = "Nats-Trace-Hop"
TRACE_ONLY = "Nats-Trace-Only"
TRACE_ORIGIN_ACCOUNT = "Nats-Trace-Origin-Account"
TRACE_PARENT = "traceparent"  # W3C trace context: starts a trace in an account with a trace destination
DISABLED = "trace disabled"  # MsgTraceDestDisabled: not a valid subject, so never a destination

# Connection kinds as the events number them (nats-server client.go: CLIENT, ROUTER, GATEWAY, SYSTEM, LEAF, ...).
CLIENT, ROUTER, LEAF = 0, 1, 4

TRACE_PROTO = 3  # MsgTraceProto: the server-to-server protocol version that understands message tracing

# The egress errors of msgtrace.go, word for word.
ONLY_NO_SUPPORT = "Not delivered because remote does not support message tracing"
NO_SUPPORT = "Message delivered but remote does not support message tracing so no trace event generated from there"
NO_ECHO = "Not delivered because of no echo"
SUB_DENY = "Not delivered because subscription denies this subject"
CLIENT_CLOSED = "Not delivered because client is closed"

_TRUE = ("1", "true", "on")


def trace_headers(hdr: bytes) -> tuple[dict[str, list[str]], bool] | None:
    """The header block as name -> values, case kept, when it asks for a trace (genHeaderMapIfTraceHeadersPresent),
    and whether only a ``traceparent`` asks (``external``: the account's destination applies); None when nothing
    asks.  ``Nats-Trace-Dest`` is matched exactly and must not be ``trace disabled`` (then nothing is traced, whatever
    else the block holds); ``traceparent`` in any case, when its flags say sampled."""
    if not hdr.startswith(b"NATS/1.0"):
        return None
    dest = parent = False
    out: dict[str, list[str]] = {}
    for line in hdr.split(b"\r\n")[1:]:
        key, sep, val = line.partition(b":")
        if not sep:
            continue
        val = val.strip(b" \t")
        if not key or not val:
            continue
        k = key.decode("utf-8", "surrogateescape")
        v = val.decode("utf-8", "surrogateescape")
        if not parent and k.lower() == TRACE_PARENT:
            parent = _sampled(v)
        elif k == TRACE_DEST and not dest:
            if v == DISABLED:
                return None
            dest = True
        out.setdefault(k, []).append(v)
    if dest or parent:
        return out, not dest
    return None


def _sampled(value: str) -> bool:
    """W3C trace context: the flags (the 4th ``-`` field, two hex digits) have the sampled bit; nats-server parses
    them as an int8 (strconv.ParseInt(s, 16, 8)), so 80-ff count as not sampled."""
    parts = value.split("-")
    if len(parts) != 4 or len(parts[3].encode()) != 2:
        return False
    try:
        flags = int(parts[3], 16)
    except ValueError:
        return False
    return -128 <= flags <= 127 and flags & 1 == 1


def has_parent(data: bytes, hdr_len: int) -> bool:
    """Whether a header block may hold a ``traceparent`` (any case): the look the connections of an account with a
    trace destination take before handing a message here."""
    return b"traceparent" in bytes(data[:hdr_len]).lower()


def _first(hmap: dict[str, list[str]], key: str) -> str:
    vals = hmap.get(key)
    return vals[0] if vals else ""


def set_header(data: bytes, hdr_len: int, key: str, value: str) -> tuple[int, bytes]:
    """client.go setHeader: the message with ``key`` removed from its header block and ``key: value`` added last."""
    hdr = headers.strip(bytes(data[:hdr_len]), keys=(key,)) if hdr_len else b""
    hdr = headers.append(hdr, key, value)
    return len(hdr), hdr + bytes(data[hdr_len:])


class MsgTrace:
    """One traced message on this server: its events, and where they go."""

    __slots__ = ("server", "account", "dest", "only", "hop", "hops", "hmap", "size", "events", "ingress", "js",
                 "accept", "shadow")

    def __init__(self, server: Any, account: Any, dest: str, only: bool, hop: str, hmap: dict, size: int,
                 kind: int, cid: int, name: str, subject: str) -> None:
        self.server = server
        self.account = account
        self.dest = dest
        self.only = only
        self.hop = hop  # the Nats-Trace-Hop this server got it with ("" from a client)
        self.hops = 0  # forwards to other servers so far
        self.hmap = hmap
        self.size = size
        self.accept = _first(hmap, "Accept-Encoding")
        self.ingress: dict[str, Any] = {"type": "in", "ts": self.now(), "kind": kind, "cid": cid}
        if name:
            self.ingress["name"] = name
        self.ingress["acc"] = account.name
        self.ingress["subj"] = subject
        self.events: list[dict] = [self.ingress]
        self.js: dict | None = None
        self.shadow: Any = None  # past a stream import: how an egress names the subscription (accounts.py)

    # ------------------------------------------------------------------ events
    def now(self) -> str:
        """An event's time, on the server's clock (a test may drive it: skiff.testing)."""
        return format_time(self.server.clock.time_ns())

    def egress(self, conn: Any, sub: Any, error: str = "") -> None:
        """A client subscription's delivery (addEgressEvent for a CLIENT)."""
        e: dict[str, Any] = {"type": "eg", "ts": self.now(), "kind": CLIENT, "cid": conn.cid}
        if conn.name:
            e["name"] = conn.name
        if conn.account is not self.account:
            e["acc"] = conn.account.name
        e["sub"] = sub.subject if self.shadow is None else self.shadow(sub.subject)
        if sub.queue:
            e["queue"] = sub.queue
        if error:
            e["error"] = error
        self.events.append(e)

    def forward(self, link: Any, data: bytes, hdr_len: int) -> tuple[int, bytes] | None:
        """A route or leaf connection the message goes to: its egress event, and the message with the hop header
        the next server reads (setHopHeader: ``<hop>.<n>``, or ``<n>`` on the first server); None when it must not go
        there: trace-only, and the other side announced no tracing (it would deliver the message)."""
        self.hops += 1
        nhop = f"{self.hop}.{self.hops}" if self.hop else str(self.hops)
        e: dict[str, Any] = {"type": "eg", "ts": self.now(), "kind": ROUTER if link.is_route else LEAF,
                             "cid": link.cid}
        name = link.remote_name or link.remote_id
        if name:
            e["name"] = name
        e["hop"] = nhop
        self.events.append(e)
        if link.remote_proto < TRACE_PROTO:  # msgTraceSupport
            e["error"] = ONLY_NO_SUPPORT if self.only else NO_SUPPORT
            if self.only:
                return None
        return set_header(data, hdr_len, TRACE_HOP, nhop)

    def add(self, typ: str, **fields: Any) -> None:
        e: dict[str, Any] = {"type": typ, "ts": self.now()}
        e.update(fields)
        self.events.append(e)

    def jetstream(self, stream: str) -> dict:
        """addJetStreamEvent; the stream fills in ``subject``, ``nointerest`` and ``error`` (jetstream_done)."""
        self.js = {"type": "js", "ts": self.now(), "stream": stream}
        self.events.append(self.js)
        return self.js

    # ------------------------------------------------------------------ sending
    def send(self) -> None:
        """sendInternalAccountSysMsg: the event, from the server, in the message's account, on the destination.  The
        event is built from what the publisher sent: whatever goes wrong here is logged and costs the message
        nothing (it has been delivered)."""
        try:
            self._send()
        except Exception as e:
            self.server.log_error("message trace event not sent", dest=self.dest, error=repr(e))

    def _send(self) -> None:
        srv = self.server
        system = srv.system
        if system is None:  # no system account: nats-server's internal send queue does not exist either
            return
        doc: dict[str, Any] = {"server": system.server_info(),
                               "request": {"header": self.hmap, "msgsize": self.size}}
        if self.hops:
            doc["hops"] = self.hops
        doc["events"] = self.events
        # Bytes that are not UTF-8 (in a header, the subject, a client name) come out as U+FFFD, as Go's json.Marshal
        # writes them; the text holds them surrogate-escaped.
        body = dumps(doc).encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode()
        hdr = b""
        enc = _encoding(self.accept)
        if enc == "gzip":
            import gzip

            body, hdr = gzip.compress(body), b"NATS/1.0\r\nContent-Encoding: gzip\r\n\r\n"
        elif enc == "snappy":
            import cramjam

            body = bytes(cramjam.snappy.compress(body))  # the framing format, as s2's WriterSnappyCompat writes
            hdr = b"NATS/1.0\r\nContent-Encoding: snappy\r\n\r\n"
        elif enc == "identity":
            hdr = b"NATS/1.0\r\nContent-Encoding: identity\r\n\r\n"
        srv.route(None, self.dest, "", len(hdr), hdr + body, sublist=self.account.sublist)


def _encoding(accept: str) -> str:
    """getCompressionType: as a system request's Accept-Encoding (sysacc), and any other value is answered uncompressed,
    labelled ``identity``."""
    return headers.accept_encoding(accept) or "identity" if accept else ""


# ---------------------------------------------------------------------- starting a trace
def start_trace(srv: Any, found: tuple[dict, bool], hdr_len: int, data: bytes, account: Any, kind: int, cid: int,
           name: str, subject: str, allowed) -> "MsgTrace | bool | tuple[int, bytes]":
    """initMsgTrace, for the entry points of msgtrace_delivery.py: a :class:`MsgTrace`; or ``True``: drop the message (a trace-only message that cannot be traced,
    or a destination the publisher may not publish to); or ``False``: deliver it untraced; or a new
    ``(hdr_len, data)``: deliver that, untraced (the header now says ``trace disabled``)."""
    hmap, external = found
    only = False if external else _first(hmap, TRACE_ONLY).lower() in _TRUE
    dest = _first(hmap, TRACE_DEST)
    origin_acc = _first(hmap, TRACE_ORIGIN_ACCOUNT)
    if origin_acc:
        # A header of servers before 2.10.x's message tracing: such a message is not traced.
        srv.log_error(f'Message tracing disabled because of header "{TRACE_ORIGIN_ACCOUNT}" with '
                      f'value="{origin_acc}"', cid=cid)
        return True if only else set_header(data, hdr_len, TRACE_DEST, DISABLED)
    if external:
        # A sampled traceparent: the account's destination, if it has one, and its sampling on the first server
        # (a message it does not pick goes on marked "trace disabled", so that no later server picks it either).
        dest = account.trace_dest
        if not dest:
            return False
        if kind == CLIENT and not _sample(account.trace_sampling):
            return set_header(data, hdr_len, TRACE_DEST, DISABLED)
    if not is_valid_literal_subject(dest):
        srv.log_error(f'Destination "{dest}" is not valid, won\'t be able to trace events', cid=cid)
        return only
    if allowed is not None and not allowed(dest):
        return True
    hop = _first(hmap, TRACE_HOP) if kind != CLIENT else ""
    return MsgTrace(srv, account, dest, only, hop, hmap, len(data), kind, cid, name, subject)


def _sample(sampling: int) -> bool:
    """msgtrace.go sample: 1..99 percent (rand.Int31n(100) <= sampling, so a hair more), anything else always."""
    if sampling <= 0 or sampling >= 100:
        return True
    return int(random.random() * 100) <= sampling
