"""The configs Skiff emits validate against nats-io's published JSON schemas, and the request models parse
what nats-server parses (strictness per request kind as observed from 2.15.1)."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.consumer_config import ConsumerConfig, set_consumer_defaults, with_dynamic_consumer_metadata
from skiff.protocol.jsapi.requests import (
    JSApiConsumerGetNextRequest, JSApiConsumerPauseRequest, JSApiConsumerUnpinRequest, JSApiMsgGetRequest,
    JSApiStreamInfoRequest, JSApiStreamPurgeRequest, is_empty_request, parse_pull_request, parse_request,
)
from skiff.protocol.jsapi.stream_config import StreamConfig, normalize_stream_config, with_dynamic_metadata
from tests.protocol.test_jsapi_stream_config import FULL_REQ

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "jetstream" / "api" / "v1"


def validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)  # the config schemas are self-contained (no $ref)


STREAMS = [
    {"name": "S"},
    {k: v for k, v in FULL_REQ.items()},
    {"name": "M", "mirror": {"name": "O", "opt_start_time": "2020-01-01T00:00:00.5+01:00",
                             "subject_transforms": [{"src": "o.*", "dest": "q.{{wildcard(1)}}"}]}},
    {"name": "K", "subjects": ["$KV.K.>"], "max_msgs_per_subject": 5, "allow_rollup_hdrs": True, "deny_delete": True,
     "allow_direct": True, "discard": "new", "max_age": 3600000000000, "allow_msg_ttl": True},
]


@pytest.mark.parametrize("raw", STREAMS, ids=lambda r: r["name"])
def test_stream_config_round_trips_and_validates(raw):
    cfg = normalize_stream_config(StreamConfig.from_json(json.dumps(raw)))
    assert not isinstance(cfg, ApiError), cfg
    emitted = with_dynamic_metadata(cfg, "2.15.1").to_json()
    validator("stream_configuration.json").validate(json.loads(emitted))
    again = StreamConfig.from_json(emitted)
    assert again.to_json() == emitted


CONSUMERS = [
    {},
    {"durable_name": "D", "ack_policy": "explicit", "filter_subjects": ["a", "b"], "backoff": [10**9, 2 * 10**9],
     "max_deliver": 5, "metadata": {"x": "y"}},
    {"name": "P", "deliver_subject": "d", "idle_heartbeat": 5 * 10**9, "flow_control": True, "ack_policy": "all",
     "deliver_policy": "by_start_time", "opt_start_time": "2020-01-01T00:00:00Z", "headers_only": True},
    {"name": "G", "priority_policy": "pinned_client", "priority_groups": ["g"], "pause_until": "2099-01-01T00:00:00Z"},
]


@pytest.mark.parametrize("raw", CONSUMERS, ids=range(len(CONSUMERS)))
def test_consumer_config_round_trips_and_validates(raw):
    stream = normalize_stream_config(StreamConfig(name="S"))
    cfg = set_consumer_defaults(ConsumerConfig.from_json(json.dumps(raw)), stream)
    emitted = with_dynamic_consumer_metadata(cfg, "2.15.1").to_json()
    validator("consumer_configuration.json").validate(json.loads(emitted))
    assert ConsumerConfig.from_json(emitted).to_json() == emitted


# Strict request kinds, as the oracle answered them (unknown field -> 10025; Go's struct name in type errors).
REQUEST_CASES = [
    (JSApiStreamPurgeRequest, b'{"foo":1}', 'invalid JSON: json: unknown field "foo"'),
    (JSApiStreamPurgeRequest, b'{"seq":"x"}',
     "invalid JSON: json: cannot unmarshal string into Go struct field JSApiStreamPurgeRequest.seq of type uint64"),
    (JSApiMsgGetRequest, b'{"seq":-1}',
     "invalid JSON: json: cannot unmarshal number -1 into Go struct field JSApiMsgGetRequest.seq of type uint64"),
    (JSApiStreamInfoRequest, b'{"offset":"x"}',
     "invalid JSON: json: cannot unmarshal string into Go struct field JSApiStreamInfoRequest.offset of type int"),
    (JSApiConsumerPauseRequest, b'{"pause_until":5}',
     "invalid JSON: json: cannot unmarshal number into Go struct field JSApiConsumerPauseRequest.pause_until of type time.Time"),
    (JSApiConsumerUnpinRequest, b'{"group":5}',
     "invalid JSON: json: cannot unmarshal number into Go struct field JSApiConsumerUnpinRequest.group of type string"),
]


@pytest.mark.parametrize("model,body,description", REQUEST_CASES)
def test_request_errors(model, body, description):
    got = parse_request(model, body)
    assert isinstance(got, ApiError) and got.err_code == 10025 and got.description == description


def test_unpin_is_lenient_like_nats_server():
    # nats-server decodes UNPIN with json.Unmarshal: unknown fields are ignored (it then says "consumer group not
    # specified" because group is empty).
    got = parse_request(JSApiConsumerUnpinRequest, b'{"foo":1}', strict=False)
    assert got.group == ""


def test_pull_request_forms():
    assert parse_pull_request(b"").batch == 1
    assert parse_pull_request(b"  7 ").batch == 7
    r = parse_pull_request(b'{"batch":5,"expires":1000000000,"no_wait":true,"group":"g","priority":3,"x":1}')
    assert (r.batch, r.expires, r.no_wait, r.group, r.priority) == (5, 10**9, True, "g", 3)
    assert isinstance(parse_pull_request(b'{"batch":"x"}'), str)
    assert JSApiConsumerGetNextRequest(batch=2, expires=5).to_json() == '{"expires":5,"batch":2}'


def test_empty_request():
    assert is_empty_request(b"") and is_empty_request(b"{}") and is_empty_request(b' { } ')
    assert not is_empty_request(b'{"a":1}') and not is_empty_request(b"x")


def test_the_suites_reply_check_refuses_what_its_schema_refuses():
    """tests/conftest.py check_schema (which every JetStream API reply of the client tests goes through) caches its
    validators: it must still refuse a reply its schema refuses, by the reply's own type or a given one."""
    from tests.conftest import check_schema

    info = "io.nats.jetstream.api.v1.stream_info_response"
    check_schema({"stream": "S", "seq": 1}, "io.nats.jetstream.api.v1.pub_ack_response")
    with pytest.raises(jsonschema.ValidationError):
        check_schema({"seq": 1}, "io.nats.jetstream.api.v1.pub_ack_response")  # no stream
    for _ in range(2):  # and again, from the cache
        with pytest.raises(jsonschema.ValidationError):
            check_schema({"type": info, "config": {"name": "S"}, "state": "none", "created": "x"})
