"""TLS against both servers: nats-py through upgrade after INFO, handshake_first and client verification, and raw
``ssl`` sockets for how a TLS connection ends (close_notify both ways, the alert of a failed handshake, plain text
where a ClientHello is due).

Go's crypto/tls, which nats-server uses, answers a client's close_notify and sends its own when it closes a
connection; a server that does neither makes asyncio's SSL transport (nats-py) wait out its 30 s shutdown timeout
on every close.  Each close here is timed against a bound far below that.
"""
import asyncio
import socket
import ssl
import time
from pathlib import Path

import nats
import pytest

CERTS = Path(__file__).resolve().parents[2] / "conf" / "certs"
CLOSE_BOUND = 0.5  # seconds; nats-server closes in a few ms, the bug took 30 s


def client_ctx(with_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(CERTS / "ca.pem"))
    ctx.check_hostname = False
    if with_cert:
        ctx.load_cert_chain(str(CERTS / "client-cert.pem"), str(CERTS / "client-key.pem"))
    return ctx


def tls_conf(**extra) -> str:
    lines = [f'cert_file: "{CERTS / "server-cert.pem"}"', f'key_file: "{CERTS / "server-key.pem"}"',
             f'ca_file: "{CERTS / "ca.pem"}"'] + [f"{k}: {v}" for k, v in extra.items()]
    return "tls {\n  " + "\n  ".join(lines) + "\n}\n"


async def roundtrip(nc) -> None:
    sub = await nc.subscribe("tls.x")
    await nc.publish("tls.x", b"secret")
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"secret"
    await timed_close(nc)


async def timed_close(nc) -> None:
    t0 = time.monotonic()
    await asyncio.wait_for(nc.close(), 5)
    took = time.monotonic() - t0
    assert took < CLOSE_BOUND, f"TLS close took {took:.2f}s"


async def test_tls_upgrade_after_info(server_factory):
    srv = server_factory(jetstream=False, config=tls_conf())
    nc = await nats.connect(f"tls://127.0.0.1:{srv.port}", tls=client_ctx(), allow_reconnect=False)
    await roundtrip(nc)


async def test_tls_handshake_first(server_factory):
    srv = server_factory(jetstream=False, config=tls_conf(handshake_first="true"))
    nc = await nats.connect(f"tls://127.0.0.1:{srv.port}", tls=client_ctx(), tls_handshake_first=True,
                            allow_reconnect=False)
    await roundtrip(nc)


async def test_tls_verify_requires_a_client_certificate(server_factory):
    srv = server_factory(jetstream=False, config=tls_conf(verify="true"))
    nc = await nats.connect(f"tls://127.0.0.1:{srv.port}", tls=client_ctx(with_cert=True), allow_reconnect=False)
    await roundtrip(nc)
    with pytest.raises(Exception):
        await nats.connect(f"tls://127.0.0.1:{srv.port}", tls=client_ctx(), allow_reconnect=False,
                           max_reconnect_attempts=0, connect_timeout=2)


@pytest.mark.parametrize("mode", ["upgrade", "handshake_first"])
async def test_nats_py_tls_close_is_prompt(server_factory, mode):
    """Several connect/close cycles, each close well under a second (nats-py waits for the server's close_notify)."""
    first = mode == "handshake_first"
    srv = server_factory(jetstream=False, config=tls_conf(**({"handshake_first": "true"} if first else {})))
    for _ in range(3):
        nc = await nats.connect(f"tls://127.0.0.1:{srv.port}", tls=client_ctx(), tls_handshake_first=first,
                                allow_reconnect=False)
        await nc.flush()
        await timed_close(nc)


# ---------------------------------------------------------------------------------------------------- raw ssl sockets


def raw_tls(srv, handshake_first: bool = False, ctx: ssl.SSLContext | None = None) -> ssl.SSLSocket:
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
    if not handshake_first:
        assert s.recv(4096).startswith(b"INFO ")  # plain INFO, then the upgrade
    # suppress_ragged_eofs=False: a TCP close without close_notify raises instead of reading as a clean end.
    return (ctx or client_ctx()).wrap_socket(s, server_hostname="127.0.0.1", suppress_ragged_eofs=False)


def read_to_eof(ss: ssl.SSLSocket) -> bytes:
    """Everything until a clean TLS end (close_notify); SSLEOFError if the TCP stream just stops."""
    out = b""
    while True:
        chunk = ss.recv(4096)
        if not chunk:
            return out
        out += chunk


def test_client_close_notify_is_answered(server_factory):
    srv = server_factory(jetstream=False, config=tls_conf())
    ss = raw_tls(srv)
    ss.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
    assert ss.recv(4096) == b"PONG\r\n"
    ss.settimeout(CLOSE_BOUND)
    ss.unwrap()  # sends close_notify and reads the server's; times out if none comes
    ss.close()


def test_server_close_sends_close_notify(server_factory):
    """A client the server closes (here for a protocol error) gets the -ERR, then close_notify, then EOF."""
    srv = server_factory(jetstream=False, config=tls_conf())
    ss = raw_tls(srv)
    ss.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
    assert ss.recv(4096) == b"PONG\r\n"
    ss.sendall(b"FOO\r\n")
    assert read_to_eof(ss) == b"-ERR 'Unknown Protocol Operation'\r\n"
    ss.close()


def test_missing_client_certificate_gets_the_alert(server_factory):
    """Under verify, a client without a certificate learns why: the certificate_required alert, not a bare EOF."""
    srv = server_factory(jetstream=False, config=tls_conf(verify="true"))
    ss = raw_tls(srv)  # TLS 1.3: the client finishes its side before the server checks the certificate
    ss.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
    with pytest.raises(ssl.SSLError, match="CERTIFICATE_REQUIRED"):
        ss.recv(4096)
    ss.close()


@pytest.mark.parametrize("handshake_first", [False, True])
def test_broken_client_hello_gets_a_fatal_alert(server_factory, handshake_first):
    """A TLS record that is not a valid ClientHello: one fatal alert record, then the connection closes.  (The
    alert's description differs - Go sends decode_error, OpenSSL unexpected_message - so only its kind is compared.)"""
    conf = tls_conf(**({"handshake_first": "true"} if handshake_first else {}))
    srv = server_factory(jetstream=False, config=conf)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
    if not handshake_first:
        s.recv(4096)
    s.sendall(b"\x16\x03\x01\x00\x05hello")
    got = b""
    while chunk := s.recv(4096):
        got += chunk
    s.close()
    assert len(got) == 7 and got[0] == 0x15 and got[3:6] == b"\x00\x02\x02", got  # alert record, fatal


def test_certificate_chain_is_the_cert_file(server_factory):
    """The server sends the cert_file chain, not the CA from ca_file: a client that does not trust the CA fails
    with "unable to get local issuer certificate" (20), not "self-signed certificate in chain" (19)."""
    srv = server_factory(jetstream=False, config=tls_conf())
    ctx = ssl.create_default_context()  # system CAs only
    ctx.check_hostname = False
    with pytest.raises(ssl.SSLCertVerificationError) as e:
        raw_tls(srv, ctx=ctx)
    assert e.value.verify_code == 20, e.value


@pytest.mark.parametrize("handshake_first", [False, True])
def test_plain_text_on_a_tls_port_is_closed_silently(server_factory, handshake_first):
    conf = tls_conf(**({"handshake_first": "true"} if handshake_first else {}))
    srv = server_factory(jetstream=False, config=conf)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
    if not handshake_first:
        assert s.recv(4096).startswith(b"INFO ")
    s.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
    t0 = time.monotonic()
    assert s.recv(4096) == b""  # no -ERR, no PONG: closed
    assert time.monotonic() - t0 < 1
    s.close()
