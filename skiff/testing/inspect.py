"""Read-only snapshots of a running server's state as plain Python objects.

Theory of operation
-------------------
``Inspector(server)`` reads the server's own structures at the moment it is asked: streams and their store
(server/jetstream/stream.py, the ``StreamStore``), consumers (the bookkeeping of server/jetstream/consumer_core.py:
``pending``, ``rdc``, the ack floor; the pull ``WaitQueue`` of server/jetstream/pull.py), connections
(``Server.clients``) and accounts.  Nothing is copied on the side while the server runs, so a snapshot can never
disagree with what the server does; and nothing here changes state: each call returns frozen dataclasses built from
a read, and holding one does not keep anything alive.

The names are nats-server's (``num_pending``, ``num_ack_pending``, ``ack_floor``, ``delivered``), so an assert reads
like the consumer info a client would get, plus what the API does not show: the redelivery count of each pending
sequence, the pull requests waiting, the subscriptions of each connection.

``to_json(obj)`` turns any snapshot into JSON-ready data (bytes as base64, as ``STREAM.MSG.GET`` returns them); the
control interface (control.py) answers with it.
"""
from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.core.server import Server

__all__ = [
    "AccountView", "ConnectionView", "ConsumerView", "Inspector", "MessageView", "PullRequestView", "SeqPair",
    "StreamView", "SubscriptionView", "to_json",
]


@dataclass(frozen=True)
class MessageView:
    seq: int
    subject: str
    time_ns: int
    hdr: bytes
    data: bytes


@dataclass(frozen=True)
class StreamView:
    account: str
    name: str
    config: dict
    messages: int
    bytes: int
    first_seq: int
    last_seq: int
    num_subjects: int
    num_deleted: int
    consumers: tuple[str, ...]


@dataclass(frozen=True)
class SeqPair:
    """nats-server ``SequenceInfo``: a consumer (delivery) sequence and the stream sequence it stands for."""

    consumer_seq: int
    stream_seq: int


@dataclass(frozen=True)
class PullRequestView:
    """One waiting pull request (nats-server waitingRequest)."""

    reply: str
    batch: int  # messages still wanted
    delivered: int
    max_bytes: int  # bytes still allowed, 0: no limit
    expires_in: float | None  # seconds left on the server's clock, None: no expiry
    no_wait: bool
    group: str


@dataclass(frozen=True)
class ConsumerView:
    account: str
    stream: str
    name: str
    config: dict
    delivered: SeqPair
    ack_floor: SeqPair
    num_pending: int
    num_ack_pending: int
    num_redelivered: int
    num_waiting: int
    # stream sequence -> (consumer sequence, delivery time ns) of what was delivered and not acknowledged yet
    pending: dict[int, tuple[int, int]]
    # stream sequence -> times it was redelivered (nats-server rdc; a sequence delivered once is absent)
    redelivered: dict[int, int]
    waiting: tuple[PullRequestView, ...]
    push_bound: bool
    paused: bool

    def delivery_count(self, stream_seq: int) -> int:
        """How many times ``stream_seq`` was delivered, as the ``$JS.ACK`` subject's count says (0: not pending)."""
        if stream_seq not in self.pending:
            return 0
        return self.redelivered.get(stream_seq, 0) + 1


@dataclass(frozen=True)
class SubscriptionView:
    subject: str
    queue: str
    sid: str
    delivered: int
    max_msgs: int  # UNSUB <sid> <max>; 0: none


@dataclass(frozen=True)
class ConnectionView:
    cid: int
    kind: str  # connz "type": nats or websocket
    name: str
    account: str
    user: str
    lang: str
    version: str
    host: str
    port: int
    subscriptions: tuple[SubscriptionView, ...]
    pending_bytes: int
    in_msgs: int
    out_msgs: int
    in_bytes: int
    out_bytes: int

    def subjects(self) -> list[str]:
        return [s.subject for s in self.subscriptions]


@dataclass(frozen=True)
class AccountView:
    name: str
    num_connections: int
    num_subscriptions: int  # client subscriptions
    jetstream: bool
    streams: tuple[str, ...]
    system: bool


class Inspector:
    """Snapshots of ``server``; every method reads the live structures when called."""

    def __init__(self, server: "Server") -> None:
        self.server = server

    # ------------------------------------------------------------------ JetStream
    def _engines(self, account: str | None) -> list:
        engines = self.server.jetstreams or {}
        if account is None:
            return list(engines.values())
        js = engines.get(account)
        return [js] if js is not None else []

    def _stream(self, name: str, account: str | None):
        for js in self._engines(account):
            st = js.streams.get(name)
            if st is not None:
                return js, st
        raise KeyError(f"stream not found: {name!r}" + (f" in account {account!r}" if account else ""))

    def streams(self, account: str | None = None) -> list[StreamView]:
        return [self._stream_view(js, st) for js in self._engines(account) for st in list(js.streams.values())]

    def stream(self, name: str, account: str | None = None) -> StreamView:
        return self._stream_view(*self._stream(name, account))

    def _stream_view(self, js, st) -> StreamView:
        state = st.store.state()
        return StreamView(
            account=js.server.js_account.name, name=st.name, config=_config(st.config),
            messages=state.messages, bytes=state.bytes, first_seq=state.first_seq, last_seq=state.last_seq,
            num_subjects=state.num_subjects, num_deleted=state.num_deleted, consumers=tuple(st.consumers),
        )

    def messages(self, stream: str, subject: str = "", start_seq: int = 0, limit: int | None = None,
                 account: str | None = None) -> list[MessageView]:
        """The stored messages of ``stream`` in sequence order, those on ``subject`` (wildcards allowed) only when
        given, from ``start_seq``."""
        _, st = self._stream(stream, account)
        store = st.store
        out: list[MessageView] = []
        seq = max(start_seq, store.first_seq, 1)
        while limit is None or len(out) < limit:
            sm, found = store.load_next_msg(subject, seq)
            if sm is None:
                break
            out.append(_msg(sm))
            seq = found + 1
        return out

    def message(self, stream: str, seq: int, account: str | None = None) -> MessageView | None:
        _, st = self._stream(stream, account)
        sm = st.store.load_msg(seq)
        return _msg(sm) if sm is not None else None

    def consumers(self, stream: str, account: str | None = None) -> list[ConsumerView]:
        js, st = self._stream(stream, account)
        return [self._consumer_view(js, c) for c in list(st.consumers.values())]

    def consumer(self, stream: str, name: str, account: str | None = None) -> ConsumerView:
        js, st = self._stream(stream, account)
        c = st.consumers.get(name)
        if c is None:
            raise KeyError(f"consumer not found: {name!r} on stream {stream!r}")
        return self._consumer_view(js, c)

    def _consumer_view(self, js, c) -> ConsumerView:
        # The same numbers as consumer info (Consumer.info), read without its side effects (it expires stale pull
        # requests first).
        store = c.store
        core = c.core
        if store.dc != 0 or store.ds != 0:
            delivered = SeqPair(store.dc, store.ds)
        else:
            delivered = SeqPair(max(core.dseq, 1) - 1, max(core.sseq, 1) - 1)
        now = c.clock.monotonic()
        waiting = tuple(
            PullRequestView(reply=w.reply, batch=w.n, delivered=w.d, max_bytes=w.b,
                            expires_in=(w.expires - now) if w.expires else None, no_wait=bool(w.no_wait),
                            group=w.group)
            for w in (c.waiting.q if c.waiting is not None else ())
        )
        cfg = c.config
        return ConsumerView(
            account=js.server.js_account.name, stream=c.stream.name, name=c.name, config=_config(cfg),
            delivered=delivered, ack_floor=SeqPair(store.ac, store.as_),
            num_pending=c._info_num_pending(), num_ack_pending=len(core.pending),
            num_redelivered=0 if cfg.max_deliver == 1 else len(core.rdc), num_waiting=len(waiting),
            pending={s: (p[0], p[1]) for s, p in sorted(core.pending.items())},
            redelivered={s: n for s, n in sorted(core.rdc.items()) if n > 0},
            waiting=waiting, push_bound=c.waiting is None and bool(c.active), paused=bool(c.paused()),
        )

    # ------------------------------------------------------------------ connections and accounts
    def connections(self, account: str | None = None) -> list[ConnectionView]:
        return [self._conn_view(c) for c in list(self.server.clients.values())
                if account is None or c.account.name == account]

    def connection(self, cid: int) -> ConnectionView:
        c = self.server.clients.get(cid)
        if c is None:
            raise KeyError(f"connection not found: cid {cid}")
        return self._conn_view(c)

    def connection_named(self, name: str) -> ConnectionView:
        """The one open connection whose CONNECT carried ``name``."""
        found = [c for c in list(self.server.clients.values()) if c.name == name]
        if len(found) != 1:
            raise KeyError(f"{len(found)} connections named {name!r}")
        return self._conn_view(found[0])

    @staticmethod
    def _conn_view(c) -> ConnectionView:
        subs = tuple(SubscriptionView(subject=s.subject, queue=s.queue, sid=s.sid, delivered=s.delivered,
                                      max_msgs=s.max_msgs) for s in list(c.subs.values()))
        return ConnectionView(
            cid=c.cid, kind=c.client_type, name=c.name, account=c.account.name, user=c.user, lang=c.lang,
            version=c.version, host=c.host, port=c.port, subscriptions=subs, pending_bytes=c.pending_bytes(),
            in_msgs=c.in_msgs, out_msgs=c.out_msgs, in_bytes=c.in_bytes, out_bytes=c.out_bytes,
        )

    def accounts(self) -> list[AccountView]:
        srv = self.server
        conns: dict[str, list] = {}
        for c in list(srv.clients.values()):
            conns.setdefault(c.account.name, []).append(c)
        sys_acc = srv.accounts.system
        out = []
        for name, acc in list(srv.accounts.by_name.items()):
            mine = conns.get(name, [])
            js = (srv.jetstreams or {}).get(name)
            out.append(AccountView(
                name=name, num_connections=len(mine), num_subscriptions=sum(len(c.subs) for c in mine),
                jetstream=js is not None, streams=tuple(js.streams) if js is not None else (),
                system=acc is sys_acc,
            ))
        return out


def _config(cfg: Any) -> dict:
    import json

    return json.loads(cfg.to_json())


def _msg(sm) -> MessageView:
    return MessageView(seq=sm.seq, subject=sm.subject, time_ns=sm.ts, hdr=bytes(sm.hdr or b""), data=bytes(sm.data))


def to_json(obj: Any) -> Any:
    """JSON-ready data for a snapshot (or a list / dict of them): bytes as base64, dataclasses as objects,
    integer keys as strings (JSON has no others)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj
