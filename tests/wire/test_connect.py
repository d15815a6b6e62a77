"""CONNECT: defaults (verbose, pedantic), bad JSON, protocol, no_responders, and authentication.

Ref: jetstream-notes.md 1.3 and 1.8; nats-server client.go processConnect, auth.go; verified against v2.15.1.
"""
from __future__ import annotations

import time

import pytest

OK = b"+OK\r\n"
AUTH_VIOLATION = b"-ERR 'Authorization Violation'\r\n"


# -- verbose / pedantic --------------------------------------------------------------------------------------------

def test_verbose_is_default(shared_server, raw, subj):
    c = raw.connect(shared_server)
    c.send(b"CONNECT {}\r\n")
    c.expect(OK)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\n")
    c.expect(OK)
    c.send(b"PUB " + s + b" 2\r\nhi\r\n")
    # +OK for the PUB comes before the MSG it caused.
    c.expect(OK + b"MSG " + s + b" 1 2\r\nhi\r\n")
    c.send(b"UNSUB 1\r\n")
    c.expect(OK)
    c.send(b"UNSUB 99\r\n")  # unknown sid: still +OK
    c.expect(OK)
    c.send(b"PING\r\n")  # PING gets PONG, no +OK
    c.expect(b"PONG\r\n")
    c.expect_nothing()


def test_verbose_without_any_connect(shared_server, raw, subj):
    # No CONNECT at all (allowed without auth): the server's defaults apply, verbose included.
    c = raw.connect(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 2\r\nhi\r\n")
    c.expect(OK + OK + b"MSG " + s + b" 1 2\r\nhi\r\n")


def test_verbose_false(shared_server, raw, subj):
    c = raw.connect(shared_server)
    s = subj.encode()
    c.send(b'CONNECT {"verbose":false}\r\nSUB ' + s + b" 1\r\nPUB " + s + b" 2\r\nhi\r\nUNSUB 1\r\nPING\r\n")
    c.expect(b"MSG " + s + b" 1 2\r\nhi\r\nPONG\r\n")
    c.expect_nothing()


def test_second_connect_changes_options(shared_server, raw):
    c = raw.connect(shared_server)
    c.send(b'CONNECT {"verbose":true}\r\nCONNECT {"verbose":false}\r\nPING\r\n')
    c.expect(OK + b"PONG\r\n")


def test_connect_op_is_case_insensitive_and_tab_separated(shared_server, raw):
    c = raw.connect(shared_server)
    c.send(b"connect\t{}\r\n")
    c.expect(OK)
    c.send(b"CoNnEcT  {}\r\n")
    c.expect(OK)


def test_connect_unknown_field_is_ignored(shared_server, raw):
    c = raw.connect(shared_server)
    c.send(b'CONNECT {"no_such_field":1,"verbose":true}\r\n')
    c.expect(OK)


def test_pedantic_default_flags_publish_subject(shared_server, raw, subj):
    # A bare {} client is pedantic: a wildcard publish subject gets -ERR, and the message is still routed.
    c = raw.connect(shared_server)
    s = subj.encode()
    c.send(b'CONNECT {"verbose":false}\r\nSUB ' + s + b".> 1\r\nPUB " + s + b".* 2\r\nhi\r\n")
    c.expect(b"-ERR 'Invalid Publish Subject'\r\nMSG " + s + b".* 1 2\r\nhi\r\n")
    assert c.is_open()


def test_pedantic_verbose_sends_err_then_ok(shared_server, raw, subj):
    c = raw.connect(shared_server)
    s = subj.encode()
    c.send(b'CONNECT {"verbose":true,"pedantic":true}\r\n')
    c.expect(OK)
    c.send(b"PUB " + s + b".> 2\r\nhi\r\n")
    c.expect(b"-ERR 'Invalid Publish Subject'\r\n" + OK)


@pytest.mark.parametrize("bad", [b"foo.*", b"foo.>", b">", b"*"])
def test_pedantic_off_routes_wildcard_publish_silently(shared_server, raw, bad):
    c = raw.handshake(shared_server)  # pedantic false
    c.send(b"SUB > 1\r\n")  # '>' sees every subject on this server, wildcards included
    c.send(b"PUB " + bad + b" 1\r\nx\r\nPING\r\n")
    got = c.read_until(b"PONG\r\n")
    assert b"-ERR" not in got
    assert b"MSG " + bad + b" 1 1\r\nx\r\n" in got


def test_pedantic_malformed_publish_subject_is_not_delivered(server, raw):
    # Empty tokens never match any subscription, pedantic or not; pedantic adds the -ERR.  A fresh server, so
    # '>' sees nothing but this test's traffic.
    pedantic = raw.connect(server)
    pedantic.send(b'CONNECT {"verbose":false,"pedantic":true}\r\nSUB > 1\r\n')
    lax = raw.handshake(server)
    lax.send(b"SUB > 1\r\n")
    for bad in [b"foo..bar", b".foo", b"foo."]:
        pedantic.send(b"PUB " + bad + b" 1\r\nx\r\nPING\r\n")
        pedantic.expect(b"-ERR 'Invalid Publish Subject'\r\nPONG\r\n")
        lax.send(b"PUB " + bad + b" 1\r\nx\r\nPING\r\n")
        lax.expect(b"PONG\r\n")


# -- malformed CONNECT ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    b"CONNECT {bad\r\n",
    b"CONNECT\r\n",
    b"CONNECT []\r\n",
    b'CONNECT {"verbose":1}\r\n',  # wrong JSON type
    b'CONNECT {"verbose":false} trailing\r\n',
    b"CONNECTX\r\n",
])
def test_invalid_connect_json_closes_silently(shared_server, raw, line):
    c = raw.connect(shared_server)
    c.send(line)
    assert c.assert_closed() == b""


@pytest.mark.parametrize("proto", [b"2", b"-1", b"3"])
def test_invalid_protocol(shared_server, raw, proto):
    c = raw.connect(shared_server)
    c.send(b'CONNECT {"protocol":' + proto + b"}\r\n")
    assert c.assert_closed() == b"-ERR 'invalid client protocol'\r\n"


def test_no_responders_requires_headers(shared_server, raw):
    c = raw.connect(shared_server)
    c.send(b'CONNECT {"verbose":false,"no_responders":true}\r\n')
    assert c.assert_closed() == b"-ERR 'no responders requires headers support'\r\n"


def test_no_responders_with_headers_ok(shared_server, raw):
    c = raw.connect(shared_server)
    c.send(b'CONNECT {"verbose":true,"no_responders":true,"headers":true}\r\n')
    c.expect(OK)
    assert c.is_open()


# -- authentication -------------------------------------------------------------------------------------------------

@pytest.fixture
def userpass_server(server_factory):
    return server_factory("--user", "u", "--pass", "p", jetstream=False)


@pytest.fixture
def token_server(server_factory):
    return server_factory("--auth", "tok", jetstream=False)


def test_user_password_ok(userpass_server, raw):
    c = raw.connect(userpass_server)
    c.send(b'CONNECT {"user":"u","pass":"p"}\r\nPING\r\n')
    c.expect(OK + b"PONG\r\n")


def test_user_password_wrong(userpass_server, raw):
    # One server for all cases: each bad CONNECT gets the same -ERR and close.
    for creds in [b'"user":"u","pass":"x"', b'"user":"x","pass":"p"', b'"user":"u"', b'"auth_token":"p"', b""]:
        c = raw.connect(userpass_server)
        c.send(b"CONNECT {" + creds + b"}\r\nPING\r\n")
        assert c.assert_closed() == AUTH_VIOLATION, creds


def test_token_ok(token_server, raw):
    c = raw.connect(token_server)
    c.send(b'CONNECT {"auth_token":"tok","verbose":false}\r\nPING\r\n')
    c.expect(b"PONG\r\n")


def test_token_wrong(token_server, raw):
    for creds in [b'"auth_token":"bad"', b'"user":"tok"', b'"user":"u","pass":"tok"', b""]:
        c = raw.connect(token_server)
        c.send(b"CONNECT {" + creds + b"}\r\n")
        assert c.assert_closed() == AUTH_VIOLATION, creds


def test_auth_required_first_op_must_be_connect(token_server, raw):
    # Without a CONNECT first, any op (even an unknown one) is an authorization violation.
    for first in [b"PING\r\n", b"PUB foo 0\r\n\r\n", b"SUB foo 1\r\n", b"XYZ\r\n", b"ping\r\n"]:
        c = raw.connect(token_server)
        c.send(first)
        assert c.assert_closed() == AUTH_VIOLATION, first


def test_auth_timeout(server_factory, raw):
    srv = server_factory(jetstream=False, config='authorization {\n  token: "tok"\n  timeout: 0.5\n}\n')
    c = raw.connect(srv)
    t0 = time.monotonic()
    assert c.assert_closed(3) == b"-ERR 'Authentication Timeout'\r\n"
    assert 0.3 < time.monotonic() - t0 < 2.0
    # A client that authenticates in time is not affected by the timer.
    d = raw.connect(srv)
    d.send(b'CONNECT {"auth_token":"tok","verbose":false}\r\n')
    time.sleep(0.7)
    assert d.is_open(0.5)


# -- a second CONNECT ------------------------------------------------------------------------------------------------
# nats-server processConnect: a CONNECT after the first one drops every subscription the connection has
# (clearAccountSubs: their sids are gone too), puts the client back in $G and authenticates it again with the options
# merged over the first CONNECT's (json.Unmarshal into the existing clientOpts).

def test_second_connect_drops_subscriptions(shared_server, raw, subj):
    c = raw.connect(shared_server)
    s = subj.encode()
    c.send(b'CONNECT {"verbose":false}\r\nSUB ' + s + b" 1\r\nSUB " + s + b" q 2\r\nPING\r\n")
    c.expect(b"PONG\r\n")
    c.send(b"CONNECT {}\r\nPUB " + s + b" 2\r\nhi\r\nPING\r\n")
    c.expect(b"PONG\r\n")  # nothing delivered to sid 1 or 2
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 2\r\nho\r\nPING\r\n")  # sid 1 is free again
    c.expect(b"MSG " + s + b" 1 2\r\nho\r\nPONG\r\n")
    c.expect_nothing()


@pytest.fixture
def two_users_server(server_factory):
    return server_factory(jetstream=False, config='authorization { users = [\n  {user: a, password: p}\n'
                                                  '  {user: b, password: q, permissions: {publish: "foo"}}\n] }\n')


def test_second_connect_authenticates_again(two_users_server, raw):
    c = raw.connect(two_users_server)
    c.send(b'CONNECT {"verbose":false,"user":"a","pass":"p"}\r\nSUB foo 1\r\nPING\r\n')
    c.expect(b"PONG\r\n")
    c.send(b'CONNECT {}\r\nSUB foo 1\r\nPUB foo 2\r\nhi\r\nPING\r\n')  # the first CONNECT's credentials still hold
    c.expect(b"MSG foo 1 2\r\nhi\r\nPONG\r\n")
    c.send(b'CONNECT {"pass":"wrong"}\r\nPING\r\n')
    assert c.assert_closed() == AUTH_VIOLATION


def test_second_connect_takes_the_new_users_permissions(two_users_server, raw):
    c = raw.connect(two_users_server)
    c.send(b'CONNECT {"verbose":false,"user":"a","pass":"p"}\r\nCONNECT {"user":"b","pass":"q"}\r\n'
           b"SUB bar 1\r\nPUB bar 1\r\nx\r\nPING\r\n")
    c.expect(b"-ERR 'Permissions Violation for Publish to \"bar\"'\r\nPONG\r\n")
    c.expect_nothing()


def test_connect_with_invalid_utf8_in_a_string(server, raw):
    # Go's json.Unmarshal replaces invalid UTF-8 inside strings with U+FFFD: the CONNECT is accepted.
    c = raw.connect(server)
    c.send(b'CONNECT {"verbose":false,"name":"\xff\xfe"}\r\nPING\r\n')
    c.expect(b"PONG\r\n")
