"""protocol/marshal.py: Go's encoding/json output, the one encoder behind API replies, $SYS replies, the monitor and
the configuration digest (encode.go: appendString's HTML-safe escapes, floatEncoder, MarshalIndent)."""
import datetime
import json

from skiff.protocol.jsapi.timefmt import GoTime, format_time
from skiff.protocol.marshal import Raw, dumpb, dumps, dumps_indent, go_float, quote


def test_compact_and_indent():
    doc = {"a": 1, "b": 2.0, "c": [1.5, True, None], "d": "x&y", "e": {}, "f": [], "g": 1e21, "h": 1e-7, "u": "é"}
    assert dumps(doc) == ('{"a":1,"b":2,"c":[1.5,true,null],"d":"x\\u0026y","e":{},"f":[],"g":1e+21,'
                          '"h":1e-7,"u":"é"}')
    assert json.loads(dumps_indent(doc)) == json.loads(dumps(doc))
    plain = {"k": [1, {"z": "v"}], "s": "t"}
    assert dumps_indent(plain) == json.dumps(plain, indent=2)


def test_strings_are_html_safe_and_keep_utf8():
    assert quote('<a href="x">&\u2028\u2029é\n') == '"\\u003ca href=\\"x\\"\\u003e\\u0026\\u2028\\u2029é\\n"'
    assert dumps({"<k>": "v"}) == '{"\\u003ck\\u003e":"v"}'
    assert dumpb({"u": "é"}) == '{"u":"é"}'.encode()


def test_floats_as_go_writes_them():
    for f, text in ((0.0, "0"), (-0.0, "-0"), (100.0, "100"), (0.1, "0.1"), (1e-6, "0.000001"),
                    (1e20, "100000000000000000000"), (1e21, "1e+21"), (1.5e-7, "1.5e-7"), (-2.5e300, "-2.5e+300")):
        assert go_float(f) == text, f
    # Go's encoder refuses NaN and infinities; the document stays valid instead
    assert dumps([float("nan"), float("inf"), float("-inf")]) == "[null,null,null]"


def test_raw_times_and_to_json_are_inserted():
    class Cfg:
        def to_json(self):
            return '{"name":"S"}'

    t = GoTime(1_700_000_000_123_456_789, 0)
    assert dumps({"c": Raw('{"x":[1]}'), "m": Cfg(), "t": t, "l": (1, "2")}) == (
        '{"c":{"x":[1]},"m":{"name":"S"},"t":"' + format_time(t) + '","l":[1,"2"]}')


def test_sort_keys_is_a_go_map():
    doc = {"b": {"z": 1, "a": [{"y": 2, "x": datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)}]}, "a": 0}
    assert dumps(doc, sort_keys=True) == '{"a":0,"b":{"a":[{"x":"2024-01-02T00:00:00Z","y":2}],"z":1}}'
