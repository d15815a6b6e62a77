"""The least a Python NATS server can do at start: the floor under ``startup.empty``'s Skiff row on this machine.

    python bench/floor_server.py -a 127.0.0.1 -p <port> [any other flag, ignored]

The interpreter starts, imports asyncio (and uvloop where it is installed, the loop Skiff runs on), listens, sends
an ``INFO`` line to each connection and answers each ``PUB`` with an empty JSON ``MSG`` (what bench/startup.py's
``$JS.API.INFO`` probe reads as an answer).  Nothing else: no configuration, no store, no monitoring.  Started and
timed by bench/startup.py exactly as the servers are, it shows how much of Skiff's start is the interpreter and
asyncio on this machine (on a slow one the floor alone can be above the 100 ms target), and how much is Skiff's.
It imports nothing from Skiff or from the benchmark.
"""
import asyncio
import sys

try:
    import uvloop
except ImportError:  # Skiff runs on asyncio's own loop then
    uvloop = None

INFO = b'INFO {"server_id":"FLOOR","version":"0.0.0","proto":1,"headers":true,"max_payload":1048576}\r\n'


async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(INFO)
    sid = b"1"
    try:
        while line := await reader.readline():
            if line.startswith(b"SUB "):
                sid = line.split()[-1]
            elif line.startswith(b"PUB "):
                parts = line.split()
                await reader.readexactly(int(parts[-1]) + 2)
                if len(parts) == 4:  # PUB <subject> <reply> <size>: answer the reply subject
                    writer.write(b"MSG %s %s 2\r\n{}\r\n" % (parts[2], sid))
            elif line.startswith(b"PING"):
                writer.write(b"PONG\r\n")
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    writer.close()


async def main(host: str, port: int) -> None:
    server = await asyncio.start_server(client, host, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    args = sys.argv[1:]
    host = args[args.index("-a") + 1] if "-a" in args else "127.0.0.1"
    port = int(args[args.index("-p") + 1]) if "-p" in args else 4222
    try:
        (uvloop.run if uvloop is not None else asyncio.run)(main(host, port))
    except KeyboardInterrupt:
        pass
