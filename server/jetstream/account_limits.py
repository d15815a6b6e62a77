"""The JetStream limits of the account JetStream runs in, and its usage against them (jetstream.go jsAccount).

The limits come from the configuration (``accounts { A { jetstream { max_mem ... } } }``) or the account JWT
(core/operator.py, again on every JWT update); absent keys are unlimited.  A JWT's ``tiered_limits`` make them the
limits of tier ``R1``: they are reported under ``tiers`` and every stream keeps the tier it was made in.  The engine
(engine.py) owns the streams; this module holds what is checked against them: a stream's bytes at create/update
(checkBytesLimits), the account's and the server's store use at every publish (limitsExceeded/wouldExceedLimits),
and the limits and tiers of ``$JS.API.INFO`` (JetStreamUsage).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.stream_config import StreamConfig, StreamLimits

from ..clock import LoopClock

if TYPE_CHECKING:  # pragma: no cover
    from .engine import JetStream
    from .stream import Stream

#: JetStreamAccountLimits' numbers, in its JSON order (jetstream.go).
REPORTED_LIMITS = ("max_memory", "max_storage", "max_streams", "max_consumers", "max_ack_pending",
                   "memory_max_stream_bytes", "storage_max_stream_bytes")
_STORED_OVERHEAD = (16, 30)  # bytes a stored message takes beyond subject, header and payload: memory, file


class AccountLimits:
    def __init__(self, js: "JetStream", limits: dict, tier: str) -> None:
        self.js = js
        self.limits: dict = {}
        self.max_streams = 0
        self.tier = ""
        # Streams made under the account's other kind of limits (plain "" or tiered "R1") before a JWT update
        # switched it: nats-server's mset.tier, chosen when a stream is made (set).
        self._stale_tiers: dict[str, str] = {}
        # check_resources, per storage kind (Stream.storage_kind: 0 memory, 1 file): the bytes in use, the server's
        # store limit and the account's (-1 none).  The account's follow its JWT (set).
        self._usage = [0, 0]
        self._usage_seen = False  # check_resources: whether nats-server would have the account's usage entry
        self._usage_at = -1e9
        # LoopClock.monotonic is time.monotonic behind a method: read here without the method's frame (as
        # Stream._time_ns reads time.time_ns); any other clock (ManualClock in tests) through itself.
        clock = js.server.clock
        self._monotonic = time.monotonic if type(clock) is LoopClock else clock.monotonic
        self._server_max = (js.max_memory, js.max_storage)
        self.set(limits, tier)

    def set(self, limits: dict, tier: str = "") -> None:
        """The account's JetStream limits (accounts { A { jetstream { max_mem ... } } } or the account JWT's, as
        nats-server keeps them: core/operator.py), absent keys unlimited; ``tier`` "R1" when they came from the
        JWT's tiered_limits (reported under ``tiers``).  A JWT update sets them again on the running engine."""
        self.limits = dict(limits)
        if tier != self.tier:
            # Every stream keeps the tier it was made in (nats-server 2.15.1: a publish to a stream made under
            # plain limits, after a JWT update to tiered ones, gets 10120 until a stream update moves it to R1).
            # The new tier starts with no usage entry (check_resources).
            for name in self.js.streams:
                self._stale_tiers.setdefault(name, self.tier)
            self._stale_tiers = {n: t for n, t in self._stale_tiers.items() if t != tier}
            self._usage_seen = False
            self._usage_at = -1e9
        self.tier = tier
        self.max_streams = self.limits.get("max_streams", 0)  # 0 or below: unlimited (jsNonClusteredStreamLimitsCheck)
        self._account_max = (self.account_limit("max_memory"), self.account_limit("max_storage"))

    def stream_updated(self, name: str) -> None:
        """stream.go updateWithAdvisory: a stream whose tier has no limits moves to its replicas' tier (R1) when the
        account has limits for that; with plain limits there is no R1 tier to move to."""
        if self.tier and self._stale_tiers.pop(name, None) is not None:
            self._usage_seen = False  # only its bytes are in the tier now

    def stream_deleted(self, name: str) -> None:
        self._stale_tiers.pop(name, None)

    def account_limit(self, key: str) -> int:
        """An account limit as nats-server reports it: -1 when not configured."""
        v = self.limits.get(key)
        return -1 if v is None else (int(v) if not isinstance(v, bool) else v)

    def stream_limits(self, cfg: StreamConfig) -> StreamLimits:
        """The account limits checkStreamCfg applies: max_bytes_required (10113) and the per-storage max stream
        bytes (10122)."""
        per_stream = self.limits.get("memory_max_stream_bytes" if cfg.storage == "memory" else
                                     "storage_max_stream_bytes", 0)
        return StreamLimits(max_bytes_required=bool(self.limits.get("max_bytes_required")),
                            max_stream_bytes=per_stream if per_stream and per_stream > 0 else 0)

    def reserved(self, storage: str, exclude: Stream | None = None) -> int:
        """The bytes the account's streams of one storage kind reserve (their max_bytes)."""
        return sum(s.config.max_bytes for s in self.js.streams.values()
                   if s is not exclude and s.config.storage == storage and s.config.max_bytes > 0)

    def check_stream_limits(self, cfg: StreamConfig, exclude: Stream | None = None) -> ApiError | None:
        """checkBytesLimits against the account's max_mem / max_file (when set) and the server's max_memory_store /
        max_file_store reservations."""
        add = cfg.max_bytes if cfg.max_bytes > 0 else 1
        if cfg.storage == "memory":
            acc = self.account_limit("max_memory")
            reserved = self.reserved("memory", exclude)
            if (acc >= 0 and reserved + add > acc) or add > self.js.max_memory - reserved:
                return ApiError.of("JSMemoryResourcesExceededErr")
        else:
            acc = self.account_limit("max_storage")
            reserved = self.reserved("file", exclude)
            if (acc >= 0 and reserved + add > acc) or add > self.js.max_storage - reserved:
                return ApiError.of("JSStorageResourcesExceededErr")
        return None

    def check_resources(self, stream: Stream, size: int, hdr: int = 0) -> ApiError | None:
        """jetStream.limitsExceeded for a publish: the server-wide store limit is already used up (10023)."""
        # Summing every stream on every publish would cost O(streams); the usage is refreshed at most every 50 ms
        # (nats-server's own usage accounting is also updated asynchronously).
        now = self._monotonic()
        if self._stale_tiers and stream.name in self._stale_tiers:
            return ApiError.of("JSNoLimitsErr")  # wouldExceedLimits: no limits for the stream's tier
        if now - self._usage_at > 0.05 or now < self._usage_at:
            t = self.js.totals(self._stale_tiers)
            self._usage = [t["memory"], t["storage"]]
            self._usage_at = now
        kind = stream.storage_kind
        used = self._usage[kind]
        if used >= self._server_max[kind]:
            return ApiError.of("JSInsufficientResourcesErr")
        # jsAccount.wouldExceedLimits counts the message as stored: memStoreMsgSize (subject + header + payload +
        # 16) or fileStoreMsgSize (22 + subject + payload + 8 hash, and 4 more for the header length word when
        # there is a header).  ``size`` includes the header's ``hdr`` bytes.
        size += _STORED_OVERHEAD[kind] + (4 if hdr and kind else 0)
        acc = self._account_max[kind]
        if not self._usage_seen:
            # wouldExceedLimits passes while the account has no usage entry, made by the first change of a stream's
            # stored bytes (jetstream.go updateUsage): the account's first message is stored whatever its size
            # (checked with nats-server 2.15.1: mem_storage 5 takes one 25-byte message, then refuses).
            self._usage_seen = True
            if not (self._usage[0] or self._usage[1]):
                acc = -1
        if acc >= 0 and used + size > acc:  # jsAccount.wouldExceedLimits
            return ApiError.of("JSAccountResourcesExceededErr")
        # What this publish adds counts at once, until the next refresh (nats-server accounts each stored message
        # as it is stored): a burst faster than the refresh cannot run past the limit.
        self._usage[kind] = used + size
        return None

    def info(self, out: dict) -> dict | None:
        """JetStreamUsage's ``limits`` into ``out``, which holds the usage, and its ``tiers`` (returned: nats-server
        writes them last, after ``api``).  The limits as the account has them (-1 where none is set); with tiered
        limits the top-level ``limits`` are Go's zero value and the tier's usage and limits are under ``tiers``
        (jetstream.go JetStreamUsage, non-clustered branch); None without."""
        limits = {k: self.account_limit(k) for k in REPORTED_LIMITS}
        limits["max_bytes_required"] = bool(self.limits.get("max_bytes_required"))
        if not self.tier:
            out["limits"] = limits
            return None
        zero = {**dict.fromkeys(REPORTED_LIMITS, 0), "max_bytes_required": False}
        out["limits"] = zero
        return self._tiers_info(out, limits, zero)

    def _tiers_info(self, out: dict, limits: dict, zero: dict) -> dict:
        """JetStreamUsage's ``tiers`` (non-clustered), step by step as jetstream.go builds them from the account's
        usage entries: one per tier whose streams stored something (R1; "" for streams made before the limits
        became tiered, which keep that tier: set_account_limits).  An entry with no usage and no limits is left
        out; the R1 limits are added when the counts differ (a Go quirk kept: with only a "" entry in use they are
        not, checked with nats-server 2.15.1); streams and consumers are counted in their stream's tier, making an
        empty entry for a tier not listed yet.  Every listed entry reserves what all streams reserve (every stream
        is R1: reservedStorage goes by replicas)."""
        cur = self.js.totals(self._stale_tiers)
        usage: dict[str, tuple[int, int]] = {}
        if self._stale_tiers:
            st = self.js.totals(set(self.js.streams) - set(self._stale_tiers))
            usage[""] = (st["memory"], st["storage"])
        if self._usage_seen or cur["memory"] or cur["storage"]:
            usage[self.tier] = (cur["memory"], cur["storage"])
        reserved = {"reserved_memory": out["reserved_memory"], "reserved_storage": out["reserved_storage"]}
        tiers: dict[str, dict] = {}
        skipped = 0
        for name, (mem, sto) in usage.items():
            if name != self.tier and not (mem or sto):
                skipped += 1
                continue
            tiers[name] = {"memory": mem, "storage": sto, **reserved, "streams": 0, "consumers": 0,
                           "limits": limits if name == self.tier else zero}
        if len(usage) - skipped != 1 and self.tier not in tiers:
            tiers[self.tier] = {"memory": 0, "storage": 0, **reserved, "streams": 0, "consumers": 0,
                                "limits": limits}
        for s in self.js.streams.values():
            name = self._stale_tiers.get(s.name, self.tier)
            u = tiers.get(name)
            if u is None:
                u = tiers[name] = {"memory": 0, "storage": 0, "reserved_memory": 0, "reserved_storage": 0,
                                   "streams": 0, "consumers": 0, "limits": zero}
            u["streams"] += 1
            u["consumers"] += len(s.consumers)
        return dict(sorted(tiers.items()))  # encoding/json writes a map's keys sorted
