"""TLS through nats-py against both servers: upgrade after INFO, handshake_first, and client verification."""
import ssl
from pathlib import Path

import nats
import pytest

CERTS = Path(__file__).resolve().parents[2] / "conf" / "certs"


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
    await nc.close()


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
