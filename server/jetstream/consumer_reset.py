"""``$JS.API.CONSUMER.RESET.<stream>.<consumer>`` (nats-server 2.14, ADR-60; consumer.go processResetReq /
resetStartingSeqLocked / resetLocalStartingSeq).

Theory of operation
-------------------
The consumer goes back to a stream sequence and starts over from there: an empty body (or ``seq`` 0) means its
ack floor + 1; another sequence is allowed for deliver policy ``all`` (any), ``by_start_sequence`` (not below
``opt_start_seq``) and ``by_start_time`` (not below the first sequence at ``opt_start_time``), any other policy is
10204 ``invalid reset: not allowed``.  The reset drops everything outstanding: pending and redelivery counts are
cleared, the next delivery is the first message at or after the sequence with delivery sequence 1, and the stored
state becomes delivered = ack floor = ``seq - 1`` (consumerFileStore.Reset / SetStarting).  On an interest stream
the messages nobody is interested in any more are removed.  The reply is the consumer info with ``reset_seq``.
Without a reply subject the request is ignored; a body that is not JSON is 10025 (plain ``json.Unmarshal``).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi import requests as rq

if TYPE_CHECKING:  # pragma: no cover
    from .api import ApiRequest
    from .consumer import Consumer


def reset_starting_seq(c: "Consumer", seq: int) -> int | str:
    """Reset ``c``; the sequence it now starts from, or the reason it may not (the text after "invalid reset: ")."""
    cfg = c.config
    if seq == 0:
        seq = c.core.asflr + 1
    elif cfg.deliver_policy == "all":
        pass
    elif cfg.deliver_policy == "by_start_sequence":
        if seq < cfg.opt_start_seq:
            return "below start seq"
    elif cfg.deliver_policy == "by_start_time":
        if seq < c.stream.store.get_seq_from_time(cfg.opt_start_time.unix_ns):
            return "below start time"
    else:
        return "not allowed"
    seq = max(seq, 1)
    c.reset(seq)
    if c.stream.config.retention == "interest":
        c.cset.cleanup_no_interest()
    # Delivery resumes after the caller's reply is out (nats-server signalNewMessages wakes the delivery goroutine):
    # the reply's ``delivered`` is the reset position, which a sourcing stream starts from.
    asyncio.get_running_loop().call_soon(c.kick)
    return seq


def reset_request(c: "Consumer | None", req: "ApiRequest") -> dict | ApiError | None:
    if c is None or not req.reply:
        return None
    seq = 0
    if req.body:
        r = rq.parse_request(rq.JSApiConsumerResetRequest, req.body, strict=False, unmarshal=True)
        if isinstance(r, ApiError):
            return r
        seq = r.seq
    res = reset_starting_seq(c, seq)
    if isinstance(res, str):
        return ApiError.of("JSConsumerInvalidResetErr", err=res)
    info = c.info()
    info["reset_seq"] = res
    return info
