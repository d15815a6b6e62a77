"""Operator mode with the MEMORY resolver: the operator -> account -> user chain, against both servers.

One configuration (inline operator JWT, ``resolver: MEMORY``, ``resolver_preload``) read by both servers.  Keys and
JWTs are made for the module by tests/jwt_helpers.py with the nkeys package, as nsc would.  Accounts:

* ``A``: the default limits; a plain signing key and a scoped signing key whose template allows ``t.{{name()}}.>``;
  revokes user ``revoked``; allows bearer tokens.
* ``B``: at most 2 connections, bearer tokens disallowed.
* ``X``: signed by another operator, which the server does not trust.
"""
from __future__ import annotations

import asyncio
import base64
import json
import time

import nats
import pytest

from tests import jwt_helpers as jh
from tests.wire.rawclient import RawClient

OP = jh.new_key("O")
SYS = jh.new_key("A")
A, A_SK, A_SCOPED = jh.new_key("A"), jh.new_key("A"), jh.new_key("A")
B = jh.new_key("A")
X, OTHER_OP = jh.new_key("A"), jh.new_key("O")
NOW = int(time.time())

REVOKED = jh.new_key("U")
ACCOUNT_A = jh.account_jwt(
    A, OP, name="A",
    signing_keys=[A_SK.public, {"kind": "user_scope", "key": A_SCOPED.public, "role": "t",
                                "template": {"pub": {"allow": ["t.{{name()}}.>"]}, "sub": {"allow": ["t.>"]},
                                             "subs": -1, "data": -1, "payload": -1}}],
    revocations={REVOKED.public: NOW + 5})
ACCOUNT_B = jh.account_jwt(B, OP, name="B", limits={"conn": 2, "disallow_bearer": True})
ACCOUNT_X = jh.account_jwt(X, OTHER_OP, name="X")
ACCOUNT_SYS = jh.account_jwt(SYS, OP, name="SYS")

CONF = f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver: MEMORY
resolver_preload {{
  {A.public}: {ACCOUNT_A}
  {B.public}: {ACCOUNT_B}
  {X.public}: {ACCOUNT_X}
  {SYS.public}: {ACCOUNT_SYS}
}}
"""


@pytest.fixture
def srv(server_factory):
    return server_factory(config=CONF, jetstream=False)


def user(account: "jh.Key", signer: "jh.Key | None" = None, **kw) -> tuple[str, "jh.Key"]:
    u = kw.pop("key", None) or jh.new_key("U")
    signer = signer or account
    if signer is not account:
        kw.setdefault("issuer_account", account.public)
    return jh.user_jwt(u, signer, **kw), u


def raw_connect(srv, token: str, key: "jh.Key | None", sign_with: "jh.Key | None" = None) -> tuple[RawClient, bytes]:
    """CONNECT with a user JWT, signing the nonce with ``key`` (no ``sig`` when key is None); the first reply."""
    c = RawClient(port=srv.port)
    info = c.connect().info
    opts: dict = {"jwt": token, "verbose": False, "pedantic": False}  # protocol 0: no async INFO
    signer = sign_with or key
    if signer is not None:
        opts["sig"] = base64.urlsafe_b64encode(signer.sign(info["nonce"].encode())).rstrip(b"=").decode()
    c.send(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPING\r\n")
    return c, c.read_line()


def assert_refused(srv, token: str, key, **kw) -> None:
    c, line = raw_connect(srv, token, key, **kw)
    try:
        assert line == b"-ERR 'Authorization Violation'\r\n"
        c.assert_closed()
    finally:
        c.close()


def assert_accepted(srv, token: str, key, **kw) -> RawClient:
    c, line = raw_connect(srv, token, key, **kw)
    assert line == b"PONG\r\n", line
    return c


async def test_creds_file_connects_and_messages_flow_in_the_account(srv, tmp_path):
    token, key = user(A)
    creds = jh.write_creds(str(tmp_path / "a.creds"), token, key)
    nc = await nats.connect(srv.url, user_credentials=creds, allow_reconnect=False)
    other_token, other_key = user(A, A_SK)
    other = await nats.connect(srv.url, user_credentials=jh.write_creds(str(tmp_path / "b.creds"), other_token,
                                                                       other_key), allow_reconnect=False)
    sub = await other.subscribe("hello")
    await other.flush()
    await nc.publish("hello", b"world")
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"world"
    await nc.close()
    await other.close()


def test_info_carries_a_nonce_and_requires_auth(srv):
    c = RawClient(port=srv.port)
    info = c.connect().info
    c.close()
    assert info["auth_required"] is True and len(info["nonce"]) == 15


def test_accounts_are_separate_subject_spaces(srv):
    ta, ka = user(A)
    tb, kb = user(B)
    a = assert_accepted(srv, ta, ka)
    b = assert_accepted(srv, tb, kb)
    b.send(b"SUB x 1\r\nPING\r\n")
    b.expect(b"PONG\r\n")
    a.send(b"PUB x 2\r\nhi\r\nPING\r\n")
    a.expect(b"PONG\r\n")
    b.expect_nothing(0.2)
    a.close()
    b.close()


def test_no_jwt_is_refused(srv):
    c = RawClient(port=srv.port)
    c.connect()
    c.send(b'CONNECT {"verbose":false,"user":"a","pass":"a"}\r\nPING\r\n')
    assert c.read_line() == b"-ERR 'Authorization Violation'\r\n"
    c.close()


def test_unknown_account_is_refused(srv):
    stranger = jh.new_key("A")
    token, key = user(stranger)
    assert_refused(srv, token, key)


def test_account_signed_by_an_untrusted_operator_is_refused(srv):
    token, key = user(X)
    assert_refused(srv, token, key)


def test_wrong_signature_is_refused(srv):
    token, key = user(A)
    assert_refused(srv, token, key, sign_with=jh.new_key("U"))


def test_missing_signature_is_refused(srv):
    token, _ = user(A)
    assert_refused(srv, token, None)


def test_tampered_user_jwt_is_refused(srv):
    token, key = user(A, pub={"allow": ["only.this"]})
    head, body, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["nats"]["pub"] = {}
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert_refused(srv, f"{head}.{forged}.{sig}", key)


def test_user_signed_by_an_unknown_key_is_refused(srv):
    token, key = user(A, jh.new_key("A"))  # issuer_account A, but not one of A's keys
    assert_refused(srv, token, key)


def test_expired_user_jwt_is_refused(srv):
    token, key = user(A, exp=int(time.time()) - 10)
    assert_refused(srv, token, key)


def test_not_yet_valid_user_jwt_is_refused(srv):
    token, key = user(A, nbf=int(time.time()) + 3600)
    assert_refused(srv, token, key)


def test_revoked_user_is_refused_and_a_newer_jwt_of_the_same_key_is_not(srv):
    token, key = user(A, key=REVOKED, iat=NOW)
    assert_refused(srv, token, key)
    newer, _ = user(A, key=REVOKED, iat=NOW + 10)  # issued after the revocation time
    assert_accepted(srv, newer, key).close()


def test_bearer_token_needs_no_signature(srv):
    token, _ = user(A, bearer=True)
    assert_accepted(srv, token, None).close()


def test_bearer_token_refused_when_the_account_disallows_it(srv):
    token, key = user(B, bearer=True)
    assert_refused(srv, token, key)


def test_account_connection_limit(srv):
    held = [assert_accepted(srv, *user(B)) for _ in range(2)]
    c, line = raw_connect(srv, *user(B))
    assert line == b"-ERR 'maximum account active connections exceeded'\r\n"
    c.assert_closed()
    c.close()
    held[0].close()
    time.sleep(0.2)
    assert_accepted(srv, *user(B)).close()
    held[1].close()


def test_user_jwt_permissions(srv):
    token, key = user(A, pub={"allow": ["ok.>"]}, sub={"deny": ["secret"]})
    c = assert_accepted(srv, token, key)
    c.send(b"PUB nope 0\r\n\r\nPING\r\n")
    assert c.read_line() == b"-ERR 'Permissions Violation for Publish to \"nope\"'\r\n"
    c.expect(b"PONG\r\n")
    c.send(b"SUB secret 1\r\nPING\r\n")
    assert c.read_line() == b"-ERR 'Permissions Violation for Subscription to \"secret\"'\r\n"
    c.expect(b"PONG\r\n")
    c.send(b"PUB ok.1 0\r\n\r\nPING\r\n")
    c.expect(b"PONG\r\n")
    c.close()


def test_scoped_signing_key_template_replaces_permissions(srv):
    token, key = user(A, A_SCOPED, name="bob", scoped=True)
    c = assert_accepted(srv, token, key)
    c.send(b"PUB t.bob.x 0\r\n\r\nPING\r\n")
    c.expect(b"PONG\r\n")
    c.send(b"PUB t.alice.x 0\r\n\r\n")
    assert c.read_line() == b"-ERR 'Permissions Violation for Publish to \"t.alice.x\"'\r\n"
    c.close()


def test_scoped_signing_key_refuses_a_user_with_its_own_permissions(srv):
    token, key = user(A, A_SCOPED, name="bob")  # -1 limits and empty pub/sub maps count as set
    assert_refused(srv, token, key)


def test_user_payload_limit(srv):
    token, key = user(A, limits={"payload": 4})
    c = assert_accepted(srv, token, key)
    c.send(b"PUB x 5\r\n12345\r\n")
    assert c.read_line() == b"-ERR 'Maximum Payload Violation'\r\n"
    c.close()


async def test_user_is_closed_when_its_jwt_expires(srv):
    token, key = user(A, exp=int(time.time()) + 2)
    c = assert_accepted(srv, token, key)
    try:
        data = c.read_until(b"\r\n", timeout=5)
        if data == b"PING\r\n":  # the first PING (server.go firstClientPingInterval, 2 s) may come first
            c.send(b"PONG\r\n")
            data = c.read_until(b"\r\n", timeout=5)
        assert data == b"-ERR 'User Authentication Expired'\r\n"
        c.assert_closed()
    finally:
        c.close()


def test_limits_left_out_of_the_jwts_are_zero_not_unlimited(server_factory):
    # Go decodes a missing limit as 0: an account JWT without "conn" admits nobody (nats-server 2.15.1).
    op, acc, acc2 = jh.new_key("O"), jh.new_key("A"), jh.new_key("A")
    bare = jh.encode({"sub": acc.public, "name": "bare", "nats": {"type": "account", "version": 2}}, op)
    conn_only = jh.encode({"sub": acc2.public, "name": "c", "nats": {"type": "account", "version": 2,
                                                                       "limits": {"conn": -1}}}, op)
    srv = server_factory(jetstream=False, config=f"""
operator: {jh.operator_jwt(op)}
resolver: MEMORY
resolver_preload {{
  {acc.public}: {bare}
  {acc2.public}: {conn_only}
}}
""")
    u = jh.new_key("U")
    c, line = raw_connect(srv, jh.encode({"sub": u.public, "nats": {"type": "user", "version": 2}}, acc), u)
    assert line == b"-ERR 'maximum account active connections exceeded'\r\n"
    c.close()
    # A user JWT without "subs" may hold 0 subscriptions: nats-server says so right after the PONG and closes.
    # (nats-server sends it from a goroutine: before or after the PONG.)
    c, line = raw_connect(srv, jh.encode({"sub": u.public, "nats": {"type": "user", "version": 2}}, acc2), u)
    rest = c.assert_closed()
    assert sorted([line, *[x + b"\r\n" for x in rest.split(b"\r\n") if x]]) == [
        b"-ERR 'maximum subscriptions exceeded'\r\n", b"PONG\r\n"]
    c.close()


async def test_conf_operator_example_with_its_creds_files(server_factory):
    """conf/operator/: the worked example starts on both servers and its .creds files log in (APP has JetStream)."""
    from tests.harness import ROOT

    text = (ROOT / "conf" / "operator" / "operator.conf").read_text()
    text = text.replace("listen: 127.0.0.1:4222\n", "").replace(
        "operator: conf/operator/operator.jwt", f"operator: {ROOT / 'conf' / 'operator' / 'operator.jwt'}")
    srv = server_factory(config=text)
    creds = ROOT / "conf" / "operator" / "creds"
    app = await nats.connect(srv.url, user_credentials=str(creds / "app.creds"), allow_reconnect=False)
    js = app.jetstream()
    await js.add_stream(name="EXAMPLE", subjects=["example.>"])
    assert (await js.publish("example.1", b"x")).seq == 1
    sys_nc = await nats.connect(srv.url, user_credentials=str(creds / "sys.creds"), allow_reconnect=False)
    reply = json.loads((await sys_nc.request("$SYS.REQ.USER.INFO", b"", timeout=2)).data)
    sys_account = text.split("# SYS\n", 1)[1].split(":", 1)[0].strip()
    assert reply["data"]["account"] == sys_account, reply
    await app.close()
    await sys_nc.close()


def test_src_and_connection_types_from_the_user_jwt(srv):
    assert_refused(srv, *user(A, src="10.0.0.0/8"))
    assert_accepted(srv, *user(A, src="10.0.0.0/8,127.0.0.1/32")).close()
    assert_refused(srv, *user(A, allowed_connection_types=["WEBSOCKET"]))
    assert_accepted(srv, *user(A, allowed_connection_types=["STANDARD", "WEBSOCKET"])).close()


async def test_memory_resolver_update_of_a_loaded_account(srv, tmp_path):
    token, key = user(SYS)
    sys_nc = await nats.connect(srv.url, user_credentials=jh.write_creds(str(tmp_path / "s.creds"), token, key),
                                allow_reconnect=False)

    async def update(acc_key, body: str) -> dict:
        msg = await sys_nc.request(f"$SYS.REQ.ACCOUNT.{acc_key.public}.CLAIMS.UPDATE", body.encode(), timeout=2)
        doc = json.loads(msg.data)
        doc.pop("server")
        return doc

    held = assert_accepted(srv, *user(B))  # loads B
    # B may now hold 1 connection: the next one is refused.
    assert await update(B, jh.account_jwt(B, OP, name="B", limits={"conn": 1})) == {
        "data": {"account": B.public, "code": 200, "message": "jwt updated"}}
    c, line = raw_connect(srv, *user(B))
    assert line == b"-ERR 'maximum account active connections exceeded'\r\n"
    c.close()
    held.close()
    # An account the server never loaded is skipped (the MEMORY resolver holds only the preloads).
    stranger = jh.new_key("A")
    assert await update(stranger, jh.account_jwt(stranger, OP)) == {
        "data": {"account": stranger.public, "code": 200, "message": "jwt update skipped"}}
    assert await update(stranger, "") == {
        "error": {"account": stranger.public, "code": 500, "description": "jwt update error - request body is empty"}}
    await sys_nc.close()


def test_strict_signing_key_usage(server_factory):
    op, sk, acc, acc2, acc_sk = jh.new_key("O"), jh.new_key("O"), jh.new_key("A"), jh.new_key("A"), jh.new_key("A")
    srv = server_factory(jetstream=False, config=f"""
operator: {jh.operator_jwt(op, signing_keys=[sk.public], strict=True)}
resolver: MEMORY
resolver_preload {{
  {acc.public}: {jh.account_jwt(acc, sk, signing_keys=[acc_sk.public])}
  {acc2.public}: {jh.account_jwt(acc2, op)}
}}
""")
    assert_accepted(srv, *user(acc, acc_sk)).close()
    # Strict all the way down: the account's own key no longer signs users...
    assert_refused(srv, *user(acc))
    # ...and an account signed by the operator's own key is not trusted.
    assert_refused(srv, *user(acc2))


def test_trusted_keys_without_an_operator_jwt(server_factory):
    op, acc = jh.new_key("O"), jh.new_key("A")
    srv = server_factory(jetstream=False, config=f"""
trusted_keys: [{op.public}]
resolver: MEMORY
resolver_preload {{
  {acc.public}: {jh.account_jwt(acc, op)}
}}
""")
    assert_accepted(srv, *user(acc)).close()
    assert_refused(srv, *user(jh.new_key("A")))


def test_clients_are_closed_when_their_account_jwt_expires(server_factory):
    op, acc = jh.new_key("O"), jh.new_key("A")
    srv = server_factory(jetstream=False, config=f"""
operator: {jh.operator_jwt(op)}
resolver: MEMORY
resolver_preload {{
  {acc.public}: {jh.account_jwt(acc, op, exp=int(time.time()) + 4)}
}}
""")  # 4 s: the server starts and the client logs in before the account expires, even on a loaded machine
    c = assert_accepted(srv, *user(acc))
    try:
        line = c.read_until(b"\r\n", timeout=12)
        while line == b"PING\r\n":  # nats-server's expiry comes a few seconds late, after a PING or two
            c.send(b"PONG\r\n")
            line = c.read_until(b"\r\n", timeout=12)
        assert line == b"-ERR 'Account Authentication Expired'\r\n"
        c.assert_closed()
    finally:
        c.close()
    assert_refused(srv, *user(acc))


# Fields of the wrong Go type make jwt.DecodeUserClaims fail in nats-server: the user is refused, never half-read.
WRONG_TYPES = [{"pub": []}, {"pub": "x"}, {"sub": {"allow": "x"}}, {"resp": 5}, {"resp": {"max": "a", "ttl": "b"}},
               {"src": 5}, {"allowed_connection_types": "STANDARD"}, {"issuer_account": 5}, {"subs": "x"},
               {"times": "x"}, {"bearer_token": "yes"}, {"tags": 5}, {"pub": {"allow": [5]}}]


@pytest.mark.parametrize("fields", WRONG_TYPES, ids=[json.dumps(w) for w in WRONG_TYPES])
def test_user_jwt_with_wrongly_typed_fields_is_refused(srv, fields):
    u = jh.new_key("U")
    n = {"type": "user", "version": 2, "subs": -1, "data": -1, "payload": -1, **fields}
    assert_refused(srv, jh.encode({"sub": u.public, "nats": n}, A), u)


@pytest.mark.parametrize("claims", [{"exp": "soon"}, {"iat": "x"}, {"nbf": [1]}, {"name": 5}])
def test_user_jwt_with_wrongly_typed_claims_is_refused(srv, claims):
    u = jh.new_key("U")
    payload = {"sub": u.public, "nats": {"type": "user", "version": 2, "subs": -1, "data": -1, "payload": -1}}
    assert_refused(srv, jh.encode({**payload, **claims}, A), u)
