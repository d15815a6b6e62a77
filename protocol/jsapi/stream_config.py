"""StreamConfig: the wire model, nats-server's defaults and validation (checkStreamCfg, configUpdateCheck).

Theory of operation
-------------------
:class:`StreamConfig` mirrors Go's ``server.StreamConfig`` field for field, in Go's order, with Go's ``omitempty``
choices, so ``to_json()`` is byte-for-byte what nats-server 2.15 echoes (``consumer_limits`` is always ``{}`` at
least, ``max_msg_size``/``duplicate_window`` only when non-zero ...).  Fields that exist only in newer servers are
marked in comments with the version that added them.  :class:`StreamConfigRequest` adds the request-only
``pedantic`` flag.  Parsing goes through :mod:`.gojson` so bad requests fail with Go's exact text.

:func:`normalize_stream_config` is ``checkStreamCfg``: it returns a *new* config with defaults applied (limits
``0``/``< -1`` -> ``-1``, ``num_replicas`` 0 -> 1, ``storage`` file, ``duplicate_window`` 2m or ``max_age``,
``subjects`` = ``[name]`` ...) or the first :class:`~protocol.errors.ApiError` in nats-server's check order.
Everything the Go code reads from outside the config is a parameter: other streams (``lookup_stream``, used for
mirror/source size checks, direct-get inheritance and cycle detection) and server/account limits
(:class:`StreamLimits`).  :func:`check_stream_create` holds the checks ``jsStreamCreateRequest`` does before that
(subject/name mismatch, path separators, sealed on create, mirror_direct without mirror), and
:func:`check_stream_update` is ``configUpdateCheck`` (which runs the normalization first).

Metadata versioning (``jetstream_versioning.go``): :func:`set_static_stream_metadata` stores ``_nats.req.level``;
:func:`with_dynamic_metadata` adds ``_nats.ver`` / ``_nats.level`` for replies only; :func:`configs_equal` compares
two configs the way an idempotent re-create does (ignoring the versioning keys).
"""
from __future__ import annotations

from typing import Annotated, Callable, Optional

from ..errors import ApiError
from ..record import NamedTuple  # typing's, without its annotation checks (start-up)
from . import _subjects as subj
from .gojson import (
    BOOL, DURATION, INT, INT32, INT64, OMIT, STRING, UINT64, Go, GoDecodeError, GoModel, enum_type, go_quote,
)
from .requests import parse_request
from .timefmt import MS, SECOND, GoTime, format_go_duration

__all__ = [
    "StreamConfig", "StreamConfigRequest", "StreamSource", "ExternalStream", "Placement", "RePublish",
    "SubjectTransformConfig", "StreamConsumerLimits", "StreamConsumerSource", "StreamLimits",
    "normalize_stream_config", "check_stream_create", "check_stream_update", "set_static_stream_metadata",
    "with_dynamic_metadata", "configs_equal", "required_api_level", "parse_stream_config_request",
    "JS_MAX_NAME_LEN", "JS_MAX_DESCRIPTION_LEN", "JS_MAX_METADATA_LEN", "STREAM_MAX_REPLICAS",
    "DEFAULT_DUPLICATE_WINDOW", "JS_API_LEVEL", "REQUIRED_LEVEL_KEY", "SERVER_VERSION_KEY", "SERVER_LEVEL_KEY",
    "static_metadata", "dynamic_metadata", "compared_metadata",
]

JS_MAX_NAME_LEN = 255
JS_MAX_DESCRIPTION_LEN = 4 * 1024
JS_MAX_METADATA_LEN = 128 * 1024
STREAM_MAX_REPLICAS = 5
DEFAULT_DUPLICATE_WINDOW = 120 * SECOND
#: nats-server 2.15's JSApiLevel (what the oracle reports in ``_nats.level``).
JS_API_LEVEL = 5
REQUIRED_LEVEL_KEY = "_nats.req.level"
SERVER_VERSION_KEY = "_nats.ver"
SERVER_LEVEL_KEY = "_nats.level"


# The transform checks (_transform.py) compile a dozen patterns at import: loaded with the first stream config that
# has a subject transform, a source or mirror transform or a republish (issue #13, start-up).
def validate_mapping(src: str, dest: str) -> str | None:
    from ._transform import validate_mapping as check

    return check(src, dest)


def new_transform_error(src: str, dest: str) -> str | None:
    from ._transform import new_transform_error as check

    return check(src, dest)


# --- enums (Go types with custom UnmarshalJSON; the error texts are theirs) -----------------------------------------

def _exact(values: tuple[str, ...]) -> Callable[[str], str]:
    quoted = {f'"{v}"': v for v in values}

    def parse(raw: str) -> str:
        v = quoted.get(raw)
        if v is None:
            raise GoDecodeError(f"can not unmarshal {go_quote(raw)}")
        return v
    return parse


def _discard(raw: str) -> str:  # DiscardPolicy lower-cases the raw text first
    low = raw.lower()
    if low == '"old"':
        return "old"
    if low == '"new"':
        return "new"
    raise GoDecodeError(f"can not unmarshal {go_quote(raw)}")


def _compression(raw: str) -> str:  # json.Unmarshal into a string, then "s2" / "none"
    if raw == "null":
        raise GoDecodeError("unknown compression algorithm")
    if not raw.startswith('"'):
        kind = {"t": "bool", "f": "bool", "{": "object", "[": "array"}.get(raw[:1], "number")
        raise GoDecodeError(f"json: cannot unmarshal {kind} into Go value of type string")
    if raw == '"s2"':
        return "s2"
    if raw == '"none"':
        return "none"
    raise GoDecodeError("unknown compression algorithm")


def _persist(raw: str) -> str:
    if raw in ('"default"', '""'):
        return "default"
    if raw == '"async"':
        return "async"
    raise GoDecodeError(f"can not unmarshal {go_quote(raw)}")


RETENTION = enum_type("server.RetentionPolicy", _exact(("limits", "interest", "workqueue")), "limits")
DISCARD = enum_type("server.DiscardPolicy", _discard, "old")
STORAGE = enum_type("server.StorageType", _exact(("file", "memory")), "file")
COMPRESSION = enum_type("server.StoreCompression", _compression, "none")
PERSIST_MODE = enum_type("server.PersistModeType", _persist, "default")


# --- the Go structs -------------------------------------------------------------------------------------------------

class Placement(GoModel):
    cluster: Annotated[str, OMIT] = ""
    tags: Annotated[Optional[list[str]], OMIT] = None
    preferred: Annotated[str, OMIT] = ""


class ExternalStream(GoModel):
    api: str = ""
    deliver: str = ""


class SubjectTransformConfig(GoModel):
    src: str = ""
    dest: str = ""


class StreamConsumerSource(GoModel):  # 2.14+ (durable sourcing consumer)
    name: Annotated[str, OMIT] = ""
    deliver_subject: Annotated[str, OMIT] = ""


class StreamSource(GoModel):
    name: str = ""
    opt_start_seq: Annotated[int, Go(UINT64, omitempty=True)] = 0
    opt_start_time: Annotated[Optional[GoTime], OMIT] = None
    filter_subject: Annotated[str, OMIT] = ""
    subject_transforms: Annotated[Optional[list[SubjectTransformConfig]], OMIT] = None
    external: Annotated[Optional[ExternalStream], OMIT] = None
    consumer: Annotated[Optional[StreamConsumerSource], OMIT] = None

    def compose_iname(self) -> str:
        """nats-server's composeIName: what makes two sources duplicates."""
        iname = self.name
        if self.external is not None:
            iname += ":" + self.external.api  # Go hashes the prefix; equality is what matters here
        if self.consumer is not None:
            iname += ":C=" + self.consumer.name
        if not self.subject_transforms:
            source, dest = self.filter_subject or ">", ">"
        else:
            source = "\f".join(t.src or ">" for t in self.subject_transforms)
            dest = "\f".join(t.dest or ">" for t in self.subject_transforms)
        return " ".join((iname, source, dest))

    def compose_cname(self) -> str:
        iname = self.name + (":" + self.external.api if self.external is not None else "")
        return iname + " " + (self.consumer.name if self.consumer is not None else "")


class RePublish(GoModel):
    src: Annotated[str, OMIT] = ""
    dest: str = ""
    headers_only: Annotated[bool, OMIT] = False


class StreamConsumerLimits(GoModel):
    inactive_threshold: Annotated[int, Go(DURATION, omitempty=True)] = 0
    max_ack_pending: Annotated[int, Go(INT, omitempty=True)] = 0


class StreamConfig(GoModel):
    name: str = ""
    description: Annotated[str, OMIT] = ""
    subjects: Annotated[Optional[list[str]], OMIT] = None
    retention: Annotated[str, Go(RETENTION)] = "limits"
    max_consumers: Annotated[int, Go(INT)] = 0
    max_msgs: Annotated[int, Go(INT64)] = 0
    max_bytes: Annotated[int, Go(INT64)] = 0
    max_age: Annotated[int, Go(DURATION)] = 0
    max_msgs_per_subject: Annotated[int, Go(INT64)] = 0
    max_msg_size: Annotated[int, Go(INT32, omitempty=True)] = 0
    discard: Annotated[str, Go(DISCARD)] = "old"
    storage: Annotated[str, Go(STORAGE)] = "file"
    num_replicas: Annotated[int, Go(INT)] = 0
    no_ack: Annotated[bool, OMIT] = False
    duplicate_window: Annotated[int, Go(DURATION, omitempty=True)] = 0
    placement: Annotated[Optional[Placement], OMIT] = None
    mirror: Annotated[Optional[StreamSource], OMIT] = None
    sources: Annotated[Optional[list[StreamSource]], OMIT] = None
    compression: Annotated[str, Go(COMPRESSION)] = "none"
    first_seq: Annotated[int, Go(UINT64, omitempty=True)] = 0
    subject_transform: Annotated[Optional[SubjectTransformConfig], OMIT] = None
    republish: Annotated[Optional[RePublish], OMIT] = None
    allow_direct: bool = False
    mirror_direct: bool = False
    discard_new_per_subject: Annotated[bool, OMIT] = False
    sealed: bool = False
    deny_delete: bool = False
    deny_purge: bool = False
    allow_rollup_hdrs: bool = False
    consumer_limits: StreamConsumerLimits = StreamConsumerLimits()
    allow_msg_ttl: bool = False  # 2.11+
    subject_delete_marker_ttl: Annotated[int, Go(DURATION, omitempty=True)] = 0  # 2.11+
    allow_msg_counter: Annotated[bool, OMIT] = False  # 2.12+
    allow_atomic: Annotated[bool, OMIT] = False  # 2.12+
    allow_msg_schedules: Annotated[bool, OMIT] = False  # 2.12+
    persist_mode: Annotated[str, Go(PERSIST_MODE, omitempty=True)] = "default"  # 2.12+
    allow_batched: Annotated[bool, OMIT] = False  # 2.14+ (fast batch publish)
    metadata: Annotated[Optional[dict[str, str]], OMIT] = None


class StreamConfigRequest(StreamConfig):
    """Body of STREAM.CREATE / STREAM.UPDATE: the config plus the request-scoped ``pedantic`` flag."""

    pedantic: Annotated[bool, OMIT] = False

    def config(self) -> StreamConfig:
        return StreamConfig.model_validate(self.model_dump(exclude={"pedantic"}))


def parse_stream_config_request(data: bytes | str, *, strict: bool = True) -> StreamConfigRequest | ApiError:
    """Decode a STREAM.CREATE/UPDATE body; a bad body is 10025 ``invalid JSON: <Go's text>``."""
    return parse_request(StreamConfigRequest, data, strict=strict)


# --- normalization --------------------------------------------------------------------------------------------------

class StreamLimits(NamedTuple):  # not a frozen dataclass: ~0.5 ms less of every start
    """Server and account limits checkStreamCfg consults (all 0 = not set, nats-server's defaults)."""

    duplicates: int = 0  # server jetstream limits: max duplicate window (ns)
    max_bytes_required: bool = False  # account: streams must set max_bytes
    max_stream_bytes: int = 0  # account: memory_max_stream_bytes / storage_max_stream_bytes for this storage


def _invalid(text: str) -> ApiError:
    return ApiError.of("JSStreamInvalidConfigF", err=text)


def _pedantic(text: str) -> ApiError:
    return ApiError.of("JSPedanticErrF", err=text)


def normalize_stream_config(
    config: StreamConfig,
    *,
    pedantic: bool = False,
    limits: StreamLimits | None = None,
    lookup_stream: Callable[[str], StreamConfig | None] | None = None,
) -> StreamConfig | ApiError:
    """nats-server's ``checkStreamCfg``: the config with defaults, or the first error in Go's order."""
    lim = limits or StreamLimits()
    lookup = lookup_stream or (lambda _name: None)

    if not subj.is_valid_asset_name(config.name):
        return _invalid("stream name is required and can not contain '.', '*', '>', '\\', '/'")
    if len(config.name.encode()) > JS_MAX_NAME_LEN:
        return _invalid(f"stream name is too long, maximum allowed is {JS_MAX_NAME_LEN}")
    if len(config.description.encode()) > JS_MAX_DESCRIPTION_LEN:
        return _invalid(f"stream description is too long, maximum allowed is {JS_MAX_DESCRIPTION_LEN}")
    if _metadata_len(config.metadata) > JS_MAX_METADATA_LEN:
        return _invalid(f"stream metadata exceeds maximum size of {JS_MAX_METADATA_LEN} bytes")

    cfg = config.model_copy(deep=True)
    if cfg.num_replicas == 0:
        cfg.num_replicas = 1
    if cfg.num_replicas > STREAM_MAX_REPLICAS:
        return _invalid(f"maximum replicas is {STREAM_MAX_REPLICAS}")
    if cfg.num_replicas < 0:
        return ApiError.of("JSReplicasCountCannotBeNegative")
    for attr in ("max_msgs", "max_msgs_per_subject", "max_bytes", "max_msg_size", "max_consumers"):
        v = getattr(cfg, attr)
        if v == 0 or v < -1:
            if pedantic and v < -1:
                return _pedantic(f"{attr} must be set to -1")
            setattr(cfg, attr, -1)
    if cfg.max_age < 0:
        return _invalid("max age can not be negative")
    if cfg.max_age != 0 and cfg.max_age < 100 * MS:
        return _invalid("max age needs to be >= 100ms")

    if cfg.duplicate_window == 0 and cfg.mirror is None and not cfg.sources:
        max_window = DEFAULT_DUPLICATE_WINDOW
        if lim.duplicates > 0 and max_window > lim.duplicates:
            if pedantic:
                return _pedantic("duplicate window limits are higher than current limits")
            max_window = lim.duplicates
        if cfg.max_age != 0 and cfg.max_age < max_window:
            if pedantic:
                return _pedantic("duplicate window cannot be bigger than max age")
            cfg.duplicate_window = cfg.max_age
        else:
            cfg.duplicate_window = max_window
    if cfg.duplicate_window < 0:
        return _invalid("duplicates window can not be negative")
    if cfg.max_age != 0 and cfg.duplicate_window > cfg.max_age:
        return _invalid("duplicates window can not be larger then max age")
    if lim.duplicates > 0 and cfg.duplicate_window > lim.duplicates:
        return _invalid(f"duplicates window can not be larger then server limit of {format_go_duration(lim.duplicates)}")
    if 0 < cfg.duplicate_window < 100 * MS:
        return _invalid("duplicates window needs to be >= 100ms")

    if cfg.deny_purge and cfg.allow_rollup_hdrs:
        return _invalid("roll-ups require the purge permission")

    if cfg.allow_msg_counter:
        if cfg.discard == "new":
            return _invalid("counter stream cannot use discard new")
        if cfg.allow_msg_ttl:
            return _invalid("counter stream cannot use message TTLs")
        if cfg.allow_msg_schedules:
            return _invalid("counter stream cannot use message schedules")
        if cfg.retention != "limits":
            return _invalid("counter stream can only use limits retention")

    if cfg.discard_new_per_subject:
        if cfg.discard != "new":
            return _invalid("discard new per subject requires discard new policy to be set")
        if cfg.max_msgs_per_subject <= 0:
            return _invalid("discard new per subject requires max msgs per subject > 0")

    if cfg.subject_delete_marker_ttl > 0:
        if cfg.subject_delete_marker_ttl < SECOND:
            return _invalid("subject delete marker TTL must be at least 1 second")
        if not cfg.allow_msg_ttl:
            if pedantic:
                return _invalid("subject delete marker cannot be set if message TTLs are disabled")
            cfg.allow_msg_ttl = True
        if not cfg.allow_rollup_hdrs:
            if pedantic:
                return _invalid("subject delete marker cannot be set if roll-ups are disabled")
            cfg.allow_rollup_hdrs, cfg.deny_purge = True, False
    elif cfg.subject_delete_marker_ttl < 0:
        return _invalid("subject delete marker TTL must not be negative")

    if cfg.allow_msg_schedules:
        if cfg.discard == "new":
            return _invalid("message scheduling cannot use discard new")
        if not cfg.allow_rollup_hdrs:
            if pedantic:
                return _invalid("message scheduling cannot be set if roll-ups are disabled")
            cfg.allow_rollup_hdrs, cfg.deny_purge = True, False

    if cfg.persist_mode == "async":
        if cfg.storage != "file":
            return _invalid("async persist mode is only supported on file storage")
        if cfg.num_replicas > 1:
            return _invalid("async persist mode is not supported on replicated streams")
        if cfg.allow_atomic:
            return _invalid("async persist mode is not supported with atomic batch publish")

    stream_subs: list[str] = []
    delivery_prefixes: list[str] = []
    api_prefixes: list[str] = []

    if cfg.mirror is not None:
        m = cfg.mirror
        if cfg.first_seq > 0:
            return ApiError.of("JSMirrorWithFirstSeqErr")
        if cfg.subjects:
            return ApiError.of("JSMirrorWithSubjectsErr")
        if cfg.sources:
            return ApiError.of("JSMirrorWithSourcesErr")
        if cfg.allow_msg_counter:
            return ApiError.of("JSMirrorWithCountersErr")
        if cfg.allow_atomic:
            return ApiError.of("JSMirrorWithAtomicPublishErr")
        if cfg.allow_batched:
            return ApiError.of("JSMirrorWithBatchPublishErr")
        if cfg.allow_msg_schedules:
            return ApiError.of("JSMirrorWithMsgSchedulesErr")
        if m.consumer is not None:
            c = m.consumer
            if (not subj.is_valid_asset_name(c.name) or not subj.subject_is_literal(c.deliver_subject)
                    or not subj.is_valid_subject(c.deliver_subject) or m.opt_start_seq != 0
                    or m.opt_start_time is not None or m.filter_subject):
                return ApiError.of("JSMirrorDurableConsumerCfgInvalid")
        if m.filter_subject and m.subject_transforms:
            return ApiError.of("JSMirrorMultipleFiltersNotAllowed")
        if cfg.subject_delete_marker_ttl > 0:
            return _invalid("subject delete markers forbidden on mirrors")
        transforms = m.subject_transforms or []
        for outer, tr in enumerate(transforms):
            if tr.src and not subj.is_valid_subject(tr.src):
                return ApiError.of("JSMirrorInvalidSubjectFilter", err=f"invalid subject {tr.src}")
            err = validate_mapping(tr.src, tr.dest)
            if err:
                return ApiError.of("JSMirrorInvalidTransformDestination", err=err)
            for inner, itr in enumerate(transforms):
                if inner != outer and subj.subjects_collide(tr.src, itr.src):
                    return ApiError.of("JSMirrorOverlappingSubjectFilters")
        if m.external is None:
            if not subj.is_valid_asset_name(m.name):
                return ApiError.of("JSMirrorInvalidStreamName")
            origin = lookup(m.name)
            if origin is not None:
                stream_subs.extend(origin.subjects or [])
                if cfg.max_msg_size > 0 and origin.max_msg_size > 0 and cfg.max_msg_size < origin.max_msg_size:
                    return ApiError.of("JSMirrorMaxMessageSizeTooBigErr")
                if pedantic and cfg.mirror_direct != origin.allow_direct:
                    return _pedantic("origin stream has direct get set, mirror has it disabled")
                cfg.mirror_direct = origin.allow_direct
        else:
            if m.external.deliver:
                delivery_prefixes.append(m.external.deliver)
            if m.external.api:
                api_prefixes.append(m.external.api)

    if cfg.sources and cfg.allow_msg_schedules:
        return ApiError.of("JSSourceWithMsgSchedulesErr")

    inames: set[str] = set()
    cnames: set[str] = set()
    for src in cfg.sources or []:
        if src is None or not subj.is_valid_asset_name(src.name):
            return ApiError.of("JSSourceInvalidStreamName")
        iname = src.compose_iname()
        if iname in inames:
            return ApiError.of("JSSourceDuplicateDetected")
        inames.add(iname)
        if src.filter_subject and src.subject_transforms:
            return ApiError.of("JSSourceMultipleFiltersNotAllowed")
        transforms = src.subject_transforms or []
        for tr in transforms:
            if tr.src and not subj.is_valid_subject(tr.src):
                return ApiError.of("JSSourceInvalidSubjectFilter", err=f"invalid subject {tr.src}")
            err = validate_mapping(tr.src, tr.dest)
            if err:
                return ApiError.of("JSSourceInvalidTransformDestination", err=err)
        for outer, tr in enumerate(transforms):
            for inner, itr in enumerate(transforms):
                if inner != outer and subj.subject_is_subset_match(tr.src, itr.src):
                    return ApiError.of("JSSourceOverlappingSubjectFilters")
        if src.consumer is not None:
            c = src.consumer
            if (not subj.is_valid_asset_name(c.name) or not subj.subject_is_literal(c.deliver_subject)
                    or not subj.is_valid_subject(c.deliver_subject) or src.opt_start_seq != 0
                    or src.opt_start_time is not None or src.filter_subject):
                return ApiError.of("JSSourceDurableConsumerCfgInvalid")
            cname = src.compose_cname()
            if cname in cnames:
                return ApiError.of("JSSourceDurableConsumerDuplicateDetected")
            cnames.add(cname)
        if src.external is None:
            origin = lookup(src.name)
            if origin is not None:
                stream_subs.extend(origin.subjects or [])
                if cfg.max_msg_size > 0 and origin.max_msg_size > 0 and cfg.max_msg_size < origin.max_msg_size:
                    return ApiError.of("JSSourceMaxMessageSizeTooBigErr")
        else:
            if src.external.deliver:
                delivery_prefixes.append(src.external.deliver)
            if src.external.api:
                api_prefixes.append(src.external.api)

    for pfx in delivery_prefixes:
        if not subj.is_valid_publish_subject(pfx):
            return ApiError.of("JSStreamInvalidExternalDeliverySubjErrF", prefix=pfx)
        for s in stream_subs:
            if subj.subjects_collide(s, f"{pfx}.{s}"):
                return ApiError.of("JSStreamExternalDelPrefixOverlapsErrF", prefix=pfx, subject=s)
    for apfx in api_prefixes:
        if not subj.is_valid_publish_subject(apfx):
            return _invalid(f"stream external api prefix {go_quote(apfx)} must be a valid subject without wildcards")
        if subj.subjects_collide(apfx, "$JS.API"):
            return ApiError.of("JSStreamExternalApiOverlapErrF", prefix=apfx, subject="$JS.API")

    cycle = _detect_cycle(cfg, lookup)
    if cycle:
        return _invalid("detected cycle")

    if not cfg.subjects:
        if cfg.mirror is None and not cfg.sources:
            cfg.subjects = [cfg.name]
    else:
        if cfg.mirror is not None:
            return ApiError.of("JSMirrorWithSubjectsErr")
        seen: set[str] = set()
        # The first colliding pair in the order of the all-pairs loop, found without comparing all pairs.
        overlap = subj.first_overlap(cfg.subjects) if len(cfg.subjects) > 1 else None
        for i, s in enumerate(cfg.subjects):
            if not subj.is_valid_subject(s):
                return _invalid("invalid subject")
            if s in seen:
                return _invalid("duplicate subjects detected")
            if s == ">":
                if not cfg.no_ack:
                    return _invalid("capturing all subjects requires no-ack to be true")
                if cfg.num_replicas != 1:
                    return _invalid("capturing all subjects requires replicas of 1")
            # Only a subject starting with '$', '*' or '>' can collide with these namespaces (skip 4 calls each).
            if not cfg.no_ack and s[0] in "$*>":
                for ns in ("$JS.>", "$JSC.>", "$NRG.>"):
                    if subj.subjects_collide(s, ns) and not subj.subject_is_subset_match(s, "$JS.EVENT.>"):
                        return _invalid("subjects that overlap with jetstream api require no-ack to be true")
                if subj.subjects_collide(s, "$SYS.>") and not subj.subject_is_subset_match(s, "$SYS.ACCOUNT.>"):
                    return _invalid("subjects that overlap with system api require no-ack to be true")
            if overlap is not None and overlap[0] == i:
                t = cfg.subjects[overlap[1]]
                return _invalid(f"subject {go_quote(s)} overlaps with {go_quote(t)}")
            seen.add(s)

    if not cfg.subjects and not cfg.sources and cfg.mirror is None:
        return _invalid("stream needs at least one configured subject or be a source/mirror")

    if lim.max_bytes_required and cfg.max_bytes <= 0:
        return ApiError.of("JSStreamMaxBytesRequired")
    if lim.max_stream_bytes > 0 and cfg.max_bytes > lim.max_stream_bytes:
        return ApiError.of("JSStreamMaxStreamBytesExceeded")

    if cfg.subject_transform is not None:
        st = cfg.subject_transform
        if st.src and not subj.is_valid_subject(st.src):
            return ApiError.of("JSStreamTransformInvalidSource", err=f"invalid subject {st.src}")
        err = validate_mapping(st.src, st.dest)
        if err:
            return ApiError.of("JSStreamTransformInvalidDestination", err=err)

    if cfg.republish is not None:
        rp = cfg.republish
        if not rp.src:
            if pedantic:
                return _pedantic("republish source can not be empty")
            rp.src = ">"
        if (rp.dest == ">" and rp.src == ">" and cfg.subject_transform is not None and len(cfg.subjects or []) == 1
                and cfg.subject_transform.src == cfg.subjects[0]):
            if pedantic:
                return _pedantic("implicit republish based on subject transform")
            rp.src = rp.dest = cfg.subject_transform.dest
        if any(subj.subjects_collide(rp.dest, s) for s in cfg.subjects or []):
            return _invalid("stream configuration for republish destination forms a cycle")
        if new_transform_error(rp.src, rp.dest):
            return _invalid(f"stream configuration for republish with transform from '{rp.src}' to '{rp.dest}' not valid")

    if cfg.placement is not None and cfg.placement == Placement():
        cfg.placement = None
    if cfg.placement is not None and cfg.placement.preferred:
        return _invalid("preferred server not permitted in placement")
    return cfg


def _metadata_len(md: dict[str, str] | None) -> int:
    return sum(len(k.encode()) + len(v.encode()) for k, v in (md or {}).items())


def _detect_cycle(cfg: StreamConfig, lookup: Callable[[str], StreamConfig | None]) -> bool:
    to_visit = [cfg]
    visited: set[str] = set()

    def overlaps(subjects: list[str] | None, flt: str) -> bool:
        if not flt:
            return True
        return any(subj.subjects_collide(s, flt) for s in subjects or [])

    while to_visit:
        c = to_visit.pop(0)
        visited.add(c.name)
        for src in c.sources or []:
            if src.external is not None:
                continue
            if src.name in visited:
                if overlaps(c.subjects, src.filter_subject):
                    return True
            else:
                other = lookup(src.name)
                if other is not None:
                    to_visit.append(other)
        m = c.mirror
        if m is not None and m.external is None:
            if m.name in visited:
                return True
            other = lookup(m.name)
            if other is not None:
                to_visit.append(other)
    return False


def check_stream_create(subject_stream: str, cfg: StreamConfig) -> ApiError | None:
    """The checks ``jsStreamCreateRequest`` makes before ``checkStreamCfg`` (after the body parsed)."""
    if subject_stream != cfg.name:
        return ApiError.of("JSStreamMismatchErr")
    if "\\" in subject_stream or "/" in subject_stream:
        return ApiError.of("JSStreamNameContainsPathSeparatorsErr")
    if cfg.sealed:
        return _invalid("stream configuration for create can not be sealed")
    if cfg.mirror_direct and cfg.mirror is None:
        return _invalid("stream has no mirror but does have mirror direct")
    return None


def check_stream_update(
    old: StreamConfig,
    new: StreamConfig,
    *,
    pedantic: bool = False,
    limits: StreamLimits | None = None,
    lookup_stream: Callable[[str], StreamConfig | None] | None = None,
    standalone: bool = True,
) -> StreamConfig | ApiError:
    """nats-server's ``configUpdateCheck``: normalize ``new`` and check what may not change from ``old``.

    Returns the config to store (sealing forces its settings) or the error.  Account reservation limits are the
    caller's (they need the other streams' usage).
    """
    cfg = normalize_stream_config(new, pedantic=pedantic, limits=limits, lookup_stream=lookup_stream)
    if isinstance(cfg, ApiError):
        return cfg
    if cfg.name != old.name:
        return _invalid("stream configuration name must match original")
    if standalone and cfg.num_replicas > 1:
        return ApiError.of("JSStreamReplicasNotSupportedErr")
    if cfg.storage != old.storage:
        return _invalid("stream configuration update can not change storage type")
    if cfg.retention != old.retention and "workqueue" in (old.retention, cfg.retention):
        return _invalid("stream configuration update can not change retention policy to/from workqueue")
    if not cfg.sealed and old.sealed:
        return _invalid("stream configuration update can not unseal a sealed stream")
    if not cfg.deny_delete and old.deny_delete:
        return _invalid("stream configuration update can not cancel deny message deletes")
    if not cfg.deny_purge and old.deny_purge:
        return _invalid("stream configuration update can not cancel deny purge")
    if cfg.mirror is not None and cfg.mirror != old.mirror:
        return ApiError.of("JSStreamMirrorNotUpdatableErr")
    if cfg.discard_new_per_subject:
        if cfg.discard != "new":
            return _invalid("discard new per subject requires discard new policy to be set")
        if cfg.max_msgs_per_subject <= 0:
            return _invalid("discard new per subject requires max msgs per subject > 0")
    if old.allow_msg_ttl and not cfg.allow_msg_ttl:
        return _invalid("message TTL status can not be disabled")
    if cfg.allow_msg_counter != old.allow_msg_counter:
        return _invalid("stream configuration update can not change message counter setting")
    if old.allow_msg_schedules and not cfg.allow_msg_schedules:
        return _invalid("message schedules can not be disabled")
    if old.persist_mode != cfg.persist_mode:
        return _invalid("stream configuration update can not change persist mode")
    if cfg.sealed:
        cfg.max_age = 0
        cfg.discard = "new"
        cfg.deny_delete = cfg.deny_purge = True
        cfg.allow_rollup_hdrs = False
    return cfg


# --- metadata versioning ----------------------------------------------------------------------------------------
# jetstream_versioning.go, shared by streams and consumers: the stored config keeps ``_nats.req.level``; a reply
# adds ``_nats.ver`` and ``_nats.level``; a create compares configs with the existing one's required level.

def static_metadata(md: dict | None, level: int) -> dict:
    """setStatic*Metadata: the dynamic keys dropped, the required level stored."""
    out = dict(md or {})
    out.pop(SERVER_VERSION_KEY, None)
    out.pop(SERVER_LEVEL_KEY, None)
    out[REQUIRED_LEVEL_KEY] = str(level)
    return out


def dynamic_metadata(md: dict | None, version: str, api_level: int) -> dict:
    """setDynamic*Metadata: the server's version and API level added (for a reply)."""
    out = dict(md or {})
    out[SERVER_VERSION_KEY] = version
    out[SERVER_LEVEL_KEY] = str(api_level)
    return out


def compared_metadata(md: dict | None, existing: dict | None) -> dict:
    """copy*Metadata: ``md`` without the dynamic keys and with ``existing``'s required level (or none)."""
    out = dict(md or {})
    out.pop(SERVER_VERSION_KEY, None)
    out.pop(SERVER_LEVEL_KEY, None)
    prev = existing or {}
    if REQUIRED_LEVEL_KEY in prev:
        out[REQUIRED_LEVEL_KEY] = prev[REQUIRED_LEVEL_KEY]
    else:
        out.pop(REQUIRED_LEVEL_KEY, None)
    return out


def required_api_level(cfg: StreamConfig) -> int:
    level = 0
    if cfg.allow_msg_ttl or cfg.subject_delete_marker_ttl > 0:
        level = max(level, 1)
    if cfg.allow_msg_counter or cfg.allow_atomic or cfg.allow_msg_schedules or cfg.persist_mode == "async":
        level = max(level, 2)
    if cfg.allow_batched:
        level = max(level, 4)
    return level


def set_static_stream_metadata(cfg: StreamConfig) -> StreamConfig:
    """``setStaticStreamMetadata``: drop dynamic keys, store ``_nats.req.level`` (in place; returns cfg)."""
    cfg.metadata = static_metadata(cfg.metadata, required_api_level(cfg))
    return cfg


def with_dynamic_metadata(cfg: StreamConfig, version: str, api_level: int = JS_API_LEVEL) -> StreamConfig:
    """``setDynamicStreamMetadata``: a copy with ``_nats.ver`` and ``_nats.level`` for a reply."""
    return cfg.model_copy(update={"metadata": dynamic_metadata(cfg.metadata, version, api_level)})


def configs_equal(new: StreamConfig, existing: StreamConfig) -> bool:
    """Is ``new`` (normalized) the same config as ``existing``, versioning metadata aside (``copyStreamMetadata``)?"""
    a = new.model_copy(deep=True)
    a.metadata = compared_metadata(a.metadata, existing.metadata) or None
    b = existing.model_copy(update={"metadata": existing.metadata or None})
    return a == b


# STRING / BOOL are re-exported for callers building their own Go structs next to these.
_ = (STRING, BOOL)
