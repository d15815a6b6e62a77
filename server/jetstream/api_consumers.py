"""Handlers for ``$JS.API.CONSUMER.*`` (nats-server jetstream_api.go) and the consumers' own subjects.

Theory of operation
-------------------
:func:`register` adds the consumer routes to the API router (which calls it with the first request to one of them,
api.py ``LAZY``); :class:`ConsumerApi` answers the three internal wildcard subscriptions (the engine makes them at
start, engine.py) that stand in for the per-consumer subscriptions of nats-server:

``$JS.API.CONSUMER.MSG.NEXT.>``   pull requests, handed to the consumer named by the subject
``$JS.ACK.>``                      acks (v1 9-token and v2 11+-token reply subjects)
``$JS.FC.>``                       flow-control answers of push consumers

One subscription each keeps the subject index small with thousands of consumers.  Where nats-server would have had no
subscriber at all (an unknown consumer, the ack subject of an ``ack_policy: none`` consumer) a requester that
supports it gets the 503 no-responders status, as it would from the Go server.

CREATE runs nats-server's order of checks: body (10025), subject form (:func:`check_consumer_create`), replicas,
stream lookup (10059), defaults and ``checkConsumerCfg``, an existing consumer of that name (action ``create`` with a
different config is 10148, otherwise an update checked by ``checkNewConsumerConfig``), ``action: update`` on a
missing one (10149), the stream's ``max_consumers`` (10026), workqueue rules, names.  Replies carry consumer info
with the dynamic ``_nats.*`` metadata; LIST items carry the stored metadata only.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from skiff.protocol import headers
from skiff.protocol.errors import ApiError
from skiff.protocol.headers import get_exact
from skiff.protocol.jsapi.timefmt import format_time
from skiff.protocol.jsapi import requests as rq
from skiff.protocol.jsapi.consumer_config import (
    ConsumerConfig, ConsumerLimits, apply_inactive_threshold_default, check_consumer_config, check_consumer_create,
    check_consumer_name, check_consumer_update, check_workqueue_consumer, consumer_configs_equal, filter_subjects,
    parse_create_consumer_request, set_consumer_defaults, set_static_consumer_metadata,
)
from skiff.protocol.jsapi.subjects import LIST_LIMIT, NAMES_LIMIT, STREAM_IDENTITY_HDR
from skiff.protocol.jsapi._subjects import subjects_collide

from . import consumer_advisories as adv
from .api import ApiRequest, ApiRouter, WithHeader, api_level_error, consumer_of, serves
from .consumer import Consumer, create_consumer_name
from .pause import pause_advisory, pause_request
from .priority import unpin_request
from .consumer_reset import reset_request, reset_starting_seq
from .consumer_writes import meta_doc, open_store, when_written
from .stream_consumers import consumer_set

if TYPE_CHECKING:  # pragma: no cover
    from .engine import JetStream
    from .stream import Stream

DEFAULT_MAX_CONSUMERS = 1000
NAME_MAX = 255  # bytes in one path component (Linux, macOS): longer consumer names cannot be directories


def register(router: ApiRouter) -> "ConsumerApi":
    """The handlers of the ``CONSUMER.*`` rows of the API table (the ``@serves`` methods of :class:`ConsumerApi`);
    the router calls it with the first request to one of them (api.py ApiRouter.load).  Returns the handler object,
    whose ``on_next``, ``on_ack`` and ``on_fc`` take the consumers' own subjects: the engine subscribes those at
    start and hands them over with their first message (engine.py _subscribe_consumer_subjects)."""
    h = ConsumerApi(router.js)
    router.serve(h)
    return h


class ConsumerApi:
    def __init__(self, js: "JetStream") -> None:
        self.js = js
        self.server = js.server

    @property
    def strict(self) -> bool:
        return bool(getattr(self.server.options, "jetstream_strict", True))

    def lookup(self, stream: str, consumer: str) -> Consumer | None:
        s = self.js.streams.get(stream)
        if s is None:
            return None
        return s.consumers.get(consumer)

    # ------------------------------------------------------------------ consumer subjects
    def _no_responders(self, sub, subject: str, reply: str, origin) -> None:
        if not reply or origin is None or not origin.no_responders:
            return
        plain, queues = self.server.sublist.match(subject)
        if queues or any(s is not sub and s.conn is not None for s in plain):
            return
        self.server.no_responders(subject, reply, origin)

    @serves("CONSUMER.MSG.NEXT")  # subscribed by the engine: one wildcard subscription for every consumer
    def on_next(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        toks = subject.split(".")
        c = self.lookup(toks[5], toks[6]) if len(toks) == 7 else None
        if c is None:
            self._no_responders(sub, subject, reply, origin)
            return
        hdr = bytes(data[:hdr_len]) if hdr_len else b""
        c.process_next_request(reply, hdr, bytes(data[hdr_len:]))

    def on_ack(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        # acks.ack_tokens and lookup in-line: once per ack
        toks = subject.split(".")
        n = len(toks)
        c = None
        if n == 9 or n >= 11:
            s = self.js.streams.get(toks[2] if n == 9 else toks[4])
            if s is not None:
                c = s.consumers.get(toks[3] if n == 9 else toks[5])
        if c is None or c.core.ack_policy in ("none", "flow_control"):
            self._no_responders(sub, subject, reply, origin)
            return
        # the parser's payload is bytes already: a copy only for a header's tail (HPUB) or another buffer type
        c.process_ack(toks, reply, data if not hdr_len and type(data) is bytes else bytes(data[hdr_len:]))

    def on_fc(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        # nats-server subscribes $JS.FC.<stream>.<consumer>.* for a consumer with flow_control only
        # (consumer.go setLeader, fcSub): anything else has nobody behind it, and a request gets no responders.
        toks = subject.split(".")
        c = self.lookup(toks[2], toks[3]) if len(toks) == 5 else None
        if c is None or not c.config.flow_control:
            self._no_responders(sub, subject, reply, origin)
            return
        c.process_flow_control(subject, bytes(data[:hdr_len]) if hdr_len else b"")

    # ------------------------------------------------------------------ create
    # jsConsumerCreateRequest decodes the body before it looks at Nats-Required-Api-Level
    # stream_scope: while a create waits for its files, only the requests naming the same stream wait, and other
    # creates and updates of that stream join it (api.py); pending: a create or update of a consumer whose
    # meta.inf is being written waits for that write, then runs again (_after_pending).
    @serves("CONSUMER.CREATE", "CONSUMER.CREATE.EX", "CONSUMER.DURABLE.CREATE", level_check=False, stream_scope=True,
            joins=True)
    def create(self, req: ApiRequest) -> dict | ApiError:
        js = self.js
        creq = parse_create_consumer_request(req.body, strict=self.strict)
        if isinstance(creq, ApiError):
            return creq
        err = api_level_error(req)
        if err is not None:
            return err
        r = check_consumer_create(req.subject, creq)
        if isinstance(r, ApiError):
            return r
        stream_name, cname, _filtered, creq = r
        stream = js.streams.get(stream_name)
        if stream is None:
            return ApiError.of("JSStreamNotFoundErr")
        cfg, cname = sourcing_consumer(creq.config, cname, stream)
        ident = ""
        if cfg.direct or cfg.sourcing:
            # 2.15 (API level 5): a sourcing stream names the origin it knew; another one (deleted and created
            # again since) is refused so that the source starts over, and the reply says who answered.
            ident = stream_identity(stream)
            want = get_exact(req.hdr, STREAM_IDENTITY_HDR)
            if want and want != ident:
                return ApiError.of("JSConsumerStreamIdentityMismatchF", msg=ident)
        existing = stream.consumers.get(cname) if cname else None
        if existing is not None:
            keep = {"pause_until": existing.config.pause_until}
            if cfg.sourcing and cfg.durable_name:
                # A durable sourcing consumer asked for again resumes where it was acked: its start stays
                # (jsConsumerCreateRequest), and the update below resets it to its ack floor.
                keep.update(deliver_policy=existing.config.deliver_policy, opt_start_seq=existing.config.opt_start_seq,
                            opt_start_time=existing.config.opt_start_time)
            cfg = cfg.model_copy(update=keep)
        cfg = set_static_consumer_metadata(cfg)
        limits = ConsumerLimits(account_max_ack_pending=max(js.account_limit("max_ack_pending"), 0))
        ncfg = set_consumer_defaults(cfg, stream.config, pedantic=creq.pedantic, limits=limits)
        if isinstance(ncfg, ApiError):
            return ncfg
        err = check_consumer_config(ncfg, stream.config, limits=limits)
        if err is not None:
            return err
        cs = consumer_set(stream)
        name = ncfg.durable_name or ncfg.name
        if cs.pending and (name in cs.pending or stream.config.retention == "workqueue"):
            # That consumer's meta.inf is being written (its create or an update joined by this request), or a
            # workqueue stream whose partition checks need every consumer in place: decide once that is over.
            return self._after_pending(cs, [cs.pending[name]] if name in cs.pending else list(cs.pending.values()),
                                       req)
        if name and name in stream.consumers:
            eo = stream.consumers[name]
            if creq.action == "create" and not consumer_configs_equal(ncfg, eo.config):
                return ApiError.of("JSConsumerAlreadyExists")
            if stream.config.retention == "workqueue" and not self._partition_unique(stream, name, ncfg):
                return ApiError.of("JSConsumerWQConsumerNotUniqueErr")
            err = check_consumer_update(eo.config, ncfg, old_deliver_has_interest=(
                bool(eo.config.deliver_subject) and self.server.sublist.has_interest(eo.config.deliver_subject)))
            if err is not None:
                return err
            ucfg = apply_inactive_threshold_default(ncfg)
            eo.update_config(ucfg)
            written = cs.write_meta(eo)
            if ucfg.sourcing:
                reset_starting_seq(eo, 0)  # updateConfig: a sourcing consumer starts over from its ack floor

            def updated() -> dict | WithHeader:
                info = eo.info()
                if eo.paused():  # nats-server's create handler announces the pause on every request that finds it
                    pause_advisory(eo, eo.config)
                return with_identity(info, ident)
            # The reply waits for the new meta.inf (nats-server writes it before it answers: updateConfig ->
            # store.UpdateConfig), written off the loop; the requests on this stream wait with it (stream_scope).
            return updated() if written is None else when_written(written, eo, updated)
        if creq.action == "update":
            return ApiError.of("JSConsumerDoesNotExist")
        # nats-server 2.15 caps a stream without max_consumers at 1000 consumers (the "default_max_consumers"
        # of /varz and /jsz; verified against 2.15.1).
        # The account's max_consumers is a per-stream limit too, and wins when it is smaller (nats-server addConsumer).
        maxc = stream.config.max_consumers
        acc_max = js.account_limit("max_consumers")
        if maxc <= 0 or 0 < acc_max < maxc:
            maxc = acc_max
        if maxc <= 0:
            maxc = DEFAULT_MAX_CONSUMERS
        if len(stream.consumers) + len(cs.pending) >= maxc:  # creates in flight count (nothing else is pending)
            return ApiError.of("JSMaximumConsumersLimitErr")
        if stream.config.retention == "workqueue":
            others = [filter_subjects(o.config) for o in stream.consumers.values()
                      if not o.config.direct and not o.config.sourcing]
            err = check_workqueue_consumer(ncfg, stream.config, others, name=name)
            if err is not None:
                return err
        err = check_consumer_name(ncfg)
        if err is not None:
            return err
        if not name:
            while True:
                name = create_consumer_name()
                if name not in stream.consumers and name not in cs.pending:
                    break
            # nats-server copies the config before naming a legacy ephemeral: its config keeps no name.
        defaulted = not ncfg.durable_name and ncfg.inactive_threshold <= 0
        ncfg = apply_inactive_threshold_default(ncfg)
        if stream.path is not None and not ncfg.mem_storage and len(name.encode()) > NAME_MAX:
            # the consumer's directory is its name: the file system refuses it, as it does under nats-server
            return self._store_failed(stream, name, OSError(36, "File name too long"))
        created = self.server.clock.time_ns()
        if stream.path is not None and not ncfg.mem_storage:
            # Pending from now, not from the coroutine's first step: a request dispatched in between (the same
            # read) must see this name taken and this consumer counted.
            done = cs.pending[name] = asyncio.get_running_loop().create_future()
            return self._create_on_disk(stream, cs, ncfg, name, created, defaulted, ident, done)
        return self._start(cs, ncfg, name, created, open_store(stream, name, ncfg), defaulted, ident)

    async def _create_on_disk(self, stream: "Stream", cs, ncfg: ConsumerConfig, name: str, created: int,
                              defaulted: bool, ident: str, done: asyncio.Future) -> dict | WithHeader | ApiError:
        """The store is opened and ``meta.inf`` written in a worker thread (consumer_writes.create_files) and the
        reply waits for it, so a consumer acknowledged as created survives kill -9 (as nats-server, which writes
        the metadata before it answers: addConsumerWithAssignment).  Meanwhile the loop serves the other clients;
        the router holds the later API requests naming this stream (api.py, ``stream_scope``) but creates and
        updates, which see this name in ``cs.pending`` (and count it against max_consumers), so nothing can
        delete, update or create this consumer or its stream between the checks above and the registration below;
        the creates that joined have their files written in the same worker job (ConsumerSet._queue_meta), and
        requests for other streams go on."""
        doc = meta_doc(ncfg, created)
        try:
            try:
                store = await cs.create_files(name, ncfg, doc)
            except Exception as e:  # noqa: BLE001 - the disk said no
                return self._store_failed(stream, name, e)
            if stream.closed or self.js.streams.get(stream.name) is not stream:
                # Stopped or deleted outside the API meanwhile (shutdown, account removal): no consumer to answer for.
                try:
                    store.delete()
                except OSError:
                    pass
                return ApiError.of("JSStreamNotFoundErr")
            return self._start(cs, ncfg, name, created, store, defaulted, ident)
        finally:  # registered or refused: a create or update of this name that waited decides now
            if cs.pending.get(name) is done:
                del cs.pending[name]
            done.set_result(None)

    async def _after_pending(self, cs, waits: list, req: ApiRequest) -> dict | WithHeader | ApiError | None:
        """Run ``req`` again once the writes it waits for are over (whatever their outcome: each answers its own
        request).  It then finds the consumer created, or not, as if it had arrived after that reply."""
        await asyncio.wait(waits)
        try:
            res = self.create(req)
            if asyncio.iscoroutine(res):
                res = await res
        except ApiError as e:
            return e
        return res

    def _start(self, cs, ncfg: ConsumerConfig, name: str, created: int, store, defaulted: bool,
               ident: str) -> dict | WithHeader:
        c = Consumer(cs, ncfg, name, created, store)
        if defaulted:
            cs.mark_defaulted_threshold(name)
        cs.add(c)
        c.start(has_state=False)
        info = c.info()
        adv.action(c, True)
        c.kick()
        if c.paused():
            pause_advisory(c, c.config)
        return with_identity(info, ident)

    def _store_failed(self, stream, name: str, e: Exception) -> ApiError:
        """jsConsumerCreateRequest hides the store's error from the client: 10012 ``error creating store for
        consumer`` (errConsumerStoreFailed), the OS error goes to the log."""
        self.server.log_warning("Consumer create failed", stream=stream.name, consumer=name, error=str(e))
        return ApiError.of("JSConsumerCreateErrF", err="error creating store for consumer")

    @staticmethod
    def _partition_unique(stream, name: str, cfg: ConsumerConfig) -> bool:
        mine = filter_subjects(cfg)
        for o in stream.consumers.values():
            if o.name == name:
                continue
            theirs = filter_subjects(o.config)
            if not theirs:
                return False
            for a in mine:
                for b in theirs:
                    if subjects_collide(a, b):
                        return False
        return True

    # ------------------------------------------------------------------ info / delete / names / list
    def _existing(self, req: ApiRequest):
        """The consumer named by ``<stream>.<consumer>`` of an empty-body request, or the error in nats-server's
        order (non-empty body, stream, consumer)."""
        if not rq.is_empty_request(req.body):
            return ApiError.of("JSNotEmptyRequestErr")
        return consumer_of(self.js, req)

    @serves("CONSUMER.INFO", level_check=False)
    def info(self, req: ApiRequest) -> dict | ApiError:
        if not rq.is_empty_request(req.body):  # jsConsumerInfoRequest: 10038 before Nats-Required-Api-Level
            return ApiError.of("JSNotEmptyRequestErr")
        err = api_level_error(req)
        if err is not None:
            return err
        c = self._existing(req)
        return c if isinstance(c, ApiError) else c.info()

    @serves("CONSUMER.DELETE")
    def delete(self, req: ApiRequest) -> dict | ApiError:
        c = self._existing(req)
        if isinstance(c, ApiError):
            return c
        c.cset.delete_consumer(c)
        return {"success": True}

    def _paged(self, req: ApiRequest) -> "tuple[Stream, int] | ApiError":
        """(stream, offset) of a NAMES or LIST request, or its error (the body's first, then the stream's)."""
        offset = 0
        body = req.body.lstrip(b" \t\r\n")
        if body[:1] in (b"{", b"["):
            r = rq.parse_request(rq.JSApiConsumersRequest, req.body, strict=self.strict)
            if isinstance(r, ApiError):
                return r
            offset = max(r.offset, 0)
        stream = self.js.streams.get(req.tokens[2])
        if stream is None:
            return ApiError.of("JSStreamNotFoundErr")
        return stream, offset

    @serves("CONSUMER.NAMES")
    def names(self, req: ApiRequest) -> dict | ApiError:
        paged = self._paged(req)
        if isinstance(paged, ApiError):
            return paged
        stream, offset = paged
        # Mirror/source consumers (direct) are not listed (nats-server getPublicConsumers).
        names = sorted(n for n, c in stream.consumers.items() if not c.config.direct)
        offset = min(offset, len(names))
        return {"total": len(names), "offset": offset, "limit": NAMES_LIMIT,
                "consumers": names[offset:offset + NAMES_LIMIT]}

    @serves("CONSUMER.LIST")
    def list(self, req: ApiRequest) -> dict | ApiError:
        paged = self._paged(req)
        if isinstance(paged, ApiError):
            return paged
        stream, offset = paged
        obs = sorted((c for c in stream.consumers.values() if not c.config.direct), key=lambda c: c.name)
        offset = min(offset, len(obs))
        infos = [c.info(dynamic_meta=False) for c in obs[offset:offset + LIST_LIMIT]]
        return {"total": len(obs), "offset": offset, "limit": LIST_LIMIT, "consumers": infos}

    # ------------------------------------------------------------------ pause
    # jsConsumerPauseRequest, too, decodes the body before the level check
    @serves("CONSUMER.PAUSE", level_check=False, stream_scope=True)  # waits for its meta.inf, as an update
    def pause(self, req: ApiRequest) -> dict | ApiError:
        return pause_request(self.js, req, self.strict)

    @serves("CONSUMER.UNPIN")
    def unpin(self, req: ApiRequest) -> dict | ApiError:
        return unpin_request(self.js, req)

    # ------------------------------------------------------------------ reset
    # nats-server 2.15: each consumer subscribes to its own RESET subject (consumer.go processResetReq), outside
    # the API accounting; with no such consumer nobody answers.
    @serves("CONSUMER.RESET", accounted=False)
    def reset(self, req: ApiRequest) -> dict | WithHeader | ApiError | None:
        c = self.lookup(req.tokens[2], req.tokens[3])
        res = reset_request(c, req)
        if isinstance(res, dict) and get_exact(req.hdr, STREAM_IDENTITY_HDR) is not None:
            # processResetReq: the header asked for, even empty, the reply names the stream's identity
            return WithHeader(res, headers.build([(STREAM_IDENTITY_HDR, stream_identity(c.stream))]))
        return res


def sourcing_consumer(cfg: ConsumerConfig, cname: str, stream) -> tuple[ConsumerConfig, str]:
    """What nats-server makes of a mirror's or source's consumer request (``direct`` + ``sourcing`` + a stable
    ``name``, 2.14+; jsConsumerCreateRequest): on an interest or workqueue origin a durable consumer acked by flow
    control, so the origin keeps what the sourcing stream has not stored yet (ADR-60); on a limits origin an
    ephemeral whose stable name gets a random suffix, so that several sourcing streams never share one."""
    if not (cfg.direct and cfg.sourcing and cfg.name):
        return cfg, cname
    if stream.config.retention in ("interest", "workqueue"):
        cfg = cfg.model_copy(update={"direct": False, "durable_name": cfg.name, "ack_policy": "flow_control",
                                     "ack_wait": 0, "max_deliver": 0, "inactive_threshold": 0})
        return cfg, cfg.name
    name = f"{cfg.name}-{create_consumer_name()}"
    return cfg.model_copy(update={"name": name}), name



def stream_identity(stream) -> str:
    """nats-server stream.identity (2.15): getHash of the creation time, RFC3339Nano in UTC; it changes when a
    stream of the same name is deleted and created again."""
    from .sourcing import get_hash

    return get_hash(format_time(stream.created))


def with_identity(info: dict, ident: str) -> "dict | WithHeader":
    return WithHeader(info, headers.build([(STREAM_IDENTITY_HDR, ident)])) if ident else info
