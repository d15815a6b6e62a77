"""Server RSS across connection churn, Skiff and nats-server side by side.

    python -m bench.churn_rss [--cycles 60000] [--parallel 20] [--budget 240] [--servers skiff,nats-server]

Each cycle connects, sends CONNECT, two SUBs, a PUB with a reply, PING, reads the PONG and closes; ``parallel``
cycles run at once.  RSS (VmRSS of the server process) is sampled every twelfth of the run and two seconds after
it; the figure of merit is the growth from the first sample after warm-up to the end (target: within 10%).
Time-bounded by ``--budget`` seconds per server.
"""
from __future__ import annotations

import argparse
import asyncio
import time

from tests.harness import ServerProcess


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def one_cycle(port: int) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    await r.readline()
    w.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB foo.* 1\r\nSUB _INBOX.abc 2\r\n'
            b"PUB foo.bar _INBOX.abc 5\r\nhello\r\nPING\r\n")
    while (await r.readline()) not in (b"PONG\r\n", b""):
        pass
    w.close()
    await w.wait_closed()


async def measure(kind: str, cycles: int, parallel: int, budget: float) -> list[tuple[int, int]]:
    srv = ServerProcess(kind=kind, jetstream=False).start()
    try:
        pid = srv.proc.pid
        samples = [(0, rss_kib(pid))]
        step = max(cycles // 12, parallel)
        done = 0
        t0 = time.monotonic()
        while done < cycles and time.monotonic() - t0 < budget:
            await asyncio.gather(*(one_cycle(srv.port) for _ in range(parallel)))
            done += parallel
            if done % step < parallel:
                samples.append((done, rss_kib(pid)))
        await asyncio.sleep(2)  # idle
        samples.append((done, rss_kib(pid)))
        print(f"{kind}: {done} cycles in {time.monotonic() - t0:.0f} s")
        for n, kib in samples:
            print(f"  {n:>7} cycles  RSS {kib / 1024:7.1f} MiB")
        base = samples[1][1] if len(samples) > 2 else samples[0][1]
        print(f"  growth after warm-up ({samples[1][0]} cycles) to the end: {(samples[-1][1] - base) / base * 100:+.1f}%")
        return samples
    finally:
        srv.cleanup()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cycles", type=int, default=60000)
    p.add_argument("--parallel", type=int, default=20)
    p.add_argument("--budget", type=float, default=240.0, help="seconds per server at most")
    p.add_argument("--servers", default="skiff,nats-server")
    a = p.parse_args()
    for kind in a.servers.split(","):
        asyncio.run(measure(kind, a.cycles, a.parallel, a.budget))


if __name__ == "__main__":
    main()
