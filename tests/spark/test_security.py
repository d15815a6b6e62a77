"""What a production cluster asks of the connector (issue #18 "Also"), against both servers: TLS as nats-server's
``tls {}`` block sets it up (upgrade after INFO, client certificates under ``verify``, ``handshake_first``), nkey
users and ``.creds`` files of operator mode - and the refusals: TLS asked of a server without it, a missing client
certificate, a wrong seed, two ways to authenticate at once, half a client certificate.

The connector's client is tested through ``open_jetstream`` with the options a Spark job passes; one Spark job then
writes and reads through a server that takes only TLS clients with a certificate and nkey users, so the options
reach the executors.
"""
from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from pyspark_jetstream.client import NatsError
from pyspark_jetstream.jetstream import Publisher, read_range
from pyspark_jetstream.options import ConnectOptions, _lower
from pyspark_jetstream.runner import open_jetstream
from tests import jwt_helpers as jh
from tests.client.test_operator import user as user_jwt
from tests.spark.helpers import unique

CERTS = Path(__file__).resolve().parents[2] / "conf" / "certs"
CA, CERT, KEY = str(CERTS / "ca.pem"), str(CERTS / "client-cert.pem"), str(CERTS / "client-key.pem")


def tls_block(**extra) -> str:
    lines = [f'cert_file: "{CERTS / "server-cert.pem"}"', f'key_file: "{CERTS / "server-key.pem"}"',
             f'ca_file: "{CA}"'] + [f"{k}: {v}" for k, v in extra.items()]
    return "tls {\n  " + "\n  ".join(lines) + "\n}\n"


def opts(**o) -> ConnectOptions:
    return ConnectOptions.parse(_lower(o))


async def roundtrip(options: ConnectOptions) -> None:
    """Create a stream, publish 20 messages with PubAcks, read them back: JetStream works over this connection."""
    js = await open_jetstream(options)
    try:
        name = unique("SEC")
        await js.api(f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name}.>"], "storage": "memory"})
        pub = Publisher(js.conn, expected_stream=name)
        for i in range(20):
            await pub.publish(f"{name}.x", b"%d" % i)
        await pub.wait()
        assert pub.published == 20
        got = [m.data for chunk in [c async for c in read_range(js, name, 1, 20, [])] for m in chunk]
        assert got == [b"%d" % i for i in range(20)]
    finally:
        await js.conn.close()


# ------------------------------------------------------------------------------------------------------------ TLS


async def test_tls_with_client_certificate(server_factory):
    srv = server_factory(config=tls_block(verify="true"))
    await roundtrip(opts(servers=srv.url, tlsCaFile=CA, tlsCertFile=CERT, tlsKeyFile=KEY))
    # verify: a client without a certificate is turned away (during the handshake or right after it)
    with pytest.raises(NatsError, match="could not connect"):
        await open_jetstream(opts(servers=srv.url, tlsCaFile=CA, timeout=2))


async def test_tls_required_upgrades_with_ca_only_and_checks_the_server(server_factory):
    srv = server_factory(config=tls_block())
    await roundtrip(opts(servers=f"tls://127.0.0.1:{srv.port}", tlsCaFile=CA))
    # without the CA the server's certificate is not trusted: refused, never used unchecked
    with pytest.raises(NatsError, match="CERTIFICATE_VERIFY_FAILED"):
        await open_jetstream(opts(servers=f"tls://127.0.0.1:{srv.port}", timeout=2))


async def test_tls_handshake_first(server_factory):
    srv = server_factory(config=tls_block(handshake_first="true"))
    await roundtrip(opts(servers=srv.url, tlsCaFile=CA, tlsHandshakeFirst="true"))


async def test_tls_asked_of_a_plain_server_is_refused(shared_server):
    with pytest.raises(NatsError, match="secure connection not available"):
        await open_jetstream(opts(servers=shared_server.url.replace("nats://", "tls://"), timeout=2))
    with pytest.raises(NatsError, match="secure connection not available"):
        await open_jetstream(opts(servers=shared_server.url, tlsCaFile=CA, timeout=2))


# ----------------------------------------------------------------------------------------------- nkeys and creds


async def test_nkey_user(server_factory, tmp_path):
    u = jh.new_key("U")
    srv = server_factory(config="authorization {\n  users = [ { nkey: %s } ]\n}\n" % u.public)
    seed = tmp_path / "user.nk"
    seed.write_text(u.seed + "\n")
    await roundtrip(opts(servers=srv.url, nkeySeedFile=str(seed)))
    other = tmp_path / "other.nk"
    other.write_text(jh.new_key("U").seed + "\n")
    with pytest.raises(NatsError, match="Authorization Violation"):
        await open_jetstream(opts(servers=srv.url, nkeySeedFile=str(other), timeout=2))


OP = jh.new_key("O")
SYS, ACC = jh.new_key("A"), jh.new_key("A")
OPERATOR_CONF = f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver: MEMORY
resolver_preload {{
  {SYS.public}: {jh.account_jwt(SYS, OP, name="SYS")}
  {ACC.public}: {jh.account_jwt(ACC, OP, name="J", jetstream={"mem_storage": 1 << 26, "disk_storage": 1 << 26,
                                                                "streams": -1, "consumer": -1})}
}}
"""


async def test_creds_file_in_operator_mode(server_factory, tmp_path):
    srv = server_factory(config=OPERATOR_CONF)
    token, key = user_jwt(ACC)
    path = jh.write_creds(str(tmp_path / "u.creds"), token, key)
    await roundtrip(opts(servers=srv.url, credsFile=path))
    # a JWT with another user's seed cannot sign the nonce for it
    wrong = jh.write_creds(str(tmp_path / "wrong.creds"), token, jh.new_key("U"))
    with pytest.raises(NatsError, match="Authorization Violation"):
        await open_jetstream(opts(servers=srv.url, credsFile=wrong, timeout=2))


def test_option_refusals(tmp_path):
    """Checked when the options are parsed (at load(), on the driver), each naming the options."""
    with pytest.raises(ValueError, match="credsFile and nkeySeedFile are two ways to authenticate"):
        opts(credsFile="/a", nkeySeedFile="/b")
    with pytest.raises(ValueError, match="user/password and credsFile are two ways"):
        opts(user="u", password="p", credsFile="/a")
    with pytest.raises(ValueError, match="tlsCertFile and tlsKeyFile go together"):
        opts(tlsCertFile=CERT)
    with pytest.raises(ValueError, match="tlsHandshakeFirst needs TLS"):
        opts(tlsHandshakeFirst="true")
    with pytest.raises(ValueError, match="option tlsCaFile: cannot load"):
        opts(tlsCaFile=str(tmp_path / "missing.pem")).ssl_context()
    assert isinstance(opts(tlsCaFile=CA, tlsCertFile=CERT, tlsKeyFile=KEY).ssl_context(), ssl.SSLContext)


async def test_unreadable_credentials_name_their_option(tmp_path):
    bad = tmp_path / "bad.creds"
    bad.write_text("not a creds file\n")
    with pytest.raises(ValueError, match="option credsFile: .*is not a NATS credentials file"):
        await open_jetstream(opts(credsFile=str(bad)))
    with pytest.raises(ValueError, match="option nkeySeedFile: .*No such file"):
        await open_jetstream(opts(nkeySeedFile=str(tmp_path / "missing.nk")))


# ---------------------------------------------------------------------------------------------------- with Spark


def test_spark_write_and_read_over_tls_with_an_nkey_user(spark, server_factory, tmp_path):
    u = jh.new_key("U")
    srv = server_factory(config=tls_block(verify="true")
                         + "authorization {\n  users = [ { nkey: %s } ]\n}\n" % u.public)
    seed = tmp_path / "user.nk"
    seed.write_text(u.seed + "\n")
    sec = {"servers": srv.url, "tlsCaFile": CA, "tlsCertFile": CERT, "tlsKeyFile": KEY, "nkeySeedFile": str(seed)}
    name = unique("SECS")

    async def create():
        js = await open_jetstream(opts(**sec))
        await js.api(f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name}.>"], "storage": "memory"})
        await js.conn.close()

    import asyncio

    asyncio.run(create())
    df = spark.range(0, 500, 1, 2).selectExpr(f"concat('{name}.', cast(id % 3 as string)) as subject",
                                               "cast(id as string) as data")
    df.write.format("jetstream").mode("append").options(stream=name, **sec).save()
    rows = spark.read.format("jetstream").options(stream=name, **sec).load().collect()
    assert sorted(int(bytes(r.data)) for r in rows) == list(range(500))
    # the same job without the client certificate cannot connect: the error says so at planning
    with pytest.raises(Exception, match="could not connect"):
        spark.read.format("jetstream").options(stream=name, servers=srv.url, tlsCaFile=CA,
                                               nkeySeedFile=str(seed), timeout="2").load().collect()
