"""The consumer API ($JS.API.CONSUMER.*) against both servers: shapes, defaults, errors, paging, updates, policies."""
from __future__ import annotations

import pytest

from tests.jetstream.conftest import strip_dynamic
from tests.jetstream.test_consumer_support import SECOND, add_consumer, cinfo, pull, status

T = "io.nats.jetstream.api.v1."


async def _stream(jsc, n: int = 0, **cfg) -> str:
    name = jsc.name()
    await jsc.create(name, **cfg)
    for i in range(n):
        await jsc.pub(f"{name}.a", b"x%d" % i)
    return name


async def test_create_durable_pull_defaults_and_shape(jsc):
    s = await _stream(jsc, 3)
    r = await add_consumer(jsc, s, "D", ack_policy="explicit")
    assert r["type"] == T + "consumer_create_response"
    assert list(r) == ["type", "stream_name", "name", "created", "config", "delivered", "ack_floor", "num_ack_pending",
                       "num_redelivered", "num_waiting", "num_pending", "ts"]
    cfg = strip_dynamic(r["config"])
    assert cfg == {"durable_name": "D", "name": "D", "deliver_policy": "all", "ack_policy": "explicit",
                   "ack_wait": 30 * SECOND, "max_deliver": -1, "replay_policy": "instant", "max_waiting": 512,
                   "max_ack_pending": 1000, "num_replicas": 0, "metadata": {"_nats.req.level": "0"}}
    assert r["delivered"] == {"consumer_seq": 0, "stream_seq": 0}
    assert r["ack_floor"] == {"consumer_seq": 0, "stream_seq": 0}
    assert (r["num_ack_pending"], r["num_redelivered"], r["num_waiting"], r["num_pending"]) == (0, 0, 0, 3)
    assert set(r["config"]["metadata"]) == {"_nats.req.level", "_nats.ver", "_nats.level"}
    info = await cinfo(jsc, s, "D")
    assert info["type"] == T + "consumer_info_response" and info["created"] == r["created"]
    names = await jsc.api(f"STREAM.INFO.{s}")
    assert names["state"]["consumer_count"] == 1


async def test_create_ephemeral_push_and_named(jsc):
    s = await _stream(jsc, 1)
    r = await add_consumer(jsc, s, None, deliver_subject=jsc.name("dlv"))
    assert len(r["name"]) == 8
    assert "name" not in r["config"]  # a legacy ephemeral's config keeps no name
    assert r["config"]["inactive_threshold"] == 5 * SECOND and r["config"]["ack_policy"] == "none"
    assert "push_bound" not in r
    r = await add_consumer(jsc, s, "N", durable=False, ack_policy="explicit")
    assert r["name"] == "N" and "durable_name" not in r["config"] and r["config"]["inactive_threshold"] == 5 * SECOND


async def test_names_list_paging_and_missing_stream(jsc):
    s = await _stream(jsc)
    for n in ("C", "A", "B"):
        await add_consumer(jsc, s, n)
    r = await jsc.api(f"CONSUMER.NAMES.{s}")
    assert r == {"type": T + "consumer_names_response", "total": 3, "offset": 0, "limit": 1024,
                 "consumers": ["A", "B", "C"]}
    r = await jsc.api(f"CONSUMER.NAMES.{s}", {"offset": 2})
    assert (r["consumers"], r["offset"]) == (["C"], 2)
    r = await jsc.api(f"CONSUMER.NAMES.{s}", {"offset": 9})
    assert (r["consumers"], r["offset"], r["total"]) == ([], 3, 3)
    r = await jsc.api(f"CONSUMER.LIST.{s}", {"offset": 1})
    assert [c["name"] for c in r["consumers"]] == ["B", "C"] and r["limit"] == 256
    assert r["consumers"][0]["config"]["metadata"] == {"_nats.req.level": "0"}  # stored metadata only
    for sub in ("NAMES", "LIST"):
        r = await jsc.api(f"CONSUMER.{sub}.NOPE_{s}")
        assert r["error"] == {"code": 404, "err_code": 10059, "description": "stream not found"}
        assert (r["total"], r["offset"], r["limit"], r["consumers"]) == (0, 0, 0, [])
    r = await jsc.api(f"CONSUMER.NAMES.{s}", "{bad")
    assert r["error"]["err_code"] == 10025


async def test_info_delete_errors(jsc):
    s = await _stream(jsc)
    await add_consumer(jsc, s, "D")
    r = await jsc.api(f"CONSUMER.INFO.{s}.NOPE")
    assert r["error"] == {"code": 404, "err_code": 10014, "description": "consumer not found"}
    r = await jsc.api(f"CONSUMER.INFO.NOPE_{s}.D")
    assert r["error"]["err_code"] == 10059
    r = await jsc.api(f"CONSUMER.INFO.{s}.D", {"x": 1})
    assert r["error"]["err_code"] == 10038
    r = await jsc.api(f"CONSUMER.DELETE.{s}.D", {"x": 1})
    assert r["error"]["err_code"] == 10038
    r = await jsc.api(f"CONSUMER.DELETE.{s}.D")
    assert r == {"type": T + "consumer_delete_response", "success": True}
    r = await jsc.api(f"CONSUMER.DELETE.{s}.D")
    assert r["error"]["err_code"] == 10014
    assert (await jsc.info(s))["state"]["consumer_count"] == 0


@pytest.mark.parametrize("subject_fmt,cfg,err_code", [
    ("CONSUMER.CREATE.{s}.X", {"durable_name": "Y"}, 10017),
    ("CONSUMER.DURABLE.CREATE.{s}.X", {}, 10018),
    ("CONSUMER.DURABLE.CREATE.{s}.X", {"durable_name": "Y"}, 10017),
    ("CONSUMER.CREATE.{s}", {"durable_name": "Y"}, 10020),
    ("CONSUMER.CREATE.{s}.X.{s}.b", {"filter_subject": "{s}.a"}, 10131),
    ("CONSUMER.CREATE.{s}.X", {"deliver_policy": "by_start_sequence"}, 10094),
    ("CONSUMER.CREATE.{s}.X", {"deliver_policy": "last_per_subject"}, 10094),
    ("CONSUMER.CREATE.{s}.X", {"filter_subject": "{s}.a", "filter_subjects": ["{s}.b"]}, 10136),
    ("CONSUMER.CREATE.{s}.X", {"filter_subjects": ["{s}.>", "{s}.a"]}, 10138),
    ("CONSUMER.CREATE.{s}.X", {"ack_policy": "explicit", "backoff": [SECOND, 2 * SECOND], "max_deliver": 1}, 10116),
    ("CONSUMER.CREATE.{s}.X", {"deliver_subject": "dx", "max_waiting": 5}, 10080),
    ("CONSUMER.CREATE.{s}.X", {"rate_limit_bps": 10}, 10086),
    ("CONSUMER.CREATE.{s}.X", {"idle_heartbeat": SECOND}, 10088),
    ("CONSUMER.CREATE.{s}.X", {"deliver_subject": "{s}.x"}, 10081),
    ("CONSUMER.CREATE.{s}.X", {"num_replicas": 3}, 10074),
])
async def test_create_validation(jsc, subject_fmt, cfg, err_code):
    s = await _stream(jsc)
    fill = lambda v: v.replace("{s}", s) if isinstance(v, str) else [fill(x) for x in v] if isinstance(v, list) else v  # noqa: E731
    cfg = {k: fill(v) for k, v in cfg.items()}
    r = await jsc.api(subject_fmt.replace("{s}", s), {"stream_name": s, "config": cfg})
    assert r["error"]["err_code"] == err_code, r


async def test_create_on_missing_stream_and_mismatch(jsc):
    s = await _stream(jsc)
    r = await jsc.api(f"CONSUMER.CREATE.NOPE_{s}.X", {"stream_name": f"NOPE_{s}", "config": {}})
    assert r["error"] == {"code": 404, "err_code": 10059, "description": "stream not found"}
    r = await jsc.api(f"CONSUMER.CREATE.{s}.X", {"stream_name": "OTHER", "config": {}})
    assert r["error"]["err_code"] == 10056
    r = await jsc.api(f"CONSUMER.CREATE.{s}.X", "{nope")
    assert r["error"]["err_code"] == 10025


async def test_action_create_update_and_immutable_fields(jsc):
    s = await _stream(jsc)
    r = await jsc.api(f"CONSUMER.CREATE.{s}.U", {"stream_name": s, "config": {"durable_name": "U"}, "action": "update"})
    assert r["error"]["err_code"] == 10149
    await add_consumer(jsc, s, "U", ack_policy="explicit")
    # Same config again: fine, even with action create.
    r = await jsc.api(f"CONSUMER.CREATE.{s}.U", {"stream_name": s, "action": "create",
                                                 "config": {"durable_name": "U", "ack_policy": "explicit"}})
    assert "error" not in r
    r = await jsc.api(f"CONSUMER.CREATE.{s}.U", {"stream_name": s, "action": "create",
                                                 "config": {"durable_name": "U", "ack_policy": "explicit",
                                                            "max_ack_pending": 5}})
    assert r["error"]["err_code"] == 10148
    # An update of an editable field.
    r = await add_consumer(jsc, s, "U", ack_policy="explicit", max_ack_pending=5, description="d")
    assert r["config"]["max_ack_pending"] == 5 and r["config"]["description"] == "d"
    r = await add_consumer(jsc, s, "U", ack_policy="all", check=False)
    assert r["error"] == {"code": 500, "err_code": 10012,
                          "description": "ack policy can not be updated"}
    r = await add_consumer(jsc, s, "U", ack_policy="explicit", deliver_subject="dd", check=False)
    assert r["error"]["description"] == "can not update pull consumer to push based"


async def test_workqueue_rules(jsc):
    s = await _stream(jsc, retention="workqueue")
    r = await add_consumer(jsc, s, "A", check=False)
    assert r["error"]["err_code"] == 10084  # a pull consumer on a workqueue needs acks
    r = await add_consumer(jsc, s, "A", deliver_subject=jsc.name("wq"), check=False)
    assert r["error"]["err_code"] == 10098  # explicit ack required
    r = await add_consumer(jsc, s, "A", ack_policy="explicit", deliver_policy="new", check=False)
    assert r["error"]["err_code"] == 10101
    await add_consumer(jsc, s, "A", ack_policy="explicit")
    r = await add_consumer(jsc, s, "B", ack_policy="explicit", check=False)
    assert r["error"]["err_code"] == 10099
    await jsc.api(f"CONSUMER.DELETE.{s}.A")
    await add_consumer(jsc, s, "A", ack_policy="explicit", filter_subject=f"{s}.a")
    r = await add_consumer(jsc, s, "B", ack_policy="explicit", filter_subject=f"{s}.*", check=False)
    assert r["error"]["err_code"] == 10100
    await add_consumer(jsc, s, "B", ack_policy="explicit", filter_subject=f"{s}.b")


async def test_max_consumers(jsc):
    s = await _stream(jsc, max_consumers=1)
    await add_consumer(jsc, s, "A")
    r = await add_consumer(jsc, s, "B", check=False)
    assert r["error"] == {"code": 400, "err_code": 10026, "description": "maximum consumers limit reached"}


async def _deliver_policy_seqs(jsc, s: str, **cfg) -> list[int]:
    await add_consumer(jsc, s, "P", ack_policy="none", **cfg)
    msgs = await pull(jsc.nc, s, "P", {"batch": 10, "no_wait": True})
    out = [m.metadata.sequence.stream for m in msgs if status(m) is None]
    await jsc.api(f"CONSUMER.DELETE.{s}.P")
    return out


async def test_deliver_policies(jsc):
    s = jsc.name()
    await jsc.create(s)
    for subj in ("a", "b", "a", "c", "b"):
        await jsc.pub(f"{s}.{subj}")
    assert await _deliver_policy_seqs(jsc, s) == [1, 2, 3, 4, 5]
    assert await _deliver_policy_seqs(jsc, s, deliver_policy="last") == [5]
    assert await _deliver_policy_seqs(jsc, s, deliver_policy="last", filter_subject=f"{s}.a") == [3]
    assert await _deliver_policy_seqs(jsc, s, deliver_policy="new") == []
    assert await _deliver_policy_seqs(jsc, s, deliver_policy="by_start_sequence", opt_start_seq=4) == [4, 5]
    assert await _deliver_policy_seqs(jsc, s, deliver_policy="last_per_subject", filter_subject=f"{s}.>") == [3, 4, 5]
    assert await _deliver_policy_seqs(jsc, s, filter_subjects=[f"{s}.a", f"{s}.c"]) == [1, 3, 4]
    ts = (await jsc.api(f"STREAM.MSG.GET.{s}", {"seq": 4}))["message"]["time"]
    assert await _deliver_policy_seqs(jsc, s, deliver_policy="by_start_time", opt_start_time=ts) == [4, 5]


async def test_info_counts_and_pending_in_ack_subject(jsc):
    s = await _stream(jsc, 4)
    await add_consumer(jsc, s, "D", ack_policy="explicit")
    msgs = await pull(jsc.nc, s, "D", {"batch": 2})
    assert [m.metadata.num_pending for m in msgs] == [3, 2]
    info = await cinfo(jsc, s, "D")
    assert info["delivered"]["consumer_seq"] == 2 and info["delivered"]["stream_seq"] == 2
    assert "last_active" in info["delivered"]
    assert (info["num_ack_pending"], info["num_pending"]) == (2, 2)
    await msgs[1].ack_sync()
    info = await cinfo(jsc, s, "D")
    assert info["ack_floor"]["stream_seq"] == 0 and info["num_ack_pending"] == 1
    await msgs[0].ack_sync()
    info = await cinfo(jsc, s, "D")
    assert info["ack_floor"]["consumer_seq"] == 2 and info["ack_floor"]["stream_seq"] == 2
    assert "last_active" in info["ack_floor"]


async def test_default_cap_of_1000_consumers_per_stream(jsc):
    """nats-server 2.15 caps a stream whose max_consumers is unset at 1000 consumers (10026 beyond)."""
    import asyncio
    import json

    s = await _stream(jsc)
    sem = asyncio.Semaphore(100)

    async def create(i: int) -> bytes:
        async with sem:
            body = json.dumps({"stream_name": s, "config": {"durable_name": f"c{i}"}}).encode()
            return (await jsc.nc.request(f"$JS.API.CONSUMER.CREATE.{s}.c{i}", body, timeout=10)).data

    replies = await asyncio.gather(*(create(i) for i in range(1000)))
    assert not [r for r in replies if b'"error"' in r]
    r = await add_consumer(jsc, s, "one_more", check=False)
    assert r["error"] == {"code": 400, "err_code": 10026, "description": "maximum consumers limit reached"}
    assert (await jsc.info(s))["state"]["consumer_count"] == 1000
    assert (await jsc.api(f"STREAM.DELETE.{s}"))["success"] is True
