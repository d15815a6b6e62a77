"""Go-compatible JSON decoding: every row is a STREAM.CREATE.S body and nats-server 2.15.1's description
(or "OK" when it created the stream).  test_jsapi_oracle.py replays the table live."""
from __future__ import annotations

import pytest

from skiff.protocol.jsapi.gojson import go_quote, go_syntax_error
from skiff.protocol.jsapi.stream_config import check_stream_create, normalize_stream_config, parse_stream_config_request
from skiff.protocol.errors import ApiError

U = 'invalid JSON: json: unknown field '
T = "invalid JSON: json: cannot unmarshal "
MISMATCH = "stream name in subject does not match request"

JSON_CASES: list[tuple[bytes, str]] = [
    (b'{"name":"S","foo":1}', U + '"foo"'),
    (b'{"name":"S","consumer_limits":{"foo":1}}', U + '"foo"'),
    (b'{"name":"S","sources":[{"name":"X","foo":1}]}', U + '"foo"'),
    (b'{"name":"S","max_msgs":"x"}', T + "string into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"S","max_msgs":1.5}', T + "number 1.5 into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"S","max_msgs":1e3}', T + "number 1e3 into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"S","max_msgs":5.0}', T + "number 5.0 into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"S","max_msgs":100000000000000000000}',
     T + "number 100000000000000000000 into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"S","max_msgs":9223372036854775807}', "OK"),
    (b'{"name":"S","max_msgs":true}', T + "bool into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"S","max_msgs":{}}', T + "object into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"S","max_msgs":null}', "OK"),
    (b'{"name":5}', T + "number into Go struct field StreamConfigRequest.name of type string"),
    (b'{"name":"S","subjects":"a"}', T + "string into Go struct field StreamConfigRequest.subjects of type []string"),
    (b'{"name":"S","subjects":[1]}', T + "number into StreamConfigRequest.subjects.0 of type string"),
    (b'{"name":"S","max_msg_size":3000000000}',
     T + "number 3000000000 into Go struct field StreamConfigRequest.max_msg_size of type int32"),
    (b'{"name":"S","first_seq":-1}', T + "number -1 into Go struct field StreamConfigRequest.first_seq of type uint64"),
    (b'{"name":"S","max_age":"1s"}', T + "string into Go struct field StreamConfigRequest.max_age of type time.Duration"),
    (b'{"name":"S","metadata":{"a":1}}', T + "number into Go struct field StreamConfigRequest.metadata.a of type string"),
    (b'{"name":"S","metadata":[]}', T + "array into Go struct field StreamConfigRequest.metadata of type map[string]string"),
    (b'{"name":"S","consumer_limits":{"max_ack_pending":"x"}}',
     T + "string into Go struct field StreamConfigRequest.consumer_limits.max_ack_pending of type int"),
    (b'{"name":"S","sources":[5]}', T + "number into StreamConfigRequest.sources.0 of type server.StreamSource"),
    (b'{"name":"S","sources":[{"name":5}]}', T + "number into Go struct field StreamConfigRequest.sources.0.name of type string"),
    (b'{"name":"S","mirror":"x"}', T + "string into Go struct field StreamConfigRequest.mirror of type server.StreamSource"),
    (b'{"name":"S","consumer_limits":5}',
     T + "number into Go struct field StreamConfigRequest.consumer_limits of type server.StreamConsumerLimits"),
    (b'{"name":"S","mirror":{"name":"X","opt_start_time":5}}',
     T + "number into Go struct field StreamConfigRequest.mirror.opt_start_time of type time.Time"),
    (b'[]', T + "array into Go value of type server.StreamConfigRequest"),
    (b'"str"', T + "string into Go value of type server.StreamConfigRequest"),
    (b'{"name":"S","retention":"bad"}', 'invalid JSON: can not unmarshal "\\"bad\\""'),
    (b'{"name":"S","retention":"Limits"}', 'invalid JSON: can not unmarshal "\\"Limits\\""'),
    (b'{"name":"S","retention":5}', 'invalid JSON: can not unmarshal "5"'),
    (b'{"name":"S","retention":null}', 'invalid JSON: can not unmarshal "null"'),
    (b'{"name":"S","discard":"NEW"}', "OK"),
    (b'{"name":"S","storage":"MEMORY"}', 'invalid JSON: can not unmarshal "\\"MEMORY\\""'),
    (b'{"name":"S","compression":"S2"}', "invalid JSON: unknown compression algorithm"),
    (b'{"name":"S","compression":5}', T + "number into Go value of type string"),
    (b'{"name":"S","persist_mode":""}', "OK"),
    (b'{"name":"S","persist_mode":"bad"}', 'invalid JSON: can not unmarshal "\\"bad\\""'),
    (b'{"name":"S","mirror":{"name":"X","opt_start_time":"bad"}}',
     'invalid JSON: parsing time "bad" as "2006-01-02T15:04:05Z07:00": cannot parse "bad" as "2006"'),
    (b'{"name":"S","mirror":{"name":"X","opt_start_time":"2020-01-01"}}',
     'invalid JSON: parsing time "2020-01-01" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T"'),
    (b'{"name":"S","mirror":{"name":"X","opt_start_time":"2020-01-01T00:00:00"}}',
     'invalid JSON: parsing time "2020-01-01T00:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"'),
    (b'{"name":"S","mirror":{"name":"X","opt_start_time":"2020-13-01T00:00:00Z"}}',
     'invalid JSON: parsing time "2020-13-01T00:00:00Z": month out of range'),
    (b'{"name":"S","mirror":{"name":"X","opt_start_time":"2020-02-30T00:00:00Z"}}',
     'invalid JSON: parsing time "2020-02-30T00:00:00Z": day out of range'),
    (b'{"name":"S","foo":1,"max_msgs":"x"}', U + '"foo"'),
    (b'{"name":"S","max_msgs":"x","foo":1}', T + "string into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"S","retention":"bad","max_msgs":"x"}', 'invalid JSON: can not unmarshal "\\"bad\\""'),
    (b'{"NAME":"S"}', "OK"),
    (b'{"Max_Msgs":5,"name":"S"}', "OK"),
    (b'{"maxmsgs":5,"name":"S"}', U + '"maxmsgs"'),
    (b'{"\\u006eame":"S"}', "OK"),
    (b'{"na\xffme":1}', U + '"na\ufffdme"'),
    (b'{}{"name":"S"}', "OK"),
    (b'{"name":"S"} {"foo":1}', U + '"foo"'),
    (b'', MISMATCH),
    (b'null', MISMATCH),
    (b'{"name":null}', MISMATCH),
    (b' \t\r\n{"name":"S"}', "OK"),
    (b'{', "invalid JSON: unexpected EOF"),
    (b'  {"name":"S"', "invalid JSON: unexpected EOF"),
    (b'{"name":tru', "invalid JSON: unexpected EOF"),
    (b'{"name":"S"}{', "invalid JSON: unexpected EOF"),
    (b'{"name":}', "invalid JSON: invalid character '}' looking for beginning of value at offset 9"),
    (b'{"name":"S",}', "invalid JSON: invalid character '}' looking for beginning of object key string at offset 13"),
    (b'x', "invalid JSON: invalid character 'x' looking for beginning of value at offset 1"),
    (b'{} x', "invalid JSON: invalid character 'x' looking for beginning of value at offset 4"),
    (b'{"name":"S"}  }', "invalid JSON: invalid character '}' looking for beginning of value at offset 15"),
    (b'{"name":"S\\x"}', "invalid JSON: invalid escape sequence `\\x` in string at offset 12"),
    (b'{"name":"\\u12"}', 'invalid JSON: invalid escape sequence `\\u12"}` in string at offset 15'),
    (b'{"name":tru}', "invalid JSON: invalid character '}' in literal true (expecting 'e') at offset 12"),
    (b'{"name":nul}', "invalid JSON: invalid character '}' in literal null (expecting 'l') at offset 12"),
    (b'{"name":-}', "invalid JSON: invalid character '}' in numeric literal at offset 10"),
    (b'{"name":01}', "invalid JSON: invalid character '1' after object key:value pair at offset 10"),
    (b'{"name":1.5.3}', "invalid JSON: invalid character '.' after object key:value pair at offset 12"),
    (b'{"name":1e+}', "invalid JSON: invalid character '}' in numeric literal at offset 12"),
    (b'{"name":+1}', "invalid JSON: invalid character '+' looking for beginning of value at offset 9"),
    (b'{"a" 1}', "invalid JSON: invalid character '1' after object key at offset 6"),
    (b'{"name":"S" "b":1}', "invalid JSON: invalid character '\"' after object key:value pair at offset 13"),
    (b'{"name":[1}', "invalid JSON: invalid character '}' after array element at offset 11"),
    (b'{"name":"a\nb"}', "invalid JSON: invalid character '\\n' in string at offset 11"),
    (b'{"name":\xff}', "invalid JSON: invalid character '\\xff' looking for beginning of value at offset 9"),
    (b'\xef\xbb\xbf{"name":"S"}', "invalid JSON: invalid character '\\ufeff' looking for beginning of value at offset 3"),
    (b'{"name":"S"}\x00', "invalid JSON: invalid character '\\x00' looking for beginning of value at offset 13"),
    (b'{"foo":1,"name":}', "invalid JSON: invalid character '}' looking for beginning of value at offset 17"),
    (b'{"name":"S","subjects":["a",]}', "invalid JSON: invalid character ']' looking for beginning of value at offset 29"),
    (b'{"name":"S","pedantic":"x"}', T + "string into Go struct field StreamConfigRequest.pedantic of type bool"),
    # Go names a field by the key as written, whatever its case
    (b'{"name":"S","MAX_MSGS":"x"}', T + "string into Go struct field StreamConfigRequest.MAX_MSGS of type int64"),
    # unsigned fields refuse a minus sign even on zero (strconv.ParseUint)
    (b'{"name":"S","first_seq":-0}', T + "number -0 into Go struct field StreamConfigRequest.first_seq of type uint64"),
    # a top-level number goes on where Python's scanner stops
    (b'1.', "invalid JSON: unexpected EOF"),
    (b'1.x', "invalid JSON: invalid character 'x' in numeric literal at offset 3"),
    (b'1 x', T + "number into Go value of type server.StreamConfigRequest"),
    # nesting: Go's scanner allows 10000 levels (deeper than Python's C scanner goes) and refuses the 10001st
    (b'[' * 10001, "invalid JSON: exceeded max depth at offset 10001"),
    (b'[' * 100000 + b']' * 100000, "invalid JSON: exceeded max depth at offset 10001"),
    (b'{"a":' * 10001 + b'1' + b'}' * 10001, "invalid JSON: exceeded max depth at offset 50001"),
    (b'{"name":"S"}' + b'[' * 10001, "invalid JSON: exceeded max depth at offset 10013"),
    (b'[' * 5000 + b']' * 5000, T + "array into Go value of type server.StreamConfigRequest"),
    (b'{"subjects":' + b'[' * 5000 + b']' * 5000 + b'}', T + "array into StreamConfigRequest.subjects.0 of type string"),
    (b'{"bogus":' + b'[' * 5000 + b']' * 5000 + b'}', U + '"bogus"'),
    (b'{"retention":' + b'[' * 3000 + b']' * 3000 + b'}',
     'invalid JSON: can not unmarshal "' + '[' * 3000 + ']' * 3000 + '"'),
]


def describe(body: bytes) -> str:
    req = parse_stream_config_request(body)
    if isinstance(req, ApiError):
        return req.description
    err = check_stream_create("S", req.config())
    if err:
        return err.description
    out = normalize_stream_config(req.config())
    return out.description if isinstance(out, ApiError) else "OK"


@pytest.mark.parametrize("body,description", JSON_CASES, ids=[repr(c[0])[:60] for c in JSON_CASES])
def test_decode_errors_match_go(body, description):
    assert describe(body) == description


def test_syntax_scanner_accepts_valid_values():
    for text in (b'{"a":[1,-2.5e+3,true,false,null,"x\\u00e9\\n"],"b":{}}', b"[]", b'"s"', b"0", b"-0.1E9"):
        msg, end = go_syntax_error(text)
        assert msg == "" and end == len(text)


# json.Unmarshal (UNPIN, CONSUMER.RESET, pull requests, Direct Get): the whole input is checked first, errors carry
# no offset, running out of input is "unexpected end of JSON input" (observed on nats-server 2.15.1 via UNPIN).
UNMARSHAL_CASES: list[tuple[bytes, str]] = [
    (b'', "unexpected end of JSON input"),
    (b'{"a":', "unexpected end of JSON input"),
    (b'1.', "unexpected end of JSON input"),
    (b'{}{}', "invalid character '{' after top-level value"),
    (b'{"group":"g"} x', "invalid character 'x' after top-level value"),
    (b'{"a":1}garbage', "invalid character 'g' after top-level value"),
    (b'{"\\x":1}', "invalid escape sequence `\\x` in string"),
    (b'{"a":1,}', "invalid character '}' looking for beginning of object key string"),
    (b'1.x', "invalid character 'x' in numeric literal"),
    (b'[' * 100000 + b']' * 100000, "exceeded max depth"),
    (b'[]', "json: cannot unmarshal array into Go value of type server.JSApiConsumerUnpinRequest"),
    (b'{"group":1}', "json: cannot unmarshal number into Go struct field JSApiConsumerUnpinRequest.group of type string"),
    (b'{"x":' + b'[' * 5000 + b']' * 5000 + b'}', "OK"),
    (b'{"bogus":1,"group":"g"}', "OK"),
]


@pytest.mark.parametrize("body,description", UNMARSHAL_CASES, ids=[repr(c[0])[:60] for c in UNMARSHAL_CASES])
def test_unmarshal_errors_match_go(body, description):
    from skiff.protocol.jsapi.requests import JSApiConsumerUnpinRequest, parse_request

    r = parse_request(JSApiConsumerUnpinRequest, body, strict=False, unmarshal=True)
    got = r.description.removeprefix("invalid JSON: ") if isinstance(r, ApiError) else "OK"
    assert got == description


def test_pull_request_errors_name_no_struct():
    """consumer.go unmarshals a pull request through a pointer to a pointer: Go prints no struct name."""
    from skiff.protocol.jsapi.requests import parse_pull_request

    assert parse_pull_request(b'{"expires":"1s"}') == (
        "json: cannot unmarshal string into Go struct field .expires of type time.Duration")
    assert parse_pull_request(b'{"batch":1}{}') == "invalid character '{' after top-level value"
    assert parse_pull_request(b'{"batch":') == "unexpected end of JSON input"
    assert parse_pull_request(b'{"x":' + b'[' * 100000) == "exceeded max depth"
    assert parse_pull_request(b' {"batch":3} ').batch == 3


def test_go_quote():
    assert go_quote('a"b\\c\n\x01\u00e9') == '"a\\"b\\\\c\\n\\x01\u00e9"'
