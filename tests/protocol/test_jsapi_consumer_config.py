"""ConsumerConfig: defaults, create-subject handling and checkConsumerCfg errors as observed from nats-server 2.15.1.

All rows run against stream STREAM_FOR_CONSUMERS; test_jsapi_oracle.py replays them live.
"""
from __future__ import annotations

import json

import pytest

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.consumer_config import (
    ConsumerConfig, apply_inactive_threshold_default, check_consumer_config, check_consumer_create,
    check_consumer_update, check_workqueue_consumer, parse_create_consumer_request, set_consumer_defaults,
    set_static_consumer_metadata, with_dynamic_consumer_metadata,
)
from skiff.protocol.jsapi.stream_config import StreamConfig, normalize_stream_config

STREAM_FOR_CONSUMERS = {"name": "S", "subjects": ["s.>"]}
MD = {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1"}


def E(code, err_code, description):
    return {"error": {"code": code, "err_code": err_code, "description": description}}


def B(obj):
    return json.dumps(obj).encode()


C = "$JS.API.CONSUMER.CREATE.S"
PULL_EPH = ('{"deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,'
            '"inactive_threshold":5000000000,"num_replicas":0,"metadata":' + json.dumps(MD, separators=(",", ":")) + "}")
DURABLE = ('{"durable_name":"D","name":"D","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,'
           '"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"num_replicas":0,'
           '"metadata":' + json.dumps(MD, separators=(",", ":")) + "}")

CONSUMER_CASES: list[tuple[str, bytes, dict]] = [
    (C, B({"stream_name": "S", "config": {}}), {"config_has": json.loads(PULL_EPH)}),
    (C + ".D", B({"stream_name": "S", "config": {"ack_policy": "explicit", "durable_name": "D"}}), {"config": DURABLE}),
    (C + ".P", B({"stream_name": "S", "config": {"ack_policy": "explicit", "deliver_subject": "x.y", "flow_control": True,
                                                 "idle_heartbeat": 5000000000}}),
     {"config_has": {"name": "P", "max_ack_pending": 1000, "inactive_threshold": 5000000000, "flow_control": True}}),
    (C + ".B", B({"stream_name": "S", "config": {"ack_policy": "explicit", "backoff": [1000000000, 2000000000]}}),
     {"config_has": {"ack_wait": 1000000000, "backoff": [1000000000, 2000000000]}}),
    (C + ".G", B({"stream_name": "S", "config": {"priority_policy": "pinned_client", "priority_groups": ["g"]}}),
     {"config_has": {"priority_timeout": 120000000000, "priority_policy": "pinned_client",
                     "metadata": {"_nats.level": "5", "_nats.req.level": "1", "_nats.ver": "2.15.1"}}}),
    ("$JS.API.CONSUMER.CREATE.T", B({"stream_name": "S", "config": {}}), E(400, 10056, "stream name in subject does not match request")),
    (C, B({"stream_name": "S", "config": {"durable_name": "D"}}),
     E(400, 10020, "consumer expected to be ephemeral but a durable name was set in request")),
    ("$JS.API.CONSUMER.DURABLE.CREATE.S.D", B({"stream_name": "S", "config": {}}),
     E(400, 10018, "consumer expected to be durable but a durable name was not set")),
    ("$JS.API.CONSUMER.DURABLE.CREATE.S.D", B({"stream_name": "S", "config": {"durable_name": "X"}}),
     E(400, 10017, "consumer name in subject does not match durable name in request")),
    (C + ".D", B({"stream_name": "S", "config": {"durable_name": "X"}}),
     E(400, 10017, "consumer name in subject does not match durable name in request")),
    (C + ".F.s.a", B({"stream_name": "S", "config": {"filter_subject": "s.b"}}),
     E(400, 10131, "Consumer create request did not match filtered subject from create subject")),
    (C + ".F.s.a", B({"stream_name": "S", "config": {"filter_subjects": ["s.a"]}}),
     E(400, 10137, "consumer with multiple subject filters cannot use subject based API")),
    (C + ".R", B({"stream_name": "S", "config": {"num_replicas": 3}}), E(500, 10074, "replicas > 1 not supported in non-clustered mode")),
    (C + ".X", B({"stream_name": "S", "config": {"ack_policy": "explicit", "ack_wait": -1}}), E(400, 10183, "consumer ack wait needs to be positive")),
    (C + ".X", B({"stream_name": "S", "config": {"backoff": [-1]}}), E(400, 10184, "consumer backoff needs to be positive")),
    (C + ".X", B({"stream_name": "S", "config": {"backoff": [1, 2], "max_deliver": 1}}),
     E(400, 10116, "max deliver is required to be > length of backoff values")),
    (C + ".X", B({"stream_name": "S", "config": {"ack_policy": "flow_control"}}),
     E(400, 10218, "flow control ack policy requires a push based consumer")),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_subject": "d.*"}}), E(400, 10079, "consumer deliver subject has wildcards")),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_subject": "s.x"}}), E(400, 10081, "consumer deliver subject forms a cycle")),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_subject": "d", "max_waiting": 5}}),
     E(400, 10080, "consumer in push mode can not set max waiting")),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_subject": "d", "max_ack_pending": 5}}),
     E(400, 10082, "consumer requires ack policy for max ack pending")),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_subject": "d", "idle_heartbeat": 1000}}),
     E(400, 10083, "consumer idle heartbeat needs to be >= 100ms")),
    (C + ".X", B({"stream_name": "S", "config": {"rate_limit_bps": 5}}), E(400, 10086, "consumer in pull mode can not have rate limit set")),
    (C + ".X", B({"stream_name": "S", "config": {"idle_heartbeat": 1000000000}}),
     E(400, 10088, "consumer idle heartbeat requires a push based consumer")),
    (C + ".X", B({"stream_name": "S", "config": {"flow_control": True}}), E(400, 10089, "consumer flow control requires a push based consumer")),
    (C + ".X", B({"stream_name": "S", "config": {"max_expires": 1000}}), E(400, 10115, "consumer max request expires needs to be >= 1ms")),
    (C + ".X", B({"stream_name": "S", "config": {"filter_subject": "a", "filter_subjects": ["b"]}}),
     E(400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified")),
    (C + ".X", B({"stream_name": "S", "config": {"filter_subjects": [""]}}), E(400, 10139, "consumer filter in FilterSubjects cannot be empty")),
    (C + ".X", B({"stream_name": "S", "config": {"filter_subjects": ["s.*", "s.a"]}}), E(400, 10138, "consumer subject filters cannot overlap")),
    (C + ".X", B({"stream_name": "S", "config": {"filter_subject": "s..a"}}), E(500, 10052, "invalid subject")),
    (C + ".X", B({"stream_name": "S", "config": {"opt_start_seq": 5}}),
     E(400, 10094, "consumer delivery policy is deliver all, but optional start sequence is also set")),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_policy": "by_start_sequence"}}),
     E(400, 10094, "consumer delivery policy is deliver by start sequence, but optional start sequence is not set")),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_policy": "by_start_time"}}),
     E(400, 10094, "consumer delivery policy is deliver by start time, but optional start time is not set")),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_policy": "last_per_subject"}}),
     E(400, 10094, "consumer delivery policy is deliver last per subject, but optional filter subject is not set")),
    (C + ".X", B({"stream_name": "S", "config": {"sample_freq": "x%"}}),
     E(400, 10095, 'failed to parse consumer sampling configuration: strconv.Atoi: parsing "x": invalid syntax')),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_subject": "d", "flow_control": True}}),
     E(400, 10108, "consumer with flow control also needs heartbeats")),
    (C + ".X", B({"stream_name": "S", "config": {"name": "Y"}}), {"config_has": {"name": "X"}}),
    (C + ".N", B({"stream_name": "S", "config": {"name": "N", "durable_name": "M"}}),
     E(400, 10017, "consumer name in subject does not match durable name in request")),
    (C + ".X", B({"stream_name": "S", "config": {"priority_policy": "overflow"}}),
     E(400, 10159, "Setting PriorityPolicy requires at least one PriorityGroup to be set")),
    (C + ".X", B({"stream_name": "S", "config": {"priority_policy": "overflow", "priority_groups": ["bad group"]}}),
     E(400, 10162, "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters")),
    (C + ".X", B({"stream_name": "S", "config": {"priority_groups": ["g"]}}),
     E(400, 10196, "consumer can not have priority groups when policy is none")),
    (C + ".X", B({"stream_name": "S", "config": {"priority_timeout": 5}}),
     E(400, 10197, "PinnedTTL cannot be set when PriorityPolicy is none")),
    (C + ".X", B({"stream_name": "S", "config": {"deliver_subject": "d", "priority_policy": "overflow", "priority_groups": ["g"]}}),
     E(400, 10178, "priority groups can not be used with push consumers")),
    (C + ".X", B({"stream_name": "S", "pedantic": True, "config": {"max_deliver": -5}}),
     E(400, 10157, "pedantic mode: max_deliver must be set to -1")),
    (C + ".X", B({"stream_name": "S", "config": {"foo": 1}}), E(400, 10025, 'invalid JSON: json: unknown field "foo"')),
    (C + ".X", B({"stream_name": "S", "action": "bad"}), E(400, 10025, 'invalid JSON: unknown consumer action: "bad"')),
    (C + ".X", B({"stream_name": "S", "config": {"priority_policy": "bad"}}), E(400, 10025, 'invalid JSON: unknown priority policy: "bad"')),
]


def create_consumer(subject: str, body: bytes, stream: StreamConfig) -> dict:
    """Skiff's pure consumer create path (no existing consumers)."""
    req = parse_create_consumer_request(body)
    if isinstance(req, ApiError):
        return {"error": req.to_dict()}
    out = check_consumer_create(subject, req)
    if isinstance(out, ApiError):
        return {"error": out.to_dict()}
    _stream, name, _flt, req = out
    cfg = set_static_consumer_metadata(req.config)
    cfg = set_consumer_defaults(cfg, stream, pedantic=req.pedantic)
    if isinstance(cfg, ApiError):
        return {"error": cfg.to_dict()}
    err = check_consumer_config(cfg, stream) or check_workqueue_consumer(cfg, stream, [])
    if err:
        return {"error": err.to_dict()}
    cfg = apply_inactive_threshold_default(cfg)
    return {"config": with_dynamic_consumer_metadata(cfg, "2.15.1").to_json()}


@pytest.fixture(scope="module")
def stream():
    return normalize_stream_config(StreamConfig.model_validate(STREAM_FOR_CONSUMERS))


@pytest.mark.parametrize("subject,body,want", CONSUMER_CASES, ids=[f"case{i}" for i in range(len(CONSUMER_CASES))])
def test_consumer_create_matches_oracle_table(subject, body, want, stream):
    got = create_consumer(subject, body, stream)
    if "error" in want:
        assert got.get("error") == want["error"]
        return
    assert "error" not in got, got
    cfg = json.loads(got["config"])
    if "config" in want:
        assert got["config"] == want["config"]
    for k, v in want.get("config_has", {}).items():
        if k == "name" and "name" not in cfg:
            continue  # legacy ephemerals get a random name from the server
        assert cfg.get(k) == v, (k, cfg)


def test_workqueue_rules():
    wq = normalize_stream_config(StreamConfig(name="W", retention="workqueue"))
    pull = set_consumer_defaults(ConsumerConfig(durable_name="A"), wq)
    assert check_consumer_config(pull, wq).err_code == 10084
    c = set_consumer_defaults(ConsumerConfig(durable_name="A", ack_policy="explicit"), wq)
    assert check_workqueue_consumer(c, wq, []) is None
    assert check_workqueue_consumer(c, wq, [[]]).err_code == 10099
    f = c.model_copy(update={"filter_subject": "W.a"})
    assert check_workqueue_consumer(f, wq, [["W.*"]]).err_code == 10100
    assert check_workqueue_consumer(f, wq, [["W.b"]]) is None
    assert check_workqueue_consumer(c.model_copy(update={"deliver_policy": "new"}), wq, []).err_code == 10101


def test_update_rules():
    s = normalize_stream_config(StreamConfig(name="S"))
    old = set_consumer_defaults(ConsumerConfig(durable_name="D", ack_policy="explicit"), s)
    assert check_consumer_update(old, old) is None
    assert check_consumer_update(old, old.model_copy(update={"max_ack_pending": 5})) is None
    assert check_consumer_update(old, old.model_copy(update={"ack_policy": "all"})).description == "ack policy can not be updated"
    assert check_consumer_update(old, old.model_copy(update={"deliver_subject": "x"})).description == \
        "can not update pull consumer to push based"
    assert check_consumer_update(old, old.model_copy(update={"max_waiting": 1})).description == "max waiting can not be updated"


def test_stream_consumer_limits_apply():
    s = normalize_stream_config(StreamConfig(name="S", consumer_limits={"max_ack_pending": 10, "inactive_threshold": 10**9}))
    c = set_consumer_defaults(ConsumerConfig(ack_policy="explicit"), s)
    assert (c.max_ack_pending, c.inactive_threshold) == (10, 10**9)
    too_big = c.model_copy(update={"max_ack_pending": 11})
    assert check_consumer_config(too_big, s) == ApiError.of("JSConsumerMaxPendingAckExcessErrF", limit=10)
    idle = c.model_copy(update={"inactive_threshold": 2 * 10**9})
    assert check_consumer_config(idle, s).description == "consumer inactive threshold exceeds system limit of 1s"
