"""Subjects reserved to the servers (nats-server client.go processInboundClientMsg, isReservedReply): a client may
not use a ``$JS.ACK.`` or ``_R_.`` reply subject (a responder would ack another consumer's message, or answer a
request routed through a service import), nor publish on ``$NRG.`` (RAFT traffic).  The message is dropped with
nats-server's -ERR and the connection stays open."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("pub,err", [
    (b"PUB foo $JS.ACK.S.C.1.1.1.0.0 1\r\nx\r\n",
     b"-ERR 'Permissions Violation for Publish with Reply of \"$JS.ACK.S.C.1.1.1.0.0\"'\r\n"),
    (b"PUB foo _R_.abc 1\r\nx\r\n", b"-ERR 'Permissions Violation for Publish with Reply of \"_R_.abc\"'\r\n"),
    (b"HPUB foo _R_.abc 12 13\r\nNATS/1.0\r\n\r\nx\r\n",
     b"-ERR 'Permissions Violation for Publish with Reply of \"_R_.abc\"'\r\n"),
    (b"PUB $NRG.x 1\r\nx\r\n", b"-ERR 'Permissions Violation for Publish to \"$NRG.x\"'\r\n"),
])
def test_reserved_subject_refused(server, raw, pub, err):
    c = raw.connect(server)
    c.send(b'CONNECT {"verbose":false,"headers":true}\r\nSUB foo 1\r\nSUB $NRG.> 2\r\nPING\r\n')
    c.expect(b"PONG\r\n")
    c.send(pub + b"PING\r\n")
    c.expect(err + b"PONG\r\n")  # nothing delivered, still open


@pytest.mark.parametrize("reply", [b"_R_", b"$JS.ACKX", b"$GNR.a.b", b"_INBOX.x"])
def test_look_alike_replies_are_fine(server, raw, reply):
    c = raw.connect(server)
    c.send(b'CONNECT {"verbose":false}\r\nSUB foo 1\r\nPUB foo %s 1\r\nx\r\nPING\r\n' % reply)
    c.expect(b"MSG foo 1 %s 1\r\nx\r\nPONG\r\n" % reply)
