"""JetStream account limits of 0, -1, -2 and a positive value, from an account JWT (plain or ``tiered_limits``) and
from the configuration file, against both servers: what ``$JS.API.INFO`` reports and what stream and consumer
creates and publishes meet.

nats-server keeps an account JWT's ``streams``, ``consumer``, ``mem_storage`` and ``disk_storage`` as they are, and
turns ``max_ack_pending``, ``mem_max_stream_bytes`` and ``disk_max_stream_bytes`` into -1 unless they are above 0
(accounts.go updateAccountClaimsWithRefresh, toUnlimited).  A JWT with ``tiered_limits`` loses its plain JetStream
limits (jwt v2 decoder_account.go loadAccount) and reports them under ``tiers``, with Go's zero value as the top-level
``limits`` (jetstream.go JetStreamUsage).  The configuration file keeps every value as written (opts.go
parseJetStreamForAccount).  Only values above 0 limit anything: ``MaxStreams > 0`` (jetstream_api.go
jsNonClusteredStreamLimitsCheck), ``MaxConsumers > 0``, ``MaxAckPending > 0`` (consumer.go), ``limit > 0`` for the
per-stream bytes (stream.go checkStreamCfg).  Every expectation here was checked with nats-server 2.15.1.
"""
from __future__ import annotations

import json

import nats
import pytest

from tests import jwt_helpers as jh
from tests.client.test_operator_negative_limits import start

MB = 1 << 20
LIMIT_KEYS = ("max_memory", "max_storage", "max_streams", "max_consumers", "max_ack_pending",
              "memory_max_stream_bytes", "storage_max_stream_bytes")
STREAMS_ERR = {"code": 400, "err_code": 10027, "description": "maximum number of streams reached"}
CONSUMERS_ERR = {"code": 400, "err_code": 10026, "description": "maximum consumers limit reached"}
STREAM_BYTES_ERR = {"code": 400, "err_code": 10122,
                    "description": "stream max bytes exceeds account limit max stream bytes"}
BYTES_REQUIRED_ERR = {"code": 400, "err_code": 10113,
                      "description": "account requires a stream config to have max bytes set"}
ACCOUNT_RESOURCES_ERR = {"code": 400, "err_code": 10002, "description": "resource limits exceeded for account"}
NOT_ENABLED_ERR = {"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"}


def jwt_limits(v: int) -> dict:
    """The JWT's JetStream limits with ``v`` everywhere but the storage (2000 bytes per stream when positive)."""
    per_stream = 2000 if v > 0 else v
    return {"mem_storage": MB, "disk_storage": MB, "streams": v, "consumer": v, "max_ack_pending": v,
            "mem_max_stream_bytes": per_stream, "disk_max_stream_bytes": per_stream}


async def connect(srv, app, tmp_path):
    u = jh.new_key("U")
    return await nats.connect(srv.url, allow_reconnect=False, user_credentials=jh.write_creds(
        str(tmp_path / "app.creds"), jh.user_jwt(u, app), u))


async def api(nc, subject: str, body: dict | None = None) -> dict:
    msg = await nc.request(subject, json.dumps(body).encode() if body is not None else b"", timeout=5)
    return json.loads(msg.data)


def stream(name: str, storage: str = "memory", max_bytes: int | None = None) -> tuple[str, dict]:
    cfg = {"name": name, "subjects": [name.lower()], "storage": storage}
    if max_bytes is not None:
        cfg["max_bytes"] = max_bytes
    return f"$JS.API.STREAM.CREATE.{name}", cfg


def consumer(stream_name: str, name: str, max_ack_pending: int | None = None) -> tuple[str, dict]:
    cfg = {"durable_name": name, "ack_policy": "explicit"}
    if max_ack_pending is not None:
        cfg["max_ack_pending"] = max_ack_pending
    return f"$JS.API.CONSUMER.CREATE.{stream_name}.{name}", {"stream_name": stream_name, "config": cfg}


async def check_enforcement(nc, v: int) -> None:
    """Per-stream bytes (2000 when v > 0), then streams and consumers (2 when v > 0), then max_ack_pending."""
    limited = v > 0
    assert (await api(nc, *stream("A", max_bytes=2000)))["config"]["max_bytes"] == 2000
    r = await api(nc, *stream("B", "file", max_bytes=2001))
    assert r.get("error") == (STREAM_BYTES_ERR if limited else None)
    if not limited:
        assert r["config"]["max_bytes"] == 2001
    r = await api(nc, *stream("C"))  # the second stream when limited, the third otherwise
    assert r["config"]["max_bytes"] == -1
    r = await api(nc, *stream("D", "file"))
    assert r.get("error") == (STREAMS_ERR if limited else None)
    # No max_ack_pending: nats-server's default of 1000, lowered to the account's limit when that is above 0.
    r = await api(nc, *consumer("A", "c1"))
    assert r["config"]["max_ack_pending"] == (v if limited else 1000)
    r = await api(nc, *consumer("A", "c2", 5))
    if limited:
        assert r["error"] == {"code": 400, "err_code": 10121,
                              "description": f"consumer max ack pending exceeds system limit of {v}"}
    else:
        assert r["config"]["max_ack_pending"] == 5
    r = await api(nc, *consumer("A", "c3", -1))  # -1 is not above the account's limit: taken as it is
    assert r["config"]["max_ack_pending"] == -1
    r = await api(nc, *consumer("A", "c4", 1))
    assert r.get("error") == (CONSUMERS_ERR if limited else None)


def reported(v: int) -> dict:
    positive = v > 0
    return {"max_memory": MB, "max_storage": MB, "max_streams": v, "max_consumers": v,
            "max_ack_pending": v if positive else -1,
            "memory_max_stream_bytes": 2000 if positive else -1, "storage_max_stream_bytes": 2000 if positive else -1,
            "max_bytes_required": False}


@pytest.mark.parametrize("v", [0, -1, -2, 2])
async def test_account_jwt_limits_reported_and_enforced(server_factory, tmp_path, v):
    srv, *_, app = start(server_factory, jetstream=jwt_limits(v))
    nc = await connect(srv, app, tmp_path)
    try:
        info = await api(nc, "$JS.API.INFO")
        assert info["limits"] == reported(v)
        assert "tiers" not in info
        await check_enforcement(nc, v)
        info = await api(nc, "$JS.API.INFO")
        assert info["limits"] == reported(v)
        assert (info["streams"], info["consumers"]) == ((2, 2) if v > 0 else (4, 4))
    finally:
        await nc.close()


@pytest.mark.parametrize("v", [0, -2, 2])
async def test_tiered_r1_limits_reported_under_tiers_and_enforced(server_factory, tmp_path, v):
    """The R1 tier holds every stream of a single server: its usage and limits are under ``tiers``, the top-level
    ``limits`` are all zero, the usage totals are the tier's."""
    srv, *_, app = start(server_factory, jetstream={"mem_storage": 0, "disk_storage": 0,
                                                    "tiered_limits": {"R1": jwt_limits(v)}})
    nc = await connect(srv, app, tmp_path)
    try:
        info = await api(nc, "$JS.API.INFO")
        assert info["limits"] == {**dict.fromkeys(LIMIT_KEYS, 0), "max_bytes_required": False}
        assert info["tiers"]["R1"]["limits"] == reported(v)
        await check_enforcement(nc, v)
        info = await api(nc, "$JS.API.INFO")
        tier = info["tiers"]["R1"]
        assert list(info["tiers"]) == ["R1"]
        for k in ("memory", "storage", "reserved_memory", "reserved_storage", "streams", "consumers"):
            assert tier[k] == info[k], k
        assert (tier["streams"], tier["consumers"]) == ((2, 2) if v > 0 else (4, 4))
        assert tier["reserved_memory"] == 2000
        assert tier["limits"] == reported(v)
    finally:
        await nc.close()


async def test_tiered_limits_replace_the_plain_ones(server_factory, tmp_path):
    """A JWT with both: the tier's 5 bytes of memory and 7 streams apply, not the plain 1 MiB and 1 stream.  A
    stream of 2000 reserved bytes does not fit, one without max_bytes does (and then a second: 7 streams)."""
    srv, *_, app = start(server_factory, jetstream={"mem_storage": MB, "disk_storage": -1, "streams": 1,
                                                    "tiered_limits": {"R1": {"mem_storage": 5, "streams": 7}}})
    nc = await connect(srv, app, tmp_path)
    try:
        info = await api(nc, "$JS.API.INFO")
        assert info["limits"]["max_memory"] == 0
        assert info["tiers"]["R1"]["limits"] == {
            "max_memory": 5, "max_storage": 0, "max_streams": 7, "max_consumers": 0, "max_ack_pending": -1,
            "memory_max_stream_bytes": -1, "storage_max_stream_bytes": -1, "max_bytes_required": False}
        assert (await api(nc, *stream("A", max_bytes=2000)))["error"] == {
            "code": 500, "err_code": 10028, "description": "insufficient memory resources available"}
        assert (await api(nc, *stream("A")))["config"]["max_bytes"] == -1
        assert (await api(nc, *stream("B")))["config"]["max_bytes"] == -1
    finally:
        await nc.close()


async def test_tiered_limits_without_storage_leave_jetstream_off(server_factory, tmp_path):
    """jwt IsJSEnabled: with tiered limits, JetStream is on only when a tier has mem_storage or disk_storage."""
    srv, *_, app = start(server_factory, jetstream={"mem_storage": 0, "disk_storage": 0,
                                                    "tiered_limits": {"R1": {"streams": 3}}})
    nc = await connect(srv, app, tmp_path)
    try:
        assert (await api(nc, "$JS.API.INFO"))["error"] == NOT_ENABLED_ERR
        assert (await api(nc, *stream("A")))["error"] == NOT_ENABLED_ERR
    finally:
        await nc.close()


@pytest.mark.parametrize("tiered", [False, True], ids=["plain", "tiered"])
async def test_max_bytes_required_and_per_stream_bytes(server_factory, tmp_path, tiered):
    lim = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1, "max_bytes_required": True,
           "mem_max_stream_bytes": 2000, "disk_max_stream_bytes": 3000}
    srv, *_, app = start(server_factory, jetstream={"mem_storage": 0, "disk_storage": 0,
                                                    "tiered_limits": {"R1": lim}} if tiered else lim)
    nc = await connect(srv, app, tmp_path)
    try:
        info = await api(nc, "$JS.API.INFO")
        limits = info["tiers"]["R1"]["limits"] if tiered else info["limits"]
        assert (limits["memory_max_stream_bytes"], limits["storage_max_stream_bytes"]) == (2000, 3000)
        assert limits["max_bytes_required"] is True
        assert (await api(nc, *stream("A")))["error"] == BYTES_REQUIRED_ERR
        assert (await api(nc, *stream("A", max_bytes=2001)))["error"] == STREAM_BYTES_ERR
        assert (await api(nc, *stream("A", "file", max_bytes=3001)))["error"] == STREAM_BYTES_ERR
        assert (await api(nc, *stream("A", max_bytes=2000)))["config"]["max_bytes"] == 2000
        assert (await api(nc, *stream("B", "file", max_bytes=3000)))["config"]["max_bytes"] == 3000
    finally:
        await nc.close()


@pytest.mark.parametrize("tiered", [False, True], ids=["plain", "tiered"])
@pytest.mark.parametrize("mem,disk,first_stored", [(30, 45, (True, True)), (5, 5, (True, False))],
                         ids=["fits-one", "fits-none"])
async def test_account_storage_counts_stored_message_size(server_factory, tmp_path, tiered, mem, disk, first_stored):
    """A message on subject "a" with an 8-byte payload takes 25 bytes in memory (memStoreMsgSize: + 16) and 39 in a
    file (fileStoreMsgSize: 22 + subject + payload + 8).  The account's very first message is stored whatever the
    limit: nats-server's usage entry is made by the first stored change (jetstream.go wouldExceedLimits, inUse ==
    nil); the file message after it is refused then."""
    lim = {"mem_storage": mem, "disk_storage": disk}
    srv, *_, app = start(server_factory, jetstream={"tiered_limits": {"R1": lim}} if tiered else lim)
    nc = await connect(srv, app, tmp_path)
    try:
        for name, storage in (("A", "memory"), ("E", "file")):
            assert (await api(nc, *stream(name, storage)))["config"]["max_bytes"] == -1
        for subject, stored in (("a", first_stored[0]), ("e", first_stored[1])):
            r = await api(nc, subject, {"x": 1})
            assert r == ({"stream": subject.upper(), "seq": 1} if stored else
                         {"error": ACCOUNT_RESOURCES_ERR, "stream": subject.upper(), "seq": 0})
            r = await api(nc, subject, {"x": 1})
            assert r == {"error": ACCOUNT_RESOURCES_ERR, "stream": subject.upper(), "seq": 0}
        info = await api(nc, "$JS.API.INFO")
        assert (info["memory"], info["storage"]) == (25 if first_stored[0] else 0, 39 if first_stored[1] else 0)
    finally:
        await nc.close()


@pytest.mark.parametrize("short", [0, 1], ids=["fits", "one-byte-short"])
async def test_account_file_storage_counts_the_header_length_word(server_factory, tmp_path, short):
    """fileStoreMsgSize adds 4 bytes for a message with headers (the header length word): after a 39-byte message
    without headers, a file storage limit of 39 + 22 + subject + 4 + header + payload + 8 takes the message with
    headers, and one byte less refuses it."""
    hdr = b"NATS/1.0\r\nX: y\r\n\r\n"  # what nats-py sends for headers={"X": "y"}
    size = 22 + len("e") + 4 + len(hdr) + len(b'{"x": 1}') + 8
    srv, *_, app = start(server_factory, jetstream={"mem_storage": 0, "disk_storage": 39 + size - short})
    nc = await connect(srv, app, tmp_path)
    try:
        assert (await api(nc, *stream("E", "file")))["config"]["name"] == "E"
        assert await api(nc, "e", {"x": 1}) == {"stream": "E", "seq": 1}
        r = json.loads((await nc.request("e", b'{"x": 1}', headers={"X": "y"}, timeout=5)).data)
        assert r == ({"stream": "E", "seq": 2} if not short else
                     {"error": ACCOUNT_RESOURCES_ERR, "stream": "E", "seq": 0})
    finally:
        await nc.close()


@pytest.mark.parametrize("v", [0, -2, 2])
async def test_config_file_account_limits_reported_as_written_and_enforced(server_factory, v):
    per_stream = 2000 if v > 0 else v
    srv = server_factory(config=f"""
accounts {{
  APP {{
    jetstream {{ max_mem: 1M, max_file: 1M, max_streams: {v}, max_consumers: {v}, max_ack_pending: {v},
                 mem_max_stream_bytes: {per_stream}, disk_max_stream_bytes: {per_stream} }}
    users: [{{user: a, password: a}}]
  }}
}}
""")
    nc = await nats.connect(srv.url, user="a", password="a", allow_reconnect=False)
    try:
        info = await api(nc, "$JS.API.INFO")
        assert info["limits"] == {"max_memory": 1000000, "max_storage": 1000000, "max_streams": v,
                                  "max_consumers": v, "max_ack_pending": v, "memory_max_stream_bytes": per_stream,
                                  "storage_max_stream_bytes": per_stream, "max_bytes_required": False}
        await check_enforcement(nc, v)
    finally:
        await nc.close()


NO_LIMITS_ERR = {"code": 400, "err_code": 10120, "description": "no JetStream default or applicable tiered limit present"}


async def push(sys_nc, op, app, jetstream: dict) -> None:
    token = jh.account_jwt(app, op, name="APP", jetstream=jetstream)
    msg = await sys_nc.request(f"$SYS.REQ.ACCOUNT.{app.public}.CLAIMS.UPDATE", token.encode(), timeout=5)
    assert json.loads(msg.data)["data"]["message"] == "jwt updated"


@pytest.mark.parametrize("first", ["plain", "tiered"])
async def test_claims_update_between_plain_and_tiered_limits(server_factory, tmp_path, first):
    """A stream keeps the tier it was made in (mset.tier): after a pushed JWT switches the running account between
    plain and tiered limits, a publish to a stream made before gets 10120 (wouldExceedLimits finds no limits for
    its tier), while it still counts against the new stream limit (countStreams goes by replicas).  Under tiered
    limits it is listed in a tier "" with no limits, and a stream update moves it to R1; under plain limits no
    update can (stream.go updateWithAdvisory: no R1 limits to move to)."""
    plain = {"mem_storage": MB, "disk_storage": MB, "streams": 1}
    tiered = {"mem_storage": 0, "disk_storage": 0, "tiered_limits": {"R1": {**plain, "streams": 3}}}
    before, after = (plain, tiered) if first == "plain" else (tiered, plain)
    srv, op, sys_key, app = start(server_factory, jetstream=before)
    nc = await connect(srv, app, tmp_path)
    su = jh.new_key("U")
    sys_nc = await nats.connect(srv.url, allow_reconnect=False, user_credentials=jh.write_creds(
        str(tmp_path / "sys.creds"), jh.user_jwt(su, sys_key), su))
    try:
        assert "error" not in await api(nc, *stream("A"))
        assert await api(nc, "a", {"x": 1}) == {"stream": "A", "seq": 1}
        await push(sys_nc, op, app, after)
        assert await api(nc, "a", {"x": 1}) == {"error": NO_LIMITS_ERR, "stream": "A", "seq": 0}
        info = await api(nc, "$JS.API.INFO")
        assert (info["streams"], info["memory"]) == (1, 25)
        if after is plain:
            assert "tiers" not in info and info["limits"]["max_streams"] == 1
            assert (await api(nc, *stream("B")))["error"] == STREAMS_ERR
        else:
            # Only the "" tier, holding A: jetstream.go adds the unused R1 limits only when the number of tiers
            # with usage differs from the number with limits (both 1 here).
            assert list(info["tiers"]) == [""]
            assert info["tiers"][""] == {"memory": 25, "storage": 0, "reserved_memory": 0, "reserved_storage": 0,
                                         "streams": 1, "consumers": 0, "limits": info["limits"]}
            assert "error" not in await api(nc, *stream("B"))
            assert "error" not in await api(nc, *stream("C"))
            assert (await api(nc, *stream("D")))["error"] == STREAMS_ERR
            info = await api(nc, "$JS.API.INFO")
            assert [(k, t["streams"]) for k, t in info["tiers"].items()] == [("", 1), ("R1", 2)]
            # R1 is listed by the streams in it, with Go's zero limits (the R1 limits were never added, see above).
            assert info["tiers"]["R1"]["limits"] == info["limits"]
        assert "error" not in await api(nc, "$JS.API.STREAM.UPDATE.A", {**stream("A")[1], "max_msgs": 10})
        r = await api(nc, "a", {"x": 1})
        if after is plain:
            assert r == {"error": NO_LIMITS_ERR, "stream": "A", "seq": 0}
        else:
            assert r == {"stream": "A", "seq": 2}
            info = await api(nc, "$JS.API.INFO")
            assert list(info["tiers"]) == ["R1"]
            assert (info["tiers"]["R1"]["streams"], info["tiers"]["R1"]["memory"]) == (3, 50)
    finally:
        await sys_nc.close()
        await nc.close()


@pytest.mark.parametrize("v", [-2, 2])
async def test_updates_and_stream_consumer_limits_meet_the_account_limits(server_factory, tmp_path, v):
    """A stream update past the per-stream bytes (10122; -1 is not past it), a consumer update past the account's
    max_ack_pending (10121), and a consumer taking its max_ack_pending from the stream's consumer_limits, checked
    against the account's as if it had asked for it (consumer.go checkConsumerCfg)."""
    limited = v > 0
    srv, *_, app = start(server_factory, jetstream={
        "mem_storage": MB, "disk_storage": MB, "streams": -1, "consumer": -1, "max_ack_pending": v,
        "mem_max_stream_bytes": 2000 if limited else v, "disk_max_stream_bytes": 2000 if limited else v})
    nc = await connect(srv, app, tmp_path)
    ack_err = {"code": 400, "err_code": 10121, "description": f"consumer max ack pending exceeds system limit of {v}"}
    try:
        assert "error" not in await api(nc, *stream("A", max_bytes=100))
        r = await api(nc, "$JS.API.STREAM.UPDATE.A", stream("A", max_bytes=2001)[1])
        assert r.get("error") == (STREAM_BYTES_ERR if limited else None)
        r = await api(nc, "$JS.API.STREAM.UPDATE.A", stream("A", max_bytes=-1)[1])
        assert r["config"]["max_bytes"] == -1
        assert (await api(nc, *consumer("A", "c", 1)))["config"]["max_ack_pending"] == 1
        r = await api(nc, *consumer("A", "c", 5))
        assert r.get("error") == (ack_err if limited else None)
        assert (await api(nc, *consumer("A", "c", 2)))["config"]["max_ack_pending"] == 2
        subject, cfg = stream("L")
        r = await api(nc, subject, {**cfg, "consumer_limits": {"max_ack_pending": 5}})
        assert r["config"]["consumer_limits"] == {"max_ack_pending": 5}
        for name, asked, taken in (("x", None, 5), ("y", 4, 4)):
            r = await api(nc, *consumer("L", name, asked))
            if limited:
                assert r["error"] == ack_err
            else:
                assert r["config"]["max_ack_pending"] == taken
    finally:
        await nc.close()


async def test_fast_batch_message_counts_once_against_the_account_limit(server_factory, tmp_path):
    """A fast batch message is checked against the account's limits once before it is stored (stream.go
    processJetStreamFastBatchMsg: wouldExceedLimits with the message's size): with room for exactly one more 39-byte
    message, the batch's first message is stored.  Skiff counted the
    message twice (Stream.process, then Stream.check), and refused it.  The commit at end of batch is checked as
    well, and finds the account full."""
    srv, *_, app = start(server_factory, jetstream={"mem_storage": 0, "disk_storage": 39 + 39})
    nc = await connect(srv, app, tmp_path)
    try:
        _, cfg = stream("E", "file")
        assert (await api(nc, "$JS.API.STREAM.CREATE.E", {**cfg, "allow_batched": True}))["config"]["name"] == "E"
        assert await api(nc, "e", {"x": 1}) == {"stream": "E", "seq": 1}
        sub = await nc.subscribe("_FI.>")
        await nc.publish("e", b'{"x": 1}', reply="_FI.b.10.fail.1.0.$FI")
        assert json.loads((await sub.next_msg(timeout=5)).data) == {"type": "ack", "seq": 0, "msgs": 10}
        await nc.publish("e", b"", reply="_FI.b.10.fail.2.3.$FI")
        assert json.loads((await sub.next_msg(timeout=5)).data) == {"error": ACCOUNT_RESOURCES_ERR, "stream": "E",
                                                                    "seq": 0}
        assert (await api(nc, "$JS.API.STREAM.INFO.E"))["state"]["messages"] == 2
        assert (await api(nc, "$JS.API.INFO"))["storage"] == 78
    finally:
        await nc.close()
