"""Stream mirrors and sources: internal push consumers on the origin stream (nats-server stream.go).

Theory of operation
-------------------
A stream with ``mirror`` or ``sources`` gets one :class:`Sourcing`, which keeps a :class:`SourceInfo` per origin
(the mirror, or each source keyed by its index name ``<name>[:<api hash>] <filter> <dest>``, composeIName).  For
each it does what nats-server's setupMirrorConsumer / trySetupSourceConsumer do, all through the JetStream API,
even for an origin in the same account, so that an ``external`` origin (another account reached through an
import of its ``$JS.API``, or another domain) works the same way:

1. ``$JS.API.CONSUMER.CREATE.<origin>[.<name>.<filter>]`` (the ``$JS.API`` prefix swapped for ``external.api``) for a
   push consumer: ``ack_policy none, ack_wait 22h, max_deliver 1, idle_heartbeat 1s, flow_control, direct,
   sourcing, inactive_threshold 10s``, deliver subject ``$JS.M.<8 base62>`` / ``$JS.S.<8>`` (or under
   ``external.deliver``), starting after the last message taken from that origin.  A source's request asks for API
   level 5 with the origin's stream identity (``Nats-Stream-Identity``, a hash of its creation time, kept as the
   sixth field of ``Nats-Stream-Source``), then 4, then none without ``sourcing`` and with a unique name, each time
   the answer is 10185 / 10025, exactly as nats-server steps down against an older server; a mirror asks for 4.
   An origin that answers with another identity, or refuses ours (10225), was created again: the source takes it
   from its start (server/jetstream/sourcing_identity.py).  A durable ``consumer`` (2.14, ADR-60) is reset to its
   ack floor instead of created (server/jetstream/sourcing_durable.py).
2. On the reply, subscribe the deliver subject.  Every delivery's ``$JS.ACK`` reply carries the origin sequence,
   delivery sequence and pending count: a gap in delivery sequences re-creates the consumer at the next origin
   sequence; a mirror stores each message at the origin's sequence and time (a gap with a continuous delivery
   sequence is a deleted or filtered-out range, skipped), a source stores it as a new message with the header
   ``Nats-Stream-Source: <name> <origin seq> <filter> <dest> <origin subject>`` (genSourceHeader).
3. Flow-control requests are answered with ``Nats-Last-Consumer`` / ``Nats-Last-Stream``; an idle heartbeat whose
   ``Nats-Last-Consumer`` differs from what was received re-creates the consumer; ``Nats-Consumer-Stalled`` gets
   an empty reply.  A health check every 10 s re-creates any consumer not heard from for 10 s (the origin was
   deleted, restarted or unreachable).  Failures retry after 2 s plus 10 s per failure (up to 2 min), with
   100-200 ms of jitter (calculateRetryBackoff).

Requests and flow-control replies are published by :class:`InternalClient`, the stream's own client in its account
(nats-server's internal JETSTREAM client): the API acts only on what a client sent (DESIGN.md), and this is the
stream asking for itself, with the account's own subject space and imports.

Restart: a mirror resumes at its last sequence + 1; a source at the origin sequence found in the newest stored
``Nats-Stream-Source`` header of that source (startingSequenceForSources scans backwards), so a kill -9 neither
loses nor duplicates: what was not written is asked for again, what was written is not.
"""
from __future__ import annotations

import hashlib
import json
import random
from typing import TYPE_CHECKING, Any

from skiff.protocol import headers
from skiff.protocol.jsapi.subjects import (
    API, JS_API, MIRROR_DELIVER_PRE, REQUIRED_API_LEVEL_HDR, SOURCE_DELIVER_PRE,
)
from skiff.protocol.jsapi.timefmt import format_time

from ..ids import BASE62, nuid
from . import jsonout
from .acks import ack_tokens, parse_num
from .sourcing_durable import DURABLE_WAIT, DurableSourcing
from .sourcing_identity import StreamIdentity, identity_headers, identity_of, with_identity
from .transform import new_transform

if TYPE_CHECKING:  # pragma: no cover
    from skiff.protocol.jsapi.stream_config import StreamSource
    from .stream import Stream

STREAM_SOURCE = "Nats-Stream-Source"
LAST_CONSUMER = "Nats-Last-Consumer"
CONSUMER_STALLED = "Nats-Consumer-Stalled"
SECOND = 1_000_000_000
SOURCE_HEALTH_HB = 1 * SECOND          # sourceHealthHB
HEALTH_CHECK_INTERVAL = 10.0            # sourceHealthCheckInterval (s)
RETRY_THRESHOLD = 2.0                   # sourceConsumerRetryThreshold (s)
RETRY_BACKOFF, RETRY_MAXIMUM = 5.0, 120.0
CREATE_WAIT = 30.0                      # srcConsumerWaitTime (s)
ACK_WAIT_22H = 22 * 3600 * SECOND
DGET_CAUGHT_UP = 10  # dgetCaughtUpThresh
EARLY_MAX = 10_000  # deliveries held while the create reply is on its way


def get_hash(name: str, size: int = 8) -> str:
    """nats-server getHash: sha256, each of the first ``size`` bytes as a base62 digit."""
    b = hashlib.sha256(name.encode()).digest()
    return "".join(BASE62[b[i] % 62] for i in range(size))


def sync_subject(pre: str) -> str:
    """nats-server syncSubject: ``<pre>.<8 base62>``."""
    return pre + "." + nuid(8)


def retry_backoff(fails: int) -> float:
    return min(RETRY_BACKOFF * fails * 2, RETRY_MAXIMUM)


def iname_of(src: "StreamSource") -> str:
    """composeIName with the API prefix hashed, as nats-server writes it into Nats-Stream-Source."""
    name = src.name
    if src.external is not None:
        name += ":" + get_hash(src.external.api)
    if src.consumer is not None:
        name += ":C=" + get_hash(src.consumer.name)
    if not src.subject_transforms:
        return f"{name} {src.filter_subject or '>'} >"
    return " ".join((name, "\f".join(t.src or ">" for t in src.subject_transforms),
                     "\f".join(t.dest or ">" for t in src.subject_transforms)))


class InternalClient:
    """The stream's own client in its account (nats-server's internal JETSTREAM client): what it publishes is
    routed like a client's message in that account, so the API answers it and imports carry it."""

    no_responders = False
    echo = True
    headers = True
    kind = "JETSTREAM"
    cid = 0
    host = ""

    def __init__(self, stream: "Stream") -> None:
        self.server = stream.server
        self.account = stream.server.js_account
        self.name = f"stream {stream.name}"

    @property
    def sublist(self):
        return self.account.sublist

    def publish(self, subject: str, data: bytes = b"", reply: str = "", hdr: bytes = b"") -> None:
        self.server.route(self, subject, reply, len(hdr), hdr + data if hdr else data, sublist=self.account.sublist)


class SourceInfo:
    """nats-server sourceInfo: one origin's position and health."""

    def __init__(self, cfg: "StreamSource", mirror: bool) -> None:
        self.cfg = cfg
        self.mirror = mirror
        self.name = cfg.name
        self.iname = iname_of(cfg)
        self.sf = cfg.filter_subject
        trs = cfg.subject_transforms or []
        self.sfs = [t.src for t in trs]
        self.trs = [new_transform(t.src, t.dest) if t.dest else None for t in trs]
        self.tr_cfg = [(t.src, t.dest) for t in trs]
        self.sseq = self.dseq = self.lag = 0
        self.last = 0  # wall ns of the last message or control message from the origin, 0 = never
        self.err: dict | None = None
        self.cname = ""
        self.ident = ""  # the origin's stream identity (2.15), as its last reply or our newest header gave it
        self.rc = False  # the origin was found recreated: start over from its first message
        self.fails = 0
        self.lreq = -1e18  # monotonic time of the last create request
        self.sip = False  # a create request is in flight
        self.sub = None  # the deliver subject subscription
        self.early: list = []  # deliveries that came before the create reply
        self.reply_sub = None
        self.timer = None  # a scheduled setup
        self.wait_timer = None

    def info(self, now: int, with_seq: bool) -> dict:
        """StreamSourceInfo in nats-server 2.15.1's field order (checked against the binary): ``seq`` (the last
        origin sequence taken) only for sources and only when not 0."""
        out: dict[str, Any] = {"name": self.name}
        ext = self.cfg.external
        if ext is not None:
            out["external"] = {"api": ext.api, "deliver": ext.deliver}
        out["lag"] = self.lag
        if with_seq and self.sseq:
            out["seq"] = self.sseq
        out["active"] = now - self.last if self.last else -1
        if self.err is not None:
            out["error"] = self.err
        if self.sf:
            out["filter_subject"] = self.sf
        if self.tr_cfg:
            out["subject_transforms"] = [{"src": s, "dest": d} for s, d in self.tr_cfg]
        return out


class Sourcing(DurableSourcing, StreamIdentity):
    def __init__(self, stream: "Stream") -> None:
        self.stream = stream
        self.server = stream.server
        self.clock = stream.clock
        self.client = InternalClient(stream)
        self.mirror: SourceInfo | None = None
        self.sources: dict[str, SourceInfo] = {}
        self._health = None
        self._mirror_direct: list = []  # direct get subscriptions for the origin's name (mirror_direct)
        self.closed = False

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        cfg = self.stream.config
        if cfg.mirror is not None:
            self.mirror = SourceInfo(cfg.mirror, True)
            self._schedule(self.mirror)
        elif cfg.sources:
            for src in cfg.sources:
                self.sources[iname_of(src)] = SourceInfo(src, False)
            self._starting_sequences(list(self.sources.values()))
            for si in self.sources.values():
                self._schedule(si, si.sseq + 1)
        self._health = self.clock.call_later(HEALTH_CHECK_INTERVAL, self._health_check)

    def stop(self, delete_consumers: bool = False) -> None:
        self.closed = True
        self._unsubscribe_mirror_direct()
        if self._health is not None:
            self._health.cancel()
            self._health = None
        for si in self.all():
            if delete_consumers:
                self._delete_consumer(si)
            self._cancel(si)

    def all(self) -> list[SourceInfo]:
        return [self.mirror] if self.mirror is not None else list(self.sources.values())

    def update(self, old, new) -> None:
        """A config update: the mirror removed (promotion, 2.12), sources added or removed."""
        if old.mirror is not None and new.mirror is None and self.mirror is not None:
            self._unsubscribe_mirror_direct()
            self._delete_consumer(self.mirror)
            self._cancel(self.mirror)
            self.mirror = None
        want = {iname_of(s): s for s in new.sources or []}
        for iname in list(self.sources):
            if iname not in want:
                si = self.sources.pop(iname)
                self._delete_consumer(si)
                self._cancel(si)
        added = []
        for iname, src in want.items():
            if iname in self.sources:
                self.sources[iname].cfg = src
            else:
                si = self.sources[iname] = SourceInfo(src, False)
                added.append(si)
        if added:
            self._starting_sequences(added)
            for si in added:
                self._schedule(si, si.sseq + 1)

    def _unsubscribe_mirror_direct(self) -> None:
        for sub in self._mirror_direct:
            self.server.unsubscribe_internal(sub)
        self._mirror_direct = []

    @property
    def idle(self) -> bool:
        return self.mirror is None and not self.sources

    # ------------------------------------------------------------------ STREAM.INFO
    def mirror_info(self) -> dict | None:
        if self.mirror is None:
            return None
        return self.mirror.info(self.clock.time_ns(), False)

    def sources_info(self) -> list[dict]:
        now = self.clock.time_ns()
        return [si.info(now, True) for si in self.sources.values()]

    # ------------------------------------------------------------------ starting positions
    def _starting_sequences(self, infos: list[SourceInfo]) -> None:
        """startingSequenceForSources: the newest Nats-Stream-Source header of each source gives the origin
        sequence it last delivered."""
        store = self.stream.store
        wanted = {si.iname: si for si in infos}
        if store.msgs == 0 or not wanted:
            return
        seq = store.last_seq
        first = store.first_seq
        while seq >= first and wanted:
            sm = store.load_prev_msg("", seq)
            if sm is None:
                break
            seq = sm.seq - 1
            if not sm.hdr:
                continue
            ss = headers.get_exact(sm.hdr, STREAM_SOURCE)
            if not ss:
                continue
            fields = ss.split(" ")
            if len(fields) < 4:
                continue
            iname = " ".join((fields[0], fields[2], fields[3]))
            si = wanted.pop(iname, None)
            if si is not None:
                si.sseq = parse_num(fields[1])
                si.dseq = 0
                si.ident = identity_of(fields)

    # ------------------------------------------------------------------ consumer setup
    def _schedule(self, si: SourceInfo, seq: int = 0) -> None:
        """scheduleSetupMirrorConsumerRetry / setupSourceConsumer: throttled, backed off, jittered."""
        if self.closed or si.timer is not None or si.sip:
            return
        delay = max(RETRY_THRESHOLD - (self.clock.monotonic() - si.lreq), 0.0)
        if si.fails:
            delay += retry_backoff(si.fails)
        delay += 0.1 + random.random() * 0.1
        si.timer = self.clock.call_later(delay, self._setup, si, seq)

    def _cancel(self, si: SourceInfo) -> None:
        for attr in ("sub", "reply_sub"):
            sub = getattr(si, attr)
            if sub is not None:
                self.server.unsubscribe_internal(sub)
                setattr(si, attr, None)
        for attr in ("timer", "wait_timer"):
            t = getattr(si, attr)
            if t is not None:
                t.cancel()
                setattr(si, attr, None)
        si.sip = False
        si.early = []

    def _current(self, si: SourceInfo) -> bool:
        return not self.closed and (si is self.mirror or self.sources.get(si.iname) is si)

    def _setup(self, si: SourceInfo, seq: int) -> None:
        si.timer = None
        if not self._current(si):
            return
        self._cancel(si)
        stream = self.stream
        store = stream.store
        si.lreq = self.clock.monotonic()
        cfg = si.cfg
        ext = cfg.external
        if cfg.consumer is not None:
            return self._setup_durable(si)
        if ext is not None and ext.deliver:
            deliver = sync_subject(ext.deliver + (".M" if si.mirror else ".S")).replace("..", ".")
        else:
            deliver = sync_subject(MIRROR_DELIVER_PRE if si.mirror else SOURCE_DELIVER_PRE)
        acc = self.client.account.name
        domain = self.server.options.jetstream_domain
        pre = "_nats.mirror." if si.mirror else "_nats.src."
        md = {pre + "stream": stream.name, pre + "acc": acc}
        if domain:
            md[pre + "domain"] = domain
        ident = f"{stream.name} {acc}" + (f" {domain}" if domain else "")
        if not si.mirror and sum(1 for s in stream.config.sources or [] if s.name == cfg.name) > 1:
            ident += " " + si.iname  # createSourcingConsumerHash: the same origin twice needs distinct names
        cid = get_hash(ident)
        c: dict[str, Any] = {"name": ("JS_MIRROR_" if si.mirror else "JS_SRC_") + cid, "deliver_subject": deliver}
        if si.mirror:
            if store.msgs == 0 and store.first_seq == 0:  # only on first use: the configured start
                if cfg.opt_start_seq > 0:
                    c["deliver_policy"], c["opt_start_seq"] = "by_start_sequence", cfg.opt_start_seq
                elif cfg.opt_start_time is not None:
                    c["deliver_policy"] = "by_start_time"
                    c["opt_start_time"] = format_time(cfg.opt_start_time.unix_ns)
                else:
                    c["deliver_policy"] = "all"
            else:
                c["deliver_policy"], c["opt_start_seq"] = "by_start_sequence", store.last_seq + 1
            if cfg.filter_subject:
                c["filter_subject"] = cfg.filter_subject
            elif len(si.sfs) == 1:
                c["filter_subject"] = si.sfs[0]
            elif si.sfs:
                c["filter_subjects"] = si.sfs
        else:
            if seq <= 1:
                if cfg.opt_start_seq > 0:
                    c["deliver_policy"], c["opt_start_seq"] = "by_start_sequence", cfg.opt_start_seq
                else:
                    last_ts = store.state().last_ts if store.msgs or store.last_seq else 0
                    if cfg.opt_start_time is not None:
                        st = cfg.opt_start_time.unix_ns
                        if last_ts and st < last_ts:
                            st = last_ts
                        c["deliver_policy"], c["opt_start_time"] = "by_start_time", format_time(st)
                    elif store.first_seq > 1 and last_ts and not si.rc:
                        c["deliver_policy"], c["opt_start_time"] = "by_start_time", format_time(last_ts)
            else:
                c["deliver_policy"], c["opt_start_seq"] = "by_start_sequence", seq
            if cfg.filter_subject:
                c["filter_subject"] = cfg.filter_subject
            elif len(si.sfs) == 1:
                c["filter_subject"] = si.sfs[0]
            elif si.sfs:
                c["filter_subjects"] = si.sfs
        c.update({"ack_policy": "none", "ack_wait": ACK_WAIT_22H, "max_deliver": 1, "idle_heartbeat": SOURCE_HEALTH_HB,
                  "flow_control": True, "direct": True, "sourcing": True,
                  "inactive_threshold": int(HEALTH_CHECK_INTERVAL * SECOND), "metadata": md})
        si.err = None
        si.sip = True
        # Subscribed before asking: the origin may deliver before its create reply comes back (always, when an
        # import already gives the deliver subject interest); what arrives meanwhile waits in si.early.
        si.early = []
        si.sub = self.server.subscribe_internal(deliver, self._deliveries(si), server_msgs=True, msg_subject=True)
        # A mirror asks for API level 4 and, refused, steps straight down to no level; a source starts at 5 (with
        # its origin's identity) and steps down one level at a time (setupMirrorConsumer, trySetupSourceConsumer).
        self._send_create(si, c, 4 if si.mirror else 5)

    def _create_subject(self, si: SourceInfo, c: dict | None) -> str:
        if c is None:
            subject = self._reset_subject(si)
        elif c.get("filter_subject"):
            subject = API["CONSUMER.CREATE.EX"].fill(si.name, c["name"], c["filter_subject"])
        else:
            subject = API["CONSUMER.CREATE"].fill(si.name)
        ext = si.cfg.external
        if ext is not None:
            subject = subject.replace(JS_API, ext.api, 1).replace("..", ".")
        return subject

    def _send_create(self, si: SourceInfo, c: dict | None, level: int) -> None:
        """The consumer create request ``c`` (or, None, the durable consumer's reset) at API ``level`` (0: none)."""
        if si.reply_sub is not None:
            self.server.unsubscribe_internal(si.reply_sub)
        reply = "_INBOX." + nuid()
        si.reply_sub = self.server.subscribe_internal(
            reply, lambda sub, subj, r, hl, data, origin: self._on_create_reply(si, c, level, data[hl:],
                                                                                bytes(data[:hl]) if hl else b""),
            server_msgs=True)
        if si.wait_timer is not None:
            si.wait_timer.cancel()
        wait = CREATE_WAIT if c is not None else DURABLE_WAIT
        si.wait_timer = self.clock.call_later(wait, self._create_timed_out, si)
        hdr = b""
        if level:
            hdr = headers.build([(REQUIRED_API_LEVEL_HDR, str(level))] + identity_headers(si, level))
        body = jsonout.dumpb({"stream_name": si.name, "config": c}) if c is not None else b""
        self.client.publish(self._create_subject(si, c), body, reply, hdr)

    def _create_timed_out(self, si: SourceInfo) -> None:
        si.wait_timer = None
        if self._current(si):
            self._failed(si, None)
            if si.cfg.consumer is not None:
                self._probe(si)

    def _failed(self, si: SourceInfo, err: dict | None) -> None:
        self._cancel(si)
        if err is not None:
            si.err = err
        si.fails += 1
        self._schedule(si, si.sseq + 1)

    def _on_create_reply(self, si: SourceInfo, c: dict | None, level: int, data: bytes, hdr: bytes = b"") -> None:
        if not self._current(si) or not si.sip:
            return
        try:
            ccr = json.loads(bytes(data))
        except ValueError:
            self.server.log_warning("JetStream bad sourcing consumer create response", stream=self.stream.name)
            return self._failed(si, {"code": 400, "err_code": 10025, "description": "invalid JSON"})
        err = ccr.get("error") if isinstance(ccr, dict) else None
        if err is not None or not isinstance(ccr, dict) or not isinstance(ccr.get("config"), dict):
            code = err.get("err_code") if isinstance(err, dict) else None
            if code == 10225 and not si.mirror:
                # The origin is not the stream this source knew (deleted and created again).
                return self._origin_recreated(si)
            if (c is None or c.get("sourcing")) and code in (10185, 10025) and level:
                # An origin server below API level 5 / 4 / without sourcing consumers: step down as nats-server does.
                if level > 4:
                    return self._send_create(si, c, level - 1)
            if c is not None and c.get("sourcing") and code in (10185, 10025):
                c = dict(c)
                c.pop("sourcing")
                c["name"] = f"{c['name']}_{get_hash(nuid())}"
                return self._send_create(si, c, 0)
            self.server.log_warning("JetStream error response for create sourcing consumer",
                                    stream=self.stream.name, origin=si.name, error=err)
            return self._failed(si, err if isinstance(err, dict) else
                                {"code": 500, "err_code": 10029 if si.mirror else 10045,
                                 "description": "invalid consumer create response"})
        if c is None:  # a durable consumer's reset
            refused = self._reset_refused(si, ccr)
            if refused is not None:
                return self._failed(si, refused)
        if si.reply_sub is not None:
            self.server.unsubscribe_internal(si.reply_sub)
            si.reply_sub = None
        if si.wait_timer is not None:
            si.wait_timer.cancel()
            si.wait_timer = None
        si.sip = False
        si.fails = 0
        delivered = parse_num(str((ccr.get("delivered") or {}).get("stream_seq", 0)))
        store = self.stream.store
        if si.mirror:
            last = store.last_seq
            if last < delivered:
                # The origin starts past what we hold (a high first sequence, or a filtered start).
                if store.msgs == 0:
                    store.compact(delivered + 1)
                else:
                    store.skip_msgs(last + 1, delivered - last)
                self.stream.js.durability.dirty(self.stream)
            si.sseq = max(delivered, store.last_seq)
        else:
            self._check_identity(si, hdr)
            if si.sseq < delivered:
                si.sseq = delivered
        si.cname = ccr.get("name", "")
        si.dseq = 0
        si.last = self.clock.time_ns()
        if c is None:
            self._subscribe_durable(si)
        early, si.early = si.early, []
        for args in early:
            if not self._current(si) or si.sub is None:
                break
            self._on_msg(si, *args)

    def _deliveries(self, si: SourceInfo):
        def deliver(sub, subject, reply, hdr_len, data, origin, msg_subject=None) -> None:
            if si.sip:
                if len(si.early) < EARLY_MAX:  # past that: a gap, which re-creates the consumer at the right place
                    si.early.append((msg_subject or subject, reply, hdr_len, bytes(data)))
                return
            self._on_msg(si, msg_subject or subject, reply, hdr_len, data)
        return deliver

    def _delete_consumer(self, si: SourceInfo) -> None:
        """tryDeleteMirrorConsumer: ask the origin to drop the consumer now rather than after inactive_threshold.
        A durable consumer the user gave (``consumer``) is theirs and stays."""
        if not si.cname or si.cfg.consumer is not None:
            return
        subject = API["CONSUMER.DELETE"].fill(si.name, si.cname)
        ext = si.cfg.external
        if ext is not None:
            subject = subject.replace(JS_API, ext.api, 1).replace("..", ".")
        self.client.publish(subject)

    # ------------------------------------------------------------------ health
    def _health_check(self) -> None:
        """retryDisconnectedSyncConsumers: re-create any consumer not heard from within the interval."""
        self._health = None
        if self.closed:
            return
        now = self.clock.time_ns()
        for si in self.all():
            if si.sip or si.timer is not None:
                continue
            if si.sub is None or now - si.last > HEALTH_CHECK_INTERVAL * SECOND:
                si.fails = 0
                self._cancel(si)
                self._schedule(si, si.sseq + 1)
        self._health = self.clock.call_later(HEALTH_CHECK_INTERVAL, self._health_check)

    def _retry(self, si: SourceInfo) -> None:
        self._cancel(si)
        self._schedule(si, si.sseq + 1)

    # ------------------------------------------------------------------ inbound
    def _on_msg(self, si: SourceInfo, subject: str, reply: str, hdr_len: int, data: bytes) -> None:
        if not self._current(si):  # (the first deliveries may arrive while subscribe_internal is still running)
            return
        si.last = self.clock.time_ns()
        hdr = bytes(data[:hdr_len]) if hdr_len else b""
        msg = bytes(data[hdr_len:])
        try:
            if hdr[:12] == b"NATS/1.0 100":
                self._on_control(si, reply, hdr)
            else:
                self._on_data(si, subject, reply, hdr, msg)
        except Exception as e:  # a bug here must not take the origin's delivery path down
            self.server.log_error("JetStream sourcing failed to process a message", stream=self.stream.name,
                                  origin=si.name, error=repr(e))
            self._retry(si)

    def _on_control(self, si: SourceInfo, reply: str, hdr: bytes) -> None:
        if reply:  # flow control request (handleFlowControl)
            self.client.publish(reply, b"", "", b"NATS/1.0\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n\r\n"
                                % (si.dseq, si.sseq))
            return
        ldseq = parse_num(headers.get_exact(hdr, LAST_CONSUMER) or "")
        if ldseq > 0 and ldseq != si.dseq:
            self._retry(si)  # we missed something: start again after the last we have
            return
        stalled = headers.get_exact(hdr, CONSUMER_STALLED)
        if stalled:
            self.client.publish(stalled)

    def _on_data(self, si: SourceInfo, subject: str, reply: str, hdr: bytes, msg: bytes) -> None:
        t = ack_tokens(reply)
        if t is None:
            return
        cname, toks = t[1], t[2]
        if si.cname and cname != si.cname:
            return  # from an older consumer
        off = 2 if len(toks) == 9 else 4
        dc, sseq, dseq = parse_num(toks[off + 2]), parse_num(toks[off + 3]), parse_num(toks[off + 4])
        ts, pending = parse_num(toks[off + 5]), parse_num(toks[off + 6])
        if dc > 1:
            return
        if si.mirror:
            self._mirror_msg(si, subject, hdr, msg, sseq, dseq, ts, pending, cname)
        else:
            self._source_msg(si, subject, reply, hdr, msg, sseq, dseq, pending, cname)

    def _transform(self, si: SourceInfo, subject: str) -> str:
        for tr in si.trs:
            if tr is not None:
                out = tr.match(subject)
                if out:
                    return out
        return subject

    def _mirror_msg(self, si: SourceInfo, subject: str, hdr: bytes, msg: bytes, sseq: int, dseq: int, ts: int,
                    pending: int, cname: str) -> None:
        """processInboundMirrorMsg."""
        osseq, odseq = si.sseq, si.dseq
        if sseq <= si.sseq:
            if dseq == si.dseq + 1:
                si.dseq += 1
            return
        if sseq == si.sseq + 1:
            si.dseq, si.sseq = dseq, sseq
        elif not si.cname:
            si.cname, si.dseq, si.sseq = cname, dseq, sseq
        elif dseq == si.dseq + 1:
            # Missing origin sequences with a continuous delivery: deleted, expired or filtered out upstream.
            store = self.stream.store
            if store.last_seq < sseq - 1:
                if store.msgs == 0 and store.first_seq == 0:
                    store.compact(sseq)
                else:
                    store.skip_msgs(store.last_seq + 1, sseq - 1 - store.last_seq)
            si.dseq += 1
            si.sseq = sseq
        else:
            return self._retry(si)
        si.lag = pending - 1 if pending else 0
        if pending < DGET_CAUGHT_UP and not self._mirror_direct and self.stream.config.mirror_direct:
            # Mostly caught up: answer direct gets for the origin too (processInboundMirrorMsg dgetCaughtUpThresh).
            from .direct_get import subscribe_direct

            self._mirror_direct = subscribe_direct(self.stream, si.name)
        if hdr:
            hdr = headers.strip(hdr, prefixes=("Nats-Expected-", "Nats-Batch-"))
        subject = self._transform(si, subject)
        if not self.stream.store_mirrored(subject, hdr, msg, sseq, ts):
            si.sseq, si.dseq = osseq, odseq
            last = self.stream.store.last_seq
            if sseq <= last:
                si.sseq = last
            self._retry(si)

    def _source_msg(self, si: SourceInfo, subject: str, reply: str, hdr: bytes, msg: bytes, sseq: int, dseq: int,
                    pending: int, cname: str) -> None:
        """processInboundSourceMsg."""
        osseq, odseq = si.sseq, si.dseq
        if sseq <= si.sseq:
            if dseq == si.dseq + 1:
                si.dseq += 1
            return
        if dseq == si.dseq + 1:
            si.dseq += 1
            si.sseq = sseq
        elif dseq > si.dseq:
            if not si.cname:
                si.cname, si.dseq, si.sseq = cname, dseq, sseq
            else:
                return self._retry(si)
        else:
            return
        si.lag = pending - 1 if pending else 0
        if hdr:
            hdr = headers.strip(hdr, keys=(STREAM_SOURCE,), prefixes=("Nats-Expected-", "Nats-Batch-"))
        iparts = si.iname.split(" ")
        # genSourceHeader: <stream> <origin seq> <filter> <dest> <origin subject> [<identity>]
        value = with_identity(f"{iparts[0]} {sseq} {iparts[1]} {iparts[2]} {subject}", si)
        hdr = headers.append(hdr, STREAM_SOURCE, value)
        subject = self._transform(si, subject)
        stream = self.stream
        if stream.process(subject, "", hdr, msg, sourced=True) == 0 and not stream.closed:
            si.sseq, si.dseq = osseq, odseq
            self._cancel(si)
            self._schedule(si, sseq)
