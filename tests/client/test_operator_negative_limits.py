"""Account (and user) JWT limits below -1, against both servers.

jwt v2 (OperatorLimits.Validate) accepts every number ("negative values mean unlimited"), but nats-server treats
only -1 (jwt.NoLimit) as no limit: it compares any other value, so ``count >= -2`` holds at once and the limit
admits nothing (accounts.go MaxTotalConnectionsReached, client.go subsAtLimit and processPub's payload check;
checked with nats-server 2.15.1).  ``data`` is not enforced for an account by nats-server at all, and JetStream
limits below -1 count as no limit where nats-server compares them with ``>= 0``.  Skiff does the same.  The leaf
limit is in tests/cluster/test_account_conns.py (it needs a leaf port).
"""
from __future__ import annotations

import base64
import json

import nats
import pytest

from tests import jwt_helpers as jh
from tests.client.test_operator import raw_connect
from tests.wire.rawclient import RawClient

LIMIT_ERR = b"-ERR 'maximum account active connections exceeded'\r\n"
SUBS_ERR = b"-ERR 'maximum subscriptions exceeded'\r\n"


def start(server_factory, limits: dict | None = None, jetstream: dict | None = None):
    """A server in operator mode (MEMORY resolver) with the system account and APP, whose JWT has ``limits``."""
    op, sys_key, app = jh.new_key("O"), jh.new_key("A"), jh.new_key("A")
    srv = server_factory(jetstream=bool(jetstream), config=f"""
operator: {jh.operator_jwt(op, system_account=sys_key.public)}
resolver: MEMORY
resolver_preload {{
  {sys_key.public}: {jh.account_jwt(sys_key, op, name="SYS")}
  {app.public}: {jh.account_jwt(app, op, name="APP", limits=limits, jetstream=jetstream)}
}}
""")
    return srv, op, sys_key, app


def login(srv, app, **user_limits):
    u = jh.new_key("U")
    return raw_connect(srv, jh.user_jwt(u, app, limits=user_limits or None), u)


def test_conn_below_minus_one_admits_no_client(server_factory):
    srv, *_, app = start(server_factory, {"conn": -2})
    c, line = login(srv, app)
    assert line == LIMIT_ERR
    c.assert_closed()
    c.close()


async def test_an_update_to_conn_below_minus_one_closes_every_client(server_factory, tmp_path):
    """updateAccountClaimsWithRefresh counts the account's clients against the new limit: with -2 every one is
    over it."""
    srv, op, sys_key, app = start(server_factory, {"conn": -1})
    held = [login(srv, app) for _ in range(2)]
    for c, line in held:
        assert line == b"PONG\r\n"
    su = jh.new_key("U")
    sys_nc = await nats.connect(srv.url, allow_reconnect=False, user_credentials=jh.write_creds(
        str(tmp_path / "sys.creds"), jh.user_jwt(su, sys_key), su))
    try:
        msg = await sys_nc.request(f"$SYS.REQ.ACCOUNT.{app.public}.CLAIMS.UPDATE",
                                   jh.account_jwt(app, op, name="APP", limits={"conn": -2}).encode(), timeout=2)
        assert json.loads(msg.data)["data"]["message"] == "jwt updated"
    finally:
        await sys_nc.close()
    for c, _ in held:
        assert c.read_line() == LIMIT_ERR
        c.assert_closed()
        c.close()


@pytest.mark.parametrize("where", ["account", "user"])
def test_subs_below_minus_one_admits_no_subscription(server_factory, where):
    """As ``subs: 0``: the client is told at once (after or before its PONG: nats-server sends it from a goroutine)
    and closed; a SUB sent right away is refused too."""
    srv, *_, app = start(server_factory, {"subs": -5} if where == "account" else None)
    user = {"subs": -5} if where == "user" else {}
    c, line = login(srv, app, **user)
    rest = c.assert_closed()
    assert sorted([line, *[x + b"\r\n" for x in rest.split(b"\r\n") if x]]) == [SUBS_ERR, b"PONG\r\n"]
    c.close()


@pytest.mark.parametrize("where", ["account", "user"])
def test_payload_below_minus_one_admits_no_publish_not_even_an_empty_one(server_factory, where):
    srv, *_, app = start(server_factory, {"payload": -3} if where == "account" else None)
    user = {"payload": -3} if where == "user" else {}
    c, line = login(srv, app, **user)
    assert line == b"PONG\r\n"
    c.send(b"SUB x 1\r\nPING\r\n")
    c.expect(b"PONG\r\n")
    c.send(b"PUB x 0\r\n\r\n")
    assert c.read_line() == b"-ERR 'Maximum Payload Violation'\r\n"
    c.assert_closed()
    c.close()


def test_a_pub_in_the_same_packet_as_connect_meets_the_account_payload_limit(server_factory):
    """CONNECT and PUB in one write: the account's ``payload`` limit (2) applies to the PUB already (nats-server sets
    the client's mpay in processConnect, before the parser reads on); Skiff's parser once kept the limits of the
    start of the read for the rest of it."""
    srv, *_, app = start(server_factory, {"payload": 2})
    u = jh.new_key("U")
    c = RawClient(port=srv.port)
    info = c.connect().info
    sig = base64.urlsafe_b64encode(u.sign(info["nonce"].encode())).rstrip(b"=").decode()
    opts = {"jwt": jh.user_jwt(u, app), "sig": sig, "verbose": False, "pedantic": False}
    c.send(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPUB x 5\r\nhello\r\nPING\r\n")
    assert c.read_line() == b"-ERR 'Maximum Payload Violation'\r\n"
    c.assert_closed()
    c.close()


def test_data_below_minus_one_limits_nothing(server_factory):
    """nats-server reads no account ``data`` limit: messages flow."""
    srv, *_, app = start(server_factory, {"data": -2})
    c, line = login(srv, app)
    assert line == b"PONG\r\n"
    c.send(b"SUB x 1\r\nPUB x 2\r\nhi\r\nPING\r\n")
    c.expect(b"MSG x 1 2\r\nhi\r\nPONG\r\n")
    c.close()


async def test_jetstream_limits_below_minus_one_limit_nothing(server_factory, tmp_path):
    """``mem_storage``/``disk_storage`` below -1 enable JetStream (not 0) and, like ``streams`` and ``consumer``
    below -1, hold nothing back: streams of both storages are made, take messages and get consumers."""
    js_limits = {"mem_storage": -2, "disk_storage": -2, "streams": -2, "consumer": -2}
    srv, _, _, app = start(server_factory, jetstream=js_limits)
    u = jh.new_key("U")
    nc = await nats.connect(srv.url, allow_reconnect=False, user_credentials=jh.write_creds(
        str(tmp_path / "app.creds"), jh.user_jwt(u, app), u))
    try:
        js = nc.jetstream()
        info = await js.account_info()
        assert (info.limits.max_memory, info.limits.max_storage) == (-2, -2)
        for storage in ("memory", "file"):
            await js.add_stream(name=f"S{storage}", subjects=[f"s.{storage}"], storage=storage)
            ack = await js.publish(f"s.{storage}", b"x")
            assert ack.seq == 1
            ci = await js.add_consumer(f"S{storage}", durable_name="d")
            assert ci.num_pending == 1
    finally:
        await nc.close()
