"""Without --control a Skiff process is nats-server: nothing answers on $SKIFF.>, a request gets no responders
(run on both servers)."""
import nats
import pytest
from nats.errors import NoRespondersError


async def test_skiff_subjects_have_no_responders_without_control(server, target):
    nc = await nats.connect(server.url)
    for cmd in ("CLOCK.NOW", "INSPECT.STREAMS", "FAULTS.DROP"):
        with pytest.raises(NoRespondersError):
            await nc.request("$SKIFF." + cmd, b"{}", timeout=2)
    await nc.close()
