"""jwt v1 tokens (alg "ed25519", the claim type beside the standard claims, the signature over the payload chunk
alone) are still read by nats-server 2.15 (nats-io/jwt v2 loadClaims), and client test fixtures use them (nats.py's
resolver_preload.conf).  A v1 user JWT without limits has none; a v1 account JWT's limits read as v2's."""
from __future__ import annotations

import nats
import pytest

from tests.jwt_helpers import encode_v1, new_key, write_creds

OP, ACC, USER = new_key("O"), new_key("A"), new_key("U")
OP_JWT = encode_v1({"sub": OP.public, "name": "op", "type": "operator"}, OP)
LIMITS = {"subs": -1, "conn": -1, "imports": -1, "exports": -1, "data": -1, "payload": -1, "wildcards": True}
ACC_JWT = encode_v1({"sub": ACC.public, "name": "acc", "type": "account", "nats": {"limits": LIMITS}}, OP)
USER_JWT = encode_v1({"sub": USER.public, "name": "u", "type": "user", "nats": {"pub": {}, "sub": {}}}, ACC)
CONF = f"""operator: {OP_JWT}
resolver: MEMORY
resolver_preload: {{ {ACC.public}: "{ACC_JWT}" }}
"""


async def test_v1_jwts_authenticate_without_limits(server_factory, tmp_path):
    srv = server_factory(jetstream=False, config=CONF)
    nc = await nats.connect(srv.url, user_credentials=write_creds(str(tmp_path / "u.creds"), USER_JWT, USER),
                            allow_reconnect=False)
    sub = await nc.subscribe("help")
    await nc.publish("help", b"hi")
    assert (await sub.next_msg(timeout=2)).data == b"hi"
    await nc.close()


async def test_v1_user_of_another_account_is_refused(server_factory, tmp_path):
    other = new_key("A")
    stray = encode_v1({"sub": USER.public, "name": "u", "type": "user", "nats": {}}, other)
    srv = server_factory(jetstream=False, config=CONF)
    with pytest.raises(Exception) as e:
        await nats.connect(srv.url, user_credentials=write_creds(str(tmp_path / "s.creds"), stray, USER),
                           allow_reconnect=False, max_reconnect_attempts=0)
    assert "Authorization Violation" in str(e.value)


async def test_v1_account_without_conn_limit_admits_nobody(server_factory, tmp_path):
    acc = new_key("A")
    acc_jwt = encode_v1({"sub": acc.public, "name": "a0", "type": "account", "nats": {"limits": {"wildcards": True}}},
                        OP)
    user = encode_v1({"sub": USER.public, "name": "u", "type": "user", "nats": {}}, acc)
    conf = f"operator: {OP_JWT}\nresolver: MEMORY\nresolver_preload: {{ {acc.public}: \"{acc_jwt}\" }}\n"
    srv = server_factory(jetstream=False, config=conf)
    with pytest.raises(Exception) as e:
        await nats.connect(srv.url, user_credentials=write_creds(str(tmp_path / "z.creds"), user, USER),
                           allow_reconnect=False, max_reconnect_attempts=0)
    # Both limits are 0 (a v1 account's absent limits read as v2's).  nats-server's registerWithAccount refuses the
    # connection with the first error, but applyAccountLimits has already started a goroutine that sends the second
    # (subsAtLimit) and closes 20 ms later, so nats-server's first -ERR is now one, now the other (seen in CI).  Skiff
    # sends the first only.
    assert any(err in str(e.value) for err in (
        "maximum account active connections exceeded", "maximum subscriptions exceeded")), e.value
