"""The JetStream subjects as one table (nats-server jetstream_api.go): the server's routing is built from it.

Theory of operation
-------------------
:data:`API` holds one :class:`Endpoint` per ``$JS.API`` subject pattern a standalone nats-server answers: the
``pairs`` and ``infopairs`` of setJetStreamExportSubs, plus the subjects the streams and consumers answer on their
own subscriptions (Direct Get, ``CONSUMER.MSG.NEXT``, ``CONSUMER.RESET``).  Each row is keyed by its API name
(``STREAM.CREATE``) and gives the subscription pattern, the reply ``type`` and the fields an error reply of that
type still carries (the response struct's fields without ``omitempty``: paged replies keep
``total/offset/limit``, ``stream_names`` adds ``streams: null`` ...).  ``routed`` rows are answered by the API
router's one subscription on ``$JS.API.>``; the others by subscriptions of their own.

The server marks each handler with the name of the row it answers (server/jetstream/api.py ``serves``) and
builds its routes by looking the handlers up by name; tests/jetstream/test_api_table.py fails when a row has no
handler, when a handler names no row, and when a module under server/ writes a ``$JS.API.`` subject itself.

The system-account directives (``META.LEADER.STEPDOWN``, ``SERVER.REMOVE``, ``SERVER.EVACUATE``, ``META.RESCUE``,
``ACCOUNT.*``) are not rows: apiDispatch drops them and only a clustered meta leader subscribes to them, so a
standalone nats-server never answers, and neither does Skiff.

The other ``$JS`` subjects (acks, flow control, snapshots, advisories) are templates below: ``*_T`` take
``.format(...)``, ``*_PRE`` prefixes end where the variable part starts so a hot path compares strings.
"""
from __future__ import annotations

from ..record import NamedTuple  # typing's, without its annotation checks (start-up)

JS_API = "$JS.API"  # JSApiPrefix: what an external source's ``api`` prefix replaces
API_PREFIX = JS_API + "."
ALL_API = API_PREFIX + ">"  # jsAllAPI
DOMAIN_API_PRE_T = "$JS.{domain}.API."  # jsDomainAPI without its '>': mapped onto API_PREFIX

TYPE_PREFIX = "io.nats.jetstream.api.v1."


class Endpoint(NamedTuple):
    name: str  # the row's key; the handler that answers it registers under this name
    pattern: str  # the subscription pattern after ``$JS.API.`` (``*`` one token, a trailing ``>`` the rest)
    reply_type: str  # the reply's ``type`` (short name); "" where the answer is not a JSON API reply
    error_fields: dict  # fields an error reply of this type still carries, after ``error``
    routed: bool = True  # answered by the API router's ``$JS.API.>`` subscription

    @property
    def subject(self) -> str:
        """The subscription subject (``$JS.API.STREAM.INFO.*``)."""
        return API_PREFIX + self.pattern

    @property
    def prefix(self) -> str:
        """The subject up to its first wildcard token (``$JS.API.CONSUMER.MSG.NEXT.``)."""
        toks = self.subject.split(".")
        for i, tok in enumerate(toks):
            if tok in ("*", ">"):
                return ".".join(toks[:i]) + "."
        return self.subject

    def fill(self, *tokens: str) -> str:
        """The subject with its ``*`` replaced by ``tokens`` in order and a trailing ``>`` by the rest of them
        (left as ``>`` when none is left): ``API["CONSUMER.DELETE"].fill("S", "C")``."""
        out: list[str] = []
        rest = list(tokens)
        for tok in self.pattern.split("."):
            if tok == "*":
                out.append(rest.pop(0))
            elif tok == ">":
                out.append(".".join(rest) if rest else ">")
                rest = []
            else:
                out.append(tok)
        if rest:
            raise ValueError(f"{self.name} takes fewer tokens than {tokens!r}")
        return API_PREFIX + ".".join(out)


_PAGED = {"total": 0, "offset": 0, "limit": 0}

API: dict[str, Endpoint] = {e.name: e for e in (
    Endpoint("INFO", "INFO", "account_info_response", {}),
    Endpoint("STREAM.CREATE", "STREAM.CREATE.*", "stream_create_response", {}),
    Endpoint("STREAM.UPDATE", "STREAM.UPDATE.*", "stream_update_response", {}),
    Endpoint("STREAM.NAMES", "STREAM.NAMES", "stream_names_response", {**_PAGED, "streams": None}),
    Endpoint("STREAM.LIST", "STREAM.LIST", "stream_list_response", {**_PAGED, "streams": []}),
    Endpoint("STREAM.INFO", "STREAM.INFO.*", "stream_info_response", _PAGED),
    Endpoint("STREAM.DELETE", "STREAM.DELETE.*", "stream_delete_response", {}),
    Endpoint("STREAM.PURGE", "STREAM.PURGE.*", "stream_purge_response", {"purged": 0}),
    Endpoint("STREAM.MSG.GET", "STREAM.MSG.GET.*", "stream_msg_get_response", {}),
    Endpoint("STREAM.MSG.DELETE", "STREAM.MSG.DELETE.*", "stream_msg_delete_response", {}),
    Endpoint("STREAM.SNAPSHOT", "STREAM.SNAPSHOT.*", "stream_snapshot_response", {}),
    # JSApiStreamRestoreResponse has no omitempty on deliver_subject
    Endpoint("STREAM.RESTORE", "STREAM.RESTORE.*", "stream_restore_response", {"deliver_subject": ""}),
    Endpoint("STREAM.LEADER.STEPDOWN", "STREAM.LEADER.STEPDOWN.*", "stream_leader_stepdown_response", {}),
    Endpoint("STREAM.PEER.REMOVE", "STREAM.PEER.REMOVE.*", "stream_remove_peer_response", {}),
    Endpoint("STREAM.PEER.EVACUATE", "STREAM.PEER.EVACUATE.*", "stream_evacuate_peer_response", {}),
    Endpoint("STREAM.CANCEL_MOVE", "STREAM.CANCEL_MOVE.*", "stream_cancel_move_response", {}),
    Endpoint("CONSUMER.CREATE", "CONSUMER.CREATE.*", "consumer_create_response", {}),
    Endpoint("CONSUMER.CREATE.EX", "CONSUMER.CREATE.*.>", "consumer_create_response", {}),
    Endpoint("CONSUMER.DURABLE.CREATE", "CONSUMER.DURABLE.CREATE.*.*", "consumer_create_response", {}),
    Endpoint("CONSUMER.INFO", "CONSUMER.INFO.*.*", "consumer_info_response", {}),
    Endpoint("CONSUMER.DELETE", "CONSUMER.DELETE.*.*", "consumer_delete_response", {}),
    Endpoint("CONSUMER.NAMES", "CONSUMER.NAMES.*", "consumer_names_response", {**_PAGED, "consumers": []}),
    Endpoint("CONSUMER.LIST", "CONSUMER.LIST.*", "consumer_list_response", {**_PAGED, "consumers": []}),
    Endpoint("CONSUMER.PAUSE", "CONSUMER.PAUSE.*.*", "consumer_pause_response",
             {"paused": False, "pause_until": "0001-01-01T00:00:00Z"}),
    Endpoint("CONSUMER.UNPIN", "CONSUMER.UNPIN.*.*", "consumer_unpin_response", {}),
    Endpoint("CONSUMER.LEADER.STEPDOWN", "CONSUMER.LEADER.STEPDOWN.*.*", "consumer_leader_stepdown_response", {}),
    # nats-server 2.15: each consumer subscribes to its own RESET subject (consumer.go processResetReq); Skiff's
    # router answers it, outside the API accounting.
    Endpoint("CONSUMER.RESET", "CONSUMER.RESET.*.*", "consumer_reset_response", {"reset_seq": 0}),
    # Answered by the stream (ADR-31) and by the consumer, not through the API: raw messages and statuses.
    Endpoint("DIRECT.GET", "DIRECT.GET.*", "", {}, routed=False),
    Endpoint("DIRECT.GET.LAST", "DIRECT.GET.*.>", "", {}, routed=False),
    Endpoint("CONSUMER.MSG.NEXT", "CONSUMER.MSG.NEXT.*.*", "", {}, routed=False),
)}

# Prefixes nats-server compares requests with (jsDirectGetPre has no trailing dot, jsRequestNextPre has one).
DIRECT_GET_PRE = API["DIRECT.GET"].prefix[:-1]
REQUEST_NEXT_PRE = API["CONSUMER.MSG.NEXT"].prefix

# Request headers.
REQUIRED_API_LEVEL_HDR = "Nats-Required-Api-Level"
STREAM_IDENTITY_HDR = "Nats-Stream-Identity"

# Consumer subjects (jsAckT / jsAckPre, jsFlowControl / jsFlowControlPre) and the sourcing deliver prefixes
# (stream.go setupMirrorConsumer / setupSourceConsumer: syncSubject("$JS.M") / syncSubject("$JS.S")).
ACK_PRE = "$JS.ACK."
ACK_T = ACK_PRE + "{stream}.{consumer}"
FC_PRE = "$JS.FC."
FC_T = FC_PRE + "{stream}.{consumer}.{tag}"
MIRROR_DELIVER_PRE = "$JS.M"
SOURCE_DELIVER_PRE = "$JS.S"

# Snapshot and restore transfers (jsSnapshotAckT, jsRestoreDeliverT).
SNAPSHOT_ACK_T = "$JS.SNAPSHOT.ACK.{stream}.{id}"
RESTORE_DELIVER_T = "$JS.SNAPSHOT.RESTORE.{stream}.{id}"

# Advisories and metrics (jetstream_api.go JSAdvisory*Pre, JSMetric*Pre, JSAuditAdvisory).
_ADVISORY = "$JS.EVENT.ADVISORY."
ADVISORY_API = _ADVISORY + "API"
STREAM_CREATED_T = _ADVISORY + "STREAM.CREATED.{stream}"
STREAM_UPDATED_T = _ADVISORY + "STREAM.UPDATED.{stream}"
STREAM_DELETED_T = _ADVISORY + "STREAM.DELETED.{stream}"
STREAM_BATCH_ABANDONED_T = _ADVISORY + "STREAM.BATCH_ABANDONED.{stream}"
SNAPSHOT_CREATE_T = _ADVISORY + "STREAM.SNAPSHOT_CREATE.{stream}"
SNAPSHOT_COMPLETE_T = _ADVISORY + "STREAM.SNAPSHOT_COMPLETE.{stream}"
RESTORE_CREATE_T = _ADVISORY + "STREAM.RESTORE_CREATE.{stream}"
RESTORE_COMPLETE_T = _ADVISORY + "STREAM.RESTORE_COMPLETE.{stream}"
CONSUMER_CREATED_T = _ADVISORY + "CONSUMER.CREATED.{stream}.{consumer}"
CONSUMER_DELETED_T = _ADVISORY + "CONSUMER.DELETED.{stream}.{consumer}"
CONSUMER_MAX_DELIVERIES_T = _ADVISORY + "CONSUMER.MAX_DELIVERIES.{stream}.{consumer}"
CONSUMER_MSG_NAKED_T = _ADVISORY + "CONSUMER.MSG_NAKED.{stream}.{consumer}"
CONSUMER_MSG_TERMINATED_T = _ADVISORY + "CONSUMER.MSG_TERMINATED.{stream}.{consumer}"
CONSUMER_PAUSE_T = _ADVISORY + "CONSUMER.PAUSE.{stream}.{consumer}"
CONSUMER_PINNED_T = _ADVISORY + "CONSUMER.PINNED.{stream}.{consumer}"
CONSUMER_UNPINNED_T = _ADVISORY + "CONSUMER.UNPINNED.{stream}.{consumer}"
CONSUMER_ACK_METRIC_T = "$JS.EVENT.METRIC.CONSUMER.ACK.{stream}.{consumer}"

NAMES_LIMIT = 1024  # JSApiNamesLimit
LIST_LIMIT = 256  # JSApiListLimit
MAX_SUBJECT_DETAILS = 100_000  # JSMaxSubjectDetails
