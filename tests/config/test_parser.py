"""The configuration language, form by form (cases taken from nats-server's conf/lex_test.go and parse_test.go)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from skiff.server.conf import ConfigError, parse, parse_duration, parse_file, parse_file_tokens, parse_tokens
from skiff.server.conf.values import format_duration

# (text, expected mapping)
VALID = [
    # separators
    ("foo: 1", {"foo": 1}),
    ("foo = 1", {"foo": 1}),
    ("foo 1", {"foo": 1}),
    ("foo:1", {"foo": 1}),
    ("foo=1", {"foo": 1}),
    ("foo\t1", {"foo": 1}),
    # a value may start on a later line when no separator was written
    ("foo\n\n  1", {"foo": 1}),
    # entry terminators
    ("a: 1; b: 2", {"a": 1, "b": 2}),
    ("a: 1, b: 2", {"a": 1, "b": 2}),
    ("a: 1\r\nb: 2\r\n", {"a": 1, "b": 2}),
    # comments
    ("# c\nfoo: 1 # trailing\n// c2\nbar: 2 // trailing", {"foo": 1, "bar": 2}),
    ("", {}),
    ("   \n# only a comment\n", {}),
    # strings
    ("foo: bar", {"foo": "bar"}),
    ("foo: 'bar baz'", {"foo": "bar baz"}),
    ('foo: "bar baz"', {"foo": "bar baz"}),
    ("foo: 'raw\\n'", {"foo": "raw\\n"}),
    ('foo: "a\\tb\\nc\\rd\\"e\\\\f"', {"foo": 'a\tb\nc\rd"e\\f'}),
    ('foo: "\\x41\\xe2\\x82\\xac"', {"foo": "A\u20ac"}),
    ("foo: a\\tb", {"foo": "a\tb"}),
    ("foo: bar#baz", {"foo": "bar#baz"}),
    ("foo: nats://127.0.0.1:4222", {"foo": "nats://127.0.0.1:4222"}),
    ('foo: ""', {"foo": ""}),
    ("foo:", {"foo": ""}),  # nats-server: a separator then EOF is the empty string
    ("foo: bar'", {"foo": "bar"}),
    # keys
    ('"quoted key": 1', {"quoted key": 1}),
    ("'quoted key' = 1", {"quoted key": 1}),
    ("Foo.Bar-baz_1: 1", {"Foo.Bar-baz_1": 1}),
    ("a: 1\na: 2", {"a": 2}),  # the last definition wins
    # booleans, any case
    *[(f"b: {w}", {"b": True}) for w in ("true", "TRUE", "yes", "Yes", "on", "ON")],
    *[(f"b: {w}", {"b": False}) for w in ("false", "False", "no", "NO", "off", "Off")],
    ("b: 'true'", {"b": "true"}),
    # integers and sizes
    ("n: 4222", {"n": 4222}),
    ("n: -1", {"n": -1}),
    ("n: 0", {"n": 0}),
    ("n: 1k", {"n": 1000}),
    ("n: 1K", {"n": 1000}),
    ("n: 1kb", {"n": 1024}),
    ("n: 1KB", {"n": 1024}),
    ("n: 1Ki", {"n": 1024}),
    ("n: 1KiB", {"n": 1024}),
    ("n: 64KB", {"n": 65536}),
    ("n: 1m", {"n": 1_000_000}),
    ("n: 1MB", {"n": 1024**2}),
    ("n: 8MiB", {"n": 8 * 1024**2}),
    ("n: 1G", {"n": 10**9}),
    ("n: 1GB", {"n": 1024**3}),
    ("n: 2T", {"n": 2 * 10**12}),
    ("n: 2TB", {"n": 2 * 1024**4}),
    ("n: 1P", {"n": 10**15}),
    ("n: 1PB", {"n": 1024**5}),
    ("n: 1E", {"n": 10**18}),
    ("n: 1EB", {"n": 1024**6}),
    ("n: -1KB", {"n": -1024}),
    ("n: 2m", {"n": 2_000_000}),  # an unquoted "2m" is a size, not two minutes
    # words that start with digits are strings
    ("s: 10ms", {"s": "10ms"}),
    ("s: 30s", {"s": "30s"}),
    ("s: 1h", {"s": "1h"}),
    ("s: 4222abc", {"s": "4222abc"}),
    ("s: 1Mx", {"s": "1Mx"}),
    # floats and addresses
    ("f: 1.5", {"f": 1.5}),
    ("f: -0.25", {"f": -0.25}),
    ("ip: 127.0.0.1", {"ip": "127.0.0.1"}),
    ("ip: 127.0.0.1:4222", {"ip": "127.0.0.1:4222"}),
    ("ip: 0.0.0.0:-1", {"ip": "0.0.0.0:-1"}),
    ("listen: localhost:4222", {"listen": "localhost:4222"}),
    # dates
    ("d: 2016-05-04T18:53:41Z", {"d": datetime(2016, 5, 4, 18, 53, 41, tzinfo=timezone.utc)}),
    # blocks
    ("b (\n  line one\n  line two\n)\n", {"b": "\n  line one\n  line two\n"}),
    ("b (\nx) not the end\n)", {"b": "\nx) not the end\n"}),
    # arrays
    ("a: [1, 2, 3]", {"a": [1, 2, 3]}),
    ("a: [1,2,3,'bar']", {"a": [1, 2, 3, "bar"]}),
    ("a: []", {"a": []}),
    ("a: [1, 2,]", {"a": [1, 2]}),
    ("a = [\n 1, # one\n 2 // two\n 3\n 'bar' ,\n \"baz\"\n]", {"a": [1, 2, 3, "bar", "baz"]}),
    ("a: [[1, 2], [x, y]]", {"a": [[1, 2], ["x", "y"]]}),
    ("a: [{x: 1}, {x: 2}]", {"a": [{"x": 1}, {"x": 2}]}),
    ("a: [1.5, true, '2']", {"a": [1.5, True, "2"]}),
    # maps
    ("m { a: 1 }", {"m": {"a": 1}}),
    ("m: { a: 1, b: 2 }", {"m": {"a": 1, "b": 2}}),
    ("m = {a=1;b=2}", {"m": {"a": 1, "b": 2}}),
    ("m {\n  a: 1 # c\n  b: 2 // c\n  # own line\n  c {\n    d: x\n  }\n}", {"m": {"a": 1, "b": 2, "c": {"d": "x"}}}),
    ("m {\n  a:\n    1\n}", {"m": {"a": 1}}),  # inside maps a value may follow on the next line
    ("m {}", {"m": {}}),
    ("m { 'q k': 1, \"r k\" = 2 }", {"m": {"q k": 1, "r k": 2}}),
    # the whole file in braces: JSON
    ('{"port": 4222, "debug": true, "a": ["x", "y"], "m": {"k": "v"}}',
     {"port": 4222, "debug": True, "a": ["x", "y"], "m": {"k": "v"}}),
    ("{\n  port: 4222\n}\n", {"port": 4222}),
    # variables: block scope, inner shadows outer, defined earlier in the same map
    ("v: 4222\nport: $v", {"v": 4222, "port": 4222}),
    ("v: 1\nm {\n  v: 2\n  x: $v\n}\ny: $v", {"v": 1, "m": {"v": 2, "x": 2}, "y": 1}),
    ("v: 1\nm { n { x: $v } }", {"v": 1, "m": {"n": {"x": 1}}}),
    ("v: [1, 2]\na: $v", {"v": [1, 2], "a": [1, 2]}),
    ("v: 1\na: [$v, 2]", {"v": 1, "a": [1, 2]}),
    ("v: {x: 1}\na: $v", {"v": {"x": 1}, "a": {"x": 1}}),
    # bcrypt hashes stay literal
    ("p: $2a$11$3kIDaCxw.Glsl1.u5nKa6eUnNDLV5HV9tIuUp7EHhMt6Nm9myW1aS",
     {"p": "$2a$11$3kIDaCxw.Glsl1.u5nKa6eUnNDLV5HV9tIuUp7EHhMt6Nm9myW1aS"}),
    # 'include' is a key when a separator follows it directly
    ("include: 1", {"include": 1}),
    # a '}' that starts a top-level line starts a key, as in nats-server
    ("}a: 1", {"}a": 1}),
    # a size letter followed by a digit makes a string (nats-server 2.15)
    ("n: 1e5", {"n": "1e5"}),
    ("n: 2k5", {"n": "2k5"}),
    ("n: 1e", {"n": 10**18}),
    # ']' ends a number only inside an array
    ("a: 2]", {"a": "2]"}),
    # a lone '/' after a value: white space at the top level, a separator in maps and arrays (nats-server)
    ("a: 1 / \nb: 2", {"a": 1, "b": 2}),
    ("m { a: 1 / b: 2 }", {"m": {"a": 1, "b": 2}}),
    ("a: [1 / 2]", {"a": [1, 2]}),
]


@pytest.mark.parametrize("text,expected", VALID, ids=[repr(t)[:60] for t, _ in VALID])
def test_valid(text, expected):
    assert parse(text) == expected


# (text, (line, col), words that must be in the message)
INVALID = [
    ("port: {", (1, 8), "Unexpected EOF processing map"),
    ("port: [1, 2", (1, 12), "array value terminator"),
    ("a: 1 2", (1, 6), "top-level value to end"),
    ("a: 1\nb", (2, 1), "has no value"),
    ("a = \n 4", (1, 5), "found new line"),
    ('a: "x', (1, 6), "Unexpected EOF"),
    ("a: 'x", (1, 6), "Unexpected EOF"),
    ("a: 12-3", (1, 6), "ISO8601"),
    ("a: 2016-05-04X", (1, 14), "ISO8601"),
    ("a: .5", (1, 4), "Floats must start with a digit"),
    ("a: 1.x", (1, 6), "digit after the '.'"),
    ("a: -x", (1, 5), "Expected a digit"),
    ("a: [,1]", (1, 5), "Unexpected array value terminator"),
    ("a: [1 2]", (1, 7), "array value terminator"),
    ("m { a: 1 b }", (1, 10), "map value terminator"),
    ("m { a: , }", (1, 8), "Unexpected map value terminator"),
    ("m { a }", (1, 5), "has no value"),
    ("m { : 1 }", (1, 5), "Unexpected key separator"),
    ("m { ] }", (1, 5), "Unexpected array end"),
    ("= 1", (1, 1), "Unexpected key separator"),
    ("a: C:\\foo", (1, 6), "Invalid escape character 'f'"),
    ('a: "\\xZZ"', (1, 5), "hexadecimal"),
    ("a: (\nno end", (2, 7), "Unexpected EOF processing block"),
    ("a: 1kbb", (1, 4), "unknown size suffix"),
    ("a: 99999999999999999999", (1, 4), "out of the range"),
    ("a: $NOT_DEFINED_ANYWHERE_XYZ", (1, 4), "can not be found"),
    ("m { v: 1 }\na: $v", (2, 4), "can not be found"),  # block scope: inner keys are not visible outside
    ("a: 1\n}\nb: 2", (3, 4), "top-level value to end"),  # as nats-server: key "}" with value "b:"
    ("a: 1\n/ b", (2, 1), "Unexpected '/'"),
    ("include [x]", (1, 9), "start of an array"),
    ("include 5", (1, 9), "start of a number"),
]


@pytest.mark.parametrize("text,pos,words", INVALID, ids=[repr(t)[:40] for t, _, _ in INVALID])
def test_invalid_names_file_line_and_column(text, pos, words):
    with pytest.raises(ConfigError) as ei:
        parse(text, "bad.conf")
    e = ei.value
    assert words in str(e)
    assert (e.file, e.line, e.col) == ("bad.conf", *pos)
    assert str(e).startswith(f"bad.conf:{pos[0]}:{pos[1]}: ")


def test_tokens_remember_positions():
    toks = parse_tokens("a: 1\nm {\n  b: [x, y]\n}\n", "f.conf")
    assert (toks["a"].line, toks["a"].col, toks["a"].file) == (1, 1, "f.conf")
    assert (toks["m"].line, toks["m"].col) == (2, 1)
    b = toks["m"].value["b"]
    assert (b.line, b.col) == (3, 3)
    assert [(t.value, t.line, t.col) for t in b.value] == [("x", 3, 7), ("y", 3, 10)]


def test_used_variable_is_marked():
    toks = parse_tokens("PORT: 4222\nUNUSED: 1\nport: $PORT\n")
    assert toks["PORT"].used_variable
    assert not toks["UNUSED"].used_variable
    assert not toks["port"].used_variable


class TestEnvironment:
    def test_env_fallback_is_parsed_as_a_value(self, monkeypatch):
        monkeypatch.setenv("SKIFF_T_PORT", "4333")
        monkeypatch.setenv("SKIFF_T_SIZE", "1MB")
        monkeypatch.setenv("SKIFF_T_FLAG", "yes")
        monkeypatch.setenv("SKIFF_T_STR", "hello")
        monkeypatch.setenv("SKIFF_T_QUOTED", '"a b"')
        got = parse("p: $SKIFF_T_PORT\ns: $SKIFF_T_SIZE\nf: $SKIFF_T_FLAG\nx: $SKIFF_T_STR\nq: $SKIFF_T_QUOTED")
        assert got == {"p": 4333, "s": 1048576, "f": True, "x": "hello", "q": "a b"}

    def test_file_definition_wins_over_environment(self, monkeypatch):
        monkeypatch.setenv("SKIFF_T_V", "1")
        assert parse("SKIFF_T_V: 2\na: $SKIFF_T_V") == {"SKIFF_T_V": 2, "a": 2}

    def test_env_chain_and_cycle(self, monkeypatch):
        monkeypatch.setenv("SKIFF_T_A", "$SKIFF_T_B")
        monkeypatch.setenv("SKIFF_T_B", "42")
        assert parse("a: $SKIFF_T_A") == {"a": 42}
        monkeypatch.setenv("SKIFF_T_B", "$SKIFF_T_A")
        with pytest.raises(ConfigError, match="cycle"):
            parse("a: $SKIFF_T_A")

    def test_unparsable_env_value(self, monkeypatch):
        monkeypatch.setenv("SKIFF_T_BAD", "a b")
        with pytest.raises(ConfigError, match="could not be parsed"):
            parse("a: $SKIFF_T_BAD")


class TestInclude:
    def test_include_relative_to_including_file(self, tmp_path):
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / "auth.conf").write_text("authorization { token: s3cr3t }\ninclude 'more.conf'\n")
        (tmp_path / "sub" / "more.conf").write_text("debug: true\n")
        (tmp_path / "main.conf").write_text("port: 4222\ninclude ./sub/auth.conf\n")
        assert parse_file(str(tmp_path / "main.conf")) == {
            "port": 4222,
            "authorization": {"token": "s3cr3t"},
            "debug": True,
        }

    @pytest.mark.parametrize("form", ["include inc.conf", "include 'inc.conf'", 'include "inc.conf"',
                                      "INCLUDE inc.conf", "include inc.conf; port: 1", "include   inc.conf # c"])
    def test_include_forms(self, tmp_path, form):
        (tmp_path / "inc.conf").write_text("x: 1\n")
        (tmp_path / "main.conf").write_text(form + "\n")
        assert parse_file(str(tmp_path / "main.conf"))["x"] == 1

    def test_include_inside_a_map(self, tmp_path):
        (tmp_path / "users.conf").write_text("users: [ {user: a, password: b} ]\n")
        (tmp_path / "main.conf").write_text("authorization {\n  include users.conf\n  timeout: 3\n}\n")
        assert parse_file(str(tmp_path / "main.conf")) == {
            "authorization": {"users": [{"user": "a", "password": "b"}], "timeout": 3}
        }

    def test_included_keys_are_variables_for_later_lines_but_not_the_reverse(self, tmp_path):
        (tmp_path / "vars.conf").write_text("PORT: 4333\n")
        (tmp_path / "main.conf").write_text("include vars.conf\nport: $PORT\n")
        assert parse_file(str(tmp_path / "main.conf"))["port"] == 4333
        # nats-server parses an included file on its own: the includer's variables are not visible in it.
        (tmp_path / "uses.conf").write_text("port: $MINE_ONLY\n")
        (tmp_path / "main2.conf").write_text("MINE_ONLY: 1\ninclude uses.conf\n")
        with pytest.raises(ConfigError, match="MINE_ONLY"):
            parse_file(str(tmp_path / "main2.conf"))

    def test_missing_include_names_the_including_line(self, tmp_path):
        (tmp_path / "main.conf").write_text("port: 1\n\ninclude nope.conf\n")
        with pytest.raises(ConfigError) as ei:
            parse_file(str(tmp_path / "main.conf"))
        assert ei.value.file == str(tmp_path / "main.conf")
        assert ei.value.line == 3
        assert "nope.conf" in str(ei.value)

    def test_error_inside_include_names_the_included_file(self, tmp_path):
        (tmp_path / "inc.conf").write_text("ok: 1\nbad: [1 2]\n")
        (tmp_path / "main.conf").write_text("include inc.conf\n")
        with pytest.raises(ConfigError) as ei:
            parse_file(str(tmp_path / "main.conf"))
        assert ei.value.file == str(tmp_path / "inc.conf")
        assert ei.value.line == 2
        assert "included from" in str(ei.value)

    def test_include_cycle_is_an_error(self, tmp_path):
        (tmp_path / "a.conf").write_text("include b.conf\n")
        (tmp_path / "b.conf").write_text("include a.conf\n")
        with pytest.raises(ConfigError, match="cycle"):
            parse_file(str(tmp_path / "a.conf"))

    def test_tokens_from_include_carry_their_file(self, tmp_path):
        (tmp_path / "inc.conf").write_text("\n\nx: 1\n")
        (tmp_path / "main.conf").write_text("include inc.conf\n")
        tok = parse_file_tokens(str(tmp_path / "main.conf"))["x"]
        assert (tok.file, tok.line) == (str(tmp_path / "inc.conf"), 3)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="error opening config file"):
        parse_file(str(tmp_path / "nope.conf"))


def test_binary_file_is_a_config_error(tmp_path):
    p = tmp_path / "bin.conf"
    p.write_bytes(b"port: \xff\xfe\n")
    with pytest.raises(ConfigError, match="UTF-8"):
        parse_file(str(p))


def test_deep_nesting_is_a_config_error():
    with pytest.raises(ConfigError):
        parse("a: " + "[" * 5000)


@pytest.mark.parametrize("garbage", ["{{{{", "}}}}", "[[[[", "::::", '"""', "\x00\x01", "$", "a: $", "include",
                                     "a: (", "a { b { c", "\\", "a: \\", "-", "a: -", "'", "a: 1.2.", "# only"])
def test_garbage_never_escapes_as_another_exception(garbage):
    try:
        parse(garbage)
    except ConfigError:
        pass


DURATIONS = [
    ("0", 0.0), ("2m", 120.0), ("30s", 30.0), ("1h", 3600.0), ("1h30m", 5400.0), ("250ms", 0.25),
    ("1.5s", 1.5), ("100us", 1e-4), ("100\u00b5s", 1e-4), ("10ns", 1e-8), ("-5s", -5.0), ("+5s", 5.0),
    ("1h2m3s", 3723.0), (".5s", 0.5), ("2m0s", 120.0),
]


@pytest.mark.parametrize("text,seconds", DURATIONS)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "1x", "s", "1.5.5s", "--1s", "1 s", "abc"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="time: "):
        parse_duration(text)


@pytest.mark.parametrize("seconds,text", [(120, "2m0s"), (10, "10s"), (1.5, "1.5s"), (0.25, "250ms"), (0, "0s"),
                                          (3600, "1h0m0s"), (5400.5, "1h30m0.5s"), (2e-6, "2\u00b5s")])
def test_format_duration_like_go(seconds, text):
    assert format_duration(seconds) == text


def test_every_example_in_nats_server_simple_conf_shape():
    # nats-server's conf/simple.conf, in spirit: a realistic file with most forms at once.
    text = """
    listen: 127.0.0.1:4222

    authorization {
      # Our role based permissions.
      ADMIN = {
        publish = ">"
        subscribe = ">"
      }
      REQUESTOR = {
        publish = ["req.foo", "req.bar"]
        subscribe = "_INBOX.*"
      }
      users = [
        {user: alice, password: foo, permissions: $ADMIN}
        {user: bob,   password: bar, permissions: $REQUESTOR}
      ]
    }
    """
    got = parse(text)
    assert got["listen"] == "127.0.0.1:4222"
    users = got["authorization"]["users"]
    assert users[0] == {"user": "alice", "password": "foo", "permissions": {"publish": ">", "subscribe": ">"}}
    assert users[1]["permissions"]["publish"] == ["req.foo", "req.bar"]
