"""JetStream API request bodies other than stream/consumer configs, decoded like nats-server does.

Each model mirrors the Go struct nats-server unmarshals the body into (its name appears in Go's type errors, e.g.
``json: cannot unmarshal string into Go struct field JSApiStreamPurgeRequest.seq of type uint64``).  All of them go
through ``unmarshalRequest`` (strict: unknown fields are 10025) except the pull request, which the consumer decodes
itself with plain ``json.Unmarshal`` (unknown fields ignored; errors become ``400 Bad Request`` statuses):
:func:`parse_pull_request` handles its three body forms (empty, bare integer, JSON); and CONSUMER.UNPIN, which
nats-server 2.15 also decodes leniently (``parse_request(JSApiConsumerUnpinRequest, body, strict=False)``, then an
empty group is 10025 ``invalid JSON: consumer group not specified``).

:func:`parse_request` is the one entry point for the API layer: ``parse_request(JSApiStreamPurgeRequest, body)``
returns the model or the 10025 :class:`~protocol.errors.ApiError`.  :func:`is_empty_request` is nats-server's
``isEmptyRequest`` (STREAM.DELETE / CONSUMER.DELETE / CONSUMER.INFO reject anything else with 10038).
"""
from __future__ import annotations

from typing import Annotated, Optional, TypeVar

from ..errors import ApiError
from . import gojson
from .gojson import DURATION, INT, INT64, OMIT, UINT64, Go, GoDecodeError, GoModel
from .timefmt import GoTime

__all__ = [
    "ApiPagedRequest", "JSApiStreamNamesRequest", "JSApiStreamListRequest", "JSApiStreamInfoRequest",
    "JSApiConsumersRequest", "JSApiStreamPurgeRequest", "JSApiMsgGetRequest", "JSApiMsgDeleteRequest",
    "JSApiConsumerGetNextRequest", "JSApiConsumerPauseRequest", "JSApiConsumerUnpinRequest",
    "JSApiStreamSnapshotRequest", "JSApiConsumerResetRequest", "JSApiLeaderStepdownRequest",
    "JSApiMetaServerRemoveRequest", "PriorityGroup", "parse_request", "parse_pull_request", "is_empty_request",
    "PullRequest",
]

M = TypeVar("M", bound=GoModel)


class ApiPagedRequest(GoModel):
    offset: Annotated[int, Go(INT)] = 0


class JSApiStreamNamesRequest(GoModel):
    offset: Annotated[int, Go(INT)] = 0
    subject: Annotated[str, OMIT] = ""


class JSApiStreamListRequest(JSApiStreamNamesRequest):
    pass


class JSApiStreamInfoRequest(GoModel):
    offset: Annotated[int, Go(INT)] = 0
    deleted_details: Annotated[bool, OMIT] = False
    subjects_filter: Annotated[str, OMIT] = ""


class JSApiConsumersRequest(GoModel):
    offset: Annotated[int, Go(INT)] = 0


class JSApiStreamPurgeRequest(GoModel):
    seq: Annotated[int, Go(UINT64, omitempty=True)] = 0
    filter: Annotated[str, OMIT] = ""
    keep: Annotated[int, Go(UINT64, omitempty=True)] = 0


class JSApiMsgGetRequest(GoModel):
    seq: Annotated[int, Go(UINT64, omitempty=True)] = 0
    last_by_subj: Annotated[str, OMIT] = ""
    next_by_subj: Annotated[str, OMIT] = ""
    batch: Annotated[int, Go(INT, omitempty=True)] = 0
    max_bytes: Annotated[int, Go(INT, omitempty=True)] = 0
    start_time: Annotated[Optional[GoTime], OMIT] = None
    multi_last: Annotated[Optional[list[str]], OMIT] = None
    up_to_seq: Annotated[int, Go(UINT64, omitempty=True)] = 0
    up_to_time: Annotated[Optional[GoTime], OMIT] = None
    no_hdr: Annotated[bool, OMIT] = False


class JSApiMsgDeleteRequest(GoModel):
    seq: Annotated[int, Go(UINT64)] = 0
    no_erase: Annotated[bool, OMIT] = False


class PriorityGroup(GoModel):
    group: Annotated[str, OMIT] = ""
    min_pending: Annotated[int, Go(INT64, omitempty=True)] = 0
    min_ack_pending: Annotated[int, Go(INT64, omitempty=True)] = 0
    id: Annotated[str, OMIT] = ""
    priority: Annotated[int, Go(INT, omitempty=True)] = 0


class JSApiConsumerGetNextRequest(GoModel):
    """A pull request: Go's struct embeds PriorityGroup, so its fields sit at the top level."""

    expires: Annotated[int, Go(DURATION, omitempty=True)] = 0
    batch: Annotated[int, Go(INT, omitempty=True)] = 0
    max_bytes: Annotated[int, Go(INT, omitempty=True)] = 0
    no_wait: Annotated[bool, OMIT] = False
    idle_heartbeat: Annotated[int, Go(DURATION, omitempty=True)] = 0
    group: Annotated[str, OMIT] = ""
    min_pending: Annotated[int, Go(INT64, omitempty=True)] = 0
    min_ack_pending: Annotated[int, Go(INT64, omitempty=True)] = 0
    id: Annotated[str, OMIT] = ""
    priority: Annotated[int, Go(INT, omitempty=True)] = 0


PullRequest = JSApiConsumerGetNextRequest


class JSApiConsumerPauseRequest(GoModel):
    pause_until: Annotated[Optional[GoTime], Go(omitempty=True)] = None  # Go: time.Time value; zero = resume


class JSApiConsumerUnpinRequest(GoModel):
    group: str = ""


class JSApiStreamSnapshotRequest(GoModel):
    deliver_subject: str = ""
    no_consumers: Annotated[bool, OMIT] = False
    chunk_size: Annotated[int, Go(INT, omitempty=True)] = 0
    window_size: Annotated[int, Go(INT, omitempty=True)] = 0
    jsck: Annotated[bool, OMIT] = False


class JSApiConsumerResetRequest(GoModel):
    seq: Annotated[int, Go(UINT64, omitempty=True)] = 0


class JSApiMetaServerRemoveRequest(GoModel):
    peer: str = ""
    peer_id: Annotated[str, OMIT] = ""


class JSApiLeaderStepdownRequest(GoModel):
    # placement is a *Placement; kept as a plain dict-free model to avoid importing stream_config here.
    pass


def parse_request(model: type[M], data: bytes | str, *, strict: bool = True, unmarshal: bool = False) -> M | ApiError:
    """Decode an API request body as ``unmarshalRequest`` does (or, with ``unmarshal``, as a plain
    ``json.Unmarshal``); errors are 10025 with Go's text."""
    try:
        return model.from_json(data, strict=strict, unmarshal=unmarshal)
    except GoDecodeError as e:
        return ApiError.of("JSInvalidJSONErr", err=str(e))


def is_empty_request(data: bytes | str) -> bool:
    """nats-server's isEmptyRequest: nothing, ``{}``, or a JSON object without keys."""
    if isinstance(data, str):
        data = data.encode()
    if len(data) == 0:
        return True
    if data == b"{}":
        return True
    try:
        v = gojson.loads(data)  # never RecursionError: nested input is just "not empty"
    except ValueError:
        return False
    return isinstance(v, dict) and len(v) == 0


def parse_pull_request(data: bytes | str) -> JSApiConsumerGetNextRequest | str:
    """A MSG.NEXT body: empty -> batch 1, a bare integer -> batch N, else JSON (json.Unmarshal, lenient).

    Returns the request or the Go error text for ``400 Bad Request - <text>``.
    """
    if isinstance(data, str):
        data = data.encode()
    stripped = data.strip()
    if not stripped:
        return JSApiConsumerGetNextRequest(batch=1)
    if stripped[:1] != b"{":
        # Go strconv.Atoi: an optional sign and ASCII digits within int64; anything else is batch 1.  Zero and
        # negative batches are kept as they are (a waiting request counts them in the no_wait check).
        text = stripped.decode("latin-1")
        digits = text[1:] if text[:1] in "+-" else text
        n = int(text) if digits.isascii() and digits.isdigit() else 1
        return JSApiConsumerGetNextRequest(batch=n if -(1 << 63) <= n < (1 << 63) else 1)
    try:
        # consumer.go nextReqFromMsg: json.Unmarshal(req, &cr) with cr a pointer, so Go names no struct in field
        # paths ("Go struct field .expires of type time.Duration").
        return JSApiConsumerGetNextRequest.from_json(stripped, strict=False, unmarshal=True, root="")
    except GoDecodeError as e:
        return str(e)
