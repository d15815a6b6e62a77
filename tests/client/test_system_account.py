"""The system account and its $SYS services, against both servers with one configuration (issue #10 item 4).

Accounts A (a user with permissions), B (JetStream) and SYS (the system account, user ``sys``).  What is asserted
was read off nats-server 2.15.1 with the same file: the ServerAPIResponse envelope and its ServerInfo keys, the
documents of each request kind, who may ask what (a non-system account has its own ``$SYS`` subject space: it can
subscribe there and sees nothing, it can only ask who it is and about its own account), and the connect,
disconnect, account-connections and statsz events a system user sees for every account.
"""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import nats
import pytest
from nats.errors import NoRespondersError

CONF = """
accounts {
  A {
    users = [{user: a, password: a, permissions: {publish: {deny: ["nope.>"]}, subscribe: {allow: [">", "q.> grp"]}}}]
  }
  B { jetstream: enabled, users = [{user: b, password: b}] }
  SYS { users = [{user: sys, password: sys}] }
}
system_account: SYS
"""

SERVER_INFO_KEYS = {"name", "host", "id", "ver", "feature_flags", "jetstream", "flags", "seq", "time"}
CLIENT_INFO_KEYS = {"start", "host", "id", "acc", "user", "name", "lang", "ver", "name_tag", "kind", "client_type"}
ACCOUNT_STAT_KEYS = {"acc", "name", "conns", "leafnodes", "total_conns", "num_subscriptions", "sent", "received",
                     "slow_consumers"}
# The documents' keys nats-server 2.15.1 sends (a subset for varz: Skiff leaves out Go build details).
DATA_KEYS = {
    "CONNZ": {"server_id", "now", "num_connections", "total", "offset", "limit", "connections"},
    "SUBSZ": {"server_id", "now", "num_subscriptions", "num_cache", "num_inserts", "num_removes", "num_matches",
              "cache_hit_rate", "max_fanout", "avg_fanout", "total", "offset", "limit"},
    "JSZ": {"server_id", "now", "config", "memory", "storage", "reserved_memory", "reserved_storage", "accounts",
            "ha_assets", "api", "streams", "consumers", "messages", "bytes", "limits", "total"},
    "HEALTHZ": {"status", "status_code"},
    "ACCOUNTZ": {"server_id", "now", "system_account", "accounts"},
}
VARZ_KEYS = {"server_id", "server_name", "version", "host", "port", "connections", "total_connections",
             "subscriptions", "in_msgs", "out_msgs", "system_account", "jetstream", "start", "now", "uptime"}
STATSZ_KEYS = {"start", "mem", "cores", "cpu", "connections", "total_connections", "active_accounts",
               "subscriptions", "sent", "sent_to_clients", "received", "received_from_clients", "slow_consumers",
               "active_servers", "jetstream", "gomaxprocs"}


@pytest.fixture
def srv(server_factory):
    return server_factory(config=CONF)


async def connect(srv, user: str, **kw):
    return await nats.connect(srv.url, user=user, password=user, allow_reconnect=False,
                              max_reconnect_attempts=0, **kw)


async def gather(nc, subject: str, body: bytes = b"", wait: float = 0.5, headers=None) -> list:
    """Every reply to one request within ``wait`` (a PING is answered by each server)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(subject, body, reply=inbox, headers=headers)
    out = []
    try:
        while True:
            out.append(await sub.next_msg(timeout=wait))
    except (asyncio.TimeoutError, nats.errors.TimeoutError):
        pass
    await sub.unsubscribe()
    return out


async def ask(nc, subject: str, body: bytes = b"") -> dict:
    got = await gather(nc, subject, body)
    assert len(got) == 1, f"{subject}: {len(got)} replies"
    return json.loads(got[0].data)


async def ask_all(nc, *subjects: str) -> list[dict]:
    """``ask`` for each subject, all at once: each still has its own inbox and waits its full time for a second
    answer, but the waits overlap instead of adding up (0.5 s per request)."""
    return list(await asyncio.gather(*(ask(nc, s) for s in subjects)))


def http_get(srv, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(srv.http_url + path, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


# ---------------------------------------------------------------------------------------------------- requests
async def test_server_requests_answer_in_the_envelope(srv):
    sys_nc = await connect(srv, "sys")
    try:
        kinds = [*DATA_KEYS, *(k for k in ("VARZ", "IDZ", "STATSZ") if k not in DATA_KEYS)]
        pings = [f"$SYS.REQ.SERVER.PING.{kind}" for kind in kinds] + ["$SYS.REQ.SERVER.PING"]
        docs = dict(zip(pings, await ask_all(sys_nc, *pings)))
        for kind, keys in DATA_KEYS.items():
            doc = docs[f"$SYS.REQ.SERVER.PING.{kind}"]
            assert set(doc) == {"server", "data"}, kind
            assert set(doc["server"]) == SERVER_INFO_KEYS, kind
            assert doc["server"]["jetstream"] is True and doc["server"]["flags"] == 7
            assert keys <= set(doc["data"]), (kind, keys - set(doc["data"]))
        varz = docs["$SYS.REQ.SERVER.PING.VARZ"]["data"]
        assert VARZ_KEYS <= set(varz), VARZ_KEYS - set(varz)
        assert varz["system_account"] == "SYS"
        assert docs["$SYS.REQ.SERVER.PING.HEALTHZ"]["data"] == {"status": "ok", "status_code": 200}
        accountz = docs["$SYS.REQ.SERVER.PING.ACCOUNTZ"]["data"]
        assert sorted(accountz["accounts"]) == ["$G", "A", "B", "SYS"]
        # IDZ is the bare ServerID; STATSZ (and the old PING) the statsz message, no data envelope.
        idz = docs["$SYS.REQ.SERVER.PING.IDZ"]
        assert set(idz) == {"name", "host", "id"}
        for subject in ("$SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING.STATSZ"):
            st = docs[subject]
            assert set(st) == {"server", "statsz"}
            assert STATSZ_KEYS <= set(st["statsz"]), STATSZ_KEYS - set(st["statsz"])
            assert st["statsz"]["connections"] == 1
        # The same kinds addressed to this server by its id.
        direct, direct_idz = await ask_all(sys_nc, f"$SYS.REQ.SERVER.{idz['id']}.VARZ",
                                           f"$SYS.REQ.SERVER.{idz['id']}.IDZ")
        assert direct["data"]["server_id"] == idz["id"]
        assert direct_idz == idz
    finally:
        await sys_nc.close()


async def test_request_options_filter_and_errors(srv):
    sys_nc = await connect(srv, "sys")
    try:
        # All at once: each request keeps its own inbox and its full wait for answers (see ask_all).
        bad, unselected, untagged, doc, info = await asyncio.gather(
            ask(sys_nc, "$SYS.REQ.SERVER.PING.VARZ", b"{bad"),
            gather(sys_nc, "$SYS.REQ.SERVER.PING.VARZ", b'{"server_name": "no-such-server-x"}'),
            gather(sys_nc, "$SYS.REQ.SERVER.PING.STATSZ", b'{"tags": ["nope"]}'),
            ask(sys_nc, "$SYS.REQ.SERVER.PING.CONNZ", b'{"auth": true}'),
            ask(sys_nc, "$SYS.REQ.ACCOUNT.NOPE.INFO"))
        assert set(bad) == {"server", "error"}
        assert bad["error"] == {"code": 400,
                                "description": "invalid character 'b' looking for beginning of object key string"}
        # A filter that does not select this server: no answer at all (events.go filterRequest).
        assert unselected == [] and untagged == []
        # Endpoint options ride in the body: connections of one account with their user.
        (conn,) = doc["data"]["connections"]
        assert (conn["authorized_user"], conn["account"]) == ("sys", "SYS")
        # An account that does not exist.
        assert info["data"] is None
        assert info["error"] == {"code": 500, "description": "Account NOPE does not exist"}
    finally:
        await sys_nc.close()


async def test_account_requests_see_one_account(srv):
    sys_nc = await connect(srv, "sys")
    a = await connect(srv, "a", name="client-a")
    b = await connect(srv, "b")
    try:
        await a.subscribe("only.in.a")
        await b.subscribe("only.in.b")
        await a.flush()
        await b.flush()
        connz, subsz, info, statz, jsz, conns = await ask_all(
            sys_nc, "$SYS.REQ.ACCOUNT.A.CONNZ", "$SYS.REQ.ACCOUNT.A.SUBSZ", "$SYS.REQ.ACCOUNT.A.INFO",
            "$SYS.REQ.ACCOUNT.A.STATZ", "$SYS.REQ.ACCOUNT.B.JSZ", "$SYS.REQ.ACCOUNT.A.CONNS")
        connz, subsz, info, statz, jsz = (d["data"] for d in (connz, subsz, info, statz, jsz))
        assert [c["name"] for c in connz["connections"]] == ["client-a"]
        assert {s["account"] for s in subsz["subscriptions_list"]} == {"A"}
        assert "only.in.a" in {s["subject"] for s in subsz["subscriptions_list"]}
        assert "only.in.b" not in {s["subject"] for s in subsz["subscriptions_list"]}
        assert (info["account_name"], info["client_connections"], info["jetstream_enabled"]) == ("A", 1, False)
        assert {"subject", "account", "to", "local_subject", "type"} <= set(info["imports"][0])
        (stat,) = statz["account_statz"]
        assert set(stat) == ACCOUNT_STAT_KEYS and stat["conns"] == 1
        assert (jsz["name"], jsz["id"]) == ("B", "B")
        assert conns["type"] == "io.nats.server.advisory.v1.account_connections"
        assert ACCOUNT_STAT_KEYS <= set(conns) and conns["conns"] == 1
        # An account without connections has no CONNS answer (connsRequest) and no STATZ (errSkipZreq).
        assert await gather(sys_nc, "$SYS.REQ.ACCOUNT.SYS.CONNS", wait=0.3) != []  # sys itself is connected
        await a.close()
        await asyncio.sleep(0.1)
        assert await gather(sys_nc, "$SYS.REQ.ACCOUNT.A.CONNS", wait=0.3) == []
        assert await gather(sys_nc, "$SYS.REQ.ACCOUNT.A.STATZ", wait=0.3) == []
    finally:
        for nc in (sys_nc, a, b):
            if not nc.is_closed:
                await nc.close()


# ---------------------------------------------------------------------------------------------------- who may ask
async def test_user_info_answers_the_caller_in_any_account(srv):
    for user, account in (("a", "A"), ("b", "B"), ("sys", "SYS")):
        nc = await connect(srv, user)
        try:
            doc = await ask(nc, "$SYS.REQ.USER.INFO")
            assert set(doc["server"]) == SERVER_INFO_KEYS
            data = doc["data"]
            assert (data["user"], data["account"], data["account_name"]) == (user, account, account)
            if user == "a":  # the user's own permissions, as configured (list order is not kept by nats-server)
                perms = data["permissions"]
                assert perms["publish"] == {"deny": ["nope.>"]}
                assert set(perms) == {"publish", "subscribe"} and perms["subscribe"].keys() == {"allow"}
                assert sorted(perms["subscribe"]["allow"]) == [">", "q.> grp"]
            else:
                assert "permissions" not in data
        finally:
            await nc.close()


async def test_other_accounts_see_their_own_connections_only(srv):
    sys_nc = await connect(srv, "sys")
    a = await connect(srv, "a", name="client-a")
    b = await connect(srv, "b", name="client-b")
    try:
        for subject in ("$SYS.REQ.SERVER.PING.CONNZ", "$SYS.REQ.ACCOUNT.PING.CONNZ"):
            doc = await ask(a, subject)
            assert [c["name"] for c in doc["data"]["connections"]] == ["client-a"]
        statz = (await ask(b, "$SYS.REQ.ACCOUNT.PING.STATZ"))["data"]
        assert [s["acc"] for s in statz["account_statz"]] == ["B"]
    finally:
        for nc in (sys_nc, a, b):
            await nc.close()


async def test_non_system_user_cannot_reach_system_services(srv):
    """$SYS in account A is A's own subject space: nothing answers there and nothing is published there."""
    a = await connect(srv, "a")
    try:
        for subject in ("$SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING.VARZ", "$SYS.REQ.ACCOUNT.A.INFO",
                        "$SYS.REQ.ACCOUNT.B.CONNZ", "$SYS.REQ.SERVER.PING.JSZ"):
            with pytest.raises(NoRespondersError):
                await a.request(subject, b"", timeout=1)
        # Subscribing is allowed (no -ERR) and shows nothing of the other accounts.
        seen: list = []

        async def cb(m):
            seen.append(m.subject)

        await a.subscribe("$SYS.>", cb=cb)
        await a.flush()
        b = await connect(srv, "b")
        await b.close()
        await asyncio.sleep(0.5)
        assert seen == []
        assert a.is_connected
    finally:
        await a.close()


# ---------------------------------------------------------------------------------------------------- events
async def test_system_user_sees_connect_and_disconnect_of_other_accounts(srv):
    sys_nc = await connect(srv, "sys")
    events: list = []

    async def cb(m):
        events.append((m.subject, json.loads(m.data)))

    try:
        # Only account A's events: nats-server publishes the system user's own CONNECT/CONNS from its send loop,
        # which may reach this subscription after the SUB (events.go sendq), so a wider filter races.
        await sys_nc.subscribe("$SYS.ACCOUNT.A.>", cb=cb)
        await sys_nc.flush()
        a = await connect(srv, "a", name="client-a")
        await a.publish("x", b"hello")
        await a.flush()
        await a.close()
        for _ in range(50):
            if any(s.endswith(".DISCONNECT") for s, _ in events):
                break
            await asyncio.sleep(0.05)
        subjects = [s for s, _ in events]
        assert subjects == ["$SYS.ACCOUNT.A.SERVER.CONNS", "$SYS.ACCOUNT.A.CONNECT",
                            "$SYS.ACCOUNT.A.SERVER.CONNS", "$SYS.ACCOUNT.A.DISCONNECT"], subjects
        conns_up, connect_ev, conns_down, disconnect_ev = (d for _, d in events)
        assert (conns_up["conns"], conns_down["conns"]) == (1, 0)
        assert connect_ev["type"] == "io.nats.server.advisory.v1.client_connect"
        assert set(connect_ev) == {"type", "id", "timestamp", "server", "client"}
        assert set(connect_ev["server"]) == SERVER_INFO_KEYS
        assert set(connect_ev["client"]) == CLIENT_INFO_KEYS
        assert (connect_ev["client"]["acc"], connect_ev["client"]["user"]) == ("A", "a")
        assert disconnect_ev["type"] == "io.nats.server.advisory.v1.client_disconnect"
        assert set(disconnect_ev) == {"type", "id", "timestamp", "server", "client", "sent", "received", "reason"}
        assert CLIENT_INFO_KEYS | {"stop"} <= set(disconnect_ev["client"])
        assert disconnect_ev["reason"] == "Client Closed"
        # From the client's side: it sent one message of 5 bytes (plus its PINGs are not messages).
        assert disconnect_ev["sent"] == {"msgs": 1, "bytes": 5}
    finally:
        await sys_nc.close()


async def test_statsz_event_is_published_to_listeners(srv):
    sys_nc = await connect(srv, "sys")
    try:
        sub = await sys_nc.subscribe("$SYS.SERVER.*.STATSZ")
        await sys_nc.flush()
        msg = await sub.next_msg(timeout=3)  # 250 ms after start, then 500 ms, 1 s, ... up to 10 s
        doc = json.loads(msg.data)
        assert set(doc) == {"server", "statsz"}
        assert msg.subject == f"$SYS.SERVER.{doc['server']['id']}.STATSZ"
        assert STATSZ_KEYS <= set(doc["statsz"])
    finally:
        await sys_nc.close()


# ---------------------------------------------------------------------------------------------------- monitoring
async def test_monitoring_http_honours_accounts(srv):
    a = await connect(srv, "a", name="client-a")
    b = await connect(srv, "b", name="client-b")
    try:
        await a.subscribe("only.in.a")
        await a.flush()
        status, body = http_get(srv, "/connz?acc=A")
        assert status == 200
        doc = json.loads(body)
        assert [c["name"] for c in doc["connections"]] == ["client-a"]
        assert "account" not in doc["connections"][0]  # only with auth=true
        doc = json.loads(http_get(srv, "/connz?auth=true")[1])
        assert {(c["name"], c["account"], c["authorized_user"]) for c in doc["connections"]} == {
            ("client-a", "A", "a"), ("client-b", "B", "b")}
        doc = json.loads(http_get(srv, "/connz?acc=NOPE")[1])
        assert (doc["server_id"], doc["connections"]) == ("", None)
        doc = json.loads(http_get(srv, "/subsz?subs=1")[1])
        by_subject = {s["subject"]: s["account"] for s in doc["subscriptions_list"]}
        assert by_subject["only.in.a"] == "A"
        assert by_subject["$SYS.REQ.USER.INFO"] in {"A", "B", "SYS", "$G"}
        # varz counts the subscriptions of every account, as subsz does.
        assert json.loads(http_get(srv, "/varz")[1])["subscriptions"] == doc["num_subscriptions"]
        doc = json.loads(http_get(srv, "/subsz?subs=1&acc=A")[1])
        assert {s["account"] for s in doc["subscriptions_list"]} == {"A"}
        doc = json.loads(http_get(srv, "/accountz")[1])
        assert doc["system_account"] == "SYS" and sorted(doc["accounts"]) == ["$G", "A", "B", "SYS"]
        doc = json.loads(http_get(srv, "/accountz?acc=A")[1])
        assert doc["account_detail"]["account_name"] == "A"
        assert doc["account_detail"]["client_connections"] == 1
        assert http_get(srv, "/accountz?acc=NOPE") == (400, "Account NOPE does not exist")
        doc = json.loads(http_get(srv, "/jsz?accounts=true")[1])
        assert [d["name"] for d in doc["account_details"]] == ["B"]
        doc = json.loads(http_get(srv, "/accstatz")[1])
        assert sorted(s["acc"] for s in doc["account_statz"]) == ["A", "B"]
    finally:
        await a.close()
        await b.close()


async def test_default_system_account_exists_and_nobody_logs_into_it(server_factory):
    """Without system_account nats-server still has $SYS (varz, accountz), and every account can ask who it is."""
    srv = server_factory(config="accounts { A { users = [{user: a, password: a}] } }\n")
    doc = json.loads(http_get(srv, "/varz")[1])
    assert doc["system_account"] == "$SYS"
    doc = json.loads(http_get(srv, "/accountz")[1])
    assert sorted(doc["accounts"]) == ["$G", "$SYS", "A"]
    a = await connect(srv, "a")
    try:
        data = (await ask(a, "$SYS.REQ.USER.INFO"))["data"]
        assert (data["user"], data["account"]) == ("a", "A")
        with pytest.raises(NoRespondersError):
            await a.request("$SYS.REQ.SERVER.PING.VARZ", b"", timeout=1)
    finally:
        await a.close()


async def test_no_system_account_turns_it_off_without_jetstream(server_factory):
    conf = "no_system_account: true\naccounts { A { users = [{user: a, password: a}] } }\n"
    # With JetStream on, nats-server keeps $SYS anyway.
    with_js = server_factory(config=conf)
    assert json.loads(http_get(with_js, "/accountz")[1])["system_account"] == "$SYS"
    srv = server_factory(config=conf, jetstream=False)
    doc = json.loads(http_get(srv, "/accountz")[1])
    assert "system_account" not in doc and sorted(doc["accounts"]) == ["$G", "A"]
    assert "system_account" not in json.loads(http_get(srv, "/varz")[1])
    a = await connect(srv, "a")
    try:
        with pytest.raises(NoRespondersError):
            await a.request("$SYS.REQ.USER.INFO", b"", timeout=1)
    finally:
        await a.close()


async def test_kick_a_client_by_cid(srv):
    sys_nc = await connect(srv, "sys")
    closed = asyncio.Event()

    async def on_closed():
        closed.set()

    a = await connect(srv, "a", name="client-a", closed_cb=on_closed)
    try:
        connz, idz = await ask_all(sys_nc, "$SYS.REQ.ACCOUNT.A.CONNZ", "$SYS.REQ.SERVER.PING.IDZ")
        cid, sid = connz["data"]["connections"][0]["cid"], idz["id"]
        missing = await ask(sys_nc, f"$SYS.REQ.SERVER.{sid}.KICK", b'{"cid": 999999}')
        assert set(missing) == {"server", "error"}
        assert missing["error"] == {"code": 500, "description": "no such client or leafnode id"}
        kicked = await ask(sys_nc, f"$SYS.REQ.SERVER.{sid}.KICK", json.dumps({"cid": cid}).encode())
        assert set(kicked) == {"server"}
        await asyncio.wait_for(closed.wait(), 5)
        doc = json.loads(http_get(srv, f"/connz?state=closed&cid={cid}")[1])
        assert doc["connections"][0]["reason"] == "Kicked"
        # A non-system account cannot reach it.
        b = await connect(srv, "b")
        with pytest.raises(NoRespondersError):
            await b.request(f"$SYS.REQ.SERVER.{sid}.KICK", json.dumps({"cid": cid}).encode(), timeout=1)
        await b.close()
    finally:
        await sys_nc.close()
        if not a.is_closed:
            await a.close()


async def test_reply_compressed_when_the_request_accepts_gzip(srv):
    """events.go getAcceptEncoding: ``Accept-Encoding: gzip`` gets the envelope gzip-compressed, said in the reply's
    header (Skiff imports gzip only for such a request: server/core/sysacc.py)."""
    import gzip

    nc = await connect(srv, "sys")
    try:
        got = await gather(nc, "$SYS.REQ.SERVER.PING.VARZ", headers={"Accept-Encoding": "gzip"})
        assert len(got) == 1 and got[0].headers["Content-Encoding"] == "gzip"
        doc = json.loads(gzip.decompress(got[0].data))
        assert set(doc) == {"server", "data"} and VARZ_KEYS <= set(doc["data"])
        plain = await ask(nc, "$SYS.REQ.SERVER.PING.VARZ")  # and without the header, plain JSON as before
        assert plain["data"]["server_id"] == doc["data"]["server_id"]
    finally:
        await nc.close()


async def test_accept_encoding_is_read_by_its_exact_name(srv):
    """events.go getAcceptEncoding reads the header with getHeader, which matches the key as written: a request
    saying ``accept-encoding: gzip`` is answered in plain JSON by nats-server (Skiff compressed it until it matched
    the name exactly); the value is compared in any case (``GZIP``)."""
    import gzip

    nc = await connect(srv, "sys")
    try:
        for name in ("accept-encoding", "ACCEPT-ENCODING"):
            got = await gather(nc, "$SYS.REQ.SERVER.PING.VARZ", headers={name: "gzip"})
            assert len(got) == 1 and not (got[0].headers or {}).get("Content-Encoding")
            assert VARZ_KEYS <= set(json.loads(got[0].data)["data"])
        got = await gather(nc, "$SYS.REQ.SERVER.PING.VARZ", headers={"Accept-Encoding": "GZIP"})
        assert got[0].headers["Content-Encoding"] == "gzip" and gzip.decompress(got[0].data).startswith(b"{")
    finally:
        await nc.close()
