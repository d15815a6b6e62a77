"""Durable sourcing (nats-server 2.14, ADR-60): a mirror or source whose ``consumer`` names the user's own push
consumer on the origin, with ``ack_policy: flow_control``.

Instead of creating a consumer of its own, :class:`Sourcing` (server/jetstream/sourcing.py) asks the origin to
reset the named consumer to its ack floor (``$JS.API.CONSUMER.RESET.<origin>.<consumer>``; the floor is what this
stream confirmed storing in its flow-control answers), waits 5 s rather than 30 s for the answer
(srcDurableConsumerWaitTime), refuses a consumer acked any other way (10232 / 10233: the origin would keep or drop
messages regardless of what was stored here), and subscribes the consumer's deliver subject only once the reset is
answered.  While it backs off after a reset that timed out, a probe subscription on the deliver subject
(startProbeSubscription) notices the origin coming back and asks again at once.  The consumer is the user's, so it
is never deleted.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.subjects import API

if TYPE_CHECKING:  # pragma: no cover
    from .sourcing import SourceInfo

DURABLE_WAIT = 5.0  # srcDurableConsumerWaitTime (s): a reset is quicker than a create


class DurableSourcing:
    """The durable-consumer path of :class:`Sourcing` (a mixin: it uses the sourcing's server, schedule and
    deliveries)."""

    def _setup_durable(self, si: "SourceInfo") -> None:
        """Reset the user's consumer instead of creating one.  A mirror's reset carries no API level; a source's
        asks for 5, then 4."""
        dc = si.cfg.consumer
        si.err = None
        si.sip = True
        si.early = []
        si.cname = dc.name
        # Subscribed once the reset is answered, as nats-server does: the user's push consumer delivers as soon as
        # its deliver subject has interest, and what it sent before the reset would only be sent again.
        self._send_create(si, None, 0 if si.mirror else 5)

    @staticmethod
    def _reset_subject(si: "SourceInfo") -> str:
        return API["CONSUMER.RESET"].fill(si.name, si.cfg.consumer.name)

    @staticmethod
    def _reset_refused(si: "SourceInfo", ccr: dict) -> dict | None:
        """The error for a reset consumer that this stream's flow-control answers would not ack, else None."""
        if ccr["config"].get("ack_policy") == "flow_control":
            return None
        return ApiError.of("JSMirrorConsumerRequiresAckFCErr" if si.mirror
                           else "JSSourceConsumerRequiresAckFCErr").to_dict()

    def _subscribe_durable(self, si: "SourceInfo") -> None:
        """The reset was answered: take the consumer's deliveries."""
        if si.sub is None:
            si.sub = self.server.subscribe_internal(si.cfg.consumer.deliver_subject, self._deliveries(si),
                                                    server_msgs=True, msg_subject=True)

    def _probe(self, si: "SourceInfo") -> None:
        """startProbeSubscription: while backing off after a durable consumer's reset timed out, watch its deliver
        subject; a heartbeat or message there shows the origin is back, so ask again now."""
        def seen(sub, subject, reply, hdr_len, data, origin) -> None:
            if si.sub is not probe or si.sip or not si.fails or not self._current(si):
                return
            si.fails = 0
            if si.timer is not None:
                si.timer.cancel()
                si.timer = None
            self._schedule(si, si.sseq + 1)
        if si.sub is None:
            probe = si.sub = self.server.subscribe_internal(si.cfg.consumer.deliver_subject, seen, server_msgs=True)
