"""The FULL directory resolver and its $SYS claim requests (nsc push), against both servers.

The operator names a system account; its user sends ``$SYS.REQ.CLAIMS.UPDATE`` / ``$SYS.REQ.ACCOUNT.<id>.CLAIMS.
UPDATE`` with account JWTs, reads them back with ``.CLAIMS.LOOKUP``, lists them and deletes them with an
operator-signed request, as ``nsc push`` / ``nsc delete`` do.  Replies are compared field by field with what
nats-server 2.15.1 answers (the ``server`` part describes the server and is not compared).
"""
from __future__ import annotations

import json
import os
import time

import nats
import pytest

from tests import jwt_helpers as jh
from tests.client.test_operator import assert_accepted, assert_refused, raw_connect, user

OP = jh.new_key("O")
SYS = jh.new_key("A")
ACCOUNT_SYS = jh.account_jwt(SYS, OP, name="SYS")


@pytest.fixture
def jwt_dir(tmp_path):
    d = tmp_path / "jwt"
    d.mkdir()
    return str(d)


@pytest.fixture
def srv(server_factory, jwt_dir):
    conf = f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver {{ type: full, dir: "{jwt_dir}", allow_delete: true, interval: "2m" }}
resolver_preload {{
  {SYS.public}: {ACCOUNT_SYS}
}}
"""
    return server_factory(config=conf, jetstream=False)


@pytest.fixture
async def sys_nc(srv, tmp_path):
    token, key = user(SYS)
    nc = await nats.connect(srv.url, user_credentials=jh.write_creds(str(tmp_path / "sys.creds"), token, key),
                            allow_reconnect=False)
    yield nc
    await nc.close()


async def request(nc, subject: str, body: bytes | str) -> dict:
    msg = await nc.request(subject, body.encode() if isinstance(body, str) else body, timeout=2)
    doc = json.loads(msg.data)
    assert "server" in doc
    doc.pop("server")
    return doc


async def test_push_then_connect_lookup_and_list(srv, sys_nc, jwt_dir):
    acc = jh.new_key("A")
    token, key = user(acc)
    assert_refused(srv, token, key)  # not pushed yet
    pushed = jh.account_jwt(acc, OP, name="pushed")
    assert await request(sys_nc, "$SYS.REQ.CLAIMS.UPDATE", pushed) == {
        "data": {"account": acc.public, "code": 200, "message": "jwt updated"}}
    assert open(os.path.join(jwt_dir, acc.public + ".jwt")).read() == pushed
    assert_accepted(srv, token, key).close()
    msg = await sys_nc.request(f"$SYS.REQ.ACCOUNT.{acc.public}.CLAIMS.LOOKUP", b"", timeout=2)
    assert msg.data.decode() == pushed
    missing = jh.new_key("A").public
    msg = await sys_nc.request(f"$SYS.REQ.ACCOUNT.{missing}.CLAIMS.LOOKUP", b"", timeout=2)
    assert msg.data == b""
    listed = await request(sys_nc, "$SYS.REQ.CLAIMS.LIST", "")
    assert sorted(listed["data"]) == sorted([acc.public, SYS.public])


async def test_update_for_one_account(srv, sys_nc):
    acc = jh.new_key("A")
    pushed = jh.account_jwt(acc, OP)
    assert await request(sys_nc, f"$SYS.REQ.ACCOUNT.{acc.public}.CLAIMS.UPDATE", pushed) == {
        "data": {"account": acc.public, "code": 200, "message": "jwt updated"}}
    other = jh.new_key("A").public
    assert await request(sys_nc, f"$SYS.REQ.ACCOUNT.{other}.CLAIMS.UPDATE", pushed) == {
        "error": {"account": other, "code": 500,
                  "description": "jwt update resulted in error - subject does not match jwt content"}}


async def test_bad_updates(srv, sys_nc):
    assert await request(sys_nc, "$SYS.REQ.CLAIMS.UPDATE", "not a jwt") == {
        "error": {"account": "n/a", "code": 500, "description": "jwt update resulted in error - expected 3 chunks"}}
    acc = jh.new_key("A")
    expired = jh.account_jwt(acc, OP, exp=int(time.time()) - 60)
    # Stored (time checks do not block an update), but its users are refused: the account has expired.
    assert await request(sys_nc, "$SYS.REQ.CLAIMS.UPDATE", expired) == {
        "data": {"account": acc.public, "code": 200, "message": "jwt updated"}}
    assert_refused(srv, *user(acc))


async def test_untrusted_account_jwt_is_stored_but_never_used(srv, sys_nc):
    acc = jh.new_key("A")
    rogue = jh.account_jwt(acc, jh.new_key("O"))
    reply = await request(sys_nc, "$SYS.REQ.CLAIMS.UPDATE", rogue)
    assert reply == {"data": {"account": acc.public, "code": 200, "message": "jwt updated"}}
    assert_refused(srv, *user(acc))


async def test_revocation_pushed_closes_the_connected_user(srv, sys_nc):
    acc = jh.new_key("A")
    await request(sys_nc, "$SYS.REQ.CLAIMS.UPDATE", jh.account_jwt(acc, OP, iat=int(time.time()) - 5))
    token, key = user(acc, iat=int(time.time()) - 5)
    c = assert_accepted(srv, token, key)
    revoking = jh.account_jwt(acc, OP, revocations={key.public: int(time.time())})
    reply = await request(sys_nc, "$SYS.REQ.CLAIMS.UPDATE", revoking)
    assert reply["data"]["message"] == "jwt updated"
    assert c.read_line(timeout=3) == b"-ERR 'User Authentication Revoked'\r\n"
    c.assert_closed()
    c.close()
    assert_refused(srv, token, key)


async def test_delete_by_the_operator(srv, sys_nc, jwt_dir):
    acc = jh.new_key("A")
    await request(sys_nc, "$SYS.REQ.CLAIMS.UPDATE", jh.account_jwt(acc, OP))
    not_self = jh.encode({"sub": jh.new_key("O").public, "nats": {"accounts": [acc.public]}}, OP)
    assert await request(sys_nc, "$SYS.REQ.CLAIMS.DELETE", not_self) == {
        "error": {"code": 500, "description": "delete accounts request by " + json.loads(
            __import__("base64").urlsafe_b64decode(not_self.split(".")[1] + "==="))["sub"]
            + " failed - not self signed"}}
    sys_del = jh.encode({"sub": OP.public, "nats": {"accounts": [SYS.public]}}, OP)
    assert await request(sys_nc, "$SYS.REQ.CLAIMS.DELETE", sys_del) == {
        "error": {"code": 500, "description": f"delete accounts request by {OP.public} failed - not allowed to "
                                              "delete system account"}}
    good = jh.encode({"sub": OP.public, "nats": {"accounts": [acc.public]}}, OP)
    assert await request(sys_nc, "$SYS.REQ.CLAIMS.DELETE", good) == {
        "data": {"code": 200, "message": "deleted 1 accounts"}}
    assert not os.path.exists(os.path.join(jwt_dir, acc.public + ".jwt"))
    msg = await sys_nc.request(f"$SYS.REQ.ACCOUNT.{acc.public}.CLAIMS.LOOKUP", b"", timeout=2)
    assert msg.data == b""


async def test_pushed_accounts_survive_a_restart(srv, sys_nc):
    acc = jh.new_key("A")
    await request(sys_nc, "$SYS.REQ.CLAIMS.UPDATE", jh.account_jwt(acc, OP))
    await sys_nc.close()
    srv.restart(kill=True)
    assert_accepted(srv, *user(acc)).close()


async def test_users_of_other_accounts_cannot_push(srv, sys_nc, tmp_path):
    b = jh.new_key("A")
    await request(sys_nc, "$SYS.REQ.CLAIMS.UPDATE", jh.account_jwt(b, OP))
    token, key = user(b)
    nc = await nats.connect(srv.url, user_credentials=jh.write_creds(str(tmp_path / "b.creds"), token, key),
                            allow_reconnect=False)
    c = jh.new_key("A")
    with pytest.raises(nats.errors.NoRespondersError):
        await nc.request("$SYS.REQ.CLAIMS.UPDATE", jh.account_jwt(c, OP).encode(), timeout=1)
    await nc.close()
    assert_refused(srv, *user(c))
