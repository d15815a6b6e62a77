"""conf/operator-imports/operator.conf, the operator-mode example of docs/accounts.md, started as it is on both
servers: account SHOP exports the service ``prices.*`` and the stream ``orders.>``, account BILLING imports them as
``price.*`` and ``shop.orders.>``, and its users log in with the example's .creds files.

The python block of docs/accounts.md is the text of ``billing_asks_shop`` below, run here as printed (its .creds
paths are relative to the repository root, where the docs tell you to run it).
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.request

import nats
import pytest
from nats.errors import NoRespondersError

from tests.harness import ROOT, ServerProcess, server_env

CONF = "conf/operator-imports/operator.conf"

# ---- docs/accounts.md, as printed
import nats


async def billing_asks_shop(url: str = "nats://127.0.0.1:4222") -> tuple[bytes, str]:
    shop = await nats.connect(url, user_credentials="conf/operator-imports/creds/shop.creds")
    billing = await nats.connect(url, user_credentials="conf/operator-imports/creds/billing.creds")

    async def quote(msg):  # SHOP answers on its own subject, prices.<item>
        await msg.respond(b"4.20 for " + msg.subject.encode())

    await shop.subscribe("prices.*", cb=quote)
    orders = await billing.subscribe("shop.orders.>")  # SHOP's orders.> under BILLING's name for it
    await shop.flush()
    await billing.flush()
    answer = await billing.request("price.apple", b"", timeout=2)  # BILLING asks price.apple
    await shop.publish("orders.42", b"one apple")
    order = await orders.next_msg(timeout=2)
    await shop.close()
    await billing.close()
    return answer.data, order.subject
# ---- end of the docs block


class ExampleServer(ServerProcess):
    """The example file itself, started from the repository root (its operator JWT path is relative to it); the
    port flags win over its ``listen``."""

    def start(self, timeout: float = 15.0) -> "ExampleServer":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=server_env())
        log.close()
        self._wait_ready(timeout)
        return self


@pytest.fixture
def example(target):
    srv = ExampleServer(kind=target, args=["-c", CONF], jetstream=False).start()
    yield srv
    srv.cleanup()


async def wired(url: str) -> None:
    """nats-server loads both accounts when BILLING's first user connects and may wire the imports a moment
    after that CONNECT is answered (docs/parity.md, operator mode): wait for the service import to answer."""
    shop = await nats.connect(url, user_credentials=str(ROOT / "conf/operator-imports/creds/shop.creds"))
    billing = await nats.connect(url, user_credentials=str(ROOT / "conf/operator-imports/creds/billing.creds"))
    async def pong(msg):
        await msg.respond(b"")

    try:
        await shop.subscribe("prices.warmup", cb=pong)
        await shop.flush()
        for _ in range(50):
            try:
                await billing.request("price.warmup", b"", timeout=1)
                return
            except NoRespondersError:
                await asyncio.sleep(0.1)
        raise AssertionError("the service import never answered")
    finally:
        await shop.close()
        await billing.close()


async def test_request_and_stream_through_the_imports(example, monkeypatch):
    await wired(example.url)
    monkeypatch.chdir(ROOT)
    answer, subject = await billing_asks_shop(example.url)
    assert (answer, subject) == (b"4.20 for prices.apple", "shop.orders.42")
    # Each account is its own subject space: BILLING's user cannot reach SHOP's subjects by their own names.
    billing = await nats.connect(example.url, user_credentials="conf/operator-imports/creds/billing.creds")
    try:
        with pytest.raises(NoRespondersError):
            await billing.request("prices.apple", b"", timeout=2)
    finally:
        await billing.close()
    # /accountz shows the two imports as the example's README describes them.
    accounts = json.loads(urllib.request.urlopen(example.http_url + "/accountz", timeout=5).read())["accounts"]
    (billing_acc,) = [a for a in accounts if json.loads(urllib.request.urlopen(
        f"{example.http_url}/accountz?acc={a}", timeout=5).read())["account_detail"].get("name_tag") == "BILLING"]
    detail = json.loads(urllib.request.urlopen(f"{example.http_url}/accountz?acc={billing_acc}",
                                               timeout=5).read())["account_detail"]
    mine = sorted((i["type"], i["subject"], i["local_subject"]) for i in detail["imports"]
                  if not i["subject"].startswith("$SYS."))
    assert mine == [("service", "prices.*", "price.*"), ("stream", "orders.>", "shop.orders.>")]
    assert detail["complete"] is True
