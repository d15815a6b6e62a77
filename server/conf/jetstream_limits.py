"""``jetstream { limits { } }``, the server-wide JetStream limits (server/opts.go parseJetStreamLimits).

Only ``batch { }`` is implemented (parseJetStreamLimitsBatch: ``max_inflight_per_stream``, ``max_inflight_total``,
``max_msgs``, ``timeout``); it becomes ``settings["jetstream_batch_limits"]`` under the JSON names nats-server shows
in /varz and /jsz ``limits`` (JSLimitOpts).  A value that is not positive keeps the default, as nats-server checks
``> 0`` where it uses them (stream.go, jetstream_batching.go getCleanupTimeout).  The other limits
(``max_ack_pending``, ``max_request_batch``, ``duplicate_window``) change what clients see and are refused with
their line through support.JETSTREAM_LIMITS; ``max_ha_assets`` only counts replicated assets, which a single
server has none of.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skiff.protocol.jsapi.timefmt import DurationParseError, parse_go_duration
from skiff.server.conf import support
from skiff.server.conf.values import Token

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.conf.mapping import _Mapper

#: batch key -> JSLimitOpts JSON name
_BATCH_INTS = {"max_inflight_per_stream": "max_batch_inflight_per_stream",
               "max_inflight_total": "max_batch_inflight_total",
               "max_msgs": "max_batch_size"}


def parse_limits(m: "_Mapper", tok: Token, go_kind) -> dict[str, int]:
    """The ``limits`` map -> the batch limits it sets (JSON name -> int, the timeout in nanoseconds)."""
    v = tok.value
    if not isinstance(v, dict):
        m.err(tok, f"Expected a map to define JetStreamLimits, got {go_kind(v)}")
        return {}
    out: dict[str, int] = {}
    for mk, mt in v.items():
        k = mk.lower()
        if m.not_implemented(support.JETSTREAM_LIMITS, k, mt, f"jetstream.limits.{mk}"):
            continue
        try:
            if k == "batch":
                out.update(_batch(m, mt, go_kind))
            elif k in support.JETSTREAM_LIMITS:
                m.expect(mt, int, mk)  # warned about: still type-checked
            else:
                m.unknown(mt, mk)
        except m.Bad:
            continue
    return out


def _batch(m: "_Mapper", tok: Token, go_kind) -> dict[str, int]:
    v = tok.value
    if not isinstance(v, dict):
        m.err(tok, f"Expected a map to define batch limits, got {go_kind(v)}")
        return {}
    out: dict[str, Any] = {}
    for mk, mt in v.items():
        k = mk.lower()
        try:
            if k in _BATCH_INTS:
                out[_BATCH_INTS[k]] = m.expect(mt, int, mk)
            elif k == "timeout":
                out["max_batch_timeout"] = parse_go_duration(m.expect(mt, str, mk))
            else:
                m.unknown(mt, mk)
        except DurationParseError as e:
            m.err(mt, str(e))
        except m.Bad:
            continue
    return out
