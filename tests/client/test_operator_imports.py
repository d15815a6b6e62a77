"""Account JWT exports and imports (nats-io/jwt v2 exports.go / imports.go; nats-server accounts.go checkAuth,
checkActivation), against both servers with one MEMORY-resolver configuration.

``EXP`` exports streams and services: public ones, private ones (``token_req``: the importer needs an activation
token), one that names the importer in a subject token (``account_token_position``), and a service answering
with a stream of responses.  Each other account imports from it: ``IMP`` everything it may, the others one private
export each in a way nats-server refuses.  A refused import is not an error anybody is sent: the account loads,
its users connect, and the import just carries nothing (a request gets "no responders"), exactly as nats-server
does.  An activation token that fails jwt v2's own validation (signed by neither the exporter nor for the importer)
makes the whole importing account invalid: its users get ``Authorization Violation``.

Every importing account also imports the public stream ``pub.>``: the exporter publishes the private subject first
and a public one after it, so when the public message arrives the private one would have arrived before it.
"""
from __future__ import annotations

import asyncio
import json
import time

import nats
import pytest
from nats.errors import NoRespondersError

from tests import jwt_helpers as jh
from tests.client.test_operator import assert_refused, user

OP = jh.new_key("O")
SYS = jh.new_key("A")
EXP, EXP_SK = jh.new_key("A"), jh.new_key("A")
IMP, NOTOKEN, EXPIRED, WRONG_SK, REVOKED, FOREIGN, BADTOKEN = (jh.new_key("A") for _ in range(7))
NOW = int(time.time())

PUB_IMPORT = {"type": "stream", "account": EXP.public, "subject": "pub.>"}
EXPORTS = [
    {"name": "pub", "type": "stream", "subject": "pub.>"},
    {"name": "priv", "type": "stream", "subject": "priv.>", "token_req": True,
     "revocations": {REVOKED.public: NOW + 5}},
    {"name": "echo", "type": "service", "subject": "svc.echo"},
    {"name": "private service", "type": "service", "subject": "svc.priv.>", "token_req": True},
    {"name": "stream responses", "type": "service", "subject": "svc.many", "response_type": "Stream"},
    {"name": "per account", "type": "stream", "subject": "acct.*.data", "account_token_position": 2},
]


def _priv(importer: "jh.Key", token: str = "", **kw) -> dict:
    im = {"type": "stream", "account": EXP.public, "subject": "priv.>", **kw}
    if token:
        im["token"] = token
    return im


ACCOUNT_EXP = jh.account_jwt(EXP, OP, name="EXP", signing_keys=[EXP_SK.public], exports=EXPORTS)
ACCOUNT_IMP = jh.account_jwt(IMP, OP, name="IMP", imports=[
    {"type": "stream", "account": EXP.public, "subject": "pub.>", "local_subject": "exp.pub.>"},
    _priv(IMP, jh.activation_jwt(IMP, EXP, "priv.>"), to="p"),
    {"type": "service", "account": EXP.public, "subject": "svc.echo", "local_subject": "echo"},
    {"type": "service", "account": EXP.public, "subject": "svc.priv.>",
     "token": jh.activation_jwt(IMP, EXP_SK, "svc.priv.>", "service", issuer_account=EXP.public)},
    {"type": "service", "account": EXP.public, "subject": "svc.many"},
    {"type": "stream", "account": EXP.public, "subject": f"acct.{IMP.public}.data", "local_subject": "mine"},
])
REFUSING = [
    (NOTOKEN, [_priv(NOTOKEN),
              {"type": "service", "account": EXP.public, "subject": "svc.priv.x"},
              {"type": "stream", "account": EXP.public, "subject": f"acct.{IMP.public}.data"}]),
    (EXPIRED, [_priv(EXPIRED, jh.activation_jwt(EXPIRED, EXP, "priv.>", exp=NOW - 10))]),
    # Signed by a key that says it speaks for EXP but is none of EXP's signing keys (isIssuerClaimTrusted).
    (WRONG_SK, [_priv(WRONG_SK, jh.activation_jwt(WRONG_SK, jh.new_key("A"), "priv.>",
                                                  issuer_account=EXP.public))]),
    # Issued at or before the export's revocation time for this account.
    (REVOKED, [_priv(REVOKED, jh.activation_jwt(REVOKED, EXP, "priv.>", iat=NOW))]),
]
ACCOUNTS = [(k, jh.account_jwt(k, OP, name=f"R{i}", imports=[PUB_IMPORT, *ims])) for i, (k, ims) in
            enumerate(REFUSING)]
# Activation tokens that fail jwt v2 Import.Validate: the account JWT itself is invalid.
ACCOUNT_FOREIGN = jh.account_jwt(FOREIGN, OP, name="FOREIGN", imports=[
    _priv(FOREIGN, jh.activation_jwt(FOREIGN, jh.new_key("A"), "priv.>"))])
ACCOUNT_BADTOKEN = jh.account_jwt(BADTOKEN, OP, name="BADTOKEN", imports=[
    _priv(BADTOKEN, jh.activation_jwt(IMP, EXP, "priv.>"))])  # a token made out to another account

CONF = f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver: MEMORY
resolver_preload {{
  {SYS.public}: {jh.account_jwt(SYS, OP, name="SYS")}
  {EXP.public}: {ACCOUNT_EXP}
  {IMP.public}: {ACCOUNT_IMP}
  {FOREIGN.public}: {ACCOUNT_FOREIGN}
  {BADTOKEN.public}: {ACCOUNT_BADTOKEN}
""" + "".join(f"  {k.public}: {v}\n" for k, v in ACCOUNTS) + "}\n"


@pytest.fixture
def srv(server_factory):
    return server_factory(config=CONF, jetstream=False)


async def connect(srv, tmp_path, account: "jh.Key", **kw) -> nats.NATS:
    token, key = user(account, **kw)
    path = jh.write_creds(str(tmp_path / f"{key.public}.creds"), token, key)
    # connect_timeout: nats-server asks the other servers of its cluster for an unknown exporter's JWT, up to the
    # resolver's fetch timeout (1.9 s) before it answers the CONNECT of an importer of it.
    return await nats.connect(srv.url, user_credentials=path, allow_reconnect=False, connect_timeout=5)


async def received(sub, n: int = 1) -> list[tuple[str, bytes]]:
    return [(m.subject, m.data) for m in [await sub.next_msg(timeout=2) for _ in range(n)]]


async def wired(exp, sub) -> None:
    """Wait until the public stream import delivers.  nats-server 2.15.1 sometimes wires the imports of an account
    it has just loaded for a new connection a moment later (seen under load on a fresh server; Skiff wires them
    before the CONNECT is answered)."""
    for k in range(50):
        await exp.publish(f"pub.wired.{k}", b"")
        try:
            await sub.next_msg(timeout=0.1)
            break
        except nats.errors.TimeoutError:
            continue
    else:
        raise AssertionError("the public stream import never delivered")
    await exp.flush()
    await asyncio.sleep(0.1)
    while True:  # drain the probes still on their way
        try:
            await sub.next_msg(timeout=0.05)
        except nats.errors.TimeoutError:
            return


async def test_public_and_private_streams_with_renaming_and_prefix(srv, tmp_path):
    exp, imp = await connect(srv, tmp_path, EXP), await connect(srv, tmp_path, IMP)
    sub = await imp.subscribe(">")
    await imp.flush()
    await wired(exp, sub)
    for subject in ("pub.a", "priv.b", f"acct.{IMP.public}.data", f"acct.{NOTOKEN.public}.data"):
        await exp.publish(subject, subject.encode())
    await exp.publish("pub.end", b"")
    got = await received(sub, 4)
    # local_subject renames, the deprecated "to" of a stream import is a prefix, and only the subject token at
    # account_token_position that names IMP is IMP's.
    assert got == [("exp.pub.a", b"pub.a"), ("p.priv.b", b"priv.b"), ("mine", f"acct.{IMP.public}.data".encode()),
                   ("exp.pub.end", b"")]
    await exp.close()
    await imp.close()


async def test_services_public_private_and_streamed_responses(srv, tmp_path):
    exp, imp = await connect(srv, tmp_path, EXP), await connect(srv, tmp_path, IMP)

    async def echo(msg):
        await msg.respond(b"echo:" + msg.subject.encode())

    async def many(msg):
        for i in range(3):
            await msg.respond(str(i).encode())

    await exp.subscribe("svc.echo", cb=echo)
    await exp.subscribe("svc.priv.>", cb=echo)
    await exp.subscribe("svc.many", cb=many)
    await exp.flush()
    # nats-server registers a service import's interest asynchronously: under load the first request can find no
    # responders (as in tests/client/test_accounts.py); wait for the first answer.
    for _ in range(20):
        try:
            first = await imp.request("echo", b"", timeout=2)
            break
        except NoRespondersError:
            await asyncio.sleep(0.1)
    assert first.data == b"echo:svc.echo"
    assert (await imp.request("svc.priv.x", b"", timeout=2)).data == b"echo:svc.priv.x"
    # A "Stream" response type lets every response through; the exporter's subject is not imported as such.
    inbox = imp.new_inbox()
    sub = await imp.subscribe(inbox)
    await imp.publish("svc.many", b"", reply=inbox)
    assert [d for _, d in await received(sub, 3)] == [b"0", b"1", b"2"]
    with pytest.raises(NoRespondersError):
        await imp.request("svc.echo", b"", timeout=2)
    await exp.close()
    await imp.close()


@pytest.mark.parametrize("account", [k for k, _ in REFUSING], ids=["no token", "expired token", "not a signing key",
                                                         "revoked"])
async def test_refused_stream_imports_carry_nothing(srv, tmp_path, account):
    exp, imp = await connect(srv, tmp_path, EXP), await connect(srv, tmp_path, account)
    sub = await imp.subscribe(">")
    await imp.flush()
    await wired(exp, sub)
    await exp.publish("priv.x", b"secret")
    await exp.publish(f"acct.{IMP.public}.data", b"IMP's")
    await exp.publish("pub.x", b"public")
    assert await received(sub) == [("pub.x", b"public")]
    await exp.close()
    await imp.close()


async def test_private_service_without_a_token_has_no_responders(srv, tmp_path):
    exp, imp = await connect(srv, tmp_path, EXP), await connect(srv, tmp_path, NOTOKEN)
    async def answer(msg):
        await msg.respond(b"no")

    await exp.subscribe("svc.priv.>", cb=answer)
    await exp.flush()
    with pytest.raises(NoRespondersError):
        await imp.request("svc.priv.x", b"", timeout=2)
    await exp.close()
    await imp.close()


@pytest.mark.parametrize("account", [FOREIGN, BADTOKEN], ids=["token of another account", "token for another"])
def test_an_invalid_activation_token_invalidates_the_importing_account(srv, account):
    assert_refused(srv, *user(account))


# ------------------------------------------------------------------ the directory resolver: pushes and updates
@pytest.fixture
def dir_srv(server_factory, tmp_path):
    d = tmp_path / "jwt"
    d.mkdir()
    conf = f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver {{ type: full, dir: "{d}" }}
resolver_preload {{
  {SYS.public}: {jh.account_jwt(SYS, OP, name="SYS")}
}}
"""
    return server_factory(config=conf, jetstream=False)


async def push(sys_nc, token: str) -> dict:
    doc = json.loads((await sys_nc.request("$SYS.REQ.CLAIMS.UPDATE", token.encode(), timeout=2)).data)
    doc.pop("server")
    return doc


async def test_imports_follow_pushes_and_updates(dir_srv, tmp_path):
    sys_nc = await connect(dir_srv, tmp_path, SYS)
    imp = jh.new_key("A")
    iat = int(time.time()) - 10
    importer = jh.account_jwt(imp, OP, name="I", iat=iat,
                              imports=[PUB_IMPORT, _priv(imp, jh.activation_jwt(imp, EXP, "priv.>", iat=iat))])
    # The importer first: its exporter is unknown, it loads without the imports (nats-server: "incomplete").
    assert (await push(sys_nc, importer))["data"]["message"] == "jwt updated"
    early = await connect(dir_srv, tmp_path, imp)
    # The exporter is pushed and then loaded by its first user: the importer's imports are wired then, for the
    # subscriptions made from then on (nats-server 2.15 does not give them to a subscription made before:
    # docs/parity.md).
    assert (await push(sys_nc, jh.account_jwt(EXP, OP, name="EXP", iat=iat, exports=EXPORTS)))["data"]["code"] == 200
    e = await connect(dir_srv, tmp_path, EXP)
    i = await connect(dir_srv, tmp_path, imp)
    sub = await i.subscribe(">")
    await i.flush()
    # nats-server wires them a moment later (1.4 s measured with 2.15.1), Skiff at once: wait for the first.
    first = None
    for k in range(50):
        await e.publish(f"priv.{k}", b"1")
        try:
            first = await sub.next_msg(timeout=0.2)
            break
        except nats.errors.TimeoutError:
            continue
    assert first is not None and first.subject.startswith("priv.")
    # The exporter revokes the importer's activation: the private stream stops, the public one goes on.
    revoking = [dict(x, revocations={imp.public: iat}) if x["subject"] == "priv.>" else x for x in EXPORTS]
    assert (await push(sys_nc, jh.account_jwt(EXP, OP, name="EXP", exports=revoking)))["data"]["code"] == 200
    await e.publish("priv.2", b"2")
    await e.publish("pub.2", b"2")
    assert await received(sub) == [("pub.2", b"2")]
    # The importer drops its import of pub.> and imports it renamed instead.
    renamed = jh.account_jwt(imp, OP, name="I", imports=[dict(PUB_IMPORT, local_subject="new.>")])
    assert (await push(sys_nc, renamed))["data"]["code"] == 200
    await e.publish("pub.3", b"3")
    assert await received(sub) == [("new.3", b"3")]
    for c in (e, i, early, sys_nc):
        await c.close()


async def test_activation_token_expiring_while_connected(dir_srv, tmp_path):
    sys_nc = await connect(dir_srv, tmp_path, SYS)
    imp = jh.new_key("A")
    await push(sys_nc, ACCOUNT_EXP)
    # Pushed once the server runs, so that a slow start does not eat the token's 3 seconds.
    exp_at = int(time.time()) + 3
    token = jh.activation_jwt(imp, EXP, "priv.>", exp=exp_at)
    await push(sys_nc, jh.account_jwt(imp, OP, imports=[PUB_IMPORT, _priv(imp, token)]))
    e, i = await connect(dir_srv, tmp_path, EXP), await connect(dir_srv, tmp_path, imp)
    sub = await i.subscribe(">")
    await i.flush()
    await wired(e, sub)
    await e.publish("priv.1", b"before")
    assert await received(sub) == [("priv.1", b"before")]
    # nats-server re-checks the import on a timer of the token's whole seconds left: it fires within a second
    # after exp.
    await asyncio.sleep(max(0.0, exp_at + 1.5 - time.time()))
    await e.publish("priv.2", b"after")
    await e.publish("pub.2", b"public")
    assert await received(sub) == [("pub.2", b"public")]
    for c in (e, i, sys_nc):
        await c.close()


VALIDATION = [
    ([_priv(IMP, jh.activation_jwt(IMP, jh.new_key("A"), "priv.>"))],
     'activation token doesn\'t match account for import "priv.>"'),
    ([{"type": "service", "account": EXP.public, "subject": "a.>"},
      {"type": "service", "account": EXP.public, "subject": "a.b"}],
     'overlapping subject namespace for "a.b" and "a.>" in same account "' + EXP.public + '"'),
    ([{"type": "stream", "account": EXP.public, "subject": "a.*", "local_subject": "b.$2"}],
     'Reference $2 in "b.$2" reference * in "a.*" that do not exist '
     "subject does not contain enough * or reference wildcards $[0-9]"),
]


@pytest.mark.parametrize("imports,errors", VALIDATION, ids=["token signer", "overlap", "renaming"])
async def test_a_push_with_invalid_imports_is_refused(dir_srv, tmp_path, imports, errors):
    sys_nc = await connect(dir_srv, tmp_path, SYS)
    reply = await push(sys_nc, jh.account_jwt(IMP, OP, imports=imports))
    assert reply == {"error": {"account": IMP.public, "code": 500,
                               "description": f"jwt validation failed - validation errors: [{errors}]"}}
    await sys_nc.close()
    assert_refused(dir_srv, *user(IMP))


async def test_a_push_with_a_wildcard_export_beyond_the_operator_limits_is_refused(dir_srv, tmp_path):
    sys_nc = await connect(dir_srv, tmp_path, SYS)
    reply = await push(sys_nc, jh.account_jwt(EXP, OP, limits={"exports": 5, "wildcards": False},
                                              exports=EXPORTS[:1]))
    assert reply["error"]["description"] == ("jwt validation failed - validation errors: [the account contains "
                                             "wildcard exports that are not allowed by the operator]")
    await sys_nc.close()


@pytest.mark.skiff_only  # nats-server implements these; Skiff refuses the account rather than run it without them
@pytest.mark.parametrize("nats_fields,what", [
    ({"exports": [{"type": "service", "subject": "s", "service_latency": {"sampling": 50, "results": "lat"}}]},
     "service latency tracking is"),
    ({"imports": [{"type": "service", "account": EXP.public, "subject": "svc.echo", "share": True}]},
     "service latency tracking is"),
    ({"mappings": {"a": [{"subject": "b", "weight": 100}]}}, "subject mappings are"),
], ids=["latency", "share", "mappings"])
async def test_what_skiff_does_not_implement_is_refused(dir_srv, tmp_path, nats_fields, what):
    sys_nc = await connect(dir_srv, tmp_path, SYS)
    await push(sys_nc, ACCOUNT_EXP)
    reply = await push(sys_nc, jh.account_jwt(IMP, OP, **nats_fields))
    assert reply == {"error": {"account": IMP.public, "code": 500, "description":
                               f"jwt update resulted in error - {what} not implemented by Skiff"}}
    await sys_nc.close()
    assert_refused(dir_srv, *user(IMP))


@pytest.mark.parametrize("trace,errors", [
    ({}, "the account Trace.Destination subject cannot be empty"),
    ({"dest": "tr.*", "sampling": 101}, 'the account Trace.Destination subject "tr.*" is not a valid publish subject '
                                        "the account Trace.Sampling value '101' is not valid, should be in the range "
                                        "[1..100]"),
], ids=["empty", "wildcard+sampling"])
async def test_a_push_with_an_invalid_trace_is_refused(dir_srv, tmp_path, trace, errors):
    """jwt v2 AccountClaims.Validate checks ``trace`` (even ``{}``) before any server could act on it: the account
    is not loaded by either server, with the same words."""
    sys_nc = await connect(dir_srv, tmp_path, SYS)
    reply = await push(sys_nc, jh.account_jwt(IMP, OP, trace=trace))
    assert reply == {"error": {"account": IMP.public, "code": 500,
                               "description": f"jwt validation failed - validation errors: [{errors}]"}}
    await sys_nc.close()
    assert_refused(dir_srv, *user(IMP))


async def test_an_account_jwt_trace_destination_traces_sampled_traceparents(dir_srv, tmp_path):
    """An account JWT's ``trace`` (jwt v2 MsgTrace) is the account's message trace destination: a sampled
    ``traceparent`` is traced there (server/core/msgtrace.py); an update without it stops that, for connected
    clients too."""
    sys_nc = await connect(dir_srv, tmp_path, SYS)
    acc = jh.new_key("A")
    assert (await push(sys_nc, jh.account_jwt(acc, OP, trace={"dest": "trace.jwt", "sampling": 100})))["data"]
    nc = await connect(dir_srv, tmp_path, acc)
    try:
        trace = await nc.subscribe("trace.jwt")
        sub = await nc.subscribe("foo")
        await nc.flush()
        sampled = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
        await nc.publish("foo", b"x", headers=sampled)
        assert (await sub.next_msg(timeout=2)).data == b"x"
        ev = json.loads((await trace.next_msg(timeout=2)).data)
        assert ev["events"][0]["acc"] == acc.public
        assert (await push(sys_nc, jh.account_jwt(acc, OP)))["data"]
        await nc.publish("foo", b"y", headers=sampled)
        assert (await sub.next_msg(timeout=2)).data == b"y"
        with pytest.raises(nats.errors.TimeoutError):
            await trace.next_msg(timeout=0.3)
    finally:
        await nc.close()
        await sys_nc.close()


async def test_an_import_jwt_with_allow_trace_lets_a_trace_follow_the_stream(dir_srv, tmp_path):
    """A stream import's ``allow_trace`` in an account JWT (jwt v2 Import.AllowTrace): the trace of a message the
    exporter publishes goes on into the importing account (server/core/msgtrace.py); without it, it stops."""
    sys_nc = await connect(dir_srv, tmp_path, SYS)
    await push(sys_nc, ACCOUNT_EXP)
    tracing, plain = jh.new_key("A"), jh.new_key("A")
    await push(sys_nc, jh.account_jwt(tracing, OP, imports=[dict(PUB_IMPORT, allow_trace=True)]))
    await push(sys_nc, jh.account_jwt(plain, OP, imports=[PUB_IMPORT]))
    e = await connect(dir_srv, tmp_path, EXP)
    subs = [await connect(dir_srv, tmp_path, k) for k in (tracing, plain)]
    try:
        for nc in subs:
            await nc.subscribe("pub.>")
            await nc.flush()
        trace = await e.subscribe("trace.jwt")
        await e.flush()
        for _ in range(50):  # nats-server wires imports a moment after the accounts load
            await e.publish("pub.x", b"x", headers={"Nats-Trace-Dest": "trace.jwt"})
            ev = json.loads((await trace.next_msg(timeout=2)).data)
            if len([x for x in ev["events"] if x["type"] == "se"]) == 2:
                break
            await asyncio.sleep(0.1)
        assert sorted(x["acc"] for x in ev["events"] if x["type"] == "se") == sorted([tracing.public, plain.public])
        assert [x["acc"] for x in ev["events"] if x["type"] == "eg"] == [tracing.public]
    finally:
        for nc in (e, *subs, sys_nc):
            await nc.close()
