"""Message counters (``allow_msg_counter``, nats-server 2.12): ``Nats-Incr`` adds to the subject's last value.

Theory of operation
-------------------
On a counter stream every publish carries ``Nats-Incr: <signed decimal>`` and no payload.  The stream loads the last
message on the subject, reads its ``{"val":"<decimal>"}`` body (arbitrary precision), adds the increment and stores
``{"val":"<sum>"}`` with the publisher's headers; the PubAck carries the new value (``{"stream":..,"seq":..,
"val":"<sum>"}``).  A ``Nats-Counter-Sources`` header on the previous message is carried over.

Checks, in nats-server's order (stream.go processJetStreamMsgWithBatch): a malformed ``Nats-Incr`` is 10171, on a
stream without counters 10168, with a payload 10170, combined with roll-up or any expected-* header 10171; after the
other header checks, a counter stream publish without ``Nats-Incr`` is 10169; an unreadable previous value is 10172.
"""
from __future__ import annotations

import json
import re

from skiff.protocol import headers
from skiff.protocol.errors import ApiError

INCR = "Nats-Incr"
COUNTER_SOURCES = "Nats-Counter-Sources"
_DECIMAL = re.compile(r"[+-]?[0-9]+")  # big.Int.SetString(s, 10): ASCII digits only, no blanks
_INCOMPATIBLE = ("Nats-Rollup", "Nats-Expected-Stream", "Nats-Expected-Last-Msg-Id",
                 "Nats-Expected-Last-Subject-Sequence-Subject", "Nats-Expected-Last-Sequence",
                 "Nats-Expected-Last-Subject-Sequence")


def parse_incr(hdr: bytes) -> int | None | ApiError:
    """The increment, None when there is no Nats-Incr header, or 10171."""
    v = headers.get_exact(hdr, INCR) if hdr else None  # getMessageIncr: sliceHeader, so ``1 `` is invalid
    if not v:
        return None
    if not _DECIMAL.fullmatch(v):
        return ApiError.of("JSMessageIncrInvalidErr")
    return int(v)


def check_incr(hdr: bytes, msg: bytes, allowed: bool) -> int | None | ApiError:
    """The first checks (before the expected-* headers)."""
    incr = parse_incr(hdr)
    if incr is None or isinstance(incr, ApiError):
        return incr
    if not allowed:
        return ApiError.of("JSMessageIncrDisabledErr")
    if msg:
        return ApiError.of("JSMessageIncrPayloadErr")
    if any(headers.get_exact(hdr, h) for h in _INCOMPATIBLE):
        return ApiError.of("JSMessageIncrInvalidErr")
    return incr


def apply(store, subject: str, hdr: bytes, incr: int) -> tuple[bytes, bytes, str] | ApiError:
    """(header block, payload, new value as text) for the message to store."""
    total = 0
    last = store.load_last_msg(subject)
    if last is not None:
        try:
            val = json.loads(last.data)
            text = val["val"] if isinstance(val, dict) and "val" in val else ""
            if not isinstance(text, str):
                raise ValueError("val is not a string")
        except (ValueError, TypeError):
            return ApiError.of("JSMessageCounterBrokenErr")
        if _DECIMAL.fullmatch(text):
            total = int(text)
        sources = headers.get_exact(last.hdr, COUNTER_SOURCES) if last.hdr else None
        if sources:
            hdr = headers.set_values(hdr, {COUNTER_SOURCES: sources})
    total += incr
    value = str(total)
    return hdr, b'{"val":"' + value.encode() + b'"}', value
