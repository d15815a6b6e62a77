"""Queue-group scoped permissions, queue members passed over on a deny, and allow_responses (issue #15, finding 2).

Ref: nats-server client.go canSubscribeInternal / queueMatches (entries ``"subject queue"``), processMsgResults
(a queue member whose delivery is denied is skipped for the next member), pubAllowedFullCheck / responseAllowed /
deliverMsg (reply subjects a client received become publishable, ``max`` times within ``expires``).
"""
from __future__ import annotations

import time

import pytest

CONF = """authorization {
  users = [
    {user: q, password: q, permissions: {subscribe: {allow: ["foo.> q", "pub.>"], deny: ["pub.secret.* q1"]}}}
    {user: d, password: d, permissions: {subscribe: {deny: ["work.secret"]}}}
    {user: o, password: o}
    {user: r, password: r, permissions: {subscribe: {allow: ["req.>"]}, allow_responses: true}}
    {user: r2, password: r2, permissions: {subscribe: {allow: ["req.>"]}, allow_responses: {max: 2}}}
    {user: w, password: w, permissions: {subscribe: {allow: ["foo.*"]}}}
  ]
}
"""


@pytest.fixture
def srv(server_factory):
    return server_factory(jetstream=False, config=CONF)


def login(raw, srv, user: bytes):
    c = raw.connect(srv)
    c.send(b'CONNECT {"user":"%s","pass":"%s","verbose":false}\r\nPING\r\n' % (user, user))
    c.expect(b"PONG\r\n")
    return c


def violation(subject: bytes, queue: bytes = b"") -> bytes:
    q = b' using queue "%s"' % queue if queue else b""
    return b"-ERR 'Permissions Violation for Subscription to \"%s\"%s'\r\n" % (subject, q)


def test_queue_scoped_deny(srv, raw):
    c = login(raw, srv, b"q")
    c.send(b"SUB pub.secret.x q1 1\r\n")
    c.expect(violation(b"pub.secret.x", b"q1"))
    c.send(b"SUB pub.secret.x q2 2\r\nSUB pub.secret.x 3\r\nPING\r\n")
    c.expect(b"PONG\r\n")  # another queue, and no queue at all, are not denied


def test_queue_scoped_allow(srv, raw):
    c = login(raw, srv, b"q")
    c.send(b"SUB foo.x 1\r\n")
    c.expect(violation(b"foo.x"))  # the allow entry names a queue: a plain SUB is not allowed
    c.send(b"SUB foo.x r 2\r\n")
    c.expect(violation(b"foo.x", b"r"))
    c.send(b"SUB foo.x q 3\r\nPING\r\n")
    c.expect(b"PONG\r\n")


def test_denied_queue_member_is_passed_over(srv, raw):
    # d may subscribe to work.* but not receive work.secret: its queue membership must not swallow messages.
    d = login(raw, srv, b"d")
    o = login(raw, srv, b"o")
    d.send(b"SUB work.* g 1\r\nPING\r\n")
    d.expect(b"PONG\r\n")
    o.send(b"SUB work.* g 1\r\nPING\r\n")
    o.expect(b"PONG\r\n")
    p = login(raw, srv, b"o")
    n = 200
    p.send(b"".join(b"PUB work.secret 1\r\nx\r\n" for _ in range(n)) + b"PING\r\n")
    p.expect(b"PONG\r\n")
    o.send(b"PING\r\n")
    o.expect(b"MSG work.secret 1 1\r\nx\r\n" * n + b"PONG\r\n")
    d.send(b"PING\r\n")
    d.expect(b"PONG\r\n")


def test_wildcard_subscription_matched_as_the_server_does(srv, raw):
    # The SUB subject's wildcards are matched as tokens against the allow entries: foo.> is inside foo.*'s reach
    # for nats-server's permission sublist, bar.* is not.
    w = login(raw, srv, b"w")
    w.send(b"SUB foo.* 1\r\nSUB foo.> 2\r\nSUB bar.* 3\r\n")
    w.expect(violation(b"bar.*"))
    w.send(b"PING\r\n")
    w.expect(b"PONG\r\n")


def _request(raw, srv, responder, reply: bytes):
    req = login(raw, srv, b"o")
    req.send(b"SUB %s 9\r\nPUB req.a %s 2\r\nhi\r\nPING\r\n" % (reply, reply))
    req.expect(b"PONG\r\n")
    responder.expect(b"MSG req.a 1 %s 2\r\nhi\r\n" % reply)
    return req


def test_allow_responses_once(srv, raw):
    r = login(raw, srv, b"r")
    r.send(b"SUB req.> 1\r\nPING\r\n")
    r.expect(b"PONG\r\n")
    r.send(b"PUB _INBOX.abc 2\r\nno\r\n")  # nothing received on it yet
    r.expect(b"-ERR 'Permissions Violation for Publish to \"_INBOX.abc\"'\r\n")
    req = _request(raw, srv, r, b"_INBOX.abc")
    r.send(b"PUB _INBOX.abc 3\r\nyes\r\nPING\r\n")
    r.expect(b"PONG\r\n")
    req.expect(b"MSG _INBOX.abc 9 3\r\nyes\r\n")
    r.send(b"PUB _INBOX.abc 5\r\nagain\r\n")  # max 1 by default
    r.expect(b"-ERR 'Permissions Violation for Publish to \"_INBOX.abc\"'\r\n")
    r.send(b"PUB other 1\r\nx\r\n")  # the blanket publish allow is off
    r.expect(b"-ERR 'Permissions Violation for Publish to \"other\"'\r\n")


def test_allow_responses_max(srv, raw):
    r = login(raw, srv, b"r2")
    r.send(b"SUB req.> 1\r\nPING\r\n")
    r.expect(b"PONG\r\n")
    req = _request(raw, srv, r, b"_INBOX.m")
    r.send(b"PUB _INBOX.m 1\r\na\r\nPUB _INBOX.m 1\r\nb\r\nPING\r\n")
    r.expect(b"PONG\r\n")
    req.expect(b"MSG _INBOX.m 9 1\r\na\r\nMSG _INBOX.m 9 1\r\nb\r\n")
    r.send(b"PUB _INBOX.m 1\r\nc\r\n")
    r.expect(b"-ERR 'Permissions Violation for Publish to \"_INBOX.m\"'\r\n")
