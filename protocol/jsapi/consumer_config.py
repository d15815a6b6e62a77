"""ConsumerConfig: the wire model, nats-server's defaults and validation.

Theory of operation
-------------------
:class:`ConsumerConfig` mirrors Go's ``server.ConsumerConfig`` (field order and ``omitempty`` as nats-server 2.15
marshals it: ``num_replicas`` is always present, ``priority_policy`` only when not ``none`` ...);
:class:`CreateConsumerRequest` is the CONSUMER.CREATE body.  A create runs, in nats-server's order:

1. :func:`check_consumer_create` - ``jsConsumerCreateRequest``'s subject handling: legacy ephemeral
   ``CONSUMER.CREATE.<s>``, ``CONSUMER.DURABLE.CREATE.<s>.<c>``, new style ``CONSUMER.CREATE.<s>.<c>[.<filter>]``;
   it returns the request with ``config.name`` set the way the Go code sets it, or the error;
2. :func:`set_consumer_defaults` - ``setConsumerConfigDefaults`` (max_deliver -1, max_waiting 512 for pull,
   ack_wait 30s, max_ack_pending 1000 or the stream's consumer_limits, pinned TTL 2m ...; pedantic mode turns each
   silent fix-up into a 10157 error);
3. :func:`check_consumer_config` - ``checkConsumerCfg`` (first error wins, exact texts);
4. the server's own checks against existing consumers, for which :func:`check_workqueue_consumer` and
   :func:`check_consumer_update` (``checkNewConsumerConfig``) hold the pure parts;
5. :func:`apply_inactive_threshold_default` - ephemerals get ``inactive_threshold`` 5s written into the config.

Limits that come from the server or account (``JSLimitOpts``, ``JetStreamAccountLimits``) are a
:class:`ConsumerLimits` parameter.
"""
from __future__ import annotations

import re
from typing import Annotated, NamedTuple, Optional

from ..errors import ApiError
from . import _subjects as subj
from .requests import parse_request
from .gojson import DURATION, INT, OMIT, UINT64, Go, GoDecodeError, GoModel, enum_type, go_quote, slice_of
from .stream_config import (
    JS_API_LEVEL, JS_MAX_DESCRIPTION_LEN, JS_MAX_METADATA_LEN, JS_MAX_NAME_LEN, StreamConfig, _exact,
    compared_metadata, dynamic_metadata, static_metadata,
)
from .timefmt import MS, MINUTE, SECOND, GoTime, format_go_duration

__all__ = [
    "ConsumerConfig", "CreateConsumerRequest", "ConsumerLimits", "parse_create_consumer_request",
    "check_consumer_create", "set_consumer_defaults", "check_consumer_config", "check_workqueue_consumer",
    "check_consumer_update", "apply_inactive_threshold_default", "is_durable", "is_pull", "filter_subjects",
    "set_static_consumer_metadata", "with_dynamic_consumer_metadata", "consumer_configs_equal",
    "DEFAULT_ACK_WAIT", "DEFAULT_MAX_ACK_PENDING", "DEFAULT_MAX_WAITING", "DEFAULT_PINNED_TTL",
    "DEFAULT_INACTIVE_THRESHOLD", "SOURCE_HEALTH_HB",
]

DEFAULT_ACK_WAIT = 30 * SECOND  # JsAckWaitDefault
DEFAULT_MAX_ACK_PENDING = 1000  # JsDefaultMaxAckPending
DEFAULT_MAX_WAITING = 512  # JSWaitQueueDefaultMax
DEFAULT_PINNED_TTL = 2 * MINUTE  # JsDefaultPinnedTTL
DEFAULT_INACTIVE_THRESHOLD = 5 * SECOND  # JsDeleteWaitTimeDefault
SOURCE_HEALTH_HB = 1 * SECOND  # sourceHealthHB, the heartbeat ack_policy flow_control requires

_VALID_GROUP = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")


def _deliver(raw: str) -> str:
    m = {'"all"': "all", '"undefined"': "all", '"last"': "last", '"last_per_subject"': "last_per_subject",
         '"new"': "new", '"by_start_sequence"': "by_start_sequence", '"by_start_time"': "by_start_time"}
    v = m.get(raw)
    if v is None:
        raise GoDecodeError(f"can not unmarshal {go_quote(raw)}")
    return v


def _priority(raw: str) -> str:
    m = {'"none"': "none", '"overflow"': "overflow", '"pinned_client"': "pinned_client",
         '"prioritized"': "prioritized"}
    v = m.get(raw)
    if v is None:
        raise GoDecodeError(f"unknown priority policy: {raw}")
    return v


def _action(raw: str) -> str:
    m = {'"create"': "create", '"update"': "update", '""': ""}
    v = m.get(raw)
    if v is None:
        raise GoDecodeError(f"unknown consumer action: {raw}")
    return v


DELIVER_POLICY = enum_type("server.DeliverPolicy", _deliver, "all")
ACK_POLICY = enum_type("server.AckPolicy", _exact(("none", "all", "explicit", "flow_control")), "none")
REPLAY_POLICY = enum_type("server.ReplayPolicy", _exact(("instant", "original")), "instant")
PRIORITY_POLICY = enum_type("server.PriorityPolicy", _priority, "none")
CONSUMER_ACTION = enum_type("server.ConsumerAction", _action, "")


class ConsumerConfig(GoModel):
    durable_name: Annotated[str, OMIT] = ""
    name: Annotated[str, OMIT] = ""
    description: Annotated[str, OMIT] = ""
    deliver_policy: Annotated[str, Go(DELIVER_POLICY)] = "all"
    opt_start_seq: Annotated[int, Go(UINT64, omitempty=True)] = 0
    opt_start_time: Annotated[Optional[GoTime], OMIT] = None
    ack_policy: Annotated[str, Go(ACK_POLICY)] = "none"
    ack_wait: Annotated[int, Go(DURATION, omitempty=True)] = 0
    max_deliver: Annotated[int, Go(INT, omitempty=True)] = 0
    backoff: Annotated[Optional[list[int]], Go(slice_of(DURATION), omitempty=True)] = None
    filter_subject: Annotated[str, OMIT] = ""
    filter_subjects: Annotated[Optional[list[str]], OMIT] = None
    replay_policy: Annotated[str, Go(REPLAY_POLICY)] = "instant"
    rate_limit_bps: Annotated[int, Go(UINT64, omitempty=True)] = 0
    sample_freq: Annotated[str, OMIT] = ""
    max_waiting: Annotated[int, Go(INT, omitempty=True)] = 0
    max_ack_pending: Annotated[int, Go(INT, omitempty=True)] = 0
    flow_control: Annotated[bool, OMIT] = False
    headers_only: Annotated[bool, OMIT] = False
    max_batch: Annotated[int, Go(INT, omitempty=True)] = 0
    max_expires: Annotated[int, Go(DURATION, omitempty=True)] = 0
    max_bytes: Annotated[int, Go(INT, omitempty=True)] = 0
    deliver_subject: Annotated[str, OMIT] = ""
    deliver_group: Annotated[str, OMIT] = ""
    idle_heartbeat: Annotated[int, Go(DURATION, omitempty=True)] = 0
    inactive_threshold: Annotated[int, Go(DURATION, omitempty=True)] = 0
    num_replicas: Annotated[int, Go(INT)] = 0
    mem_storage: Annotated[bool, OMIT] = False
    direct: Annotated[bool, OMIT] = False  # internal (mirror/source consumers)
    sourcing: Annotated[bool, OMIT] = False  # internal, 2.14+
    metadata: Annotated[Optional[dict[str, str]], OMIT] = None
    pause_until: Annotated[Optional[GoTime], OMIT] = None  # 2.11+
    priority_groups: Annotated[Optional[list[str]], OMIT] = None  # 2.11+
    priority_policy: Annotated[str, Go(PRIORITY_POLICY, omitempty=True)] = "none"  # 2.11+
    priority_timeout: Annotated[int, Go(DURATION, omitempty=True)] = 0  # 2.11+


class CreateConsumerRequest(GoModel):
    stream_name: str = ""
    config: ConsumerConfig = ConsumerConfig()
    action: Annotated[str, Go(CONSUMER_ACTION)] = ""
    pedantic: Annotated[bool, OMIT] = False


def parse_create_consumer_request(data: bytes | str, *, strict: bool = True) -> CreateConsumerRequest | ApiError:
    """Decode a CONSUMER.CREATE body; a bad body is 10025 ``invalid JSON: <Go's text>``."""
    return parse_request(CreateConsumerRequest, data, strict=strict)


class ConsumerLimits(NamedTuple):  # not a frozen dataclass: ~0.5 ms less of every start
    """Server (``JSLimitOpts``) and account limits the consumer checks read; 0 = not set."""

    server_max_ack_pending: int = 0
    server_max_request_batch: int = 0
    account_max_ack_pending: int = 0


def is_durable(cfg: ConsumerConfig) -> bool:
    return bool(cfg.durable_name)


def is_pull(cfg: ConsumerConfig) -> bool:
    return not cfg.deliver_subject


def filter_subjects(cfg: ConsumerConfig) -> list[str]:
    """gatherSubjectFilters: filter_subjects plus filter_subject."""
    out = list(cfg.filter_subjects or [])
    if cfg.filter_subject:
        out.append(cfg.filter_subject)
    return out


def check_consumer_create(subject: str, req: CreateConsumerRequest) -> tuple[str, str, str, CreateConsumerRequest] | ApiError:
    """``jsConsumerCreateRequest``'s subject checks.

    Returns ``(stream_name, consumer_name, filtered_subject, request)`` with ``request.config.name`` set as
    nats-server sets it, or the error.  ``consumer_name`` is ``""`` for a legacy ephemeral without ``name``.
    The Replicas > 1 standalone check (10074) is included last, as nats-server does it before looking the stream up.
    """
    tokens = subject.split(".")
    n = len(tokens)
    if n < 5:
        return ApiError.of("JSConsumerDurableNameNotInSubjectErr")  # nats-server just drops these
    cfg = req.config.model_copy()
    filtered = ""
    if n == 5:
        kind = "legacy_ephemeral"
        stream, consumer = tokens[4], cfg.name
    elif tokens[3] == "DURABLE":
        kind = "legacy_durable"
        if n != 7:
            return ApiError.of("JSConsumerDurableNameNotInSubjectErr")
        stream, consumer = tokens[5], tokens[6]
    else:
        kind = "new"
        stream, consumer = tokens[4], tokens[5]
        if n > 6:
            filtered = ".".join(tokens[6:])
    if stream != req.stream_name:
        return ApiError.of("JSStreamMismatchErr")
    if consumer and ("\\" in consumer or "/" in consumer):
        return ApiError.of("JSConsumerNameContainsPathSeparatorsErr")
    if kind == "legacy_durable":
        if not cfg.durable_name:
            return ApiError.of("JSConsumerDurableNameNotSetErr")
        if consumer != cfg.durable_name:
            return ApiError.of("JSConsumerDurableNameNotMatchSubjectErr")
        cfg.name = consumer
    if kind == "new":
        if cfg.durable_name and consumer != cfg.durable_name:
            return ApiError.of("JSConsumerDurableNameNotMatchSubjectErr")
        cfg.name = consumer
    if kind == "legacy_ephemeral" and cfg.durable_name:
        return ApiError.of("JSConsumerEphemeralWithDurableNameErr")
    if filtered and cfg.filter_subjects:
        return ApiError.of("JSConsumerMultipleFiltersNotAllowed")
    if filtered and cfg.filter_subject != filtered:
        return ApiError.of("JSConsumerCreateFilterSubjectMismatchErr")
    if cfg.num_replicas > 1:
        return ApiError.of("JSStreamReplicasNotSupportedErr")
    return stream, consumer, filtered, req.model_copy(update={"config": cfg})


def _ped(text: str) -> ApiError:
    return ApiError.of("JSPedanticErrF", err=text)


def set_consumer_defaults(
    config: ConsumerConfig, stream: StreamConfig, *, pedantic: bool = False, limits: ConsumerLimits | None = None,
) -> ConsumerConfig | ApiError:
    """``setConsumerConfigDefaults``: a copy with defaults filled in, or a pedantic-mode error."""
    lim = limits or ConsumerLimits()
    c = config.model_copy(deep=True)
    if c.max_deliver == 0 or c.max_deliver < -1:
        if pedantic and c.max_deliver < -1:
            return _ped("max_deliver must be set to -1")
        c.max_deliver = -1
    for attr, text in (("max_waiting", "max_waiting must not be negative"),):
        if getattr(c, attr) < 0:
            if pedantic:
                return _ped(text)
            setattr(c, attr, 0)
    if c.max_ack_pending < -1:
        if pedantic:
            return _ped("max_ack_pending must be set to -1")
        c.max_ack_pending = -1
    for attr, name in (("max_batch", "max_batch"), ("max_expires", "max_expires"), ("max_bytes", "max_bytes"),
                       ("idle_heartbeat", "idle_heartbeat"), ("inactive_threshold", "inactive_threshold"),
                       ("priority_timeout", "priority_timeout")):
        if getattr(c, attr) < 0:
            if pedantic:
                return _ped(f"{name} must not be negative")
            setattr(c, attr, 0)
    if not c.deliver_subject and c.max_waiting == 0:
        c.max_waiting = DEFAULT_MAX_WAITING
    if c.ack_wait == 0 and c.ack_policy in ("explicit", "all"):
        c.ack_wait = DEFAULT_ACK_WAIT
    if c.backoff:
        if pedantic and c.ack_wait != c.backoff[0]:
            return _ped("first backoff value has to equal batch AckWait")
        c.ack_wait = c.backoff[0]
    climits = stream.consumer_limits
    if c.max_ack_pending == 0:
        if pedantic and climits.max_ack_pending > 0:
            return _ped("max_ack_pending must be set if it's configured in stream limits")
        c.max_ack_pending = climits.max_ack_pending
    if c.inactive_threshold == 0:
        if pedantic and climits.inactive_threshold > 0:
            return _ped("inactive_threshold must be set if it's configured in stream limits")
        c.inactive_threshold = climits.inactive_threshold
    if c.max_ack_pending == 0 and c.ack_policy != "none":
        pending = DEFAULT_MAX_ACK_PENDING
        if 0 < lim.server_max_ack_pending < pending:
            pending = lim.server_max_ack_pending
        if 0 < lim.account_max_ack_pending < pending:
            pending = lim.account_max_ack_pending
        c.max_ack_pending = pending
    if not c.deliver_subject and c.max_batch == 0 and lim.server_max_request_batch > 0:
        if pedantic:
            return _ped("max_request_batch must be set if it's JetStream limits are set")
        c.max_batch = lim.server_max_request_batch
    if c.priority_policy == "pinned_client" and c.priority_timeout == 0:
        c.priority_timeout = DEFAULT_PINNED_TTL
    if c.ack_policy == "flow_control" and not pedantic:
        c.flow_control = True
        c.idle_heartbeat = SOURCE_HEALTH_HB
    return c


def _invalid(text: str) -> ApiError:
    return ApiError.of("JSStreamInvalidConfigF", err=text)


def check_consumer_config(
    c: ConsumerConfig, stream: StreamConfig, *, limits: ConsumerLimits | None = None, is_recovering: bool = False,
) -> ApiError | None:
    """``checkConsumerCfg`` against the parent stream's config (defaults already applied)."""
    lim = limits or ConsumerLimits()
    if c.name and not subj.is_valid_asset_name(c.name):
        return _invalid("consumer name can not contain '.', '*', '>', '\\', '/'")
    if c.durable_name and not subj.is_valid_asset_name(c.durable_name):
        return _invalid("consumer durable name can not contain '.', '*', '>', '\\', '/'")
    if c.num_replicas > 0 and c.num_replicas > stream.num_replicas:
        return ApiError.of("JSConsumerReplicasExceedsStream")
    if c.num_replicas < 0:
        return ApiError.of("JSReplicasCountCannotBeNegative")
    if stream.retention in ("interest", "workqueue") and not is_recovering:
        if c.num_replicas != 0 and c.num_replicas != stream.num_replicas:
            return ApiError.of("JSConsumerReplicasShouldMatchStream")
    if any(b < 0 for b in c.backoff or []):
        return ApiError.of("JSConsumerBackOffNegativeErr")
    if c.ack_wait < 0:
        return ApiError.of("JSConsumerAckWaitNegativeErr")
    if c.ack_policy == "flow_control":
        if not c.deliver_subject:
            return ApiError.of("JSConsumerAckFCRequiresPushErr")
        if not c.flow_control:
            return ApiError.of("JSConsumerAckFCRequiresFCErr")
        if c.idle_heartbeat != SOURCE_HEALTH_HB:
            return _invalid("flow control ack policy heartbeat needs to be 1s")
        if c.max_ack_pending <= 0:
            return ApiError.of("JSConsumerAckFCRequiresMaxAckPendingErr")
        if c.ack_wait != 0 or c.backoff:
            return ApiError.of("JSConsumerAckFCRequiresNoAckWaitErr")
        if c.max_deliver > 0:
            return ApiError.of("JSConsumerAckFCRequiresNoMaxDeliverErr")
    if c.backoff and c.max_deliver != -1 and len(c.backoff) > c.max_deliver:
        return ApiError.of("JSConsumerMaxDeliverBackoffErr")
    if len(c.description.encode()) > JS_MAX_DESCRIPTION_LEN:
        return ApiError.of("JSConsumerDescriptionTooLongErrF", max=JS_MAX_DESCRIPTION_LEN)
    if c.deliver_subject:
        if not subj.subject_is_literal(c.deliver_subject):
            return ApiError.of("JSConsumerDeliverToWildcardsErr")
        if not subj.is_valid_subject(c.deliver_subject):
            return ApiError.of("JSConsumerInvalidDeliverSubject")
        if any(subj.subject_is_subset_match(c.deliver_subject, s) for s in stream.subjects or []):
            return ApiError.of("JSConsumerDeliverCycleErr")
        if c.max_waiting != 0:
            return ApiError.of("JSConsumerPushMaxWaitingErr")
        if c.max_ack_pending > 0 and c.ack_policy == "none":
            return ApiError.of("JSConsumerMaxPendingAckPolicyRequiredErr")
        if 0 < c.idle_heartbeat < 100 * MS:
            return ApiError.of("JSConsumerSmallHeartbeatErr")
    else:
        if c.ack_policy == "none" and stream.retention == "workqueue":
            return ApiError.of("JSConsumerPullRequiresAckErr")
        if c.rate_limit_bps > 0:
            return ApiError.of("JSConsumerPullWithRateLimitErr")
        if c.max_waiting < 0:
            return ApiError.of("JSConsumerMaxWaitingNegativeErr")
        if c.idle_heartbeat > 0:
            return ApiError.of("JSConsumerHBRequiresPushErr")
        if c.flow_control:
            return ApiError.of("JSConsumerFCRequiresPushErr")
        if c.max_batch < 0:
            return ApiError.of("JSConsumerMaxRequestBatchNegativeErr")
        if c.max_expires != 0 and c.max_expires < MS:
            return ApiError.of("JSConsumerMaxRequestExpiresTooSmall")
        if lim.server_max_request_batch > 0 and c.max_batch > lim.server_max_request_batch:
            return ApiError.of("JSConsumerMaxRequestBatchExceededF", limit=lim.server_max_request_batch)
    if lim.server_max_ack_pending > 0 and c.max_ack_pending > lim.server_max_ack_pending:
        return ApiError.of("JSConsumerMaxPendingAckExcessErrF", limit=lim.server_max_ack_pending)
    if lim.account_max_ack_pending > 0 and c.max_ack_pending > lim.account_max_ack_pending:
        return ApiError.of("JSConsumerMaxPendingAckExcessErrF", limit=lim.account_max_ack_pending)
    cl = stream.consumer_limits
    if cl.max_ack_pending > 0 and c.max_ack_pending > cl.max_ack_pending:
        return ApiError.of("JSConsumerMaxPendingAckExcessErrF", limit=cl.max_ack_pending)
    if cl.inactive_threshold > 0 and c.inactive_threshold > cl.inactive_threshold:
        return ApiError.of("JSConsumerInactiveThresholdExcess", limit=format_go_duration(cl.inactive_threshold))
    if c.direct:
        if not c.deliver_subject:
            return ApiError.of("JSConsumerDirectRequiresPushErr")
        if is_durable(c):
            return ApiError.of("JSConsumerDirectRequiresEphemeralErr")
    if c.filter_subject and c.filter_subjects:
        return ApiError.of("JSConsumerDuplicateFilterSubjects")
    if c.filter_subject and not subj.is_valid_subject(c.filter_subject):
        return _invalid("invalid subject")
    if any(f == "" for f in c.filter_subjects or []):
        return ApiError.of("JSConsumerEmptyFilter")
    filters = filter_subjects(c)
    # Go compares every pair; the first filter held by another is found from an index instead.
    first = subj.first_filter_overlap(filters)
    for i, s in enumerate(filters):
        if not subj.is_valid_subject(s):
            return _invalid("invalid subject")
        if i == first:
            return ApiError.of("JSConsumerOverlappingSubjectFilters")

    def bad_start(dp: str, start: str) -> ApiError:
        return ApiError.of("JSConsumerInvalidPolicyErrF",
                           err=f"consumer delivery policy is deliver {dp}, but optional start {start} is also set")

    def not_set(dp: str, what: str) -> ApiError:
        return ApiError.of("JSConsumerInvalidPolicyErrF",
                           err=f"consumer delivery policy is deliver {dp}, but optional {what} is not set")

    dp = c.deliver_policy
    if dp in ("all", "last", "new", "last_per_subject"):
        label = "last per subject" if dp == "last_per_subject" else dp
        if c.opt_start_seq > 0:
            return bad_start(label, "sequence")
        if c.opt_start_time is not None:
            return bad_start(label, "time")
        if dp == "last_per_subject" and not c.filter_subject and not c.filter_subjects:
            return not_set(label, "filter subject")
    elif dp == "by_start_sequence":
        if c.opt_start_seq == 0:
            return not_set("by start sequence", "start sequence")
        if c.opt_start_time is not None:
            return bad_start("by start sequence", "time")
    elif dp == "by_start_time":
        if c.opt_start_time is None:
            return not_set("by start time", "start time")
        if c.opt_start_seq != 0:
            return bad_start("by start time", "start sequence")
    if c.sample_freq:
        err = _sample_freq_error(c.sample_freq)
        if err is not None:
            return ApiError.of("JSConsumerInvalidSamplingErrF", err=err)
    if c.flow_control and c.idle_heartbeat == 0:
        return ApiError.of("JSConsumerWithFlowControlNeedsHeartbeats")
    if c.durable_name and c.name and c.name != c.durable_name:
        return ApiError.of("JSConsumerCreateDurableAndNameMismatch")
    if sum(len(k.encode()) + len(v.encode()) for k, v in (c.metadata or {}).items()) > JS_MAX_METADATA_LEN:
        return ApiError.of("JSConsumerMetadataLengthErrF", limit=f"{JS_MAX_METADATA_LEN // 1024}KB")
    if c.priority_policy != "none":
        if c.deliver_subject:
            return ApiError.of("JSConsumerPushWithPriorityGroupErr")
        if not c.priority_groups:
            return ApiError.of("JSConsumerPriorityPolicyWithoutGroup")
        for g in c.priority_groups:
            if g == "":
                return ApiError.of("JSConsumerEmptyGroupName")
            if not _VALID_GROUP.fullmatch(g):
                return ApiError.of("JSConsumerInvalidGroupNameErr")
    else:
        if c.priority_groups:
            return ApiError.of("JSConsumerPriorityGroupWithPolicyNone")
        if c.priority_timeout > 0:
            return ApiError.of("JSConsumerPinnedTTLWithoutPriorityPolicyNone")
    if stream.placement is not None and stream.placement.preferred:
        return _invalid("preferred server not permitted in placement")
    return None


def _sample_freq_error(text: str) -> str | None:
    """strconv.Atoi of sample_freq sans '%': Go's error text, '<nil>' for a negative number, None if fine."""
    s = text[:-1] if text.endswith("%") else text
    if re.fullmatch(r"[+-]?\d+", s):
        v = int(s)
        if not -(1 << 63) <= v < (1 << 63):
            return f'strconv.Atoi: parsing {go_quote(s)}: value out of range'
        return "<nil>" if v < 0 else None
    return f'strconv.Atoi: parsing {go_quote(s)}: invalid syntax'


def check_workqueue_consumer(
    c: ConsumerConfig, stream: StreamConfig, others: list[list[str]], *, name: str = "",
) -> ApiError | None:
    """addConsumer's workqueue rules; ``others`` = filter lists of the stream's other (non-direct) consumers."""
    if stream.retention != "workqueue" or c.direct or c.sourcing:
        return None
    if c.ack_policy not in ("explicit", "flow_control"):
        return ApiError.of("JSConsumerWQRequiresExplicitAckErr")
    if c.deliver_policy != "all":
        return ApiError.of("JSConsumerWQConsumerNotDeliverAllErr")
    if others:
        mine = filter_subjects(c)
        if not mine:
            return ApiError.of("JSConsumerWQMultipleUnfilteredErr")
        # Same answer as Go's loop over every pair (one error for any hit), without the pairs.
        if any(not flist for flist in others) or subj.any_collide(mine, [f for fl in others for f in fl]):
            return ApiError.of("JSConsumerWQConsumerNotUniqueErr")
    return None


def check_consumer_update(old: ConsumerConfig, new: ConsumerConfig, *, old_deliver_has_interest: bool = False) -> ApiError | None:
    """``checkNewConsumerConfig``; the text errors come back wrapped as 10012 (JSConsumerCreateErrF)."""
    if old == new:
        return None

    def err(text: str) -> ApiError:
        return ApiError.of("JSConsumerCreateErrF", err=text)

    if old.deliver_policy != new.deliver_policy:
        return err("deliver policy can not be updated")
    if old.mem_storage != new.mem_storage:
        return err("storage type can not be updated")
    if old.direct != new.direct:
        return err("direct can not be updated")
    if old.sourcing != new.sourcing:
        return err("sourcing can not be updated")
    if old.opt_start_seq != new.opt_start_seq:
        return err("start sequence can not be updated")
    if (old.opt_start_time is None) != (new.opt_start_time is None) or (
            old.opt_start_time is not None and old.opt_start_time.unix_ns != new.opt_start_time.unix_ns):
        return err("start time can not be updated")
    if old.ack_policy != new.ack_policy:
        return err("ack policy can not be updated")
    if old.replay_policy != new.replay_policy:
        return err("replay policy can not be updated")
    if old.idle_heartbeat != new.idle_heartbeat:
        return err("heart beats can not be updated")
    if old.flow_control != new.flow_control:
        return err("flow control can not be updated")
    if old.deliver_subject != new.deliver_subject:
        if not old.deliver_subject:
            return err("can not update pull consumer to push based")
        if not new.deliver_subject:
            return err("can not update push consumer to pull based")
        if old_deliver_has_interest:
            return ApiError.of("JSConsumerNameExistErr")
    if old.max_waiting != new.max_waiting:
        return err("max waiting can not be updated")
    if new.backoff and new.max_deliver != -1 and len(new.backoff) > new.max_deliver:
        return ApiError.of("JSConsumerMaxDeliverBackoffErr")
    return None


def apply_inactive_threshold_default(c: ConsumerConfig) -> ConsumerConfig:
    """updateInactiveThreshold: a non-durable with no threshold gets 5s written into its config."""
    if not is_durable(c) and c.inactive_threshold <= 0:
        return c.model_copy(update={"inactive_threshold": DEFAULT_INACTIVE_THRESHOLD})
    return c


def check_consumer_name(c: ConsumerConfig) -> ApiError | None:
    """addConsumer's name checks for a durable (length) and the final name (JSConsumerBadDurableNameErr)."""
    if is_durable(c) and len(c.durable_name.encode()) > JS_MAX_NAME_LEN:
        return ApiError.of("JSConsumerNameTooLongErrF", max=JS_MAX_NAME_LEN)
    name = c.durable_name or c.name
    if name and not subj.is_valid_asset_name(name):
        return ApiError.of("JSConsumerBadDurableNameErr")
    return None


def required_consumer_api_level(c: ConsumerConfig) -> int:
    level = 0
    if c.pause_until is not None and not c.pause_until.is_zero:
        level = 1
    if c.priority_policy != "none" or c.priority_timeout != 0 or c.priority_groups:
        level = max(level, 1)
    if c.ack_policy == "flow_control":
        level = max(level, 4)
    return level


def set_static_consumer_metadata(c: ConsumerConfig) -> ConsumerConfig:
    return c.model_copy(update={"metadata": static_metadata(c.metadata, required_consumer_api_level(c))})


def with_dynamic_consumer_metadata(c: ConsumerConfig, version: str, api_level: int = JS_API_LEVEL) -> ConsumerConfig:
    return c.model_copy(update={"metadata": dynamic_metadata(c.metadata, version, api_level)})


def consumer_configs_equal(new: ConsumerConfig, existing: ConsumerConfig) -> bool:
    """addConsumer's action=create comparison (``copyConsumerMetadata`` then DeepEqual)."""
    md = compared_metadata(new.metadata, existing.metadata)
    return new.model_copy(update={"metadata": md or None}) == existing.model_copy(
        update={"metadata": existing.metadata or None})
