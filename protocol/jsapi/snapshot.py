"""Request bodies of ``$JS.API.STREAM.SNAPSHOT.*`` and ``$JS.API.STREAM.RESTORE.*``, decoded like nats-server.

Skiff does not implement snapshots or restores, but it answers every request to them exactly as nats-server does
up to the point where the work would start (bad JSON, missing stream, invalid deliver subject, a name mismatch, a
stream that already exists ...), so a client sees the same errors; a valid request is refused with a JSON error
(server/jetstream/api_snapshot.py).  The restore body carries a whole ``StreamConfig`` and a ``StreamState``
(nats-server store.go), decoded strictly like every other API body.
"""
from __future__ import annotations

from typing import Annotated, Optional

from .gojson import INT, UINT64, Go, GoModel, OMIT, map_of, slice_of
from .stream_config import StreamConfig
from .timefmt import GoTime

__all__ = ["LostStreamData", "StreamStateModel", "JSApiStreamRestoreRequest"]


class LostStreamData(GoModel):
    msgs: Annotated[Optional[list[int]], Go(slice_of(UINT64))] = None
    bytes: Annotated[int, Go(UINT64)] = 0


class StreamStateModel(GoModel):
    """nats-server's StreamState as a request field (JSApiStreamRestoreRequest.state)."""

    __go_name__ = "StreamState"

    messages: Annotated[int, Go(UINT64)] = 0
    bytes: Annotated[int, Go(UINT64)] = 0
    first_seq: Annotated[int, Go(UINT64)] = 0
    first_ts: Optional[GoTime] = None
    last_seq: Annotated[int, Go(UINT64)] = 0
    last_ts: Optional[GoTime] = None
    num_subjects: Annotated[int, Go(INT, omitempty=True)] = 0
    subjects: Annotated[Optional[dict[str, int]], Go(map_of(UINT64), omitempty=True)] = None
    num_deleted: Annotated[int, Go(INT, omitempty=True)] = 0
    deleted: Annotated[Optional[list[int]], Go(slice_of(UINT64), omitempty=True)] = None
    lost: Annotated[Optional[LostStreamData], OMIT] = None
    consumer_count: Annotated[int, Go(INT)] = 0


class JSApiStreamRestoreRequest(GoModel):
    config: StreamConfig = StreamConfig()
    state: StreamStateModel = StreamStateModel()
