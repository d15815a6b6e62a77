"""Message tracing (ADR-41, nats-server msgtrace.go), against either server: a message with ``Nats-Trace-Dest``
makes the server publish a trace event there; ``Nats-Trace-Only`` traces it without delivering it.

Each test asserts the event as nats-server 2.15.1 sends it (the same test passes on it), and the refusals: a
trace-only message reaches no subscriber and no stream, a destination the publisher may not publish to is a
permissions violation, a disabled or invalid destination starts no trace.
"""
from __future__ import annotations

import asyncio
import gzip
import json

import cramjam
import nats
import pytest
from nats.errors import TimeoutError as NatsTimeoutError

from tests.wire.rawclient import RawClient

DEST = "Nats-Trace-Dest"
ONLY = "Nats-Trace-Only"


async def _next(sub, timeout: float = 2.0):
    return await sub.next_msg(timeout=timeout)


async def _nothing(sub, wait: float = 0.3) -> None:
    with pytest.raises(NatsTimeoutError):
        await sub.next_msg(timeout=wait)


def _event(msg) -> dict:
    return json.loads(msg.data)


def _types(ev: dict) -> list[str]:
    return [e["type"] for e in ev["events"]]


def _egresses(ev: dict) -> list[dict]:
    return [e for e in ev["events"] if e["type"] == "eg"]


@pytest.fixture
async def two(server):
    """A publisher and a subscriber on a fresh JetStream server (nats-py, no reconnects)."""
    pub = await nats.connect(server.url, name="publisher", allow_reconnect=False)
    other = await nats.connect(server.url, name="subscriber", allow_reconnect=False)
    yield pub, other
    await pub.close()
    await other.close()


async def test_a_traced_message_is_delivered_and_its_event_lists_each_step(two):
    pub, other = two
    trace = await pub.subscribe("trace.1")
    plain = await other.subscribe("foo")
    queue = await other.subscribe("foo", queue="q")
    js = pub.jetstream()
    await js.add_stream(name="S", subjects=["foo"])
    await other.flush()
    await pub.publish("foo", b"hello", headers={DEST: "trace.1"})
    for sub in (plain, queue):
        m = await _next(sub)
        assert (m.data, m.headers) == (b"hello", {DEST: "trace.1"})  # delivered as sent
    ev = _event(await _next(trace))
    assert set(ev) == {"server", "request", "events"}
    assert ev["server"]["name"] and ev["server"]["id"] and ev["server"]["jetstream"] is True
    assert ev["request"] == {"header": {DEST: ["trace.1"]}, "msgsize": len(b"NATS/1.0\r\nNats-Trace-Dest: trace.1"
                                                                          b"\r\n\r\nhello")}
    ingress = ev["events"][0]
    assert {k: v for k, v in ingress.items() if k not in ("ts", "cid")} == {
        "type": "in", "kind": 0, "name": "publisher", "acc": "$G", "subj": "foo"}
    assert sorted((e["kind"], e["name"], e["sub"], e.get("queue", "")) for e in _egresses(ev)) == [
        (0, "subscriber", "foo", ""), (0, "subscriber", "foo", "q")]
    [jse] = [e for e in ev["events"] if e["type"] == "js"]
    assert {k: v for k, v in jse.items() if k != "ts"} == {"type": "js", "stream": "S", "subject": "foo"}
    # The stored copy says "trace disabled": a consumer's delivery of it starts no trace (stream.go setHeader).
    stored = await js.get_msg("S", 1)
    assert stored.headers == {DEST: "trace disabled"}
    assert stored.data == b"hello"


async def test_trace_only_reaches_no_subscriber_and_no_stream_but_is_traced(two):
    pub, other = two
    trace = await pub.subscribe("trace.only")
    plain = await other.subscribe("foo")
    inbox = await pub.subscribe("my.reply")
    js = pub.jetstream()
    await js.add_stream(name="S", subjects=["foo"])
    await other.flush()
    await pub.publish("foo", b"hello", reply="my.reply", headers={DEST: "trace.only", ONLY: "true"})
    ev = _event(await _next(trace))
    assert ev["request"]["header"] == {DEST: ["trace.only"], ONLY: ["true"]}
    # The egress is listed as it would have happened; nothing was sent.
    assert [(e["name"], e["sub"], e.get("error")) for e in _egresses(ev)] == [("subscriber", "foo", None)]
    [jse] = [e for e in ev["events"] if e["type"] == "js"]
    assert jse["subject"] == "foo" and "error" not in jse
    await _nothing(plain)
    await _nothing(inbox)  # no PubAck: processJetStreamMsg returns before storing and acking
    assert (await js.stream_info("S")).state.messages == 0
    # "1" and "on" say the same; anything else is a normal delivery.
    for value in ("1", "on"):
        await pub.publish("foo", b"x", headers={DEST: "trace.only", ONLY: value})
        await _next(trace)
    await _nothing(plain)
    await pub.publish("foo", b"y", headers={DEST: "trace.only", ONLY: "false"})
    await _next(trace)
    assert (await _next(plain)).data == b"y"


async def test_a_trace_only_message_a_stream_refuses_gets_the_error_ack_and_the_event_the_error(two):
    pub, _ = two
    trace = await pub.subscribe("trace.err")
    js = pub.jetstream()
    await js.add_stream(name="S", subjects=["foo"])
    reply = await pub.request("foo", b"x", timeout=2, headers={
        DEST: "trace.err", ONLY: "true", "Nats-Expected-Stream": "OTHER"})
    assert json.loads(reply.data)["error"]["err_code"] == 10060
    ev = _event(await _next(trace))
    [jse] = [e for e in ev["events"] if e["type"] == "js"]
    assert jse["stream"] == "S"
    assert jse["error"] == "expected stream does not match"  # errStreamMismatch, a plain error
    assert "subject" not in jse
    assert (await js.stream_info("S")).state.messages == 0
    # Errors processJetStreamMsg returns as plain errors of its own, beside the ApiError of the PubAck.
    await js.publish("foo", b"stored", headers={"Nats-Msg-Id": "m1"})
    for hdrs, code, text in (
            ({"Nats-Expected-Last-Sequence": "7"}, 10071, "last sequence mismatch: 7 vs 1"),
            ({"Nats-Expected-Last-Subject-Sequence": "3"}, 10071, "last sequence by subject mismatch: 3 vs 1"),
            ({"Nats-Expected-Last-Msg-Id": "m0"}, 10070, 'last msgid mismatch: "m0" vs "m1"'),
            ({"Nats-TTL": "5s"}, 10166, "message TTL disabled")):
        reply = await pub.request("foo", b"x", timeout=2, headers={DEST: "trace.err", ONLY: "true", **hdrs})
        assert json.loads(reply.data)["error"]["err_code"] == code
        [jse] = [e for e in _event(await _next(trace))["events"] if e["type"] == "js"]
        assert jse["error"] == text
    assert (await js.stream_info("S")).state.messages == 1
    # An ApiError reads as Go's ApiError.Error(): "<description> (<err_code>)".
    cfg = (await js.stream_info("S")).config
    cfg.sealed = True
    await js.update_stream(cfg)
    reply = await pub.request("foo", b"x", timeout=2, headers={DEST: "trace.err", ONLY: "true"})
    assert json.loads(reply.data)["error"]["err_code"] == 10109
    [jse] = [e for e in _event(await _next(trace))["events"] if e["type"] == "js"]
    assert jse["error"] == "invalid operation on sealed stream (10109)"


async def test_egress_errors_and_no_echo(server):
    nc = await nats.connect(server.url, no_echo=True, allow_reconnect=False)
    try:
        trace = await nc.subscribe("trace.echo")
        own = await nc.subscribe("foo")
        await nc.flush()
        await nc.publish("foo", b"x", headers={DEST: "trace.echo"})
        ev = _event(await _next(trace))
        assert [e.get("error") for e in _egresses(ev)] == ["Not delivered because of no echo"]
        await _nothing(own)
        # A queue member passed over is listed with the reason (processMsgResults tries the next one).
        q = await nc.subscribe("bar", queue="q")
        await nc.flush()
        await nc.publish("bar", b"x", headers={DEST: "trace.echo"})
        ev = _event(await _next(trace))
        assert [(e["sub"], e["queue"], e.get("error")) for e in _egresses(ev)] == [
            ("bar", "q", "Not delivered because of no echo")]
        await _nothing(q)
    finally:
        await nc.close()


@pytest.mark.parametrize("dest", ["trace.*", "trace.>", "trace..x"])
async def test_an_invalid_destination_starts_no_trace(two, dest):
    pub, other = two
    trace = await pub.subscribe("trace.>")
    plain = await other.subscribe("foo")
    await other.flush()
    await pub.publish("foo", b"delivered", headers={DEST: dest})
    assert (await _next(plain)).data == b"delivered"
    await pub.publish("foo", b"dropped", headers={DEST: dest, ONLY: "true"})  # not traceable: not delivered either
    await pub.flush()
    await _nothing(plain)
    await _nothing(trace)


async def test_disabled_and_empty_destinations_and_traceparent_alone_are_plain_messages(two):
    pub, other = two
    trace = await pub.subscribe(">")
    plain = await other.subscribe("foo")
    await other.flush()
    for hdrs in ({DEST: "trace disabled", ONLY: "true"}, {ONLY: "true"},
                 {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}):
        await pub.publish("foo", b"m", headers=hdrs)
        m = await _next(plain)
        assert m.headers == hdrs
        assert (await _next(trace)).subject == "foo"  # the message itself; no event follows
    await _nothing(trace)


async def test_the_old_origin_account_header_disables_the_trace(two):
    pub, other = two
    trace = await pub.subscribe("trace.>")
    plain = await other.subscribe("foo")
    await other.flush()
    await pub.publish("foo", b"m", headers={DEST: "trace.1", "Nats-Trace-Origin-Account": "A"})
    m = await _next(plain)
    assert m.headers == {DEST: "trace disabled", "Nats-Trace-Origin-Account": "A"}
    await pub.publish("foo", b"m", headers={DEST: "trace.1", ONLY: "true", "Nats-Trace-Origin-Account": "A"})
    await pub.flush()
    await _nothing(plain)
    await _nothing(trace)


@pytest.mark.parametrize("accept, encoding, decode", [
    ("gzip", "gzip", gzip.decompress),
    ("snappy", "snappy", lambda b: bytes(cramjam.snappy.decompress(b))),  # the framing format
    ("br", "identity", lambda b: b),  # one the server does not write: plain, and labelled so
])
async def test_the_event_is_compressed_as_the_request_accepts(two, accept, encoding, decode):
    pub, other = two
    trace = await pub.subscribe("trace.gz")
    await other.subscribe("foo")
    await other.flush()
    await pub.publish("foo", b"x", headers={DEST: "trace.gz", "Accept-Encoding": accept})
    m = await _next(trace)
    assert m.headers == {"Content-Encoding": encoding}
    ev = json.loads(decode(m.data))
    assert ev["request"]["header"]["Accept-Encoding"] == [accept]
    assert len(_egresses(ev)) == 1


PERMS = """
authorization {
  users = [
    {user: limited, password: p, permissions: {publish: {allow: ["foo", "trace.ok", "_INBOX.>"], deny: ["trace.no"]}}}
    {user: full, password: p}
  ]
}
"""


def _hpub(subject: str, hdrs: dict[str, str], payload: bytes = b"m") -> bytes:
    hdr = b"NATS/1.0\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in hdrs.items()) + b"\r\n"
    return b"HPUB %s %d %d\r\n%s%s\r\nPING\r\n" % (subject.encode(), len(hdr), len(hdr) + len(payload), hdr,
                                                      payload)


async def test_a_destination_the_publisher_may_not_publish_to_is_a_violation_and_nothing_is_delivered(server_factory):
    # A raw client: nats-py closes its connection on a "Permissions Violation" it does not recognise (it looks for
    # the lower-case words).
    srv = server_factory(config=PERMS)
    full = await nats.connect(srv.url, user="full", password="p", allow_reconnect=False)
    limited = RawClient(port=srv.port).handshake(user="limited", **{"pass": "p"}, headers=True)
    try:
        trace = await full.subscribe("trace.>")
        plain = await full.subscribe("foo")
        denied = await full.subscribe("bar")
        await full.flush()
        limited.send(_hpub("foo", {DEST: "trace.no"}))
        assert limited.read_line() == b"-ERR 'Permissions Violation for Publish to \"trace.no\"'\r\n"
        limited.expect(b"PONG\r\n")
        await _nothing(plain)
        await _nothing(trace)
        # A subject the publisher may not use: one violation, and the event says so in its ingress.
        limited.send(_hpub("bar", {DEST: "trace.ok"}))
        assert limited.read_line() == b"-ERR 'Permissions Violation for Publish to \"bar\"'\r\n"
        limited.expect(b"PONG\r\n")
        ev = _event(await _next(trace))
        assert ev["events"][0]["error"] == 'Permissions Violation for Publish to "bar"'
        assert _types(ev) == ["in"]
        await _nothing(denied)
    finally:
        limited.close()
        await full.close()


ACCOUNTS = """
accounts {
  A {
    users = [{user: a, password: a}]
    exports = [{stream: "feed.>"}, {service: "svc.>"}]
  }
  B {
    users = [{user: b, password: b}]
    imports = [
      {stream: {account: A, subject: "feed.>"}, prefix: froma}
      {service: {account: A, subject: "svc.>"}, to: "asvc.>"}
    ]
  }
}
"""


async def _two_accounts(server_factory, conf: str) -> tuple:
    """A server with accounts A and B (``conf``: B imports A's ``feed.>`` under ``froma`` and its ``svc.>`` as
    ``asvc.>``): a user of each, a trace subscription in each, B's subscriber to the stream, A's responder."""
    srv = server_factory(config=conf)
    a = await nats.connect(srv.url, user="a", password="a", allow_reconnect=False)
    b = await nats.connect(srv.url, user="b", password="b", allow_reconnect=False)
    subs = (await a.subscribe("trace.>"), await b.subscribe("trace.>"), await b.subscribe("froma.feed.x"),
            await a.subscribe("svc.x"))
    await a.flush()
    await b.flush()
    return (a, b, *subs)


async def test_tracing_stops_at_an_account_boundary(server_factory):
    a, b, trace_a, trace_b, feed, svc = await _two_accounts(server_factory, ACCOUNTS)
    try:
        # A stream export: the event names the importer and the subject there; the import is not traced further.
        await a.publish("feed.x", b"f", headers={DEST: "trace.se"})
        ev = _event(await _next(trace_a))
        [se] = [e for e in ev["events"] if e["type"] == "se"]
        assert (se["acc"], se["to"]) == ("B", "froma.feed.x")
        assert (await _next(feed)).data == b"f"
        await a.publish("feed.x", b"g", headers={DEST: "trace.se", ONLY: "true"})
        assert [e["type"] for e in _event(await _next(trace_a))["events"]] == ["in", "se"]
        await _nothing(feed)
        # A service import: the event names the exporter and both subjects; the request reaches the exporter with
        # tracing disabled, and a trace-only one does not reach it.
        await b.publish("asvc.x", b"r", headers={DEST: "trace.si"})
        ev = _event(await _next(trace_b))
        [si] = [e for e in ev["events"] if e["type"] == "si"]
        assert (si["acc"], si["from"], si["to"]) == ("A", "asvc.x", "svc.x")
        m = await _next(svc)
        assert m.headers[DEST] == "trace disabled"
        await b.publish("asvc.x", b"s", headers={DEST: "trace.si", ONLY: "true"})
        assert _types(_event(await _next(trace_b))) == ["in", "si"]
        await _nothing(svc)
        await _nothing(trace_a)
    finally:
        await a.close()
        await b.close()


async def test_a_traced_api_request_crosses_the_system_accounts_service_import(server):
    """nats-server serves an account's JetStream API through a service import from the system account: the trace
    shows it, a traced request is answered, a trace-only one is not (its requester gets no responders)."""
    nc = await nats.connect(server.url, allow_reconnect=False)
    try:
        trace = await nc.subscribe("trace.api")
        inbox = await nc.subscribe("api.inbox")
        await nc.flush()
        for only in (False, True):
            hdrs = {DEST: "trace.api"}
            if only:
                hdrs[ONLY] = "true"
            await nc.publish("$JS.API.INFO", b"", reply="api.inbox", headers=hdrs)
            ev = _event(await _next(trace))
            assert [{k: v for k, v in e.items() if k not in ("ts", "cid")} for e in ev["events"]] == [
                {"type": "in", "kind": 0, "acc": "$G", "subj": "$JS.API.INFO"},
                {"type": "si", "acc": "$SYS", "from": "$JS.API.INFO", "to": "$JS.API.INFO"}]
            answer = await _next(inbox)
            if only:
                assert (answer.data, answer.headers["Status"]) == (b"", "503")
            else:
                assert json.loads(answer.data)["type"] == "io.nats.jetstream.api.v1.account_info_response"
    finally:
        await nc.close()


async def test_a_trace_only_ack_still_acks(two):
    """deliverMsg calls internal subscriptions whatever the trace mode: a consumer's ack is one (nats-server)."""
    pub, _ = two
    js = pub.jetstream()
    await js.add_stream(name="S", subjects=["foo"])
    await js.publish("foo", b"1")
    psub = await js.pull_subscribe("foo", durable="d")
    [m] = await psub.fetch(1, timeout=2)
    trace = await pub.subscribe("trace.ack")
    await pub.flush()
    await pub.publish(m.reply, b"+ACK", headers={DEST: "trace.ack", ONLY: "true"})
    ev = _event(await _next(trace))
    assert _types(ev) == ["in"]
    for _ in range(50):
        info = await js.consumer_info("S", "d")
        if info.num_ack_pending == 0:
            break
        await asyncio.sleep(0.05)
    assert (info.num_ack_pending, info.ack_floor.stream_seq) == (0, 1)


async def test_a_traced_system_request_shows_the_import_it_maps_through(server_factory):
    srv = server_factory(config=ACCOUNTS)
    b = await nats.connect(srv.url, user="b", password="b", allow_reconnect=False)
    try:
        trace = await b.subscribe("trace.sys")
        await b.flush()
        reply = await b.request("$SYS.REQ.USER.INFO", b"", timeout=2, headers={DEST: "trace.sys"})
        assert json.loads(reply.data)["data"]["account"] == "B"
        ev = _event(await _next(trace))
        [si] = [e for e in ev["events"] if e["type"] == "si"]
        assert (si["acc"], si["from"], si["to"]) == ("$SYS", "$SYS.REQ.USER.INFO", "$SYS.REQ.USER.B.INFO")
    finally:
        await b.close()


async def test_an_interest_stream_without_consumers_reports_no_interest(two):
    pub, _ = two
    js = pub.jetstream()
    await js.add_stream(name="I", subjects=["int.>"], retention="interest")
    trace = await pub.subscribe("trace.int")
    await pub.flush()
    ack = await pub.request("int.x", b"x", timeout=2, headers={DEST: "trace.int"})
    assert json.loads(ack.data) == {"stream": "I", "seq": 1}  # acked, not kept
    [jse] = [e for e in _event(await _next(trace))["events"] if e["type"] == "js"]
    assert (jse["stream"], jse["subject"], jse["nointerest"]) == ("I", "int.x", True)


TRACE_PARENT_ACCOUNTS = """
accounts {
  T { users = [{user: t, password: t}], msg_trace: { dest: "trace.acc" } }
  H { users = [{user: h, password: h}], msg_trace: { dest: "trace.half", sampling: "50%" } }
  N { users = [{user: n, password: n}] }
}
"""
SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_a_sampled_traceparent_is_traced_to_the_accounts_destination(server_factory):
    srv = server_factory(config=TRACE_PARENT_ACCOUNTS)
    t = await nats.connect(srv.url, user="t", password="t", allow_reconnect=False)
    n = await nats.connect(srv.url, user="n", password="n", allow_reconnect=False)
    try:
        trace = await t.subscribe("trace.>")
        sub = await t.subscribe("foo")
        n_trace = await n.subscribe("trace.>")
        n_sub = await n.subscribe("foo")
        await t.flush()
        await n.flush()
        # Sampled (the flags' low bit), in any letter case: traced, and delivered as sent (never trace-only).
        for name in ("traceparent", "TraceParent"):
            await t.publish("foo", b"x", headers={name: SAMPLED, ONLY: "true"})
            assert (await _next(sub)).headers == {name: SAMPLED, ONLY: "true"}
            m = await _next(trace)
            assert m.subject == "trace.acc"
            ev = _event(m)
            assert ev["request"]["header"] == {name: [SAMPLED], ONLY: ["true"]}
            assert [e["sub"] for e in _egresses(ev)] == ["foo"]
        # Not sampled ("00"; "ff" is too big for the int8 nats-server reads it as), or not a trace context at all.
        for value in (SAMPLED[:-2] + "00", SAMPLED[:-2] + "ff", "01", SAMPLED + "-01"):
            await t.publish("foo", b"y", headers={"traceparent": value})
            assert (await _next(sub)).headers == {"traceparent": value}
        # Nats-Trace-Dest takes precedence over the account's destination.
        await t.publish("foo", b"z", headers={"traceparent": SAMPLED, DEST: "trace.mine"})
        await _next(sub)
        assert (await _next(trace)).subject == "trace.mine"
        await _nothing(trace)
        # An account without a destination: nothing.
        await n.publish("foo", b"n", headers={"traceparent": SAMPLED})
        assert (await _next(n_sub)).data == b"n"
        await _nothing(n_trace)
    finally:
        await t.close()
        await n.close()


async def test_sampling_picks_some_and_marks_the_others_disabled(server_factory):
    """A traceparent the sampling does not pick goes on with ``Nats-Trace-Dest: trace disabled`` added, so that no
    later server traces it; each one it picks is traced once."""
    srv = server_factory(config=TRACE_PARENT_ACCOUNTS)
    h = await nats.connect(srv.url, user="h", password="h", allow_reconnect=False)
    try:
        events: list = []
        got: list = []

        async def on_event(m):
            events.append(m)

        async def on_msg(m):
            got.append(m)

        await h.subscribe("trace.half", cb=on_event)
        await h.subscribe("foo", cb=on_msg)
        await h.flush()
        for i in range(200):
            await h.publish("foo", str(i).encode(), headers={"traceparent": SAMPLED})
        await h.flush()
        for _ in range(100):
            if len(got) == 200:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        disabled = [m for m in got if m.headers.get(DEST) == "trace disabled"]
        traced = [m for m in got if DEST not in m.headers]
        assert len(disabled) + len(traced) == len(got) == 200
        assert len(events) == len(traced)
        assert 40 <= len(traced) <= 160  # 51% expected (rand.Int31n(100) <= 50)
    finally:
        await h.close()


ALLOW_TRACE = """
accounts {
  A {
    users = [{user: a, password: a}]
    exports = [{stream: "feed.>"}, {service: "svc.>", allow_trace: true}]
  }
  B {
    users = [{user: b, password: b}]
    imports = [
      {stream: {account: A, subject: "feed.>"}, prefix: froma, allow_trace: true}
      {service: {account: A, subject: "svc.>"}, to: "asvc.>"}
    ]
  }
}
"""


async def test_allow_trace_lets_the_trace_follow_a_message_into_the_other_account(server_factory):
    """``allow_trace`` (a stream import's, a service export's): past the import event the trace goes on, and the
    deliveries in the other account are events of it, named with their account."""
    a, b, trace_a, trace_b, feed, svc = await _two_accounts(server_factory, ALLOW_TRACE)
    try:
        # (publisher, subject, its trace subscription, the crossing, the egress beyond it, the subscriber there)
        for nc, subject, trace, crossing, egress, there in (
                (a, "feed.x", trace_a, "se", ("B", "feed.x"), feed), (b, "asvc.x", trace_b, "si", ("A", "svc.x"), svc)):
            for only in (False, True):
                await nc.publish(subject, b"m", headers={DEST: "trace.x", **({ONLY: "true"} if only else {})})
                ev = _event(await _next(trace))
                assert _types(ev) == ["in", crossing, "eg"]
                [eg] = _egresses(ev)
                # a stream import's egress is named as nats-server's shadow subscription in the exporting account:
                # the subject without the import's prefix
                assert (eg["acc"], eg["sub"]) == egress
                if only:
                    await _nothing(there)
                    continue
                m = await _next(there)
                if crossing == "si":
                    # the exporter's other servers would send their events to a response subject leading back
                    assert m.headers[DEST].startswith("_R_.")
        await _nothing(trace_a)
        await _nothing(trace_b)
    finally:
        await a.close()
        await b.close()


async def test_bytes_that_are_not_utf8_reach_the_event_as_replacement_characters(server):
    """A header value or subject with bytes that are not UTF-8: the event is still sent, those bytes written as
    U+FFFD, as Go's json.Marshal writes them, and the message is delivered as sent.  Raw clients: nats-py cannot
    read such a subject."""
    sub = RawClient(port=server.port).handshake(headers=True)
    pub = RawClient(port=server.port).handshake(headers=True)
    try:
        sub.send(b"SUB trace.utf 1\r\nSUB bin.> 2\r\nPING\r\n")
        sub.expect(b"PONG\r\n")
        hdr = b"NATS/1.0\r\nNats-Trace-Dest: trace.utf\r\nX: v\xff\r\n\r\n"
        pub.send(b"HPUB bin.\xfe %d %d\r\n%sp\r\nPING\r\n" % (len(hdr), len(hdr) + 1, hdr))
        pub.expect(b"PONG\r\n")
        got = {}
        for _ in range(2):
            line = sub.read_line()  # HMSG <subject> <sid> <hdr> <total> or MSG <subject> <sid> <size>
            parts = line.split()
            body = sub.read_exactly(int(parts[-1]) + 2)[:-2]
            got[parts[2]] = (parts[1], body[int(parts[3]):] if parts[0] == b"HMSG" else body)
        assert got[b"2"] == (b"bin.\xfe", b"p")
        subject, event = got[b"1"]
        ev = json.loads(event)
        assert ev["request"]["header"]["X"] == ["v\ufffd"]
        assert ev["events"][0]["subj"] == "bin.\ufffd"
    finally:
        sub.close()
        pub.close()


async def test_a_message_over_max_payload_gets_an_event_from_nats_server_only(server_factory):
    """The one difference (docs/parity.md): nats-server reads the trace headers of an HPUB over max_payload from the
    bytes its read already holds and sends an event with the violation before it closes the connection; Skiff
    refuses it the same way and sends no event.  Both close the publisher with the same -ERR."""
    srv = server_factory(jetstream=False, config="max_payload: 100\n")
    nc = await nats.connect(srv.url, allow_reconnect=False)
    pub = RawClient(port=srv.port).handshake(headers=True)
    try:
        trace = await nc.subscribe("trace.big")
        await nc.flush()
        hdr = b"NATS/1.0\r\nNats-Trace-Dest: trace.big\r\n\r\n"
        pub.send(b"HPUB big %d %d\r\n%s%s\r\n" % (len(hdr), len(hdr) + 200, hdr, b"x" * 200))
        assert pub.read_line() == b"-ERR 'Maximum Payload Violation'\r\n"
        if srv.kind == "nats-server":
            ev = _event(await _next(trace))
            assert _types(ev) == ["in"] and ev["events"][0]["error"] == "maximum payload exceeded"
        else:
            await _nothing(trace)
    finally:
        pub.close()
        await nc.close()
