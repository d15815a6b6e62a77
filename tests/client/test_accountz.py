"""/accountz?acc=, ``$SYS.REQ.ACCOUNT.<acc>.INFO`` and ``$SYS.REQ.SERVER.PING.ACCOUNTZ`` show an account's exports
and imports, from the ``accounts {}`` block and from account JWTs, as nats-server 2.15.1 does (monitor.go
accountInfo, ExtImport, ExtExport; issue #10).

What is asserted was read off nats-server 2.15.1 with the same configurations, field by field.  Go writes exports
and imports from maps, so their order means nothing: they are compared sorted.  The JWT fields (``jwt``,
``issuer_key``, ``name_tag``, ``tags``, ``decoded_jwt``, ``validation_result_jwt``, ``revoked_user``) come from the
account JWT; ``decoded_jwt`` is the JWT decoded into jwt v2's AccountClaims struct and written back by Go, so its
keys are in struct order and the zero values of ``omitempty`` fields are gone (the JWTs here carry
``mem_storage: 0`` and friends, as nsc writes them).
"""
from __future__ import annotations

import asyncio
import base64
import json
import time
from datetime import datetime

import nats
import pytest

from tests import jwt_helpers as jh
from tests.client.test_operator import user
from tests.client.test_system_account import http_get

# ------------------------------------------------------------------------------------------------ helpers


def account_detail(srv, name: str) -> dict:
    status, body = http_get(srv, f"/accountz?acc={name}")
    assert status == 200, body
    return json.loads(body)["account_detail"]


def by_json(docs: list[dict]) -> list[dict]:
    return sorted(docs, key=lambda d: json.dumps(d, sort_keys=True))


def sys_imports(acc: str, sys_acc: str) -> list[dict]:
    """The service imports every account has from the system account (server.go addSystemAccountExports,
    registerSystemImports)."""
    def imp(subject: str, local: str, share: bool = False) -> dict:
        return {"subject": subject, "account": sys_acc, "to": local, "local_subject": local, "type": "service",
                "invalid": False, "share": share, "tracking": False}
    return [imp(f"$SYS.REQ.ACCOUNT.{acc}.CONNZ", "$SYS.REQ.SERVER.PING.CONNZ"),
            imp(f"$SYS.REQ.ACCOUNT.{acc}.STATZ", "$SYS.REQ.ACCOUNT.PING.STATZ"),
            imp(f"$SYS.REQ.USER.{acc}.INFO", "$SYS.REQ.USER.INFO", share=True),
            imp(f"$SYS.REQ.ACCOUNT.{acc}.CONNZ", "$SYS.REQ.ACCOUNT.PING.CONNZ")]


def stream_import(account: str, subject: str, local: str, invalid: bool = False) -> dict:
    return {"subject": subject, "account": account, "local_subject": local, "type": "stream", "invalid": invalid,
            "share": False, "tracking": False}


def service_import(account: str, subject: str, local: str) -> dict:
    return {"subject": subject, "account": account, "to": local, "local_subject": local, "type": "service",
            "invalid": False, "share": False, "tracking": False}


def go_local_time(secs: int) -> str:
    """Go's time.Unix(secs, 0) as JSON: the server's local zone, "Z" for a zero offset (both servers run here)."""
    return datetime.fromtimestamp(secs).astimezone().isoformat().replace("+00:00", "Z")


# ------------------------------------------------------------------------------------------------ accounts {}

CONF = """
accounts {
  ORDERS {
    users: [{user: orders, password: orders}]
    exports: [
      {stream: "orders.*"}
      {stream: "priv.>", accounts: [BILLING]}
      {service: "prices.*", accounts: [BILLING], response: singleton}
      {service: "many", response: stream}
    ]
  }
  BILLING {
    users: [{user: billing, password: billing}]
    imports: [
      {stream: {account: ORDERS, subject: "orders.*"}, prefix: shop}
      {stream: {account: ORDERS, subject: "priv.>"}, to: "x.>"}
      {service: {account: ORDERS, subject: "prices.*"}, to: "price.*"}
      {service: {account: ORDERS, subject: "many"}}
    ]
  }
  SYS { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""


async def test_config_accounts_exports_and_imports(server_factory):
    srv = server_factory(config=CONF, jetstream=False)
    orders = account_detail(srv, "ORDERS")
    # approved_accounts for a private export, the response type by nats-server's name for it (Streamed, not the
    # configuration's "stream"), no response type on a stream export.
    assert by_json(orders["exports"]) == by_json([
        {"subject": "orders.*", "type": "stream"},
        {"subject": "priv.>", "type": "stream", "approved_accounts": ["BILLING"]},
        {"subject": "prices.*", "type": "service", "response_type": "Singleton", "approved_accounts": ["BILLING"]},
        {"subject": "many", "type": "service", "response_type": "Streamed"}])
    assert by_json(orders["imports"]) == by_json(sys_imports("ORDERS", "SYS"))
    billing = account_detail(srv, "BILLING")
    assert "exports" not in billing
    # A stream import is listed without "to": local_subject is where its messages land (a prefix joined).
    assert by_json(billing["imports"]) == by_json([
        stream_import("ORDERS", "orders.*", "shop.orders.*"),
        stream_import("ORDERS", "priv.>", "x.>"),
        service_import("ORDERS", "prices.*", "price.*"),
        service_import("ORDERS", "many", "many"),
        *sys_imports("BILLING", "SYS")])
    assert (billing["name_tag"], billing["complete"], billing["expired"]) == ("BILLING", True, False)
    for key in ("jwt", "issuer_key", "decoded_jwt", "validation_result_jwt", "revoked_user", "tags"):
        assert key not in billing, key  # an account of the configuration file has no JWT
    # The same document through the system account: the account's INFO and a PING with the account option.
    nc = await nats.connect(srv.url, user="sys", password="sys", allow_reconnect=False)
    try:
        info = json.loads((await nc.request("$SYS.REQ.ACCOUNT.BILLING.INFO", b"", timeout=2)).data)["data"]
        ping = json.loads((await nc.request("$SYS.REQ.SERVER.PING.ACCOUNTZ", b'{"account": "BILLING"}',
                                            timeout=2)).data)["data"]["account_detail"]
    finally:
        await nc.close()
    for doc in (info, ping):
        assert by_json(doc["imports"]) == by_json(billing["imports"])
    # Refused: an account that does not exist (HTTP 400 with nats-server's text).
    assert http_get(srv, "/accountz?acc=NOPE") == (400, "Account NOPE does not exist")


JS_CONF = """
accounts {
  JS { jetstream: enabled, users: [{user: js, password: js}], exports: [{service: "$JS.API.>"}] }
  PLAIN { users: [{user: plain, password: plain}] }
  VIA { users: [{user: via, password: via}], imports: [{service: {account: JS, subject: "$JS.API.>"}}] }
  SYS { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""


async def test_jetstream_api_import_from_the_system_account(server_factory):
    """With JetStream on, every account but the system one imports ``$JS.API.>`` from the system account, shared
    (jetstream.go configJetStream, enableAllJetStreamServiceImportsAndMappings), JetStream enabled for it or not;
    an account without JetStream whose own service import already takes ``$JS.API.INFO`` gets none
    (enableJetStreamInfoServiceImportOnly, serviceImportShadowed)."""
    srv = server_factory(config=JS_CONF)
    js_api = {"subject": "$JS.API.>", "account": "SYS", "to": "$JS.API.>", "local_subject": "$JS.API.>",
              "type": "service", "invalid": False, "share": True, "tracking": False}
    for name, enabled in (("JS", True), ("PLAIN", False)):
        doc = account_detail(srv, name)
        assert doc["jetstream_enabled"] is enabled
        assert by_json(doc["imports"]) == by_json([js_api, *sys_imports(name, "SYS")])
    via = account_detail(srv, "VIA")
    assert by_json(via["imports"]) == by_json([service_import("JS", "$JS.API.>", "$JS.API.>"),
                                               *sys_imports("VIA", "SYS")])
    assert by_json(account_detail(srv, "SYS")["imports"]) == by_json(
        [x for x in sys_imports("SYS", "SYS") if x["subject"] == "$SYS.REQ.USER.SYS.INFO"])


# ------------------------------------------------------------------------------------------------ account JWTs

OP = jh.new_key("O")
SYS = jh.new_key("A")
EXP, EXP_SK, EXP_SCOPED = jh.new_key("A"), jh.new_key("A"), jh.new_key("A")
IMP, NOTOKEN, LATE = jh.new_key("A"), jh.new_key("A"), jh.new_key("A")
GONE_USER = jh.new_key("U")
NOW = int(time.time())
REVOKED_AT = NOW - 60

EXPORTS = [
    {"name": "pub", "type": "stream", "subject": "pub.>"},
    {"name": "priv", "type": "stream", "subject": "priv.>", "token_req": True,
     "revocations": {NOTOKEN.public: REVOKED_AT}},
    {"name": "echo", "type": "service", "subject": "svc.echo"},
    {"name": "stream responses", "type": "service", "subject": "svc.many", "response_type": "Stream"},
    {"name": "per account", "type": "stream", "subject": "acct.*.data", "account_token_position": 2},
]
# A scoped signing key: Go writes its UserScope with every field, the template from NewUserScope's unlimited
# subs, data and payload (signingkeys.go).
SCOPE = {"kind": "user_scope", "key": EXP_SCOPED.public, "role": "dev", "template": {"pub": {"allow": ["a.>"]}}}
ACCOUNT_EXP = jh.account_jwt(EXP, OP, name="EXP", signing_keys=[EXP_SK.public, SCOPE], exports=EXPORTS,
                             revocations={GONE_USER.public: REVOKED_AT}, tags=["team:a"])
IMP_IMPORTS = [
    {"type": "stream", "account": EXP.public, "subject": "pub.>", "local_subject": "exp.pub.>"},
    # The deprecated "to" of a stream import is a prefix, and earns a validation warning.
    {"type": "stream", "account": EXP.public, "subject": "priv.>", "to": "p",
     "token": jh.activation_jwt(IMP, EXP, "priv.>")},
    {"type": "service", "account": EXP.public, "subject": "svc.echo", "local_subject": "echo"},
    {"type": "service", "account": EXP.public, "subject": "svc.many"},
    {"type": "stream", "account": EXP.public, "subject": f"acct.{IMP.public}.data", "local_subject": "mine"},
]
ACCOUNT_IMP = jh.account_jwt(IMP, OP, name="IMP", imports=IMP_IMPORTS)
# A private import without a token is not wired: nats-server marks the account incomplete.
ACCOUNT_NOTOKEN = jh.account_jwt(NOTOKEN, OP, name="NOTOKEN", imports=[
    {"type": "stream", "account": EXP.public, "subject": "pub.>"},
    {"type": "stream", "account": EXP.public, "subject": "priv.>"}])


def op_conf(*extra: str) -> str:
    return f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver: MEMORY
resolver_preload {{
  {SYS.public}: {jh.account_jwt(SYS, OP, name="SYS")}
  {EXP.public}: {ACCOUNT_EXP}
  {IMP.public}: {ACCOUNT_IMP}
  {NOTOKEN.public}: {ACCOUNT_NOTOKEN}
""" + "".join(f"  {x}\n" for x in extra) + "}\n"

# What jh.account_jwt writes in "limits" that Go leaves out (omitempty zero values).
LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True, "conn": -1,
          "leaf": -1}


async def connect(srv, tmp_path, account: "jh.Key") -> nats.NATS:
    token, key = user(account)
    path = jh.write_creds(str(tmp_path / f"{key.public}.creds"), token, key)
    return await nats.connect(srv.url, user_credentials=path, allow_reconnect=False, connect_timeout=5)


async def settled(srv, name: str, check, timeout: float = 5.0) -> dict:
    """The account's detail once ``check`` holds: nats-server loads an account JWT when a user of it connects
    and may wire its imports a moment after the CONNECT is answered (docs/parity.md, operator mode)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = http_get(srv, f"/accountz?acc={name}")
        doc = json.loads(body)["account_detail"] if status == 200 else None
        if doc is not None and check(doc):
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: {status} {body[:2000]}")
        await asyncio.sleep(0.1)


@pytest.fixture
def op_srv(server_factory):
    return server_factory(config=op_conf(), jetstream=False)


async def test_jwt_account_exports_and_claims(op_srv, tmp_path):
    ncs = [await connect(op_srv, tmp_path, k) for k in (EXP, IMP)]
    try:
        exp = await settled(op_srv, EXP.public, lambda d: "exports" in d)
        # Exports as nats-server keeps them: subject, type, token_req, the response type by its name, revoked
        # activations as times; not the JWT's name or account_token_position.
        assert by_json(exp["exports"]) == by_json([
            {"subject": "pub.>", "type": "stream"},
            {"subject": "priv.>", "type": "stream", "token_req": True,
             "revoked_activations": {NOTOKEN.public: go_local_time(REVOKED_AT)}},
            {"subject": "svc.echo", "type": "service", "response_type": "Singleton"},
            {"subject": "svc.many", "type": "service", "response_type": "Streamed"},
            {"subject": "acct.*.data", "type": "stream"}])
        assert exp["jwt"] == ACCOUNT_EXP
        assert exp["issuer_key"] == OP.public
        assert (exp["name_tag"], exp["tags"]) == ("EXP", ["team:a"])
        assert exp["revoked_user"] == {GONE_USER.public: go_local_time(REVOKED_AT)}
        assert (exp["complete"], exp["expired"]) == (True, False)
        assert "validation_result_jwt" not in exp
        payload = _payload(ACCOUNT_EXP)
        expected = {
            "jti": payload["jti"], "iat": payload["iat"], "iss": OP.public, "name": "EXP", "sub": EXP.public,
            "nats": {
                "exports": [
                    {"name": "pub", "subject": "pub.>", "type": "stream"},
                    {"name": "priv", "subject": "priv.>", "type": "stream", "token_req": True,
                     "revocations": {NOTOKEN.public: REVOKED_AT}},
                    {"name": "echo", "subject": "svc.echo", "type": "service"},
                    {"name": "stream responses", "subject": "svc.many", "type": "service",
                     "response_type": "Stream"},
                    {"name": "per account", "subject": "acct.*.data", "type": "stream",
                     "account_token_position": 2}],
                "limits": LIMITS,
                "signing_keys": sorted([EXP_SK.public, {
                    "kind": "user_scope", "key": EXP_SCOPED.public, "role": "dev",
                    "template": {"pub": {"allow": ["a.>"]}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
                    "description": ""}], key=lambda k: k if isinstance(k, str) else k["key"]),
                "revocations": {GONE_USER.public: REVOKED_AT},
                "default_permissions": {"pub": {}, "sub": {}},
                "authorization": {},
                "tags": ["team:a"], "type": "account", "version": 2}}
        assert exp["decoded_jwt"] == expected
        # Key order too: Go writes a struct's fields in their declaration order.
        assert list(exp["decoded_jwt"]) == list(expected)
        assert list(exp["decoded_jwt"]["nats"]) == list(expected["nats"])
        assert list(exp["decoded_jwt"]["nats"]["limits"]) == list(LIMITS)
    finally:
        for nc in ncs:
            await nc.close()


def _payload(token: str) -> dict:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


async def test_jwt_account_imports(op_srv, tmp_path):
    ncs = [await connect(op_srv, tmp_path, k) for k in (EXP, IMP, NOTOKEN)]
    try:
        mine = [
            stream_import(EXP.public, "pub.>", "exp.pub.>"),
            stream_import(EXP.public, "priv.>", "p.priv.>"),
            service_import(EXP.public, "svc.echo", "echo"),
            service_import(EXP.public, "svc.many", "svc.many"),
            stream_import(EXP.public, f"acct.{IMP.public}.data", "mine")]
        want = by_json([*mine, *sys_imports(IMP.public, SYS.public)])
        imp = await settled(op_srv, IMP.public, lambda d: by_json(d.get("imports", [])) == want)
        assert (imp["name_tag"], imp["complete"], imp["jwt"]) == ("IMP", True, ACCOUNT_IMP)
        assert imp["validation_result_jwt"] == [
            {"description": "the field to has been deprecated (use LocalSubject instead)", "blocking": False,
             "time_check": False}]
        assert [im["subject"] for im in imp["decoded_jwt"]["nats"]["imports"]] == [i["subject"] for i in IMP_IMPORTS]
        # The import it may not make is left out and the account is incomplete; its users still connect.
        notoken = await settled(op_srv, NOTOKEN.public, lambda d: len(d.get("imports", [])) == 5)
        assert notoken["complete"] is False
        assert by_json(notoken["imports"]) == by_json([stream_import(EXP.public, "pub.>", "pub.>"),
                                                       *sys_imports(NOTOKEN.public, SYS.public)])
        # The same through the system account.
        sys_nc = await connect(op_srv, tmp_path, SYS)
        ncs.append(sys_nc)
        info = json.loads((await sys_nc.request(f"$SYS.REQ.ACCOUNT.{IMP.public}.INFO", b"", timeout=2)).data)
        ping = json.loads((await sys_nc.request("$SYS.REQ.SERVER.PING.ACCOUNTZ",
                                                json.dumps({"account": IMP.public}).encode(), timeout=2)).data)
        for doc in (info["data"], ping["data"]["account_detail"]):
            assert by_json(doc["imports"]) == want
            assert doc["decoded_jwt"] == imp["decoded_jwt"]
    finally:
        for nc in ncs:
            await nc.close()


async def test_expired_activation_leaves_an_invalid_import(server_factory, tmp_path):
    """An import whose activation token expires stays listed, flagged invalid, and carries nothing
    (accounts.go streamActivationExpired); the account stays complete."""
    ttl = 4
    expires = int(time.time()) + ttl
    late_jwt = jh.account_jwt(LATE, OP, name="LATE", imports=[
        {"type": "stream", "account": EXP.public, "subject": "priv.>",
         "token": jh.activation_jwt(LATE, EXP, "priv.>", exp=expires)}])
    srv = server_factory(config=op_conf(f"{LATE.public}: {late_jwt}"), jetstream=False)
    exp_nc, late_nc = await connect(srv, tmp_path, EXP), await connect(srv, tmp_path, LATE)
    try:
        sub = await late_nc.subscribe("priv.>")
        await late_nc.flush()
        late = await settled(srv, LATE.public, lambda d: len(d.get("imports", [])) == 5)
        assert time.time() < expires, "the server took the token's whole lifetime to start"
        assert stream_import(EXP.public, "priv.>", "priv.>") in late["imports"]
        await asyncio.sleep(max(0.0, expires + 1.5 - time.time()))
        late = await settled(srv, LATE.public, lambda d: len(d.get("imports", [])) == 5)
        assert stream_import(EXP.public, "priv.>", "priv.>", invalid=True) in late["imports"]
        assert late["complete"] is True
        await exp_nc.publish("priv.x", b"too late")
        await exp_nc.flush()
        with pytest.raises(nats.errors.TimeoutError):
            await sub.next_msg(timeout=0.5)
    finally:
        await exp_nc.close()
        await late_nc.close()


OLD, OLD_SK, OLD_GONE = jh.new_key("A"), jh.new_key("A"), jh.new_key("U")
# An account JWT as nsc 1.x wrote it (jwt v1), with what v1 never had added under "nats" (JetStream limits,
# default_permissions, tags and version there): jwt v2 reads it through v1AccountClaims.migrateV1
# (decoder_account.go), which keeps imports, exports, the NATS and account limits, signing keys and revocations,
# moves type and tags in from beside the standard claims, and sets version 1.
OLD_IMPORT = {"name": "p", "subject": "pub.>", "account": EXP.public, "to": "frompub", "type": "stream"}
OLD_EXPORTS = [{"name": "s", "subject": "old.>", "type": "stream"},
               {"name": "svc", "subject": "oldsvc", "type": "service", "response_type": "Stream"}]
ACCOUNT_OLD = jh.encode_v1({
    "sub": OLD.public, "name": "OLD", "type": "account", "tags": ["Team:Old", "b"],
    "nats": {"imports": [OLD_IMPORT], "exports": OLD_EXPORTS,
             "limits": {**LIMITS, "mem_storage": 1 << 20, "disk_storage": 1 << 20, "streams": 5},
             "signing_keys": [OLD_SK.public], "revocations": {OLD_GONE.public: REVOKED_AT},
             "default_permissions": {"pub": {"deny": ["x"]}}, "tags": ["ignored"], "version": 2}}, OP)


async def test_v1_account_jwt(server_factory, tmp_path):
    srv = server_factory(config=op_conf(f"{OLD.public}: {ACCOUNT_OLD}"))
    nc, sys_nc = await connect(srv, tmp_path, OLD), await connect(srv, tmp_path, SYS)
    try:
        doc = await settled(srv, OLD.public, lambda d: len(d.get("imports", [])) == 6)
        payload = _payload(ACCOUNT_OLD)
        expected = {
            "jti": payload["jti"], "iat": payload["iat"], "iss": OP.public, "name": "OLD", "sub": OLD.public,
            "nats": {"imports": [OLD_IMPORT], "exports": OLD_EXPORTS, "limits": LIMITS,
                     "signing_keys": [OLD_SK.public], "revocations": {OLD_GONE.public: REVOKED_AT},
                     "default_permissions": {"pub": {}, "sub": {}}, "authorization": {},
                     "tags": ["Team:Old", "b"], "type": "account", "version": 1}}
        assert doc["decoded_jwt"] == expected
        assert list(doc["decoded_jwt"]["nats"]) == list(expected["nats"])
        assert (doc["jwt"], doc["issuer_key"], doc["name_tag"], doc["tags"]) == (
            ACCOUNT_OLD, OP.public, "OLD", ["Team:Old", "b"])
        assert doc["revoked_user"] == {OLD_GONE.public: go_local_time(REVOKED_AT)}
        assert doc["validation_result_jwt"] == [
            {"description": "the field to has been deprecated (use LocalSubject instead)", "blocking": False,
             "time_check": False}]
        assert by_json(doc["exports"]) == by_json([{"subject": "old.>", "type": "stream"},
                                                   {"subject": "oldsvc", "type": "service",
                                                    "response_type": "Streamed"}])
        js_api = {"subject": "$JS.API.>", "account": SYS.public, "to": "$JS.API.>", "local_subject": "$JS.API.>",
                  "type": "service", "invalid": False, "share": True, "tracking": False}
        assert by_json(doc["imports"]) == by_json([stream_import(EXP.public, "pub.>", "frompub.pub.>"), js_api,
                                                   *sys_imports(OLD.public, SYS.public)])
        # What migration drops is gone in use too: no JetStream (its limits were not v1's), no default
        # permissions (a publish to the subject they deny goes through).
        assert doc["jetstream_enabled"] is False
        reply = json.loads((await nc.request("$JS.API.INFO", b"", timeout=2)).data)
        assert reply["error"]["err_code"] == 10039
        sub = await nc.subscribe("x")
        await nc.publish("x", b"allowed")
        assert (await sub.next_msg(timeout=2)).data == b"allowed"
        info = json.loads((await sys_nc.request(f"$SYS.REQ.ACCOUNT.{OLD.public}.INFO", b"", timeout=2)).data)
        assert info["data"]["decoded_jwt"] == expected
    finally:
        await nc.close()
        await sys_nc.close()


# ------------------------------------------------------------------------------------------------ differences

async def test_differences_kept(op_srv, tmp_path):
    """docs/parity.md (accountz): each difference, asserted as each server behaves."""
    skiff = op_srv.kind == "skiff"
    status, body = http_get(op_srv, "/accountz")
    listed = set(json.loads(body)["accounts"])
    # Skiff loads every account JWT of the resolver at start (so that JetStream starts with the server);
    # nats-server loads one when it is first needed (a user connects, an import names it).
    preloaded = {SYS.public, EXP.public, IMP.public, NOTOKEN.public}
    assert listed == ({"$G"} | preloaded if skiff else {"$G", SYS.public})
    ncs = [await connect(op_srv, tmp_path, k) for k in (EXP, IMP, NOTOKEN)]
    try:
        await settled(op_srv, NOTOKEN.public, lambda d: len(d.get("imports", [])) == 5)
        exp = account_detail(op_srv, EXP.public)
        # Skiff's stream import is one subscription in the exporter's account per import (IMP's pub.>, priv.>,
        # acct.IMP.data and NOTOKEN's pub.>, above the 4 system imports); nats-server adds one there only for
        # a matching subscription of the importer, and here there is none.
        assert exp["subscriptions"] == (4 + 4 if skiff else 4)
        sys_doc = account_detail(op_srv, SYS.public)
        # nats-server's system account also exports $SYS.DEBUG.SUBSCRIBERS (an "old experiment", events.go);
        # Skiff does not serve that subject, so it does not export it.
        subjects = {e["subject"] for e in sys_doc["exports"]}
        assert ("$SYS.DEBUG.SUBSCRIBERS" in subjects) is (not skiff)
        assert {"$SYS.REQ.USER.*.INFO", "$SYS.REQ.ACCOUNT.*.CONNZ", "$SYS.REQ.ACCOUNT.*.STATZ"} <= subjects
    finally:
        for nc in ncs:
            await nc.close()


async def test_import_of_a_withdrawn_export_stays_listed_invalid(server_factory, tmp_path):
    """The exporter's new JWT no longer exports what an account imports: nats-server keeps the import, flagged
    invalid (updateAccountClaimsWithRefresh: im.invalid = !checkStreamImportAuthorized), and it carries nothing.
    Pushed to a full resolver as ``nsc push`` does."""
    jwt_dir = tmp_path / "jwt"
    jwt_dir.mkdir()
    srv = server_factory(config=f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver {{ type: full, dir: "{jwt_dir}", allow_delete: true, interval: "2m" }}
resolver_preload {{
  {SYS.public}: {jh.account_jwt(SYS, OP, name="SYS")}
}}
""", jetstream=False)
    exporter, importer = jh.new_key("A"), jh.new_key("A")
    sys_nc = await connect(srv, tmp_path, SYS)
    ncs = [sys_nc]
    try:
        async def push(token: str) -> None:
            reply = json.loads((await sys_nc.request("$SYS.REQ.CLAIMS.UPDATE", token.encode(), timeout=2)).data)
            assert reply["data"]["code"] == 200, reply

        await push(jh.account_jwt(exporter, OP, name="X", exports=[
            {"type": "stream", "subject": "pub.>"}, {"type": "stream", "subject": "other.>"}]))
        await push(jh.account_jwt(importer, OP, name="I", imports=[
            {"type": "stream", "account": exporter.public, "subject": "pub.>"}]))
        x, i = await connect(srv, tmp_path, exporter), await connect(srv, tmp_path, importer)
        ncs += [x, i]
        valid = stream_import(exporter.public, "pub.>", "pub.>")
        await settled(srv, importer.public, lambda d: valid in d.get("imports", []))
        await push(jh.account_jwt(exporter, OP, name="X", exports=[{"type": "stream", "subject": "other.>"}]))
        invalid = stream_import(exporter.public, "pub.>", "pub.>", invalid=True)
        doc = await settled(srv, importer.public, lambda d: invalid in d.get("imports", []))
        assert doc["complete"] is True
        sub = await i.subscribe("pub.>")
        await i.flush()
        await x.publish("pub.x", b"withdrawn")
        await x.flush()
        with pytest.raises(nats.errors.TimeoutError):
            await sub.next_msg(timeout=0.5)
    finally:
        for nc in ncs:
            await nc.close()
