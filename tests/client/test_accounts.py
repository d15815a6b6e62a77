"""Accounts, nkey users, exports and imports, and JetStream per account, against both servers (issue #10).

One configuration, read by both servers: accounts A and B are separate subject spaces; A exports a stream ``pub.>``
(public) and a service ``svc.>`` (to B only), which B imports under the prefix ``from_a`` and as ``asvc.>``;
JetStream is enabled in B alone; an nkey user belongs to B; clients without credentials are B's user ``b``.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os

import nacl.signing
import nats
import nkeys
import pytest

from tests.wire.rawclient import RawClient


def _new_user_key() -> tuple[str, str]:
    sk = nacl.signing.SigningKey.generate()
    seed = nkeys.encode_seed(bytes(sk), nkeys.PREFIX_BYTE_USER)
    return seed.decode(), nkeys.from_seed(bytearray(seed)).public_key.decode()


SEED, NKEY = _new_user_key()
OTHER_SEED, _ = _new_user_key()

CONF = f"""
accounts {{
  A {{
    users = [{{user: a, password: a}}, {{user: a2, password: a2}}]
    exports = [{{stream: "pub.>"}}, {{service: "svc.>", accounts: [B]}}]
  }}
  B {{
    jetstream: enabled
    users = [{{user: b, password: b}}, {{nkey: {NKEY}}}]
    imports = [
      {{stream: {{account: A, subject: "pub.>"}}, prefix: from_a}}
      {{service: {{account: A, subject: "svc.>"}}, to: "asvc.>"}}
    ]
  }}
}}
no_auth_user: b
"""


@pytest.fixture
def srv(server_factory):
    return server_factory(config=CONF)


async def connect(srv, user=None, **kw):
    if user is not None:
        kw.update(user=user, password=user)
    return await nats.connect(srv.url, allow_reconnect=False, max_reconnect_attempts=0, **kw)


async def collect(nc, subject: str) -> list:
    got: list = []

    async def cb(m):
        got.append(m)

    await nc.subscribe(subject, cb=cb)
    # nats-py's flush() puts its PING ahead of a SUB still in its write buffer (priority), so the PONG can come
    # back before the server saw the SUB: let the client's flusher write the SUB first.
    await asyncio.sleep(0.05)
    await nc.flush()
    return got


async def settle(*ncs) -> None:
    for nc in ncs:
        await nc.flush()
    await asyncio.sleep(0.1)


async def received(got: list, n: int = 1, timeout: float = 3.0) -> list:
    """``got`` once it holds ``n`` messages (or after ``timeout``): deliveries on a loaded machine take a while."""
    for _ in range(int(timeout / 0.02)):
        if len(got) >= n:
            break
        await asyncio.sleep(0.02)
    return got


async def test_accounts_are_separate_subject_spaces(srv):
    a, a2, b = await connect(srv, "a"), await connect(srv, "a2"), await connect(srv, "b")
    in_a2, in_b = await collect(a2, "foo"), await collect(b, "foo")
    await a.publish("foo", b"x")
    await settle(a, a2, b)
    assert [m.data for m in await received(in_a2)] == [b"x"]
    assert in_b == []
    for nc in (a, a2, b):
        await nc.close()


async def test_stream_import_with_prefix(srv):
    a, b = await connect(srv, "a"), await connect(srv, "b")
    got = await collect(b, "from_a.pub.>")
    plain = await collect(b, "pub.>")
    await a.publish("pub.x", b"hello")
    await settle(a, b)
    assert [(m.subject, m.data) for m in await received(got)] == [("from_a.pub.x", b"hello")]
    assert plain == []  # only the prefixed subject exists in B
    await a.close()
    await b.close()


async def test_service_import_request_reply(srv):
    a, b = await connect(srv, "a"), await connect(srv, "b")

    async def responder(m):
        await m.respond(b"pong:" + m.subject.encode())

    await a.subscribe("svc.>", cb=responder)
    await a.flush()
    # nats-server adds the import's interest for the new subscription asynchronously: under load the very first
    # request can still find no responder (seen once in a full CI run), so the first answer is awaited.
    for _ in range(20):
        try:
            reply = await b.request("asvc.ping", b"", timeout=2)
            break
        except nats.errors.NoRespondersError:
            await asyncio.sleep(0.1)
    assert reply.data == b"pong:svc.ping"
    # The exporter's subject is not reachable from B under its own name.
    with pytest.raises(nats.errors.NoRespondersError):
        await b.request("svc.ping", b"", timeout=1)
    await a.close()
    await b.close()


async def test_no_auth_user_lands_in_its_account(srv):
    anon, b = await connect(srv), await connect(srv, "b")
    got = await collect(b, "hello")
    await anon.publish("hello", b"1")
    await settle(anon, b)
    assert [m.data for m in await received(got)] == [b"1"]
    await anon.close()
    await b.close()


async def test_nkey_user_connects_in_its_account(srv):
    nk = await connect(srv, nkeys_seed_str=SEED)
    b = await connect(srv, "b")
    got = await collect(b, "k")
    await nk.publish("k", b"signed")
    await settle(nk, b)
    assert [m.data for m in await received(got)] == [b"signed"]
    await nk.close()
    await b.close()


async def test_unknown_nkey_is_refused(srv):
    with pytest.raises(Exception) as e:
        await connect(srv, nkeys_seed_str=OTHER_SEED)
    assert "Authorization Violation" in str(e.value)


def test_wrong_nkey_signature_is_refused(srv):
    # The right public key with a signature over something other than the nonce.
    c = RawClient(port=srv.port)
    info = c.connect().info
    assert len(info["nonce"]) == 15  # 11 random bytes, base64url without padding
    kp = nkeys.from_seed(bytearray(SEED.encode()))
    sig = base64.urlsafe_b64encode(kp.sign(b"not the nonce")).rstrip(b"=").decode()
    c.send(b"CONNECT " + json.dumps({"nkey": NKEY, "sig": sig, "verbose": False}).encode() + b"\r\nPING\r\n")
    c.expect(b"-ERR 'Authorization Violation'\r\n")
    c.close()


def test_wrong_password_is_refused(srv):
    c = RawClient(port=srv.port)
    c.connect()
    c.send(b'CONNECT {"user":"a","pass":"b","verbose":false}\r\nPING\r\n')
    c.expect(b"-ERR 'Authorization Violation'\r\n")
    c.close()


async def test_jetstream_only_in_its_account(srv):
    a, b = await connect(srv, "a"), await connect(srv, "b")
    info = json.loads((await a.request("$JS.API.INFO", b"", timeout=2)).data)
    assert info["error"] == {"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"}
    created = json.loads((await a.request("$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["s"]}',
                                          timeout=2)).data)
    assert created["type"] == "io.nats.jetstream.api.v1.stream_create_response"
    assert created["error"]["err_code"] == 10039
    info = json.loads((await b.request("$JS.API.INFO", b"", timeout=2)).data)
    assert "error" not in info
    js = b.jetstream()
    await js.add_stream(name="S", subjects=["s"])
    ack = await js.publish("s", b"1")
    assert ack.stream == "S" and ack.seq == 1
    # The same subject in A is not captured by B's stream.
    await a.publish("s", b"2")
    await a.flush()
    assert (await js.stream_info("S")).state.messages == 1
    await a.close()
    await b.close()


async def test_stream_info_of_the_importers_stream_sees_imported_messages(srv):
    # A stream in B on the imported subjects stores what A publishes.
    a, b = await connect(srv, "a"), await connect(srv, "b")
    js = b.jetstream()
    await js.add_stream(name="IMP", subjects=["from_a.>"])
    await a.publish("pub.y", b"z")
    await a.flush()
    for _ in range(20):
        if (await js.stream_info("IMP")).state.messages == 1:
            break
        await asyncio.sleep(0.05)
    assert (await js.stream_info("IMP")).state.messages == 1
    await a.close()
    await b.close()


@pytest.mark.parametrize("conf,expect", [
    ('accounts { A { users = [{user: x, password: x}] }, B { users = [{user: x, password: y}] } }',
     'Duplicate user "x" detected'),
    ('accounts { "$G" { } }', '"$G" is a Reserved Account'),
    ('accounts { A { imports = [{stream: {account: Z, subject: "x"}}] } }', '"Z" account not defined for stream import'),
    ('accounts { A { users = [{nkey: "UABC", password: x}] } }', "Not a valid public nkey for a user"),
    ('accounts { A { exports = [{stream: "x", response: stream}] } }', "Detected response directive on non-service"),
    # opts.go parseAccountMsgTrace (the typo "Ttrace" is nats-server's)
    ('accounts { A { msg_trace: { dest: "t.*" } } }', 'Trace destination "t.*" is not valid'),
    ('accounts { A { trace_dest: 5 } }', 'Expected account message trace "trace_dest" to be a string or a map/struct, '
                                         'got int64'),
    ('accounts { A { msg_trace: { dest: 5 } } }', 'Field "dest" should be a string, got int64'),
    ('accounts { A { msg_trace: { dest: "t", sampling: 0 } } }',
     "Ttrace destination sampling value 0 is invalid, needs to be [1..100]"),
    ('accounts { A { msg_trace: { dest: "t", sampling: "101%" } } }',
     "Ttrace destination sampling value 101 is invalid, needs to be [1..100]"),
    ('accounts { A { msg_trace: { dest: "t", sampling: "half" } } }', 'Invalid trace destination sampling value "half"'),
    ('accounts { A { msg_trace: { dest: "t", sampling: true } } }',
     'Trace destination sampling field "sampling" should be an integer or a percentage, got bool'),
    ('accounts { A { msg_trace: { dest: "t", rate: 5 } } }',
     'Unknown field "rate" parsing account message trace map/struct "msg_trace"'),
    # allow_trace: a service export's, a stream import's (opts.go parseExportStreamOrService / parseImport...)
    ('accounts { A { exports = [{stream: "x", allow_trace: true}] } }', "Detected allow_trace directive on non-service"),
    ('accounts { A { exports = [{allow_trace: true, stream: "x"}] } }', "Detected allow_trace directive on non-service"),
    ('accounts { A { exports = [{service: "x"}] }, B { imports = [{service: {account: A, subject: "x"}, '
     'allow_trace: true}] } }', "Detected allow_trace directive on a non-stream"),
])
def test_configuration_errors(server_factory, conf, expect):
    with pytest.raises(RuntimeError) as e:
        server_factory(jetstream=False, config=conf)
    assert expect in str(e.value)


def test_import_of_a_private_export_is_refused(server_factory):
    conf = """accounts {
      A { exports = [{service: "svc", accounts: [B]}] }
      B { }
      C { imports = [{service: {account: A, subject: "svc"}}] }
    }"""
    with pytest.raises(RuntimeError) as e:
        server_factory(jetstream=False, config=conf)
    assert "svc" in str(e.value) and "not authorized" in str(e.value)


async def test_streams_are_stored_under_their_account(srv):
    b = await connect(srv, "b")
    await b.jetstream().add_stream(name="ONDISK", subjects=["ondisk"])
    await b.close()
    assert os.path.isdir(os.path.join(srv.store_dir, "jetstream", "B", "streams", "ONDISK"))
    assert not os.path.exists(os.path.join(srv.store_dir, "jetstream", "$G", "streams", "ONDISK"))


LIMITS_CONF = """accounts {
  L {
    users = [{user: l1, password: l1}, {user: l2, password: l2}]
    limits { max_connections: 1, max_subscriptions: 2, max_payload: 10 }
  }
}
"""


def test_account_limits(server_factory):
    srv = server_factory(jetstream=False, config=LIMITS_CONF)
    first = RawClient(port=srv.port)
    first.connect()
    first.send(b'CONNECT {"user":"l1","pass":"l1","verbose":false,"protocol":1}\r\nPING\r\n')
    first.expect(b"PONG\r\n")
    info = json.loads(first.read_line()[5:])  # protocol 1: a second INFO with connect_info
    assert info["connect_info"] is True and info["max_payload"] == 10 and info["remote_account"] == "L"
    # max_connections: the account is full.
    second = RawClient(port=srv.port)
    second.connect()
    second.send(b'CONNECT {"user":"l2","pass":"l2","verbose":false}\r\nPING\r\n')
    assert second.assert_closed() == b"-ERR 'maximum account active connections exceeded'\r\n"
    # max_subscriptions: the third SUB is refused, the connection stays.
    first.send(b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nPING\r\n")
    first.expect(b"-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n")
    # max_payload: a bigger message closes the connection.
    first.send(b"PUB x 20\r\n01234567890123456789\r\n")
    assert first.assert_closed() == b"-ERR 'Maximum Payload Violation'\r\n"
    # A place is free again once the first connection is gone.
    third = RawClient(port=srv.port)
    third.connect()
    third.send(b'CONNECT {"user":"l2","pass":"l2","verbose":false}\r\nPING\r\n')
    third.expect(b"PONG\r\n")
    third.close()


TWO_JS_CONF = """accounts {
  P { jetstream: enabled, users = [{user: p, password: p}] }
  Q { jetstream: enabled, users = [{user: q, password: q}] }
}
"""


async def test_jetstream_in_two_accounts(server_factory):
    """Each account has a JetStream of its own: same stream name, separate messages, separate directories."""
    srv = server_factory(config=TWO_JS_CONF)
    p, q = await connect(srv, "p"), await connect(srv, "q")
    for nc, n in ((p, 2), (q, 3)):
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(n):
            await js.publish("orders.new", b"%d" % i)
    assert (await p.jetstream().stream_info("ORDERS")).state.messages == 2
    assert (await q.jetstream().stream_info("ORDERS")).state.messages == 3
    # Consumers too: a pull in Q sees Q's messages only.
    sub = await q.jetstream().pull_subscribe("orders.>", durable="D", stream="ORDERS")
    msgs = await sub.fetch(3, timeout=2)
    assert [m.data for m in msgs] == [b"0", b"1", b"2"]
    for m in msgs:
        await m.ack()
    await p.close()
    await q.close()
    for acc in ("P", "Q"):
        assert os.path.isdir(os.path.join(srv.store_dir, "jetstream", acc, "streams", "ORDERS"))
    srv.restart()
    p, q = await connect(srv, "p"), await connect(srv, "q")
    assert (await p.jetstream().stream_info("ORDERS")).state.messages == 2
    assert (await q.jetstream().stream_info("ORDERS")).state.messages == 3
    await p.close()
    await q.close()


JS_LIMITS_CONF = """accounts {
  A {
    users: [{user: a, password: a}]
    jetstream: {
      max_mem: 64MB, max_file: 32MB, max_streams: 2, max_consumers: 2, max_ack_pending: 100,
      memory_max_stream_bytes: 2048, store_max_stream_bytes: 4096, max_stream_bytes: true
    }
  }
}
"""


async def test_account_jetstream_limits(server_factory):
    srv = server_factory(config=JS_LIMITS_CONF)
    nc = await connect(srv, "a")

    async def api(suffix: str, body: dict) -> dict:
        return json.loads((await nc.request("$JS.API." + suffix, json.dumps(body).encode(), timeout=3)).data)

    err = (await api("STREAM.CREATE.L", {"name": "L", "subjects": ["l"]}))["error"]
    assert (err["err_code"], err["description"]) == (10113, "account requires a stream config to have max bytes set")
    err = (await api("STREAM.CREATE.L", {"name": "L", "subjects": ["l"], "max_bytes": 65536}))["error"]
    assert (err["err_code"], err["description"]) == (
        10122, "stream max bytes exceeds account limit max stream bytes")
    assert "error" not in await api("STREAM.CREATE.L", {"name": "L", "subjects": ["l"], "max_bytes": 128})
    assert "error" not in await api("STREAM.CREATE.M", {"name": "M", "subjects": ["m"], "max_bytes": 128,
                                                        "storage": "memory"})
    err = (await api("STREAM.CREATE.N", {"name": "N", "subjects": ["n"], "max_bytes": 128}))["error"]
    assert err["err_code"] == 10027  # max_streams: 2
    info = await api("INFO", {})
    assert info["limits"] == {
        "max_memory": 64 * 1024 * 1024, "max_storage": 32 * 1024 * 1024, "max_streams": 2, "max_consumers": 2,
        "max_ack_pending": 100, "memory_max_stream_bytes": 2048, "storage_max_stream_bytes": 4096,
        "max_bytes_required": True}
    # max_ack_pending: the default is lowered to the account's limit, a larger one is refused.
    c = await api("CONSUMER.CREATE.L.C1", {"stream_name": "L", "config": {"name": "C1", "ack_policy": "explicit"}})
    assert c["config"]["max_ack_pending"] == 100
    err = (await api("CONSUMER.CREATE.L.C2", {"stream_name": "L", "config": {
        "name": "C2", "ack_policy": "explicit", "max_ack_pending": 500}}))["error"]
    assert (err["err_code"], err["description"]) == (10121, "consumer max ack pending exceeds system limit of 100")
    # max_consumers: 2 per stream (the account's limit applies to each stream without a smaller one).
    assert "error" not in await api("CONSUMER.CREATE.M.C3", {"stream_name": "M", "config": {"name": "C3"}})
    assert "error" not in await api("CONSUMER.CREATE.M.C4", {"stream_name": "M", "config": {"name": "C4"}})
    err = (await api("CONSUMER.CREATE.M.C5", {"stream_name": "M", "config": {"name": "C5"}}))["error"]
    assert err["err_code"] == 10026
    await nc.close()
