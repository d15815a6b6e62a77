"""``$JS.API.*`` subjects and reply type names (nats-server ``jetstream_api.go``).

Templates take ``.format(stream=..., consumer=...)``; the ``*_PRE`` prefixes end with a dot so the token after them
is the stream name (``stream_from_subject``).  ``$JS.<domain>.API.>`` is mapped onto ``$JS.API.>`` by the server.
Reply types are ``io.nats.jetstream.api.v1.<name>``: :func:`response_type`.
"""
from __future__ import annotations

JS_API_PREFIX = "$JS.API"
JS_ALL_API = "$JS.API.>"
JS_DOMAIN_API = "$JS.{domain}.API.>"

API_INFO = "$JS.API.INFO"
STREAM_CREATE = "$JS.API.STREAM.CREATE.{stream}"
STREAM_UPDATE = "$JS.API.STREAM.UPDATE.{stream}"
STREAM_NAMES = "$JS.API.STREAM.NAMES"
STREAM_LIST = "$JS.API.STREAM.LIST"
STREAM_INFO = "$JS.API.STREAM.INFO.{stream}"
STREAM_DELETE = "$JS.API.STREAM.DELETE.{stream}"
STREAM_PURGE = "$JS.API.STREAM.PURGE.{stream}"
STREAM_SNAPSHOT = "$JS.API.STREAM.SNAPSHOT.{stream}"
STREAM_RESTORE = "$JS.API.STREAM.RESTORE.{stream}"
STREAM_MSG_DELETE = "$JS.API.STREAM.MSG.DELETE.{stream}"
STREAM_MSG_GET = "$JS.API.STREAM.MSG.GET.{stream}"
STREAM_LEADER_STEPDOWN = "$JS.API.STREAM.LEADER.STEPDOWN.{stream}"
STREAM_PEER_REMOVE = "$JS.API.STREAM.PEER.REMOVE.{stream}"
DIRECT_GET = "$JS.API.DIRECT.GET.{stream}"
DIRECT_GET_LAST = "$JS.API.DIRECT.GET.{stream}.{subject}"
CONSUMER_CREATE = "$JS.API.CONSUMER.CREATE.{stream}"
CONSUMER_CREATE_NAMED = "$JS.API.CONSUMER.CREATE.{stream}.{consumer}"
CONSUMER_CREATE_FILTERED = "$JS.API.CONSUMER.CREATE.{stream}.{consumer}.{filter}"
CONSUMER_DURABLE_CREATE = "$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{consumer}"
CONSUMER_NAMES = "$JS.API.CONSUMER.NAMES.{stream}"
CONSUMER_LIST = "$JS.API.CONSUMER.LIST.{stream}"
CONSUMER_INFO = "$JS.API.CONSUMER.INFO.{stream}.{consumer}"
CONSUMER_DELETE = "$JS.API.CONSUMER.DELETE.{stream}.{consumer}"
CONSUMER_PAUSE = "$JS.API.CONSUMER.PAUSE.{stream}.{consumer}"
CONSUMER_UNPIN = "$JS.API.CONSUMER.UNPIN.{stream}.{consumer}"
CONSUMER_RESET = "$JS.API.CONSUMER.RESET.{stream}.{consumer}"
CONSUMER_MSG_NEXT = "$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
CONSUMER_LEADER_STEPDOWN = "$JS.API.CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}"
META_LEADER_STEPDOWN = "$JS.API.META.LEADER.STEPDOWN"
SERVER_REMOVE = "$JS.API.SERVER.REMOVE"
ACCOUNT_PURGE = "$JS.API.ACCOUNT.PURGE.{account}"

# Subscription patterns the server registers (the JetStream API as a table of internal subscriptions).
API_SUBSCRIPTIONS = {
    "INFO": "$JS.API.INFO",
    "STREAM.CREATE": "$JS.API.STREAM.CREATE.*",
    "STREAM.UPDATE": "$JS.API.STREAM.UPDATE.*",
    "STREAM.NAMES": "$JS.API.STREAM.NAMES",
    "STREAM.LIST": "$JS.API.STREAM.LIST",
    "STREAM.INFO": "$JS.API.STREAM.INFO.*",
    "STREAM.DELETE": "$JS.API.STREAM.DELETE.*",
    "STREAM.PURGE": "$JS.API.STREAM.PURGE.*",
    "STREAM.SNAPSHOT": "$JS.API.STREAM.SNAPSHOT.*",
    "STREAM.RESTORE": "$JS.API.STREAM.RESTORE.*",
    "STREAM.MSG.DELETE": "$JS.API.STREAM.MSG.DELETE.*",
    "STREAM.MSG.GET": "$JS.API.STREAM.MSG.GET.*",
    "STREAM.LEADER.STEPDOWN": "$JS.API.STREAM.LEADER.STEPDOWN.*",
    "STREAM.PEER.REMOVE": "$JS.API.STREAM.PEER.REMOVE.*",
    "CONSUMER.CREATE": "$JS.API.CONSUMER.CREATE.*",
    "CONSUMER.CREATE.EX": "$JS.API.CONSUMER.CREATE.*.>",
    "CONSUMER.DURABLE.CREATE": "$JS.API.CONSUMER.DURABLE.CREATE.*.*",
    "CONSUMER.NAMES": "$JS.API.CONSUMER.NAMES.*",
    "CONSUMER.LIST": "$JS.API.CONSUMER.LIST.*",
    "CONSUMER.INFO": "$JS.API.CONSUMER.INFO.*.*",
    "CONSUMER.DELETE": "$JS.API.CONSUMER.DELETE.*.*",
    "CONSUMER.PAUSE": "$JS.API.CONSUMER.PAUSE.*.*",
    "CONSUMER.UNPIN": "$JS.API.CONSUMER.UNPIN.*.*",
    "CONSUMER.LEADER.STEPDOWN": "$JS.API.CONSUMER.LEADER.STEPDOWN.*.*",
    "META.LEADER.STEPDOWN": "$JS.API.META.LEADER.STEPDOWN",
    "SERVER.REMOVE": "$JS.API.SERVER.REMOVE",
    "ACCOUNT.PURGE": "$JS.API.ACCOUNT.PURGE.*",
}

REQUEST_NEXT_PRE = "$JS.API.CONSUMER.MSG.NEXT."
DIRECT_GET_PRE = "$JS.API.DIRECT.GET."
ACK_PRE = "$JS.ACK."
ACK_T = "$JS.ACK.{stream}.{consumer}"
FLOW_CONTROL_PRE = "$JS.FC."
SNAPSHOT_ACK_T = "$JS.SNAPSHOT.ACK.{stream}.{id}"
RESTORE_DELIVER_T = "$JS.SNAPSHOT.RESTORE.{stream}.{id}"
ADVISORY_PREFIX = "$JS.EVENT.ADVISORY"
METRIC_PREFIX = "$JS.EVENT.METRIC"
ADVISORY_API = "$JS.EVENT.ADVISORY.API"
ADVISORY_STREAM_CREATED = "$JS.EVENT.ADVISORY.STREAM.CREATED.{stream}"
ADVISORY_STREAM_DELETED = "$JS.EVENT.ADVISORY.STREAM.DELETED.{stream}"
ADVISORY_STREAM_UPDATED = "$JS.EVENT.ADVISORY.STREAM.UPDATED.{stream}"
ADVISORY_CONSUMER_CREATED = "$JS.EVENT.ADVISORY.CONSUMER.CREATED.{stream}.{consumer}"
ADVISORY_CONSUMER_DELETED = "$JS.EVENT.ADVISORY.CONSUMER.DELETED.{stream}.{consumer}"
ADVISORY_CONSUMER_PAUSE = "$JS.EVENT.ADVISORY.CONSUMER.PAUSE.{stream}.{consumer}"
ADVISORY_CONSUMER_PINNED = "$JS.EVENT.ADVISORY.CONSUMER.PINNED.{stream}.{consumer}"
ADVISORY_CONSUMER_UNPINNED = "$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.{stream}.{consumer}"
ADVISORY_MAX_DELIVERIES = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{consumer}"
ADVISORY_MSG_NAKED = "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.{stream}.{consumer}"
ADVISORY_MSG_TERMINATED = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{stream}.{consumer}"
METRIC_CONSUMER_ACK = "$JS.EVENT.METRIC.CONSUMER.ACK.{stream}.{consumer}"

# Request headers.
REQUIRED_API_LEVEL_HDR = "Nats-Required-Api-Level"
STREAM_IDENTITY_HDR = "Nats-Stream-Identity"

TYPE_PREFIX = "io.nats.jetstream.api.v1."


def response_type(name: str) -> str:
    """``stream_create_response`` -> ``io.nats.jetstream.api.v1.stream_create_response``."""
    return TYPE_PREFIX + name


ACCOUNT_INFO_RESPONSE = response_type("account_info_response")
STREAM_CREATE_RESPONSE = response_type("stream_create_response")
STREAM_UPDATE_RESPONSE = response_type("stream_update_response")
STREAM_NAMES_RESPONSE = response_type("stream_names_response")
STREAM_LIST_RESPONSE = response_type("stream_list_response")
STREAM_INFO_RESPONSE = response_type("stream_info_response")
STREAM_DELETE_RESPONSE = response_type("stream_delete_response")
STREAM_PURGE_RESPONSE = response_type("stream_purge_response")
STREAM_SNAPSHOT_RESPONSE = response_type("stream_snapshot_response")
STREAM_RESTORE_RESPONSE = response_type("stream_restore_response")
STREAM_MSG_DELETE_RESPONSE = response_type("stream_msg_delete_response")
STREAM_MSG_GET_RESPONSE = response_type("stream_msg_get_response")
STREAM_REMOVE_PEER_RESPONSE = response_type("stream_remove_peer_response")
STREAM_LEADER_STEPDOWN_RESPONSE = response_type("stream_leader_stepdown_response")
CONSUMER_CREATE_RESPONSE = response_type("consumer_create_response")
CONSUMER_DELETE_RESPONSE = response_type("consumer_delete_response")
CONSUMER_INFO_RESPONSE = response_type("consumer_info_response")
CONSUMER_NAMES_RESPONSE = response_type("consumer_names_response")
CONSUMER_LIST_RESPONSE = response_type("consumer_list_response")
CONSUMER_PAUSE_RESPONSE = response_type("consumer_pause_response")
CONSUMER_UNPIN_RESPONSE = response_type("consumer_unpin_response")
CONSUMER_RESET_RESPONSE = response_type("consumer_reset_response")
CONSUMER_LEADER_STEPDOWN_RESPONSE = response_type("consumer_leader_stepdown_response")
META_LEADER_STEPDOWN_RESPONSE = response_type("meta_leader_stepdown_response")
META_SERVER_REMOVE_RESPONSE = response_type("meta_server_remove_response")
ACCOUNT_PURGE_RESPONSE = response_type("account_purge_response")
SYSTEM_RESPONSE = response_type("system_response")
OVERLOADED_RESPONSE = response_type("system_overloaded")

NAMES_LIMIT = 1024  # JSApiNamesLimit
LIST_LIMIT = 256  # JSApiListLimit
MAX_SUBJECT_DETAILS = 100_000  # JSMaxSubjectDetails


def token_at(subject: str, index: int) -> str:
    """nats-server's 1-based tokenAt ("" when absent)."""
    toks = subject.split(".")
    return toks[index - 1] if 0 < index <= len(toks) else ""


def stream_from_subject(subject: str) -> str:
    return token_at(subject, 5)


def consumer_from_subject(subject: str) -> str:
    return token_at(subject, 6)
