"""nats-py end to end over the core protocol: what a real client sees, against either server.

Pub/sub, wildcards, queue groups, request/reply (both styles), headers, no responders, auto-unsubscribe, drain,
flush, payloads near max_payload, many subscriptions, echo, authentication and the INFO a client exposes.
"""
from __future__ import annotations

import asyncio
import collections

import nats
import pytest
from nats.errors import MaxPayloadError, NoRespondersError, TimeoutError as NatsTimeoutError


async def collect(sub, n: int, timeout: float = 2.0) -> list:
    return [await sub.next_msg(timeout=timeout) for _ in range(n)]


async def assert_no_more(sub, wait: float = 0.1) -> None:
    with pytest.raises(NatsTimeoutError):
        await sub.next_msg(timeout=wait)


# -- pub/sub --------------------------------------------------------------------------------------------------------

async def test_pub_sub(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    sub = await nc.subscribe(subj)
    await nc.publish(subj, b"hello")
    await nc.publish(subj, b"", reply="my.reply")
    m1, m2 = await collect(sub, 2)
    assert (m1.subject, m1.data, m1.reply) == (subj, b"hello", "")
    assert (m2.subject, m2.data, m2.reply) == (subj, b"", "my.reply")
    assert m1.headers is None


async def test_pub_sub_between_connections(shared_server, conns, subj):
    a = await conns.connect(shared_server)
    b = await conns.connect(shared_server)
    sub = await b.subscribe(subj)
    await b.flush()
    for i in range(100):
        await a.publish(subj, str(i).encode())
    msgs = await collect(sub, 100)
    assert [int(m.data) for m in msgs] == list(range(100))


async def test_callback_subscription(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    got: list[bytes] = []
    done = asyncio.Event()

    async def cb(msg):
        got.append(msg.data)
        if len(got) == 3:
            done.set()

    await nc.subscribe(subj, cb=cb)
    for x in (b"a", b"b", b"c"):
        await nc.publish(subj, x)
    await asyncio.wait_for(done.wait(), 2)
    assert got == [b"a", b"b", b"c"]


async def test_async_iterator(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    sub = await nc.subscribe(subj, max_msgs=3)
    for i in range(5):
        await nc.publish(subj, b"%d" % i)
    got = []
    async def read():
        async for msg in sub.messages:
            got.append(msg.data)
    await asyncio.wait_for(read(), 2)
    assert got == [b"0", b"1", b"2"]


async def test_wildcards(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    star = await nc.subscribe(f"{subj}.*")
    gt = await nc.subscribe(f"{subj}.>")
    mid = await nc.subscribe(f"{subj}.*.z")
    for s in (subj, f"{subj}.a", f"{subj}.a.z", f"{subj}.a.b.c"):
        await nc.publish(s, s.encode())
    await nc.flush()
    assert [m.subject for m in await collect(star, 1)] == [f"{subj}.a"]
    assert [m.subject for m in await collect(gt, 3)] == [f"{subj}.a", f"{subj}.a.z", f"{subj}.a.b.c"]
    assert [m.subject for m in await collect(mid, 1)] == [f"{subj}.a.z"]
    for s in (star, gt, mid):
        await assert_no_more(s, 0.05)


async def test_queue_groups(shared_server, conns, subj):
    n = 200
    a = await conns.connect(shared_server)
    b = await conns.connect(shared_server)
    counts: dict[str, list[int]] = collections.defaultdict(list)
    total = asyncio.Event()
    expected = 4 * n  # two groups (one copy each) + two plain subscribers (a copy each)

    def handler(name):
        async def cb(msg):
            counts[name].append(int(msg.data))
            if sum(len(v) for v in counts.values()) == expected:
                total.set()
        return cb

    await a.subscribe(subj, queue="workers", cb=handler("w1"))
    await b.subscribe(subj, queue="workers", cb=handler("w2"))
    await a.subscribe(subj, queue="audit", cb=handler("a1"))
    await b.subscribe(subj, queue="audit", cb=handler("a2"))
    await a.subscribe(subj, cb=handler("p1"))
    await b.subscribe(subj, cb=handler("p2"))
    await a.flush()
    await b.flush()
    pub = await conns.connect(shared_server)
    for i in range(n):
        await pub.publish(subj, str(i).encode())
    await asyncio.wait_for(total.wait(), 3)
    assert sorted(counts["w1"] + counts["w2"]) == list(range(n))
    assert sorted(counts["a1"] + counts["a2"]) == list(range(n))
    assert counts["p1"] == list(range(n)) and counts["p2"] == list(range(n))
    assert all(counts[k] for k in ("w1", "w2", "a1", "a2")), "random member selection starved a member"


async def test_echo_off(shared_server, conns, subj):
    quiet = await conns.connect(shared_server, no_echo=True)
    other = await conns.connect(shared_server)
    sub = await quiet.subscribe(subj)
    await quiet.publish(subj, b"mine")
    await quiet.flush()
    await other.publish(subj, b"theirs")
    msgs = await collect(sub, 1)
    assert msgs[0].data == b"theirs"
    await assert_no_more(sub)


async def test_verbose_and_pedantic_client(shared_server, conns, subj):
    # nats-py must cope with +OK after every op.
    nc = await conns.connect(shared_server, verbose=True, pedantic=True)
    sub = await nc.subscribe(subj)
    await nc.publish(subj, b"x")
    assert (await sub.next_msg(1)).data == b"x"
    await nc.flush()
    assert not conns.errors


# -- request / reply ------------------------------------------------------------------------------------------------

async def responder(nc, subject, queue=""):
    async def cb(msg):
        await msg.respond(b"re:" + msg.data)
    sub = await nc.subscribe(subject, queue=queue, cb=cb)
    await nc.flush()
    return sub


async def test_request_reply(shared_server, conns, subj):
    srv = await conns.connect(shared_server)
    await responder(srv, subj)
    nc = await conns.connect(shared_server)
    for i in range(20):
        msg = await nc.request(subj, b"%d" % i, timeout=1)
        assert msg.data == b"re:%d" % i


async def test_request_old_style(shared_server, conns, subj):
    srv = await conns.connect(shared_server)
    await responder(srv, subj)
    nc = await conns.connect(shared_server)
    msg = await nc.request(subj, b"old", timeout=1, old_style=True)
    assert msg.data == b"re:old"


async def test_concurrent_requests(shared_server, conns, subj):
    srv = await conns.connect(shared_server)
    await responder(srv, subj, queue="svc")
    await responder(await conns.connect(shared_server), subj, queue="svc")
    nc = await conns.connect(shared_server)
    replies = await asyncio.gather(*(nc.request(subj, b"%d" % i, timeout=2) for i in range(100)))
    assert [r.data for r in replies] == [b"re:%d" % i for i in range(100)]


async def test_request_timeout_when_responder_is_silent(shared_server, conns, subj):
    srv = await conns.connect(shared_server)
    await srv.subscribe(subj)  # interest, but never answers
    await srv.flush()
    nc = await conns.connect(shared_server)
    with pytest.raises(NatsTimeoutError):
        await nc.request(subj, b"?", timeout=0.2)


async def test_no_responders(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(NoRespondersError):
        await nc.request(f"{subj}.nobody", b"?", timeout=2)
    # The 503 comes back at once, not after the timeout.
    assert loop.time() - t0 < 1


async def test_no_responders_old_style(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    with pytest.raises(NoRespondersError):
        await nc.request(f"{subj}.nobody", b"?", timeout=2, old_style=True)


# -- headers --------------------------------------------------------------------------------------------------------

async def test_headers(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    sub = await nc.subscribe(subj)
    await nc.publish(subj, b"body", headers={"X-Trace": "abc", "Content-Type": "text/plain"})
    await nc.publish(subj, b"", headers={"Only": "header"})
    m1, m2 = await collect(sub, 2)
    assert m1.data == b"body"
    assert m1.headers == {"X-Trace": "abc", "Content-Type": "text/plain"}
    assert m2.data == b"" and m2.headers == {"Only": "header"}


async def test_request_with_headers_and_reply_headers(shared_server, conns, subj):
    srv = await conns.connect(shared_server)

    async def cb(msg):
        await srv.publish(msg.reply, msg.data.upper(), headers={"Echo": msg.headers.get("Ask", "")})

    await srv.subscribe(subj, cb=cb)
    await srv.flush()
    nc = await conns.connect(shared_server)
    msg = await nc.request(subj, b"abc", headers={"Ask": "yes"}, timeout=1)
    assert msg.data == b"ABC"
    assert msg.headers == {"Echo": "yes"}


# -- unsubscribe / auto-unsubscribe ---------------------------------------------------------------------------------

async def test_unsubscribe(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    sub = await nc.subscribe(subj)
    await nc.publish(subj, b"1")
    assert (await sub.next_msg(1)).data == b"1"
    await sub.unsubscribe()
    watcher = await nc.subscribe(subj)
    await nc.publish(subj, b"2")
    assert (await watcher.next_msg(1)).data == b"2"


async def test_unsubscribe_with_max(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    got: list[bytes] = []

    async def cb(msg):
        got.append(msg.data)

    sub = await nc.subscribe(subj, cb=cb)
    await sub.unsubscribe(limit=3)
    pub = await conns.connect(shared_server)
    for i in range(6):
        await pub.publish(subj, b"%d" % i)
    await pub.flush()
    await nc.flush()
    await asyncio.sleep(0.05)
    assert got == [b"0", b"1", b"2"]
    assert sub.delivered == 3


async def test_subscribe_max_msgs(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    sub = await nc.subscribe(subj, max_msgs=2)
    await sub.unsubscribe(limit=2)
    for i in range(4):
        await nc.publish(subj, b"%d" % i)
    await nc.flush()
    msgs = await collect(sub, 2)
    assert [m.data for m in msgs] == [b"0", b"1"]


# -- drain / flush --------------------------------------------------------------------------------------------------

async def test_drain_subscription(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    got: list[int] = []

    async def slow(msg):
        await asyncio.sleep(0.002)
        got.append(int(msg.data))

    sub = await nc.subscribe(subj, cb=slow)
    pub = await conns.connect(shared_server)
    for i in range(50):
        await pub.publish(subj, b"%d" % i)
    await pub.flush()
    await nc.flush()
    await sub.drain()
    # Everything that had arrived was processed, in order.
    assert got == list(range(50))
    await pub.publish(subj, b"late")
    await pub.flush()
    await nc.flush()
    assert got == list(range(50))


async def test_drain_connection(shared_server, conns, subj):
    nc = await conns.connect(shared_server, drain_timeout=5)
    got: list[int] = []

    async def slow(msg):
        await asyncio.sleep(0.001)
        got.append(int(msg.data))

    await nc.subscribe(subj, cb=slow)
    await nc.subscribe(f"{subj}.other", cb=slow)
    pub = await conns.connect(shared_server)
    for i in range(100):
        await pub.publish(subj, b"%d" % i)
    await pub.flush()
    await nc.flush()
    await nc.drain()
    assert nc.is_closed
    assert got == list(range(100))


async def test_flush(shared_server, conns, subj):
    a = await conns.connect(shared_server)
    b = await conns.connect(shared_server)
    sub = await b.subscribe(subj)
    await b.flush()
    for i in range(1000):
        await a.publish(subj, b"x")
    await a.flush(timeout=2)
    # After the publisher's flush returned the server has routed all 1000: the subscriber's flush proves they
    # are in its buffer.
    await b.flush(timeout=2)
    await asyncio.sleep(0.01)
    assert sub.pending_msgs == 1000


async def test_rtt(shared_server, conns):
    nc = await conns.connect(shared_server)
    rtt = await nc.rtt()
    assert 0 <= rtt < 1


# -- payload sizes --------------------------------------------------------------------------------------------------

async def test_large_payloads_near_max_payload(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    assert nc.max_payload == 1048576
    sub = await nc.subscribe(subj)
    sizes = [0, 1, 4095, 4096, 65536, 1048576 - 1, 1048576]
    for n in sizes:
        await nc.publish(subj, bytes([n % 251]) * n)
    for n in sizes:
        msg = await sub.next_msg(timeout=5)
        assert len(msg.data) == n and msg.data == bytes([n % 251]) * n


async def test_max_payload_with_headers(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    sub = await nc.subscribe(subj)
    body = b"z" * (1048576 - 200)
    await nc.publish(subj, body, headers={"K": "v"})
    msg = await sub.next_msg(timeout=5)
    assert msg.data == body and msg.headers == {"K": "v"}


async def test_payload_over_max_is_refused_by_client(server_factory, conns, subj):
    # nats-py checks max_payload from INFO before sending: the server's advertised limit is what it trusts.
    srv = server_factory(jetstream=False, config="max_payload: 1024\n")
    nc = await conns.connect(srv)
    assert nc.max_payload == 1024
    sub = await nc.subscribe(subj)
    await nc.publish(subj, b"a" * 1024)
    assert len((await sub.next_msg(1)).data) == 1024
    with pytest.raises(MaxPayloadError):
        await nc.publish(subj, b"a" * 1025)


# -- many subscriptions ---------------------------------------------------------------------------------------------

async def test_many_subscriptions(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    n = 1000
    counts = collections.Counter()
    done = asyncio.Event()

    async def cb(msg):
        counts[msg.subject] += 1
        if sum(counts.values()) == n:
            done.set()

    for i in range(n):
        await nc.subscribe(f"{subj}.{i}", cb=cb)
    pub = await conns.connect(shared_server)
    for i in range(n):
        await pub.publish(f"{subj}.{i}", b"")
    await asyncio.wait_for(done.wait(), 5)
    assert set(counts.values()) == {1} and len(counts) == n


async def test_unsubscribe_many(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    subs = [await nc.subscribe(f"{subj}.{i}") for i in range(200)]
    for s in subs[::2]:
        await s.unsubscribe()
    watcher = await nc.subscribe(f"{subj}.>")
    for i in range(200):
        await nc.publish(f"{subj}.{i}", b"")
    await collect(watcher, 200)
    for i, s in enumerate(subs):
        if i % 2:
            assert (await s.next_msg(1)).subject == f"{subj}.{i}"


# -- connection facts -----------------------------------------------------------------------------------------------

async def test_server_info_seen_by_client(shared_server, conns):
    nc = await conns.connect(shared_server)
    v = nc.connected_server_version
    assert v.major == 2 and v.minor >= 9
    assert isinstance(nc.client_id, int)
    assert nc._server_info["headers"] is True
    assert nc._server_info.get("jetstream") is True
    assert nc.is_connected


async def test_user_password(server_factory, conns):
    srv = server_factory("--user", "u", "--pass", "p", jetstream=False)
    nc = await conns.connect(srv, user="u", password="p")
    assert nc.is_connected
    await nc.flush()
    with pytest.raises(Exception) as e:
        await conns.connect(srv, user="u", password="wrong")
    assert "authorization violation" in str(e.value).lower()


async def test_token(server_factory, conns):
    srv = server_factory("--auth", "tok", jetstream=False)
    nc = await conns.connect(srv, token="tok")
    await nc.flush()
    with pytest.raises(Exception) as e:
        await conns.connect(srv, token="nope")
    assert "authorization violation" in str(e.value).lower()


async def test_closed_connection_refuses_publish(shared_server, conns, subj):
    nc = await conns.connect(shared_server)
    await nc.close()
    with pytest.raises(nats.errors.ConnectionClosedError):
        await nc.publish(subj, b"x")
