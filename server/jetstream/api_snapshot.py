"""``$JS.API.STREAM.SNAPSHOT.*`` and ``$JS.API.STREAM.RESTORE.*``: the requests; the transfers are in
snapshot.py (out) and restore.py (in).

Theory of operation
-------------------
Every request nats-server rejects before starting the work gets exactly nats-server's answer, in its order of
checks (jetstream_api.go jsStreamSnapshotRequest / jsStreamRestoreRequest, single server):

snapshot: empty request (10003), stream (10059), body (10025), deliver subject (10015); then the reply with the
          stream's config and state, and the chunks follow on the deliver subject.
restore:  empty request (10003), body (10025), name in subject (10056), path separators (10136),
          ``checkStreamCfg``, account limits, existing stream (10130); then the reply with the subject to send
          the chunks to.

Restore error replies carry ``deliver_subject: ""`` (JSApiStreamRestoreResponse has no omitempty there: the
API table's row).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi import requests as rq
from skiff.protocol.jsapi._subjects import is_valid_publish_subject
from skiff.protocol.jsapi.stream_config import normalize_stream_config

from . import advisories, jsonout
from .api import ApiRequest, serves

# snapshot.py, restore.py (the S2 codec, the archive format) and the restore request model are imported by the
# handlers that use them: a server that never snapshots does not pay them at start-up.

if TYPE_CHECKING:  # pragma: no cover
    from .engine import JetStream


class SnapshotApi:
    def __init__(self, js: "JetStream") -> None:
        self.js = js

    @property
    def strict(self) -> bool:
        return bool(getattr(self.js.server.options, "jetstream_strict", True))

    @serves("STREAM.SNAPSHOT")
    def snapshot(self, req: ApiRequest) -> dict | ApiError:
        if rq.is_empty_request(req.body):
            return ApiError.of("JSBadRequestErr")
        stream = self.js.streams.get(req.tokens[2])
        if stream is None:
            return ApiError.of("JSStreamNotFoundErr")
        r = rq.parse_request(rq.JSApiStreamSnapshotRequest, req.body, strict=self.strict)
        if isinstance(r, ApiError):
            return r
        if not is_valid_publish_subject(r.deliver_subject):
            return ApiError.of("JSSnapshotDeliverSubjectInvalidErr")
        # jsck: nats-server 2.15 no longer pre-scans (stream.go snapshot: every read is checksum-verified anyway)
        state = stream.state_json()
        srv = self.js.server
        srv.log.info("Starting snapshot for stream", stream=stream.name)

        from . import snapshot as snap

        start = srv.clock.time_ns()

        async def run() -> None:
            # After the reply, as nats-server sends them; the complete one also when the transfer failed.
            advisories.transfer(srv, "snapshot_create", stream.name, req.origin, state=state)
            err = await snap.send(stream, r.deliver_subject, state, not r.no_consumers, r.chunk_size or 0,
                                  r.window_size or 0)
            advisories.transfer(srv, "snapshot_complete", stream.name, req.origin, start=start,
                                end=srv.clock.time_ns(), error=err)
            if err is not None:
                srv.log_warning("Snapshot of stream failed", stream=stream.name, error=err)
            else:
                srv.log.info("Completed snapshot for stream", stream=stream.name)

        task = asyncio.get_running_loop().create_task(run())
        tasks = getattr(self, "_tasks", None)
        if tasks is None:
            tasks = self._tasks = set()
        tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(tasks.discard)
        return {"config": jsonout.Raw(stream.config_json(False)), "state": state}

    @serves("STREAM.RESTORE")
    def restore(self, req: ApiRequest) -> dict | ApiError:
        js = self.js
        if rq.is_empty_request(req.body):
            return ApiError.of("JSBadRequestErr")
        from skiff.protocol.jsapi.snapshot import JSApiStreamRestoreRequest

        from .restore import RestoreSession

        r = rq.parse_request(JSApiStreamRestoreRequest, req.body, strict=self.strict)
        if isinstance(r, ApiError):
            return r
        name = req.tokens[2]
        cfg = r.config
        if not cfg.name:
            cfg = cfg.model_copy(update={"name": name})
        if cfg.name != name:
            return ApiError.of("JSStreamMismatchErr")
        if "\\" in name or "/" in name:
            return ApiError.of("JSStreamNameContainsPathSeparatorsErr")
        ncfg = normalize_stream_config(cfg, pedantic=False, limits=js.stream_limits(cfg),
                                       lookup_stream=js.lookup_config)
        if isinstance(ncfg, ApiError):
            return ncfg
        err = js.check_stream_limits(ncfg)
        if err is not None:
            return err
        if name in js.streams:  # a restore still under way does not count yet (as in nats-server)
            return ApiError.of("JSStreamNameExistRestoreFailedErr")
        session = RestoreSession(js, ncfg, req.origin)
        return {"deliver_subject": session.subject}
