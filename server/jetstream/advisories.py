"""JetStream advisories: ``$JS.EVENT.ADVISORY.*`` events, published only when someone listens.

Theory of operation
-------------------
An advisory is a JSON document with the ``TypedEvent`` envelope (``type``, ``id``, ``timestamp``) followed by the
event's own fields, in nats-server's struct order (jetstream_events.go).  nats-server's ``publishAdvisory`` drops
the event when the account has no interest in the subject; :func:`publish_advisory` does the same check first, so
an advisory nobody listens to costs one sublist lookup and no JSON.  ``id`` is a NUID-style 22-character base62
string; ``timestamp`` comes from the server clock.

The stream advisories live here; consumer advisories use :func:`publish_advisory` and :func:`envelope` too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skiff.protocol.jsapi.subjects import (
    ADVISORY_API, RESTORE_COMPLETE_T, RESTORE_CREATE_T, SNAPSHOT_COMPLETE_T, SNAPSHOT_CREATE_T, STREAM_CREATED_T,
    STREAM_DELETED_T, STREAM_UPDATED_T,
)
from skiff.protocol.jsapi.timefmt import format_time

from ..ids import nuid
from . import jsonout

if TYPE_CHECKING:  # pragma: no cover
    from ..core.server import Server


STREAM_ACTION_TYPE = "io.nats.jetstream.advisory.v1.stream_action"

ACTION_CREATE = "create"
ACTION_MODIFY = "modify"
ACTION_DELETE = "delete"


def envelope(server: "Server", type_: str) -> dict[str, Any]:
    return {"type": type_, "id": nuid(), "timestamp": format_time(server.clock.time_ns())}


def publish_advisory(server: "Server", subject: str, event: dict[str, Any]) -> bool:
    """Publish ``event`` on ``subject`` if anyone is subscribed; returns whether it was sent."""
    if not server.sublist.has_interest(subject):
        return False
    domain = server.options.jetstream_domain
    if domain and "domain" not in event:
        event["domain"] = domain
    server.publish(subject, jsonout.dumpb(event))
    return True


API_AUDIT_TYPE = "io.nats.jetstream.advisory.v1.api_audit"


def client_info(server: "Server", conn: Any) -> dict[str, Any]:
    """nats-server ClientInfo.forAdvisory for a client connection (Go field order, omitempty)."""
    ci: dict[str, Any] = {}
    start = getattr(conn, "start_ns", 0)
    if start:
        ci["start"] = format_time(start)
    for key, attr in (("host", "host"), ("id", "cid")):
        v = getattr(conn, attr, None)
        if v:
            ci[key] = v
    account = getattr(conn, "account", None)
    ci["acc"] = account.name if account is not None else server.js_account.name
    for key, attr in (("user", "user"), ("name", "name"), ("lang", "lang"), ("ver", "version"), ("rtt", "rtt_ns")):
        v = getattr(conn, attr, None)
        if v:
            ci[key] = v
    ci["server"] = server.server_name
    ci["kind"] = "Client"
    ci["client_type"] = "nats"
    return ci


def api_audit(server: "Server", origin: Any, subject: str, request: bytes, response: bytes) -> None:
    """nats-server sendJetStreamAPIAuditAdvisory: one event per answered API request (only if someone listens)."""
    if origin is None or not server.sublist.has_interest(ADVISORY_API):
        return
    ev = envelope(server, API_AUDIT_TYPE)
    ev["server"] = server.server_name
    ev["client"] = client_info(server, origin)
    ev["subject"] = subject
    if request:
        ev["request"] = request.decode("utf-8", "replace")
    ev["response"] = response.decode("utf-8", "replace")
    publish_advisory(server, ADVISORY_API, ev)


def stream_action(server: "Server", stream: str, action: str) -> None:
    """nats-server JSStreamActionAdvisory: created / updated (``modify``) / deleted."""
    subject = {ACTION_CREATE: STREAM_CREATED_T, ACTION_MODIFY: STREAM_UPDATED_T, ACTION_DELETE: STREAM_DELETED_T}[action]
    subject = subject.format(stream=stream)
    if not server.sublist.has_interest(subject):
        return
    ev = envelope(server, STREAM_ACTION_TYPE)
    ev["stream"] = stream
    ev["action"] = action
    publish_advisory(server, subject, ev)


# -- snapshot and restore (jetstream_api.go jsStreamSnapshotRequest / processStreamRestore, jetstream_events.go)
_TRANSFER_TYPE = "io.nats.jetstream.advisory.v1.{kind}"


def transfer(server: "Server", kind: str, stream: str, origin: Any, **fields: Any) -> None:
    """A snapshot_create / snapshot_complete / restore_create / restore_complete advisory about ``stream``, for the
    client ``origin`` that asked.  ``fields`` come in Go's field order (state; start, end, bytes), then client,
    domain and (snapshot_complete) a non-empty error."""
    subject = {"snapshot_create": SNAPSHOT_CREATE_T, "snapshot_complete": SNAPSHOT_COMPLETE_T,
               "restore_create": RESTORE_CREATE_T, "restore_complete": RESTORE_COMPLETE_T}[kind].format(stream=stream)
    if not server.sublist.has_interest(subject):
        return
    error = fields.pop("error", None)
    ev = envelope(server, _TRANSFER_TYPE.format(kind=kind))
    ev["stream"] = stream
    for k, v in fields.items():
        ev[k] = format_time(v) if k in ("start", "end") else v
    ev["client"] = client_info(server, origin) if origin is not None else None
    domain = server.options.jetstream_domain
    if domain:
        ev["domain"] = domain
    if error:
        ev["error"] = error
    publish_advisory(server, subject, ev)
