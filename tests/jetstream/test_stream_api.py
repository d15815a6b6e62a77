"""The stream API ($JS.API.INFO, STREAM.*) against both servers: shapes, types, errors, paging, schemas."""
from __future__ import annotations

import base64
import json
import urllib.request

import pytest

from tests.jetstream.conftest import strip_dynamic

T = "io.nats.jetstream.api.v1."


async def test_account_info_fresh_server(fresh_jsc):
    r = await fresh_jsc.api("INFO")
    assert r["type"] == T + "account_info_response"
    assert list(r)[:8] == ["type", "memory", "storage", "reserved_memory", "reserved_storage", "streams",
                           "consumers", "limits"]
    assert (r["memory"], r["storage"], r["streams"], r["consumers"]) == (0, 0, 0, 0)
    assert r["limits"] == {"max_memory": -1, "max_storage": -1, "max_streams": -1, "max_consumers": -1,
                           "max_ack_pending": -1, "memory_max_stream_bytes": -1, "storage_max_stream_bytes": -1,
                           "max_bytes_required": False}
    # The request being answered is not counted yet; the next one sees it.
    assert (r["api"]["total"], r["api"]["errors"]) == (0, 0)
    await fresh_jsc.api("STREAM.INFO.NOPE")
    r = await fresh_jsc.api("INFO")
    assert (r["api"]["total"], r["api"]["errors"]) == (2, 1)
    # An account without streams: NAMES says null, LIST says [].
    r = await fresh_jsc.api("STREAM.NAMES")
    assert r == {"type": T + "stream_names_response", "total": 0, "offset": 0, "limit": 1024, "streams": None}
    r = await fresh_jsc.api("STREAM.LIST")
    assert r == {"type": T + "stream_list_response", "total": 0, "offset": 0, "limit": 256, "streams": []}
    await account_info_counts_streams_and_bytes(fresh_jsc)


async def account_info_counts_streams_and_bytes(fresh_jsc):
    await fresh_jsc.create("M", storage="memory")
    await fresh_jsc.create("F")
    await fresh_jsc.pub("M.x", b"hello")
    await fresh_jsc.pub("F.x", b"hello")
    r = await fresh_jsc.api("INFO")
    assert r["streams"] == 2
    assert r["memory"] == 3 + 5 + 16  # memory store: subject + data + 16
    assert r["storage"] == 22 + 3 + 5 + 8  # file store accounting without headers
    # The monitoring endpoints report the same totals.
    jsz = json.loads(urllib.request.urlopen(fresh_jsc.server.http_url + "/jsz", timeout=3).read())
    assert (jsz["streams"], jsz["messages"], jsz["bytes"]) == (2, 2, 24 + 38)
    assert (jsz["memory"], jsz["storage"]) == (24, 38)
    varz = json.loads(urllib.request.urlopen(fresh_jsc.server.http_url + "/varz", timeout=3).read())
    assert (varz["jetstream"]["stats"]["memory"], varz["jetstream"]["stats"]["storage"]) == (24, 38)


async def test_names_list_paging_and_filter(fresh_jsc):
    for n in ("C", "A", "B"):
        await fresh_jsc.create(n, storage="memory")
    r = await fresh_jsc.api("STREAM.NAMES")
    assert r["streams"] == ["A", "B", "C"] and r["total"] == 3
    r = await fresh_jsc.api("STREAM.NAMES", {"offset": 1})
    assert (r["streams"], r["offset"]) == (["B", "C"], 1)
    r = await fresh_jsc.api("STREAM.NAMES", {"offset": 10})
    assert (r["streams"], r["offset"], r["total"]) == (None, 3, 3)
    r = await fresh_jsc.api("STREAM.NAMES", {"subject": "B.x"})
    assert (r["streams"], r["total"]) == (["B"], 1)
    r = await fresh_jsc.api("STREAM.NAMES", "not json")  # ignored: only {...} / [...] bodies are decoded
    assert r["total"] == 3
    r = await fresh_jsc.api("STREAM.LIST", {"offset": 2})
    assert [s["config"]["name"] for s in r["streams"]] == ["C"]
    item = r["streams"][0]
    assert list(item) == ["config", "created", "state", "ts"]  # no cluster in LIST items
    # LIST shows the stored metadata only, without the dynamic _nats.ver / _nats.level.
    assert item["config"]["metadata"] == {"_nats.req.level": "0"}
    for n in ("A", "B", "C"):
        await fresh_jsc.api(f"STREAM.DELETE.{n}")
    await list_page_limit(fresh_jsc)


async def list_page_limit(fresh_jsc):
    for i in range(260):
        r = await fresh_jsc.api(f"STREAM.CREATE.P{i:03d}", {"name": f"P{i:03d}", "storage": "memory"}, check=False)
        assert "error" not in r
    r = await fresh_jsc.api("STREAM.LIST")
    assert (r["total"], r["offset"], r["limit"], len(r["streams"])) == (260, 0, 256, 256)
    assert r["streams"][-1]["config"]["name"] == "P255"
    r = await fresh_jsc.api("STREAM.LIST", {"offset": 256})
    assert [s["config"]["name"] for s in r["streams"]] == ["P256", "P257", "P258", "P259"]
    r = await fresh_jsc.api("STREAM.NAMES", {"offset": 250})
    assert (r["total"], len(r["streams"]), r["streams"][0]) == (260, 10, "P250")


async def test_names_bad_json(jsc):
    r = await jsc.api("STREAM.NAMES", "{junk")
    assert r["error"] == {"code": 400, "err_code": 10025,
                          "description": "invalid JSON: invalid character 'j' looking for beginning of object key "
                                         "string at offset 2"}
    assert (r["total"], r["offset"], r["limit"], r["streams"]) == (0, 0, 0, None)
    r = await jsc.api("STREAM.LIST", '{"offset":"x"}')
    assert r["error"]["err_code"] == 10025 and r["streams"] == []


async def test_create_defaults_and_shape(jsc):
    name = jsc.name()
    r = await jsc.create(name)
    assert list(r) == ["type", "config", "created", "state", "ts", "did_create"]
    assert r["did_create"] is True
    cfg = strip_dynamic(r["config"])
    assert cfg == {
        "name": name, "subjects": [f"{name}.>"], "retention": "limits", "max_consumers": -1, "max_msgs": -1,
        "max_bytes": -1, "max_age": 0, "max_msgs_per_subject": -1, "max_msg_size": -1, "discard": "old",
        "storage": "file", "num_replicas": 1, "duplicate_window": 120_000_000_000, "compression": "none",
        "allow_direct": False, "mirror_direct": False, "sealed": False, "deny_delete": False, "deny_purge": False,
        "allow_rollup_hdrs": False, "consumer_limits": {}, "allow_msg_ttl": False,
        "metadata": {"_nats.req.level": "0"},
    }
    assert set(r["config"]["metadata"]) == {"_nats.req.level", "_nats.ver", "_nats.level"}
    assert r["state"] == {"messages": 0, "bytes": 0, "first_seq": 0, "first_ts": "0001-01-01T00:00:00Z",
                          "last_seq": 0, "last_ts": "0001-01-01T00:00:00Z", "consumer_count": 0}


async def test_create_idempotent_and_conflicts(jsc):
    name = jsc.name()
    a = await jsc.create(name, storage="memory")
    b = await jsc.create(name, storage="memory")
    assert b["did_create"] is True and b["created"] == a["created"]
    r = await jsc.api(f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name}.x"], "storage": "memory"})
    assert r["error"] == {"code": 400, "err_code": 10058,
                          "description": "stream name already in use with a different configuration"}
    other = jsc.name()
    r = await jsc.api(f"STREAM.CREATE.{other}", {"name": other, "subjects": [f"{name}.x.y"], "storage": "memory"})
    assert r["error"] == {"code": 400, "err_code": 10065, "description": "subjects overlap with an existing stream"}


@pytest.mark.parametrize("body, err", [
    ({"name": "OTHER"}, (400, 10056, "stream name in subject does not match request")),
    ("", (400, 10056, "stream name in subject does not match request")),
    ({"name": "{n}", "bogus": 1}, (400, 10025, 'invalid JSON: json: unknown field "bogus"')),
    ({"name": "{n}", "num_replicas": 3}, (500, 10074, "replicas > 1 not supported in non-clustered mode")),
    ({"name": "{n}", "sealed": True}, (500, 10052, "stream configuration for create can not be sealed")),
    ({"name": "{n}", "max_age": 1000}, (500, 10052, "max age needs to be >= 100ms")),
    ({"name": "{n}", "retention": "bogus"}, (400, 10025, 'invalid JSON: can not unmarshal "\\"bogus\\""')),
    ({"name": "{n}", "subjects": ["a", "a"]}, (500, 10052, 'subject "a" overlaps with "a"')),
])
async def test_create_errors(jsc, body, err):
    name = jsc.name()
    if isinstance(body, dict):
        body = json.loads(json.dumps(body).replace("{n}", name))
    r = await jsc.api(f"STREAM.CREATE.{name}", body)
    assert r["type"] == T + "stream_create_response"
    assert (r["error"]["code"], r["error"]["err_code"], r["error"]["description"]) == err
    assert list(r) == ["type", "error"]


async def test_info_shape_and_not_found(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    r = await jsc.info(name)
    assert list(r) == ["type", "total", "offset", "limit", "config", "created", "state", "cluster", "ts"]
    assert (r["total"], r["offset"], r["limit"]) == (0, 0, 0)
    assert set(r["cluster"]) == {"leader"} and r["cluster"]["leader"]
    r = await jsc.api("STREAM.INFO.NOPE_" + name)
    assert r == {"type": T + "stream_info_response",
                 "error": {"code": 404, "err_code": 10059, "description": "stream not found"},
                 "total": 0, "offset": 0, "limit": 0}
    r = await jsc.info(name, {"bogus": True})
    assert r["error"]["description"] == 'invalid JSON: json: unknown field "bogus"'
    r = await jsc.api(f"STREAM.INFO.{name}", "garbage")  # not an object: ignored
    assert "error" not in r


async def test_info_answers_as_a_create_when_the_request_says_so(jsc):
    """``Nats-Response-Type: create`` (what a clustered create that found its stream sends, jsStreamInfoRequest)
    makes the info reply, or its error, a stream_create_response; any other value changes nothing."""
    name = jsc.name()
    await jsc.create(name, storage="memory")
    create = {"Nats-Response-Type": "create"}
    r = await jsc.api(f"STREAM.INFO.{name}", headers=create, check=False)
    assert r["type"] == T + "stream_create_response" and r["config"]["name"] == name
    r = await jsc.api("STREAM.INFO.NOPE_" + name, headers=create, check=False)
    assert (r["type"], r["error"]["err_code"]) == (T + "stream_create_response", 10059)
    r = await jsc.api(f"STREAM.INFO.{name}", headers={"Nats-Response-Type": "update"})
    assert r["type"] == T + "stream_info_response"


async def test_info_subjects_and_deleted_details(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    for i in range(5):
        await jsc.pub(f"{name}.{i % 2}", b"x")
    await jsc.api(f"STREAM.MSG.DELETE.{name}", {"seq": 2})
    r = await jsc.info(name, {"deleted_details": True, "subjects_filter": ">"})
    st = r["state"]
    assert (r["total"], r["offset"], r["limit"]) == (2, 0, 100000)
    assert list(st) == ["messages", "bytes", "first_seq", "first_ts", "last_seq", "last_ts", "num_subjects",
                        "subjects", "num_deleted", "deleted", "consumer_count"]
    assert st["subjects"] == {f"{name}.0": 3, f"{name}.1": 1}
    assert (st["num_deleted"], st["deleted"], st["messages"]) == (1, [2], 4)
    r = await jsc.info(name, {"subjects_filter": f"{name}.0", "offset": 5})
    assert (r["total"], r["offset"], r["limit"]) == (1, 5, 100000)  # the requested offset is echoed
    assert "subjects" not in r["state"]


async def test_update(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_direct=True)
    r = await jsc.api(f"STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{name}.>"], "storage": "file"})
    assert r["error"] == {"code": 500, "err_code": 10052,
                          "description": "stream configuration update can not change storage type"}
    r = await jsc.api(f"STREAM.UPDATE.{name}",
                      {"name": name, "subjects": [f"{name}.>", f"{name}x"], "storage": "memory", "max_msgs": 5})
    assert list(r) == ["type", "config", "created", "state", "ts"]
    assert r["config"]["subjects"] == [f"{name}.>", f"{name}x"] and r["config"]["max_msgs"] == 5
    assert r["config"]["allow_direct"] is False
    assert (await jsc.pub(f"{name}x", b"1"))["seq"] == 1  # the new subject is captured
    r = await jsc.api(f"STREAM.UPDATE.{name}", {"name": "OTHER"})
    assert r["error"]["err_code"] == 10056
    missing = jsc.name()
    r = await jsc.api(f"STREAM.UPDATE.{missing}", {"name": missing})
    assert r["error"] == {"code": 404, "err_code": 10059, "description": "stream not found"}


async def test_delete(jsc):
    name = jsc.name()
    await jsc.create(name)
    r = await jsc.api(f"STREAM.DELETE.{name}", "x")
    assert r["error"] == {"code": 400, "err_code": 10038, "description": "expected an empty request payload"}
    r = await jsc.api(f"STREAM.DELETE.{name}", "{}")
    assert r == {"type": T + "stream_delete_response", "success": True}
    r = await jsc.api(f"STREAM.DELETE.{name}")
    assert r["error"]["err_code"] == 10059
    # Its subjects are free again.
    assert await jsc.no_reply(f"{name}.x", b"", timeout=0.3)


async def test_purge(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    for i in range(6):
        await jsc.pub(f"{name}.{i % 2}", b"x")
    r = await jsc.api(f"STREAM.PURGE.{name}", {"seq": 2, "keep": 1})
    assert r == {"type": T + "stream_purge_response",
                 "error": {"code": 400, "err_code": 10003, "description": "bad request"}, "purged": 0}
    r = await jsc.api(f"STREAM.PURGE.{name}", {"filter": f"{name}.0", "keep": 1})
    assert r == {"type": T + "stream_purge_response", "success": True, "purged": 2}
    r = await jsc.api(f"STREAM.PURGE.{name}", {"seq": 4})
    assert r["purged"] == 1  # seq 2 (subject .1) is the only one left below 4
    r = await jsc.api(f"STREAM.PURGE.{name}")
    assert r["purged"] == 3
    st = (await jsc.info(name))["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (0, 7, 6)


async def test_purge_and_delete_denied(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", deny_purge=True, deny_delete=True)
    await jsc.pub(f"{name}.a", b"x")
    r = await jsc.api(f"STREAM.PURGE.{name}")
    assert r["error"] == {"code": 500, "err_code": 10110, "description": "stream purge not permitted"}
    r = await jsc.api(f"STREAM.MSG.DELETE.{name}", {"seq": 1})
    assert r["error"] == {"code": 500, "err_code": 10057, "description": "message delete not permitted"}


async def test_sealed_stream(jsc):
    name = jsc.name()
    r = await jsc.create(name, storage="memory")
    cfg = strip_dynamic(r["config"])
    del cfg["metadata"]
    await jsc.pub(f"{name}.a", b"x")
    r = await jsc.api(f"STREAM.UPDATE.{name}", {**cfg, "sealed": True})
    c = r["config"]
    assert (c["sealed"], c["deny_delete"], c["deny_purge"], c["discard"]) == (True, True, True, "new")
    ack = await jsc.pub(f"{name}.a", b"y")
    assert ack == {"error": {"code": 400, "err_code": 10109, "description": "invalid operation on sealed stream"},
                   "stream": name, "seq": 0}
    r = await jsc.api(f"STREAM.PURGE.{name}")
    assert r["error"]["err_code"] == 10109
    r = await jsc.api(f"STREAM.UPDATE.{name}", {**cfg, "sealed": False})
    assert r["error"]["description"] == "stream configuration update can not unseal a sealed stream"


async def test_msg_get(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    await jsc.pub(f"{name}.a", b"one")
    await jsc.pub(f"{name}.b", b"two", headers={"H": "v"})
    await jsc.pub(f"{name}.a", b"")
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": 2})
    m = r["message"]
    assert list(m) == ["subject", "seq", "hdrs", "data", "time"]
    assert base64.b64decode(m["hdrs"]) == b"NATS/1.0\r\nH: v\r\n\r\n"
    assert (m["subject"], m["seq"], base64.b64decode(m["data"])) == (f"{name}.b", 2, b"two")
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": 2, "no_hdr": True})
    assert "hdrs" not in r["message"]
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"last_by_subj": f"{name}.a"})
    assert list(r["message"]) == ["subject", "seq", "time"]  # empty payload: no data field
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"next_by_subj": f"{name}.a", "seq": 2})
    assert r["message"]["seq"] == 3
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": 9})
    assert r["error"] == {"code": 404, "err_code": 10037, "description": "no message found"}
    for bad in ("", {"seq": 1, "batch": 2}, {"seq": 1, "last_by_subj": "x"}, {"no_hdr": True}):
        r = await jsc.api(f"STREAM.MSG.GET.{name}", bad)
        assert r["error"] == {"code": 400, "err_code": 10003, "description": "bad request"}, bad
    r = await jsc.api(f"STREAM.MSG.GET.NOPE{name}", {"seq": 1})
    assert r["error"]["err_code"] == 10059


async def test_msg_delete(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    for _ in range(3):
        await jsc.pub(f"{name}.a", b"x")
    r = await jsc.api(f"STREAM.MSG.DELETE.{name}", {"seq": 2})
    assert r == {"type": T + "stream_msg_delete_response", "success": True}
    r = await jsc.api(f"STREAM.MSG.DELETE.{name}", {"seq": 2, "no_erase": True})
    assert r["error"] == {"code": 400, "err_code": 10043, "description": "sequence 2 not found"}
    r = await jsc.api(f"STREAM.MSG.DELETE.{name}", "")
    assert r["error"]["err_code"] == 10003
    st = (await jsc.info(name))["state"]
    assert (st["messages"], st["num_deleted"]) == (2, 1)


async def test_msg_delete_failures_count_as_answered_requests(fresh_jsc):
    """A MSG.DELETE that fails in the store (10057) or finds no message (10043) is an answer, not an API error:
    nats-server sends it with sendAPIResponse (trackAPI), only the checks before it (stream not found, sealed,
    deny delete) with sendAPIErrResponse.  Seen with the C client's js_DeleteMsg (tests/client/test_cclient.py)."""
    name = "D"
    await fresh_jsc.create(name)
    for _ in range(3):
        await fresh_jsc.pub(f"{name}.a", b"x")
    before = (await fresh_jsc.api("INFO"))["api"]
    r = await fresh_jsc.api(f"STREAM.MSG.DELETE.{name}", {"seq": 2})
    assert r.get("success") is True
    r = await fresh_jsc.api(f"STREAM.MSG.DELETE.{name}", {"seq": 2})
    assert r["error"] == {"code": 400, "err_code": 10043, "description": "sequence 2 not found"}
    r = await fresh_jsc.api(f"STREAM.MSG.DELETE.{name}", {"seq": 99})
    assert r["error"] == {"code": 500, "err_code": 10057, "description": "stream store EOF"}
    r = await fresh_jsc.api("STREAM.MSG.DELETE.NOPE", {"seq": 1})
    assert r["error"]["err_code"] == 10059
    after = (await fresh_jsc.api("INFO"))["api"]
    # INFO itself (counted by the next request) + 4 deletes; only the stream-not-found one is an error
    assert (after["total"] - before["total"], after["errors"] - before["errors"]) == (5, 1)


async def test_unknown_api_subjects_get_no_reply(jsc):
    for subject in ("FOO", "STREAM.INFO", "STREAM.INFO.X.Y"):
        assert await jsc.no_reply("$JS.API." + subject, timeout=0.2), subject


async def test_required_api_level(jsc):
    r = await jsc.api("STREAM.NAMES", headers={"Nats-Required-Api-Level": "99"})
    assert r["error"] == {"code": 412, "err_code": 10185, "description": "JetStream minimum api level required"}
    r = await jsc.api("STREAM.NAMES", headers={"Nats-Required-Api-Level": "1"})
    assert "error" not in r


async def test_stream_advisories(jsc):
    name = jsc.name()
    sub = await jsc.nc.subscribe(f"$JS.EVENT.ADVISORY.STREAM.*.{name}")
    await jsc.create(name, storage="memory")
    await jsc.api(f"STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{name}.>"], "storage": "memory",
                                             "max_msgs": 3})
    await jsc.api(f"STREAM.DELETE.{name}")
    events = []
    for _ in range(3):
        m = await sub.next_msg(timeout=2)
        events.append((m.subject, json.loads(m.data)))
    from tests.jetstream.conftest import validate

    assert [(s.split(".")[4], e["action"]) for s, e in events] == [
        ("CREATED", "create"), ("UPDATED", "modify"), ("DELETED", "delete")]
    for _, e in events:
        validate(e)
        assert e["type"] == "io.nats.jetstream.advisory.v1.stream_action" and e["stream"] == name
        assert list(e)[:3] == ["type", "id", "timestamp"]


async def test_first_seq_and_update_limits(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", first_seq=10)
    assert (await jsc.pub(f"{name}.a", b"x"))["seq"] == 10
    for _ in range(4):
        await jsc.pub(f"{name}.a", b"x")
    r = await jsc.api(f"STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{name}.>"], "storage": "memory",
                                                 "first_seq": 10, "max_msgs": 2})
    st = r["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (2, 13, 14)  # the update evicts at once


async def test_update_overlap_and_ttl_cannot_be_disabled(jsc):
    a, b = jsc.name(), jsc.name()
    await jsc.create(a, storage="memory", allow_msg_ttl=True)
    await jsc.create(b, storage="memory")
    r = await jsc.api(f"STREAM.UPDATE.{b}", {"name": b, "subjects": [f"{b}.>", f"{a}.z"], "storage": "memory"})
    assert r["error"] == {"code": 400, "err_code": 10065, "description": "subjects overlap with an existing stream"}
    r = await jsc.api(f"STREAM.UPDATE.{a}", {"name": a, "subjects": [f"{a}.>"], "storage": "memory"})
    assert r["error"] == {"code": 500, "err_code": 10052, "description": "message TTL status can not be disabled"}


@pytest.mark.parametrize("suffix, body, description", [
    ("STREAM.PURGE.{n}", "[]",
     "invalid JSON: json: cannot unmarshal array into Go value of type server.JSApiStreamPurgeRequest"),
    ("STREAM.INFO.{n}", "[1]",
     "invalid JSON: json: cannot unmarshal array into Go value of type server.JSApiStreamInfoRequest"),
    ("STREAM.DELETE.{n}", "  ", "expected an empty request payload"),
    ("STREAM.DELETE.{n}", '{"a":1}', "expected an empty request payload"),
])
async def test_body_errors(jsc, suffix, body, description):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    r = await jsc.api(suffix.replace("{n}", name), body)
    assert r["error"]["description"] == description


async def test_api_audit_advisory(jsc):
    from tests.jetstream.conftest import validate

    name = jsc.name()
    sub = await jsc.nc.subscribe("$JS.EVENT.ADVISORY.API")
    await jsc.api(f"STREAM.INFO.{name}")
    await jsc.create(name, storage="memory")
    events = []
    while len(events) < 2:
        e = json.loads((await sub.next_msg(timeout=2)).data)
        if name in e["subject"]:
            events.append(e)
    for e in events:
        validate(e)
        assert list(e)[:6] == ["type", "id", "timestamp", "server", "client", "subject"]
        assert e["client"]["acc"] == "$G" and e["client"]["kind"] == "Client"
    assert events[0]["subject"] == f"$JS.API.STREAM.INFO.{name}" and "request" not in events[0]
    assert json.loads(events[0]["response"])["error"]["err_code"] == 10059
    assert json.loads(events[1]["request"])["name"] == name
    assert json.loads(events[1]["response"])["did_create"] is True
