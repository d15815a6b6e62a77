"""Random and mutated input, against both servers: no crash, no hang, other clients unaffected, memory bounded.

A fixed seed keeps the run reproducible; each case opens a connection, sends mutated protocol bytes split at random
points, and closes.  Afterwards a fresh client must still get PONG and a message through, and the server's RSS
(from /varz `mem`) must not have grown without bound.
"""
import json
import random
import socket
import urllib.request

VALID = [
    b'CONNECT {"verbose":false,"headers":true}\r\n',
    b"SUB fz.a 1\r\n",
    b"SUB fz.* q 2\r\n",
    b"PUB fz.a 5\r\nhello\r\n",
    b"PUB fz.b reply 3\r\nabc\r\n",
    b"HPUB fz.a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
    b"UNSUB 1 3\r\n",
    b"PING\r\n",
    b"PONG\r\n",
]


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1 and b:
            del b[rng.randrange(len(b))]
        elif op == 2:
            b.insert(rng.randrange(len(b) + 1), rng.choice(b" \t\r\n0123456789*>.-+ABCPUSH"))
        elif op == 3:
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.choice(VALID)
        else:
            b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
    return bytes(b)


def mem(srv) -> int:
    with urllib.request.urlopen(srv.http_url + "/varz", timeout=5) as r:
        return json.loads(r.read())["mem"]


def check_alive(srv) -> None:
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    f = s.makefile("rb")
    assert f.readline().startswith(b"INFO ")
    s.sendall(b'CONNECT {"verbose":false}\r\nSUB ok.fz 1\r\nPUB ok.fz 2\r\nok\r\nPING\r\n')
    assert f.readline() == b"MSG ok.fz 1 2\r\n"
    assert f.readline() == b"ok\r\n"
    assert f.readline() == b"PONG\r\n"
    s.close()


def test_fuzzed_input_never_breaks_the_server(server_factory):
    srv = server_factory(jetstream=False)
    rng = random.Random(20261121)
    check_alive(srv)
    before = mem(srv)
    for case in range(300):
        data = b"".join(rng.choice(VALID) for _ in range(rng.randint(1, 6)))
        data = mutate(rng, data)
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.settimeout(0.5)
        try:
            s.recv(4096)  # INFO
            i = 0
            while i < len(data):
                j = i + rng.randint(1, 64)
                s.sendall(data[i:j])
                i = j
        except OSError:
            pass  # the server may close a broken connection at any point
        finally:
            s.close()
        if case % 100 == 99:
            check_alive(srv)
    check_alive(srv)
    # Memory: 300 broken connections must not leave anything significant behind (allow for allocator noise).
    assert mem(srv) - before < 32 * 1024 * 1024
    assert srv.proc.poll() is None
