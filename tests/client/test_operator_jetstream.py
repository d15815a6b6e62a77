"""JetStream in operator mode: the account JWT's JetStream limits, against both servers.

An account JWT enables JetStream when ``mem_storage`` or ``disk_storage`` is not 0; its limits are the account's
(streams, consumers, max_ack_pending, max stream bytes, max_bytes_required), exactly as the ``jetstream { }`` block
of a configured account gives them (tests/client/test_accounts.py).
"""
from __future__ import annotations

import json

import nats
import pytest

from tests import jwt_helpers as jh
from tests.client.test_operator import user

OP = jh.new_key("O")
SYS, J, N = jh.new_key("A"), jh.new_key("A"), jh.new_key("A")
JS = {"mem_storage": 64 * 1024 * 1024, "disk_storage": 32 * 1024 * 1024, "streams": 2, "consumer": 2,
      "max_ack_pending": 100, "mem_max_stream_bytes": 2048, "disk_max_stream_bytes": 4096,
      "max_bytes_required": True}
CONF = f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver: MEMORY
resolver_preload {{
  {SYS.public}: {jh.account_jwt(SYS, OP, name="SYS")}
  {J.public}: {jh.account_jwt(J, OP, name="J", jetstream=JS)}
  {N.public}: {jh.account_jwt(N, OP, name="N")}
}}
"""


@pytest.fixture
def srv(server_factory):
    return server_factory(config=CONF)


async def connect(srv, tmp_path, account):
    token, key = user(account)
    path = jh.write_creds(str(tmp_path / f"{account.public}.creds"), token, key)
    return await nats.connect(srv.url, user_credentials=path, allow_reconnect=False)


async def api(nc, suffix: str, body: dict) -> dict:
    return json.loads((await nc.request("$JS.API." + suffix, json.dumps(body).encode(), timeout=3)).data)


async def test_account_jwt_jetstream_limits(srv, tmp_path):
    nc = await connect(srv, tmp_path, J)
    info = await api(nc, "INFO", {})
    assert info["limits"] == {
        "max_memory": 64 * 1024 * 1024, "max_storage": 32 * 1024 * 1024, "max_streams": 2, "max_consumers": 2,
        "max_ack_pending": 100, "memory_max_stream_bytes": 2048, "storage_max_stream_bytes": 4096,
        "max_bytes_required": True}
    err = (await api(nc, "STREAM.CREATE.L", {"name": "L", "subjects": ["l"]}))["error"]
    assert (err["err_code"], err["description"]) == (10113, "account requires a stream config to have max bytes set")
    assert "error" not in await api(nc, "STREAM.CREATE.L", {"name": "L", "subjects": ["l"], "max_bytes": 128})
    assert "error" not in await api(nc, "STREAM.CREATE.M", {"name": "M", "subjects": ["m"], "max_bytes": 128,
                                                            "storage": "memory"})
    err = (await api(nc, "STREAM.CREATE.X", {"name": "X", "subjects": ["x"], "max_bytes": 128}))["error"]
    assert err["err_code"] == 10027
    await nc.close()


async def test_account_without_jetstream_in_its_jwt(srv, tmp_path):
    nc = await connect(srv, tmp_path, N)
    err = (await api(nc, "INFO", {}))["error"]
    assert (err["code"], err["err_code"]) == (503, 10039)
    await nc.close()


async def test_jetstream_of_an_account_pushed_after_start(server_factory, tmp_path):
    jwt_dir = tmp_path / "jwt"
    jwt_dir.mkdir()
    srv = server_factory(config=f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver {{ type: full, dir: "{jwt_dir}" }}
resolver_preload {{
  {SYS.public}: {jh.account_jwt(SYS, OP, name="SYS")}
}}
""")
    sys_nc = await connect(srv, tmp_path, SYS)
    late = jh.new_key("A")
    reply = json.loads((await sys_nc.request("$SYS.REQ.CLAIMS.UPDATE", jh.account_jwt(
        late, OP, name="late", jetstream={"disk_storage": -1, "mem_storage": -1, "streams": -1,
                                          "consumer": -1}).encode(), timeout=3)).data)
    assert reply["data"]["message"] == "jwt updated"
    await sys_nc.close()
    nc = await connect(srv, tmp_path, late)
    assert "error" not in await api(nc, "STREAM.CREATE.S", {"name": "S", "subjects": ["s"]})
    ack = json.loads((await nc.request("s", b"kept", timeout=3)).data)
    assert ack == {"stream": "S", "seq": 1}
    await nc.close()
    srv.restart(kill=True)
    nc = await connect(srv, tmp_path, late)
    info = await api(nc, "STREAM.INFO.S", {})
    assert info["state"]["messages"] == 1
    await nc.close()


async def test_account_pushed_without_then_with_jetstream(server_factory, tmp_path):
    jwt_dir = tmp_path / "jwt"
    jwt_dir.mkdir()
    srv = server_factory(config=f"""
operator: {jh.operator_jwt(OP, system_account=SYS.public)}
resolver {{ type: full, dir: "{jwt_dir}" }}
resolver_preload {{
  {SYS.public}: {jh.account_jwt(SYS, OP, name="SYS")}
}}
""")
    sys_nc = await connect(srv, tmp_path, SYS)
    acc = jh.new_key("A")
    await sys_nc.request("$SYS.REQ.CLAIMS.UPDATE", jh.account_jwt(acc, OP, iat=1).encode(), timeout=3)
    nc = await connect(srv, tmp_path, acc)
    err = (await api(nc, "INFO", {}))["error"]
    assert err["err_code"] == 10039
    await sys_nc.request("$SYS.REQ.CLAIMS.UPDATE", jh.account_jwt(acc, OP, iat=2, jetstream={
        "disk_storage": -1, "mem_storage": -1, "streams": 3, "consumer": -1}).encode(), timeout=3)
    info = await api(nc, "INFO", {})
    assert info["limits"]["max_streams"] == 3
    await nc.close()
    await sys_nc.close()
