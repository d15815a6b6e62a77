"""``$JS.API.STREAM.SNAPSHOT.*`` and ``$JS.API.STREAM.RESTORE.*``: not implemented, refused loudly.

Theory of operation
-------------------
Skiff cannot stream a snapshot out or take one in.  A request that would have started one is refused with the
error nats-server itself sends when a snapshot or restore fails (10064 ``snapshot failed: ...``, 10062
``restore failed: ...``), saying that Skiff does not support it, so a client fails at once instead of waiting
for chunks that never come.  Every request nats-server rejects before starting the work gets exactly nats-server's
answer, in its order of checks (jetstream_api.go jsStreamSnapshotRequest / jsStreamRestoreRequest, single server):

snapshot: empty request (10003), stream (10059), body (10025), deliver subject (10015), then the refusal.
restore:  empty request (10003), body (10025), name in subject (10056), path separators (10136),
          ``checkStreamCfg``, account limits, existing stream (10130), then the refusal.

Restore error replies carry ``deliver_subject: ""`` (JSApiStreamRestoreResponse has no omitempty there).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ApiError
from protocol.jsapi import requests as rq
from protocol.jsapi._subjects import is_valid_publish_subject
from protocol.jsapi.snapshot import JSApiStreamRestoreRequest
from protocol.jsapi.stream_config import normalize_stream_config

from .api import ApiRequest, ApiRouter

if TYPE_CHECKING:  # pragma: no cover
    from .engine import JetStream

SNAPSHOT_NOT_SUPPORTED = ApiError.of("JSStreamSnapshotErrF", err="stream snapshots are not supported by Skiff")
RESTORE_NOT_SUPPORTED = ApiError.of("JSStreamRestoreErrF", err="stream restores are not supported by Skiff")


def register(router: ApiRouter) -> None:
    h = SnapshotApi(router.js)
    router.register("STREAM.SNAPSHOT.*", h.snapshot, "stream_snapshot_response")
    router.register("STREAM.RESTORE.*", h.restore, "stream_restore_response", {"deliver_subject": ""})


class SnapshotApi:
    def __init__(self, js: "JetStream") -> None:
        self.js = js

    @property
    def strict(self) -> bool:
        return bool(getattr(self.js.server.options, "jetstream_strict", True))

    def snapshot(self, req: ApiRequest) -> ApiError:
        if rq.is_empty_request(req.body):
            return ApiError.of("JSBadRequestErr")
        if req.tokens[2] not in self.js.streams:
            return ApiError.of("JSStreamNotFoundErr")
        r = rq.parse_request(rq.JSApiStreamSnapshotRequest, req.body, strict=self.strict)
        if isinstance(r, ApiError):
            return r
        if not is_valid_publish_subject(r.deliver_subject):
            return ApiError.of("JSSnapshotDeliverSubjectInvalidErr")
        return SNAPSHOT_NOT_SUPPORTED

    def restore(self, req: ApiRequest) -> ApiError:
        js = self.js
        if rq.is_empty_request(req.body):
            return ApiError.of("JSBadRequestErr")
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
        if name in js.streams:
            return ApiError.of("JSStreamNameExistRestoreFailedErr")
        return RESTORE_NOT_SUPPORTED
