"""Consumer advisories and the ack metric (nats-server jetstream_events.go, consumer.go ``sendAdvisory``).

Theory of operation
-------------------
Every event is built on the envelope of :mod:`.advisories` (``type``, ``id``, ``timestamp``) followed by the event's
own fields in the Go struct's order, and is published only when someone listens (``publish_advisory`` checks
interest first, so an advisory nobody wants costs one sublist lookup).  The subjects are the templates of
protocol/jsapi/subjects.py, filled with ``<stream>.<consumer>``.

==========================================================  =====================================================
subject                                                     type (``io.nats.jetstream.``...)
==========================================================  =====================================================
``$JS.EVENT.ADVISORY.CONSUMER.CREATED.<s>.<c>``             ``advisory.v1.consumer_action`` (action ``create``)
``$JS.EVENT.ADVISORY.CONSUMER.DELETED.<s>.<c>``             ``advisory.v1.consumer_action`` (action ``delete``)
``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<s>.<c>``      ``advisory.v1.max_deliver``
``$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.<s>.<c>``           ``advisory.v1.nak``
``$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.<s>.<c>``      ``advisory.v1.terminated``
``$JS.EVENT.METRIC.CONSUMER.ACK.<s>.<c>``                   ``metric.v1.consumer_ack``
``$JS.EVENT.ADVISORY.CONSUMER.PAUSE.<s>.<c>``               ``advisory.v1.consumer_pause``
``$JS.EVENT.ADVISORY.CONSUMER.PINNED.<s>.<c>``              ``advisory.v1.consumer_group_pinned``
``$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.<s>.<c>``            ``advisory.v1.consumer_group_unpinned``
==========================================================  =====================================================
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skiff.protocol.jsapi import subjects as subj
from skiff.protocol.jsapi.timefmt import format_time

from .advisories import envelope, publish_advisory

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer

T = "io.nats.jetstream."
ACTION_TYPE = T + "advisory.v1.consumer_action"
MAX_DELIVER_TYPE = T + "advisory.v1.max_deliver"
NAK_TYPE = T + "advisory.v1.nak"
TERMINATED_TYPE = T + "advisory.v1.terminated"
ACK_METRIC_TYPE = T + "metric.v1.consumer_ack"
PAUSE_TYPE = T + "advisory.v1.consumer_pause"
PINNED_TYPE = T + "advisory.v1.consumer_group_pinned"
UNPINNED_TYPE = T + "advisory.v1.consumer_group_unpinned"

# The processTerm reason the server gives for an unacknowledged message that stream limits removed
# (consumer.go ackTermUnackedLimitsReason).
TERM_UNACKED_LIMITS_REASON = "Unacknowledged message was deleted"


def _send(c: "Consumer", template: str, type_: str, fields: dict) -> None:
    srv = c.server
    subject = template.format(stream=c.stream.name, consumer=c.name)
    if not srv.sublist.has_interest(subject):
        return  # nothing is built for an advisory nobody listens to
    ev = envelope(srv, type_)
    ev["stream"] = c.stream.name
    ev["consumer"] = c.name
    ev.update(fields)
    publish_advisory(srv, subject, ev)


def action(c: "Consumer", created: bool) -> None:
    _send(c, subj.CONSUMER_CREATED_T if created else subj.CONSUMER_DELETED_T, ACTION_TYPE, {"action": "create" if created else "delete"})


def max_deliveries(c: "Consumer", sseq: int, deliveries: int) -> None:
    _send(c, subj.CONSUMER_MAX_DELIVERIES_T, MAX_DELIVER_TYPE, {"stream_seq": sseq, "deliveries": deliveries})


def naked(c: "Consumer", dseq: int, sseq: int, deliveries: int) -> None:
    _send(c, subj.CONSUMER_MSG_NAKED_T, NAK_TYPE, {"consumer_seq": dseq, "stream_seq": sseq, "deliveries": deliveries})


def terminated(c: "Consumer", dseq: int, sseq: int, deliveries: int, reason: str) -> None:
    fields: dict = {"consumer_seq": dseq, "stream_seq": sseq, "deliveries": deliveries}
    if reason:
        fields["reason"] = reason
    _send(c, subj.CONSUMER_MSG_TERMINATED_T, TERMINATED_TYPE, fields)


def ack_metric(c: "Consumer", dseq: int, sseq: int, ack_time: int, deliveries: int) -> None:
    _send(c, subj.CONSUMER_ACK_METRIC_T, ACK_METRIC_TYPE,
          {"consumer_seq": dseq, "stream_seq": sseq, "ack_time": ack_time, "deliveries": deliveries})


def pause(c: "Consumer", paused: bool, until_ns: int) -> None:
    # pause_until is a Go time.Time value: omitempty never drops it (the zero time when not paused by request).
    _send(c, subj.CONSUMER_PAUSE_T, PAUSE_TYPE, {"paused": paused, "pause_until": format_time(until_ns)})


def _send_group(c: "Consumer", template: str, type_: str, fields: dict) -> None:
    """The priority-group events put ``account`` before stream and consumer, and ``domain`` before their own
    fields (jetstream_events.go JSConsumerGroupPinnedAdvisory / JSConsumerGroupUnpinnedAdvisory)."""
    srv = c.server
    subject = template.format(stream=c.stream.name, consumer=c.name)
    if not srv.sublist.has_interest(subject):
        return
    ev = envelope(srv, type_)
    ev["account"] = srv.js_account.name
    ev["stream"] = c.stream.name
    ev["consumer"] = c.name
    domain = srv.options.jetstream_domain
    if domain:
        ev["domain"] = domain
    ev.update(fields)
    publish_advisory(srv, subject, ev)


def pinned(c: "Consumer", group: str, pin_id: str) -> None:
    _send_group(c, subj.CONSUMER_PINNED_T, PINNED_TYPE, {"group": group, "pinned_id": pin_id})


def unpinned(c: "Consumer", group: str, reason: str) -> None:
    _send_group(c, subj.CONSUMER_UNPINNED_T, UNPINNED_TYPE, {"group": group, "reason": reason})
