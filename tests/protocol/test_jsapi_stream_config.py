"""StreamConfig: defaults, checkStreamCfg errors and Go-exact JSON, as observed from nats-server 2.15.1.

Every row of CREATE_CASES was sent to the real server as STREAM.CREATE.<subject stream> (see
test_jsapi_oracle.py, which replays the table live with ``--target=nats-server``).  ``create_stream`` below is the
pure part of Skiff's create path: parse, the request checks, normalization, versioning metadata, JSON.
"""
from __future__ import annotations

import json

import pytest

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.stream_config import (
    StreamConfig, StreamLimits, check_stream_create, check_stream_update, configs_equal, normalize_stream_config,
    parse_stream_config_request, set_static_stream_metadata, with_dynamic_metadata,
)

ORACLE_VERSION = "2.15.1"
MD0 = {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": ORACLE_VERSION}

DEFAULT_S = (
    '{"name":"S","subjects":["S"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,'
    '"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,'
    '"duplicate_window":120000000000,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,'
    '"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,'
    '"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.1"}}'
)

FULL_REQ = {
    "name": "S", "description": "d", "subjects": ["a.>", "b"], "retention": "limits", "max_consumers": 5, "max_msgs": 6,
    "max_bytes": 7000, "max_age": 10000000000, "max_msgs_per_subject": 3, "max_msg_size": 1000, "discard": "new",
    "storage": "memory", "num_replicas": 1, "no_ack": True, "duplicate_window": 5000000000,
    "placement": {"cluster": "", "tags": ["t"]},
    "sources": [{"name": "O", "opt_start_seq": 2, "filter_subject": "o.x", "external": {"api": "$JS.x.API", "deliver": "dd"}}],
    "compression": "s2", "first_seq": 10, "subject_transform": {"src": "a.>", "dest": "c.>"},
    "republish": {"src": "a.>", "dest": "r.>", "headers_only": True}, "allow_direct": True, "mirror_direct": False,
    "discard_new_per_subject": True, "sealed": False, "deny_delete": True, "deny_purge": False, "allow_rollup_hdrs": True,
    "consumer_limits": {"inactive_threshold": 60000000000, "max_ack_pending": 50}, "allow_msg_ttl": True,
    "subject_delete_marker_ttl": 2000000000, "allow_atomic": True, "allow_batched": True, "metadata": {"k": "v"},
}
FULL_S = (
    '{"name":"S","description":"d","subjects":["a.\\u003e","b"],"retention":"limits","max_consumers":5,"max_msgs":6,'
    '"max_bytes":7000,"max_age":10000000000,"max_msgs_per_subject":3,"max_msg_size":1000,"discard":"new",'
    '"storage":"memory","num_replicas":1,"no_ack":true,"duplicate_window":5000000000,"placement":{"tags":["t"]},'
    '"sources":[{"name":"O","opt_start_seq":2,"filter_subject":"o.x","external":{"api":"$JS.x.API","deliver":"dd"}}],'
    '"compression":"s2","first_seq":10,"subject_transform":{"src":"a.\\u003e","dest":"c.\\u003e"},'
    '"republish":{"src":"a.\\u003e","dest":"r.\\u003e","headers_only":true},"allow_direct":true,"mirror_direct":false,'
    '"discard_new_per_subject":true,"sealed":false,"deny_delete":true,"deny_purge":false,"allow_rollup_hdrs":true,'
    '"consumer_limits":{"inactive_threshold":60000000000,"max_ack_pending":50},"allow_msg_ttl":true,'
    '"subject_delete_marker_ttl":2000000000,"allow_atomic":true,"allow_batched":true,'
    '"metadata":{"_nats.level":"5","_nats.req.level":"4","_nats.ver":"2.15.1","k":"v"}}'
)


def E(code: int, err_code: int, description: str) -> dict:
    return {"error": {"code": code, "err_code": err_code, "description": description}}


def B(obj) -> bytes:
    return obj if isinstance(obj, bytes) else json.dumps(obj).encode()


IJ = "invalid JSON: "

# (subject stream name, request body, expected reply part: {"config": exact JSON text} or {"error": {...}})
CREATE_CASES: list[tuple[str, bytes, dict]] = [
    ("S", B({"name": "S"}), {"config": DEFAULT_S}),
    ("S", B(FULL_REQ), {"config": FULL_S}),
    ("S", B({"name": "S", "max_age": 60000000000}), {"config_has": {"duplicate_window": 60000000000, "max_age": 60000000000}}),
    ("S", B({"name": "S", "discard": "NEW"}), {"config_has": {"discard": "new"}}),
    ("S", B({"name": "S", "max_msgs": -5}), {"config_has": {"max_msgs": -1}}),
    ("S", B({"name": "S", "subject_delete_marker_ttl": 1000000000}),
     {"config_has": {"allow_msg_ttl": True, "allow_rollup_hdrs": True, "subject_delete_marker_ttl": 1000000000,
                     "metadata": {"_nats.level": "5", "_nats.req.level": "1", "_nats.ver": ORACLE_VERSION}}}),
    ("S", B({"name": "S", "allow_msg_counter": True}),
     {"config_has": {"allow_msg_counter": True, "metadata": {"_nats.level": "5", "_nats.req.level": "2", "_nats.ver": ORACLE_VERSION}}}),
    ("S", B({"name": "S", "persist_mode": "async"}), {"config_has": {"persist_mode": "async"}}),
    ("S", B({"name": "S", "placement": {}}), {"config_lacks": ["placement"]}),
    ("S", B({"name": "S", "republish": {"dest": "r.>"}}), {"config_has": {"republish": {"src": ">", "dest": "r.>"}}}),
    # request-level checks (jsStreamCreateRequest)
    ("S", b"", E(400, 10056, "stream name in subject does not match request")),
    ("S", B({"name": "T"}), E(400, 10056, "stream name in subject does not match request")),
    ("S", B({"name": "S", "sealed": True}), E(500, 10052, "stream configuration for create can not be sealed")),
    ("S", B({"name": "S", "mirror_direct": True}), E(500, 10052, "stream has no mirror but does have mirror direct")),
    # checkStreamCfg, in order
    ("S", B({"name": "S", "num_replicas": 6}), E(500, 10052, "maximum replicas is 5")),
    ("S", B({"name": "S", "num_replicas": -1}), E(400, 10133, "replicas count cannot be negative")),
    ("S", B({"name": "S", "num_replicas": 3}), E(500, 10074, "replicas > 1 not supported in non-clustered mode")),
    ("S", B({"name": "S", "pedantic": True, "max_msgs": -5}), E(400, 10157, "pedantic mode: max_msgs must be set to -1")),
    ("S", B({"name": "S", "pedantic": True, "max_age": 1000000000}), E(400, 10157, "pedantic mode: duplicate window cannot be bigger than max age")),
    ("S", B({"name": "S", "max_age": -1}), E(500, 10052, "max age can not be negative")),
    ("S", B({"name": "S", "max_age": 1000}), E(500, 10052, "max age needs to be >= 100ms")),
    ("S", B({"name": "S", "duplicate_window": -1}), E(500, 10052, "duplicates window can not be negative")),
    ("S", B({"name": "S", "max_age": 1000000000, "duplicate_window": 2000000000}), E(500, 10052, "duplicates window can not be larger then max age")),
    ("S", B({"name": "S", "duplicate_window": 1000}), E(500, 10052, "duplicates window needs to be >= 100ms")),
    ("S", B({"name": "S", "deny_purge": True, "allow_rollup_hdrs": True}), E(500, 10052, "roll-ups require the purge permission")),
    ("S", B({"name": "S", "allow_msg_counter": True, "discard": "new"}), E(500, 10052, "counter stream cannot use discard new")),
    ("S", B({"name": "S", "allow_msg_counter": True, "allow_msg_ttl": True}), E(500, 10052, "counter stream cannot use message TTLs")),
    ("S", B({"name": "S", "allow_msg_counter": True, "retention": "interest"}), E(500, 10052, "counter stream can only use limits retention")),
    ("S", B({"name": "S", "discard_new_per_subject": True}), E(500, 10052, "discard new per subject requires discard new policy to be set")),
    ("S", B({"name": "S", "discard_new_per_subject": True, "discard": "new"}), E(500, 10052, "discard new per subject requires max msgs per subject > 0")),
    ("S", B({"name": "S", "subject_delete_marker_ttl": 500000000}), E(500, 10052, "subject delete marker TTL must be at least 1 second")),
    ("S", B({"name": "S", "subject_delete_marker_ttl": -1}), E(500, 10052, "subject delete marker TTL must not be negative")),
    ("S", B({"name": "S", "allow_msg_schedules": True, "discard": "new"}), E(500, 10052, "message scheduling cannot use discard new")),
    ("S", B({"name": "S", "persist_mode": "async", "storage": "memory"}), E(500, 10052, "async persist mode is only supported on file storage")),
    ("S", B({"name": "S", "persist_mode": "async", "allow_atomic": True}), E(500, 10052, "async persist mode is not supported with atomic batch publish")),
    ("S", B({"name": "S", "mirror": {"name": "O"}, "subjects": ["x"]}), E(400, 10034, "stream mirrors can not contain subjects")),
    ("S", B({"name": "S", "mirror": {"name": "O"}, "first_seq": 5}), E(400, 10143, "stream mirrors can not have first sequence configured")),
    ("S", B({"name": "S", "mirror": {"name": "O"}, "sources": [{"name": "X"}]}), E(400, 10031, "stream mirrors can not also contain other sources")),
    ("S", B({"name": "S", "mirror": {"name": "O"}, "subject_delete_marker_ttl": 1000000000}), E(500, 10052, "subject delete markers forbidden on mirrors")),
    ("S", B({"name": "S", "mirror": {"name": "O.x"}}), E(400, 10142, "mirrored stream name is invalid")),
    ("S", B({"name": "S", "mirror": {"name": "O", "filter_subject": "a", "subject_transforms": [{"src": "b", "dest": "c"}]}}),
     E(400, 10150, "mirror with multiple subject transforms cannot also have a single subject filter")),
    ("S", B({"name": "S", "mirror": {"name": "O", "subject_transforms": [{"src": "a.>", "dest": "b.*"}]}}),
     E(400, 10154, "mirror transform: invalid subject")),
    ("S", B({"name": "S", "sources": [{"name": "X"}, {"name": "X"}]}), E(400, 10140, "duplicate source configuration detected")),
    ("S", B({"name": "S", "sources": [{"name": ""}]}), E(400, 10141, "sourced stream name is invalid")),
    ("S", B({"name": "S", "sources": [{"name": "X", "subject_transforms": [{"src": "a", "dest": "{{foo(1)}}"}]}]}),
     E(400, 10146, "source transform: invalid mapping destination: unknown function in {{foo(1)}}")),
    ("S", B({"name": "S", "sources": [{"name": "X", "external": {"api": "$JS.API", "deliver": ""}}]}),
     E(400, 10021, "stream external api prefix $JS.API must not overlap with $JS.API")),
    ("S", B({"name": "S", "subjects": ["a", "a"]}), E(500, 10052, 'subject "a" overlaps with "a"')),  # overlap check runs before the duplicate mark
    ("S", B({"name": "S", "subjects": ["a..b"]}), E(500, 10052, "invalid subject")),
    ("S", B({"name": "S", "subjects": [">"]}), E(500, 10052, "capturing all subjects requires no-ack to be true")),
    ("S", B({"name": "S", "subjects": ["$JS.API.>"]}), E(500, 10052, "subjects that overlap with jetstream api require no-ack to be true")),
    ("S", B({"name": "S", "subjects": ["$SYS.x"]}), E(500, 10052, "subjects that overlap with system api require no-ack to be true")),
    ("S", B({"name": "S", "subjects": ["a.*", "a.b"]}), E(500, 10052, 'subject "a.*" overlaps with "a.b"')),
    ("S", B({"name": "S", "subject_transform": {"src": "a..", "dest": "b"}}), E(400, 10155, "stream transform source: invalid subject a..")),
    ("S", B({"name": "S", "subjects": ["a.>"], "republish": {"src": "a.>", "dest": "a.x"}}),
     E(500, 10052, "stream configuration for republish destination forms a cycle")),
    ("S", B({"name": "S", "subjects": ["a.>"], "republish": {"src": "a.*", "dest": "r.>"}}),
     E(500, 10052, "stream configuration for republish with transform from 'a.*' to 'r.>' not valid")),
    ("S", B({"name": "S", "placement": {"preferred": "x"}}), E(500, 10052, "preferred server not permitted in placement")),
    ("S", B({"name": "S", "description": "x" * 4097}), E(500, 10052, "stream description is too long, maximum allowed is 4096")),
    ("S", B({"name": "S", "metadata": {"k": "x" * 131072}}), E(500, 10052, "stream metadata exceeds maximum size of 131072 bytes")),
]


def create_stream(subject_stream: str, body: bytes, lookup=None) -> dict:
    """Skiff's pure create path, shaped like the reply's error/config parts."""
    req = parse_stream_config_request(body)
    if isinstance(req, ApiError):
        return {"error": req.to_dict()}
    cfg = set_static_stream_metadata(req.config())
    err = check_stream_create(subject_stream, cfg)
    if err:
        return {"error": err.to_dict()}
    out = normalize_stream_config(cfg, pedantic=req.pedantic, lookup_stream=lookup)
    if isinstance(out, ApiError):
        return {"error": out.to_dict()}
    if out.num_replicas > 1:
        return {"error": ApiError.of("JSStreamReplicasNotSupportedErr").to_dict()}
    return {"config": with_dynamic_metadata(out, ORACLE_VERSION).to_json()}


def check_reply(got: dict, want: dict) -> None:
    if "error" in want:
        assert got.get("error") == want["error"], got
        return
    assert "error" not in got, got
    if isinstance(got["config"], str):  # Skiff's own bytes: exact
        cfg = json.loads(got["config"])
        if "config" in want:
            assert got["config"] == want["config"]
    else:  # a parsed reply from a live server: same keys, same order, same values
        cfg = got["config"]
        if "config" in want:
            assert json.dumps(cfg) == json.dumps(json.loads(want["config"]))
    for k, v in want.get("config_has", {}).items():
        assert cfg.get(k) == v, (k, cfg.get(k))
    for k in want.get("config_lacks", []):
        assert k not in cfg


@pytest.mark.parametrize("subject_stream,body,want", CREATE_CASES, ids=[f"case{i}" for i in range(len(CREATE_CASES))])
def test_create_matches_oracle_table(subject_stream, body, want):
    check_reply(create_stream(subject_stream, body), want)


def test_mirror_inherits_direct_and_skips_duplicate_window():
    origin = normalize_stream_config(StreamConfig(name="O", subjects=["o.>"], allow_direct=True))
    got = create_stream("M", B({"name": "M", "mirror": {"name": "O"}}), lookup={"O": origin}.get)
    cfg = json.loads(got["config"])
    assert cfg["mirror_direct"] is True and "duplicate_window" not in cfg and "subjects" not in cfg


def test_source_cycle_detected():
    a = normalize_stream_config(StreamConfig(name="A", subjects=["a"], sources=[{"name": "B"}]))
    got = create_stream("B", B({"name": "B", "subjects": ["b"], "sources": [{"name": "A"}]}), lookup={"A": a}.get)
    assert got == E(500, 10052, "detected cycle")


def test_duplicate_window_server_limit():
    cfg = StreamConfig(name="S", duplicate_window=10 * 60 * 10**9)
    err = normalize_stream_config(cfg, limits=StreamLimits(duplicates=60 * 10**9))
    assert err == ApiError.of("JSStreamInvalidConfigF", err="duplicates window can not be larger then server limit of 1m0s")
    ok = normalize_stream_config(StreamConfig(name="S"), limits=StreamLimits(duplicates=60 * 10**9))
    assert ok.duplicate_window == 60 * 10**9


def test_max_bytes_required_by_account():
    assert normalize_stream_config(StreamConfig(name="S"), limits=StreamLimits(max_bytes_required=True)).err_code == 10113


UPDATE_CASES = [
    ({"name": "S"}, {"name": "S", "storage": "memory"}, "stream configuration update can not change storage type"),
    ({"name": "S"}, {"name": "S", "retention": "workqueue"}, "stream configuration update can not change retention policy to/from workqueue"),
    ({"name": "S", "deny_delete": True}, {"name": "S"}, "stream configuration update can not cancel deny message deletes"),
    ({"name": "S", "deny_purge": True}, {"name": "S"}, "stream configuration update can not cancel deny purge"),
    ({"name": "S", "allow_msg_ttl": True}, {"name": "S"}, "message TTL status can not be disabled"),
    ({"name": "S"}, {"name": "S", "allow_msg_counter": True}, "stream configuration update can not change message counter setting"),
    ({"name": "S"}, {"name": "S", "persist_mode": "async"}, "stream configuration update can not change persist mode"),
]


@pytest.mark.parametrize("old,new,text", UPDATE_CASES)
def test_update_rejections(old, new, text):
    o = normalize_stream_config(StreamConfig.model_validate(old))
    got = check_stream_update(o, StreamConfig.model_validate(new))
    assert got == ApiError.of("JSStreamInvalidConfigF", err=text)


def test_update_seal_forces_settings():
    o = normalize_stream_config(StreamConfig(name="S", max_age=10**10))
    got = check_stream_update(o, StreamConfig(name="S", max_age=10**10, sealed=True))
    assert (got.sealed, got.max_age, got.discard, got.deny_delete, got.deny_purge) == (True, 0, "new", True, True)


def test_update_can_change_limits_and_subjects():
    o = normalize_stream_config(StreamConfig(name="S", subjects=["a"]))
    got = check_stream_update(o, StreamConfig(name="S", subjects=["a", "b"], max_msgs=10, retention="interest"))
    assert got.subjects == ["a", "b"] and got.max_msgs == 10 and got.retention == "interest"


def test_identical_recreate_ignores_versioning_metadata():
    stored = set_static_stream_metadata(normalize_stream_config(StreamConfig(name="S")))
    again = normalize_stream_config(set_static_stream_metadata(StreamConfig(name="S")))
    assert configs_equal(with_dynamic_metadata(again, "9.9.9"), stored)
    assert not configs_equal(again.model_copy(update={"max_msgs": 5}), stored)
