"""Per-user publish/subscribe permissions: the -ERR texts, that the connection stays open, and what is delivered.

Ref: jetstream-notes.md 1.8; nats-server client.go (pubAllowed, canSubscribe, deliverMsg deny check).
"""
from __future__ import annotations

import pytest

CONF = """authorization {
  users = [
    {user: a, password: a, permissions: {publish: {allow: ["ok.>"]}, subscribe: {allow: ["ok.>"], deny: ["ok.secret"]}}}
    {user: c, password: c, permissions: {subscribe: {deny: ["no.>"]}}}
  ]
}
"""


@pytest.fixture
def perm_server(server_factory):
    return server_factory(jetstream=False, config=CONF)


def login(raw, srv, user, verbose=False):
    c = raw.connect(srv)
    c.send(b'CONNECT {"user":"%s","pass":"%s","verbose":%s}\r\nPING\r\n' % (user, user, b"true" if verbose else b"false"))
    c.expect((b"+OK\r\n" if verbose else b"") + b"PONG\r\n")
    return c


def test_subscribe_violations(perm_server, raw):
    c = login(raw, perm_server, b"a", verbose=True)
    c.send(b"SUB ok.x 1\r\n")
    c.expect(b"+OK\r\n")
    c.send(b"SUB other 2\r\n")  # not in allow: -ERR and no +OK
    c.expect(b"-ERR 'Permissions Violation for Subscription to \"other\"'\r\n")
    c.send(b"SUB ok.secret 3\r\n")  # allowed by ok.>, denied explicitly
    c.expect(b"-ERR 'Permissions Violation for Subscription to \"ok.secret\"'\r\n")
    c.send(b"SUB nope q 4\r\n")
    c.expect(b"-ERR 'Permissions Violation for Subscription to \"nope\" using queue \"q\"'\r\n")
    c.send(b"PING\r\n")
    c.expect(b"PONG\r\n")


def test_publish_violation_drops_message_and_stays_open(perm_server, raw):
    listener = login(raw, perm_server, b"c")
    listener.send(b"SUB other 1\r\nPING\r\n")
    listener.expect(b"PONG\r\n")
    c = login(raw, perm_server, b"a", verbose=True)
    c.send(b"SUB ok.x 1\r\n")
    c.expect(b"+OK\r\n")
    c.send(b"PUB other 1\r\ny\r\n")
    c.expect(b"-ERR 'Permissions Violation for Publish to \"other\"'\r\n")  # no +OK
    c.send(b"PUB ok.x other.reply 1\r\nz\r\n")  # reply subjects are not checked against publish allow
    c.expect(b"+OK\r\nMSG ok.x 1 other.reply 1\r\nz\r\n")
    c.send(b"PING\r\n")
    c.expect(b"PONG\r\n")
    # The denied message went nowhere: another user listening on its subject saw nothing.
    listener.send(b"PING\r\n")
    listener.expect(b"PONG\r\n")


def test_denied_message_is_not_delivered_to_wider_subscription(perm_server, raw):
    # A wildcard subscription that overlaps a subscribe deny is accepted, but messages on denied subjects are
    # filtered out on delivery.
    c = login(raw, perm_server, b"c")
    c.send(b"SUB > 2\r\nSUB no.* 3\r\n")
    c.expect(b"-ERR 'Permissions Violation for Subscription to \"no.*\"'\r\n")
    c.send(b"PUB no.x 1\r\nx\r\nPUB yes 1\r\ny\r\nPING\r\n")
    c.expect(b"MSG yes 2 1\r\ny\r\nPONG\r\n")
