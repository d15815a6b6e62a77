"""Handlers for ``$JS.API.INFO`` and ``$JS.API.STREAM.*`` (nats-server jetstream_api.go), in its check order.

Theory of operation
-------------------
Each handler reproduces the sequence of checks of its nats-server counterpart, because a client sees only the first
error: body parsing (strict JSON, unknown fields are 10025 unless ``jetstream: {strict: false}``), name checks,
``checkStreamCfg`` (:func:`protocol.jsapi.stream_config.normalize_stream_config`), replicas, existing stream,
limits, subject overlap.  Bodies of NAMES/LIST/INFO/PURGE are decoded only when they start with ``{`` or ``[``
(``isJSONObjectOrArray``): any other body is ignored, as nats-server does.

Replies are dicts in Go field order; :func:`stream_info` builds the StreamInfo object shared by CREATE, UPDATE,
INFO and LIST (LIST omits ``cluster`` and the dynamic ``_nats.*`` metadata, CREATE omits ``cluster``, INFO carries
``cluster: {"leader": <server name>}`` like a standalone nats-server).  Skiff reports its own version and API level
(server/version.py) in ``_nats.ver`` / ``_nats.level``; the config JSON is cached by the stream.
"""
from __future__ import annotations

import asyncio
import base64
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi import requests as rq
from skiff.protocol.jsapi._subjects import subjects_collide
from skiff.protocol.jsapi.stream_config import (
    StreamConfig, check_stream_create, check_stream_update, configs_equal, normalize_stream_config,
    parse_stream_config_request, set_static_stream_metadata,
)
from skiff.protocol.jsapi.subjects import LIST_LIMIT, MAX_SUBJECT_DETAILS, NAMES_LIMIT
from skiff.protocol.jsapi.timefmt import format_time

from . import jsonout
from .api import ApiRequest, ApiRouter, serves
from .api_snapshot import SnapshotApi

if TYPE_CHECKING:  # pragma: no cover
    from .engine import JetStream
    from .stream import Stream


def register(router: ApiRouter) -> None:
    """The handlers of ``INFO``, the ``STREAM.*`` rows of the API table and the cluster-only ones (the ``@serves``
    methods below and in api_snapshot.py)."""
    router.serve(StreamApi(router.js), SnapshotApi(router.js))


def is_json_object_or_array(body: bytes) -> bool:
    s = body.lstrip(b" \t\r\n")
    return s[:1] in (b"{", b"[")


def stream_info(js: "JetStream", stream: "Stream", *, dynamic_meta: bool = True, cluster: bool = False,
                deleted_details: bool = False, domain: bool = True) -> dict:
    out: dict = {
        "config": jsonout.Raw(stream.config_json(dynamic_meta)),
        "created": jsonout.time_json(stream.created),
        "state": stream.state_json(deleted_details),
    }
    name = js.server.options.jetstream_domain
    if domain and name:  # nats-server's CREATE reply leaves the domain out; UPDATE, INFO and LIST have it
        out["domain"] = name
    if cluster:
        ci: dict = {}
        cname = getattr(js.server.options, "cluster_name", "") or ""
        if cname:
            ci["name"] = cname
        ci["leader"] = js.server.server_name
        out["cluster"] = ci
    sourcing = stream.sourcing
    if sourcing is not None:  # StreamInfo: ... cluster, mirror, sources, alternates, ts
        mi = sourcing.mirror_info()
        if mi is not None:
            out["mirror"] = mi
        if sourcing.sources:
            out["sources"] = sourcing.sources_info()
    out["ts"] = format_time(js.server.clock.time_ns())
    return out


# Subjects a stream create subscribes per pass of the event loop: 5,000 subscriptions in one go held the loop for
# 24-39 ms (no client may stall the others for more than 50 ms); 1,000 take 5-8 ms.
SUBSCRIBE_SLICE = 1000


async def _subscribe_in_slices(stream, subjects: list[str], out: dict) -> dict | ApiError:
    """The rest of a large stream's subscriptions, a slice per loop pass; the reply goes out once all are in, so
    a publish the client sends after the reply is stored.  The router holds other API requests meanwhile."""
    for i in range(0, len(subjects), SUBSCRIBE_SLICE):
        await asyncio.sleep(0)
        if stream.closed:  # the server is stopping
            return ApiError.of("JSStreamCreateErrF", err="stream closed while starting")
        stream.subscribe_subjects(subjects[i:i + SUBSCRIBE_SLICE])
    return out


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop (a synchronous unit test): the disk is written on this thread
        return False
    return True


class StreamApi:
    def __init__(self, js: "JetStream") -> None:
        self.js = js

    # Standalone server: leader and peer operations need clustering (10010), which nats-server answers before it
    # looks at Nats-Required-Api-Level.
    @serves("STREAM.LEADER.STEPDOWN", "STREAM.PEER.REMOVE", "STREAM.PEER.EVACUATE", "STREAM.CANCEL_MOVE",
            "CONSUMER.LEADER.STEPDOWN", level_check=False)
    def cluster_required(self, req: ApiRequest) -> ApiError:
        return ApiError.of("JSClusterRequiredErr")

    @property
    def strict(self) -> bool:
        return bool(getattr(self.js.server.options, "jetstream_strict", True))

    def _parse(self, model, body: bytes):
        return rq.parse_request(model, body, strict=self.strict)

    # ------------------------------------------------------------------ account
    @serves("INFO")
    def account_info(self, req: ApiRequest) -> dict:
        return self.js.account_info()

    # ------------------------------------------------------------------ create / update
    def prepare_create(self, req: ApiRequest):
        """Parse, check and normalise the requested config: the part of a create whose cost grows with the
        request (a 5,000-subject overlap check), which the router may run off the event loop (api.py offload).
        It only reads the engine's state; the API's order keeps that state still until ``create`` runs."""
        js = self.js
        creq = parse_stream_config_request(req.body, strict=self.strict)
        if isinstance(creq, ApiError):
            return creq
        cfg = set_static_stream_metadata(creq.config())
        name = req.tokens[2]
        err = check_stream_create(name, cfg)
        if err is not None:
            return err
        max_streams = js.acct_limits.max_streams
        if max_streams > 0 and len(js.streams) >= max_streams and name not in js.streams:
            return ApiError.of("JSMaximumStreamsLimitErr")
        return normalize_stream_config(cfg, pedantic=creq.pedantic, limits=js.stream_limits(cfg),
                                       lookup_stream=js.lookup_config)

    @serves("STREAM.CREATE", prepare="prepare_create")
    def create(self, req: ApiRequest) -> dict | ApiError:
        js = self.js
        ncfg = req.prepared if req.prepared is not None else self.prepare_create(req)
        if isinstance(ncfg, ApiError):
            return ncfg
        name = req.tokens[2]
        if ncfg.num_replicas > 1:
            return ApiError.of("JSStreamReplicasNotSupportedErr")
        existing = js.streams.get(ncfg.name)
        if existing is not None:
            if not configs_equal(ncfg, existing.config):
                return ApiError.of("JSStreamNameExistErr")
            stream = existing
        else:
            err = js.check_stream_limits(ncfg)
            if err is not None:
                return err
            if js.subjects_overlap(ncfg.subjects or [], None):
                return ApiError.of("JSStreamSubjectOverlapErr")
            if ncfg.storage != "memory" and _loop_running():
                return self._create_on_disk(ncfg, name)
            try:
                stream = js.add_stream(ncfg, subscribe_first=SUBSCRIBE_SLICE)
            except ApiError as e:
                return e
            except Exception as e:  # the store could not be created (disk, path)
                js.server.log_warning("Stream create failed", stream=name, error=str(e))
                return ApiError.of("JSStreamCreateErrF", err=str(e))
        return self._created(stream)

    async def _create_on_disk(self, ncfg, name: str) -> dict | ApiError:
        """A file stream's ``meta.inf`` is written in a worker thread (JetStream.add_stream_later) and the reply
        waits for it, as nats-server answers once it is written; the router holds every other API request
        meanwhile (a coroutine handler), so the checks above stay true."""
        js = self.js
        try:
            stream = await js.add_stream_later(ncfg, subscribe_first=SUBSCRIBE_SLICE)
        except ApiError as e:
            return e
        except Exception as e:  # the store could not be created (disk, path)
            js.server.log_warning("Stream create failed", stream=name, error=str(e))
            return ApiError.of("JSStreamCreateErrF", err=str(e))
        out = self._created(stream)
        return await out if asyncio.iscoroutine(out) else out

    def _created(self, stream):
        js = self.js
        out = stream_info(js, stream, domain=False)
        out["did_create"] = True
        rest = stream.unsubscribed
        if rest:
            stream.unsubscribed = []
            return _subscribe_in_slices(stream, rest, out)
        return out

    def prepare_update(self, req: ApiRequest):
        """The request's own checks, off the loop for large requests (see ``prepare_create``)."""
        js = self.js
        ureq = parse_stream_config_request(req.body, strict=self.strict)
        if isinstance(ureq, ApiError):
            return ureq
        new = ureq.config()
        ncfg = normalize_stream_config(new, pedantic=ureq.pedantic, limits=js.stream_limits(new),
                                       lookup_stream=js.lookup_config)
        return ncfg if isinstance(ncfg, ApiError) else (ureq, new, ncfg)

    @serves("STREAM.UPDATE", prepare="prepare_update")
    def update(self, req: ApiRequest) -> dict | ApiError:
        js = self.js
        pre = req.prepared if req.prepared is not None else self.prepare_update(req)
        if isinstance(pre, ApiError):
            return pre
        ureq, new, ncfg = pre
        name = req.tokens[2]
        if name != ncfg.name:
            return ApiError.of("JSStreamMismatchErr")
        stream = js.streams.get(name)
        if stream is None:
            return ApiError.of("JSStreamNotFoundErr")
        new = set_static_stream_metadata(new)
        cfg = check_stream_update(stream.config, new, pedantic=ureq.pedantic, limits=js.stream_limits(new),
                                  lookup_stream=js.lookup_config)
        if isinstance(cfg, ApiError):
            return cfg
        if js.subjects_overlap(cfg.subjects or [], stream):
            return ApiError.of("JSStreamSubjectOverlapErr")
        err = js.check_stream_limits(cfg, exclude=stream)
        if err is not None:
            return err
        if stream.path is not None and _loop_running():
            return self._update_on_disk(stream, cfg)
        try:
            js.update_stream(stream, cfg)
        except Exception as e:
            return ApiError.unless("JSStreamUpdateErrF", e, err=str(e))
        return stream_info(js, stream)

    async def _update_on_disk(self, stream: "Stream", cfg) -> dict | ApiError:
        """The new ``meta.inf`` is written in a worker thread, then the config applied and the reply sent (as
        nats-server answers after writing it).  The router holds every other API request meanwhile (a coroutine
        handler): the overlap and limit checks above stay true, and no stream is created over subjects this
        update gives up before they are on disk."""
        js = self.js
        try:
            await js.write_stream_meta_later(stream, cfg)
        except Exception as e:  # noqa: BLE001 - the disk said no: nothing changed
            return ApiError.unless("JSStreamUpdateErrF", e, err=str(e))
        if stream.closed or js.streams.get(stream.name) is not stream:
            return ApiError.of("JSStreamNotFoundErr")  # stopped meanwhile outside the API (shutdown)
        try:
            js.update_stream(stream, cfg, written=True)
        except Exception as e:
            return ApiError.unless("JSStreamUpdateErrF", e, err=str(e))
        return stream_info(js, stream)

    # ------------------------------------------------------------------ names / list / info
    def _paged_filter(self, req: ApiRequest, model) -> tuple[int, str] | ApiError:
        offset, flt = 0, ""
        if is_json_object_or_array(req.body):
            r = self._parse(model, req.body)
            if isinstance(r, ApiError):
                return r
            offset = max(r.offset, 0)
            flt = r.subject
        return offset, flt

    def _filtered(self, flt: str) -> list["Stream"]:
        streams = list(self.js.streams.values())
        if flt:
            streams = [s for s in streams if any(subjects_collide(flt, x) for x in s.config.subjects or [])]
        streams.sort(key=lambda s: s.name)
        return streams

    @serves("STREAM.NAMES")
    def names(self, req: ApiRequest) -> dict | ApiError:
        r = self._paged_filter(req, rq.JSApiStreamNamesRequest)
        if isinstance(r, ApiError):
            return r
        offset, flt = r
        streams = self._filtered(flt)
        offset = min(offset, len(streams))
        names = [s.name for s in streams[offset:offset + NAMES_LIMIT]]
        return {"total": len(streams), "offset": offset, "limit": NAMES_LIMIT, "streams": names or None}

    @serves("STREAM.LIST")
    def list(self, req: ApiRequest) -> dict | ApiError:
        r = self._paged_filter(req, rq.JSApiStreamListRequest)
        if isinstance(r, ApiError):
            return r
        offset, flt = r
        streams = self._filtered(flt)
        offset = min(offset, len(streams))
        infos = [stream_info(self.js, s, dynamic_meta=False) for s in streams[offset:offset + LIST_LIMIT]]
        return {"total": len(streams), "offset": offset, "limit": LIST_LIMIT, "streams": infos}

    @serves("STREAM.INFO")
    def info(self, req: ApiRequest) -> dict | ApiError:
        details, subjects, offset = False, "", 0
        if is_json_object_or_array(req.body):
            r = self._parse(rq.JSApiStreamInfoRequest, req.body)
            if isinstance(r, ApiError):
                return r
            details, subjects, offset = r.deleted_details, r.subjects_filter, max(r.offset, 0)
        stream = self.js.streams.get(req.tokens[2])
        if stream is None:
            return ApiError.of("JSStreamNotFoundErr")
        info = stream_info(self.js, stream, cluster=True, deleted_details=details)
        paged = {"total": 0, "offset": 0, "limit": 0}
        if subjects:
            totals = stream.store.subjects_totals(subjects)
            if totals:
                # nats-server reports the requested offset even when it is past the end.
                paged = {"total": len(totals), "offset": offset, "limit": MAX_SUBJECT_DETAILS}
                if offset == 0 and len(totals) <= MAX_SUBJECT_DETAILS:
                    page = totals
                else:
                    keys = sorted(totals)
                    start = min(offset, len(keys))
                    page = {k: totals[k] for k in keys[start:start + MAX_SUBJECT_DETAILS]}
                if page:
                    _insert_subjects(info["state"], page)
        return {**paged, **info}

    # ------------------------------------------------------------------ delete / purge
    @serves("STREAM.DELETE")
    def delete(self, req: ApiRequest) -> dict | ApiError:
        if not rq.is_empty_request(req.body):
            return ApiError.of("JSNotEmptyRequestErr")
        stream = self.js.streams.get(req.tokens[2])
        if stream is None:
            return ApiError.of("JSStreamNotFoundErr")
        try:
            self.js.delete_stream(stream)
        except Exception as e:
            return ApiError.unless("JSStreamDeleteErrF", e, err=str(e))
        return {"success": True}

    @serves("STREAM.PURGE")
    def purge(self, req: ApiRequest) -> dict | ApiError:
        preq = None
        if is_json_object_or_array(req.body):
            preq = self._parse(rq.JSApiStreamPurgeRequest, req.body)
            if isinstance(preq, ApiError):
                return preq
            if preq.seq > 0 and preq.keep > 0:
                return ApiError.of("JSBadRequestErr")
        stream = self.js.streams.get(req.tokens[2])
        if stream is None:
            return ApiError.of("JSStreamNotFoundErr")
        if stream.config.sealed:
            return ApiError.of("JSStreamSealedErr")
        if stream.config.deny_purge:
            return ApiError.of("JSStreamPurgeFailedF", err="stream purge not permitted")
        if preq is None:
            n = stream.purge()
        else:
            n = stream.purge(preq.filter or None, preq.seq, preq.keep)
        return {"success": True, "purged": n}

    # ------------------------------------------------------------------ messages
    @serves("STREAM.MSG.GET", count_success=False)
    def msg_get(self, req: ApiRequest) -> dict | ApiError:
        name = req.tokens[3]
        if rq.is_empty_request(req.body):
            return ApiError.of("JSBadRequestErr")
        r = self._parse(rq.JSApiMsgGetRequest, req.body)
        if isinstance(r, ApiError):
            return r
        if r.batch > 0 or r.max_bytes > 0:
            return ApiError.of("JSBadRequestErr")
        st = r.start_time
        if ((r.seq > 0 and r.last_by_subj) or (r.seq == 0 and not r.last_by_subj and not r.next_by_subj and st is None)
                or (r.seq > 0 and st is not None) or (st is not None and r.last_by_subj)
                or (r.last_by_subj and r.next_by_subj)):
            return ApiError.of("JSBadRequestErr")
        stream = self.js.streams.get(name)
        if stream is None:
            return ApiError.of("JSStreamNotFoundErr")
        store = stream.store
        seq = store.get_seq_from_time(st.unix_ns) if st is not None else r.seq
        if seq > 0 and not r.next_by_subj:
            sm = store.load_msg(seq)
        elif r.next_by_subj:
            sm, _ = store.load_next_msg(r.next_by_subj, seq)
        else:
            sm = store.load_last_msg(r.last_by_subj)
        if sm is None:
            return ApiError.of("JSNoMessageFoundErr")
        m: dict = {"subject": sm.subject, "seq": sm.seq}
        if sm.hdr and not r.no_hdr:
            m["hdrs"] = base64.b64encode(sm.hdr).decode()
        if sm.data:
            m["data"] = base64.b64encode(sm.data).decode()
        m["time"] = format_time(sm.ts)
        return {"message": m}

    @serves("STREAM.MSG.DELETE")
    def msg_delete(self, req: ApiRequest) -> dict | ApiError:
        name = req.tokens[3]
        if rq.is_empty_request(req.body):
            return ApiError.of("JSBadRequestErr")
        r = self._parse(rq.JSApiMsgDeleteRequest, req.body)
        if isinstance(r, ApiError):
            return r
        stream = self.js.streams.get(name)
        if stream is None:
            return ApiError.of("JSStreamNotFoundErr")
        if stream.config.sealed:
            return ApiError.of("JSStreamSealedErr")
        if stream.config.deny_delete:
            return ApiError.of("JSStreamMsgDeleteFailedF", err="message delete not permitted")
        # jsMsgDeleteRequest answers the store's outcome with sendAPIResponse, not sendAPIErrResponse: a failed
        # remove or a missing message is an error reply that the API statistics count as answered (trackAPI).
        err = _store_remove_error(stream, r.seq)
        if err is not None:
            return {"error": ApiError.of("JSStreamMsgDeleteFailedF", err=err).to_dict()}
        if not stream.remove_msg(r.seq, erase=not r.no_erase):
            return {"error": ApiError.of("JSSequenceNotFoundErrF", seq=r.seq).to_dict()}
        return {"success": True}


def _store_remove_error(stream: "Stream", seq: int) -> str | None:
    """The error a file store's RemoveMsg returns before looking for the message (filestore.go removeMsg and
    selectMsgBlock): sequence 0 or one outside ``[first, last]`` is ``no message found``, past the last sequence
    ``stream store EOF``; nats-server wraps it in 10057.  The memory store has no such errors: a missing
    message there is 10043 like a deleted one inside the range."""
    if stream.config.storage != "file":
        return None
    store = stream.store
    if seq == 0:
        return "no message found"
    if seq < store.first_seq or seq > store.last_seq or store.msgs == 0:
        return "stream store EOF" if seq > store.last_seq else "no message found"
    return None


def _insert_subjects(state: dict, page: dict[str, int]) -> None:
    """Put ``subjects`` after ``num_subjects`` (Go's StreamState field order) in a state dict."""
    items = list(state.items())
    state.clear()
    placed = False
    for k, v in items:
        if not placed and k in ("num_deleted", "deleted", "lost", "consumer_count"):
            state["subjects"] = dict(sorted(page.items()))
            placed = True
        state[k] = v
    if not placed:
        state["subjects"] = dict(sorted(page.items()))


__all__ = ["register", "stream_info", "StreamConfig"]
