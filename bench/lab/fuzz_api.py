"""JetStream API fuzzer: the same seeded list of malformed requests to every endpoint of both servers, replies
compared one by one.

A case is (subject, payload).  Payloads come from a valid body for the endpoint, mutated: a field replaced by a
value of another type or an extreme number, a field dropped, an unknown field added, the whole body replaced by
non-JSON, invalid UTF-8, a JSON value of the wrong type, 1,500-deep nesting or a 200 KB string; subject tokens
are replaced by missing, wildcard or over-long names.  Every case gets a fresh name where it creates something,
so the two servers stay in step.  A reply is classified as ``no reply``, ``status <code>`` (a header-only
message), ``non-JSON``, ``ok:<type>`` or ``err <code>/<err_code> <description>``; the summary counts how many
replies are identical, differ only in the description, differ in code/err_code, or differ in outcome.
"""
from __future__ import annotations

import asyncio
import json
import random

from bench.lab.common import Budget, Result, first_traceback, lab_server, tracebacks
from bench.lab.wire import Conn

WEIRD = [-1, 0, 1, 2**31, 2**63 - 1, 2**63, 2**64 + 5, -(2**63) - 1, 1.5, -0.5, 1e300, "", "x", "-1", "1h",
         "\u0000", "é" * 3, "*", ">", "a.>", " ", [], [1], ["*"], {}, {"a": 1}, None, True, False]


def base_bodies(i: int) -> dict[str, object]:
    n = f"F{i}"
    return {
        "STREAM.CREATE.{n}": {"name": n, "subjects": [f"fz.{i}.>"], "storage": "memory", "max_msgs": 10,
                              "max_age": 0, "discard": "old", "retention": "limits", "num_replicas": 1,
                              "duplicate_window": 1_000_000_000, "max_msg_size": 1024, "allow_direct": True},
        "STREAM.UPDATE.S": {"name": "S", "subjects": ["s.>"], "storage": "file", "max_msgs": -1},
        "STREAM.INFO.S": {"subjects_filter": "s.>", "deleted_details": True, "offset": 0},
        "STREAM.NAMES": {"offset": 0, "subject": "s.a"},
        "STREAM.LIST": {"offset": 0, "subject": "s.>"},
        "STREAM.MSG.GET.S": {"seq": 1},
        "STREAM.MSG.GET.S#last": {"last_by_subj": "s.a"},
        "STREAM.MSG.DELETE.S": {"seq": 10_000, "no_erase": True},
        "STREAM.PURGE.S": {"filter": "s.nope", "keep": 1},
        "CONSUMER.CREATE.S": {"stream_name": "S", "config": {"ack_policy": "explicit", "deliver_policy": "all",
                                                           "inactive_threshold": 5_000_000_000}},
        "CONSUMER.CREATE.S.{c}": {"stream_name": "S", "config": {
            "name": f"K{i}", "durable_name": f"K{i}", "ack_policy": "explicit", "deliver_policy": "all",
            "filter_subject": "s.>", "max_deliver": 5, "ack_wait": 1_000_000_000, "max_ack_pending": 10,
            "backoff": [1_000_000_000, 2_000_000_000], "max_waiting": 8}},
        "CONSUMER.DURABLE.CREATE.S.{c}": {"stream_name": "S", "config": {
            "durable_name": f"K{i}", "ack_policy": "none", "deliver_subject": f"fz.deliver.{i}",
            "deliver_policy": "by_start_sequence", "opt_start_seq": 1}},
        "CONSUMER.INFO.S.C": {},
        "CONSUMER.NAMES.S": {"offset": 0},
        "CONSUMER.LIST.S": {"offset": 0},
        "CONSUMER.PAUSE.S.C": {"pause_until": "2001-01-01T00:00:00Z"},
        "CONSUMER.UNPIN.S.C": {"group": "g"},
        "CONSUMER.MSG.NEXT.S.C": {"batch": 1, "no_wait": True},
        "CONSUMER.DELETE.S.{c}": {},
        "DIRECT.GET.S": {"seq": 1},
        "DIRECT.GET.S#multi": {"multi_last": ["s.a"], "batch": 2},
        "STREAM.SNAPSHOT.S": {"deliver_subject": f"fz.snap.{i}", "chunk_size": 1024},
        "STREAM.LEADER.STEPDOWN.S": {},
        "ACCOUNT.PURGE.NOPE": {},
        "INFO": {},
    }


def mutate(body, rng: random.Random):
    """One mutation of a JSON body (or of a nested object in it)."""
    r = rng.random()
    if r < 0.12:
        return rng.choice([b"", b"{", b"nope", b"\xff\xfe\xfd", b"[1,2", b'{"a":1}}', b"{'a': 1}", b"\x00",
                           b'{"config": ', b"\r\n", b"null"])
    if r < 0.2:
        return json.dumps(rng.choice([[], 1, "x", True, None, [body], {"config": 5}])).encode()
    if r < 0.23:
        return b"[" * 1500 + b"]" * 1500
    if r < 0.25:
        return json.dumps({"name": "x" * 200_000}).encode()
    if not isinstance(body, dict) or not body:
        return json.dumps(body).encode()
    body = json.loads(json.dumps(body))
    target = body
    if "config" in body and isinstance(body["config"], dict) and rng.random() < 0.7:
        target = body["config"]
    key = rng.choice(sorted(target))
    r = rng.random()
    if r < 0.65:
        target[key] = rng.choice(WEIRD)
    elif r < 0.8:
        del target[key]
    elif r < 0.9:
        target[rng.choice(["bogus", "Name", "config", "stream_name", "subjects", "ack_policy"])] = rng.choice(WEIRD)
    else:
        target[key] = {"nested": target[key]}
    return json.dumps(body).encode()


def cases(n: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        bodies = base_bodies(i)
        tmpl = rng.choice(sorted(bodies))
        body = bodies[tmpl]
        subject = "$JS.API." + tmpl.split("#")[0].format(n=f"F{i}", c=f"K{i}")
        if rng.random() < 0.1:  # a bad token in the subject instead of a bad body
            toks = subject.split(".")
            j = rng.randrange(2, len(toks))
            toks[j] = rng.choice(["*", ">", "N" * 300, "x-y", "ü", "S", "C"])
            subject = ".".join(toks)
            payload = json.dumps(body).encode()
        else:
            payload = mutate(body, rng)
        out.append((subject, payload))
    return out


def classify(m) -> str:
    if m is None:
        return "no reply"
    if m.status and not m.data:
        return f"status {m.status}"
    try:
        doc = json.loads(m.data)
    except ValueError:
        return "non-JSON" if not m.status else f"status {m.status}"
    if not isinstance(doc, dict):
        return "non-JSON"
    err = doc.get("error")
    if isinstance(err, dict):
        return f"err {err.get('code')}/{err.get('err_code')} {err.get('description')}"
    return f"ok:{str(doc.get('type', '?')).rsplit('.', 1)[-1]}"


async def run_cases(srv, todo: list[tuple[str, bytes]], budget: Budget, timeout: float = 1.0) -> list[str | None]:
    c = await Conn.connect(srv.port, name="fuzz-api")
    await c.request("$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["s.>"],"storage":"file"}', 5)
    for k in range(5):
        c.pub("s.a" if k % 2 else "s.b", b"m%d" % k)
    await c.request("$JS.API.CONSUMER.DURABLE.CREATE.S.C",
                    b'{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit"}}', 5)
    out: list[str | None] = [None] * len(todo)
    sem = asyncio.Semaphore(8)

    async def one(i: int, subject: str, payload: bytes) -> None:
        nonlocal c
        async with sem:
            if c.closed.is_set():  # a server that closes the connection on a request: reconnect, count it
                try:
                    c = await Conn.connect(srv.port, name="fuzz-api")
                except OSError:
                    out[i] = "server gone"
                    return
            out[i] = classify(await c.request(subject, payload, timeout))

    tasks = []
    for i, (subject, payload) in enumerate(todo):
        if budget.over():
            break
        tasks.append(asyncio.ensure_future(one(i, subject, payload)))
        if len(tasks) >= 64:
            await asyncio.gather(*tasks)
            tasks = []
    await asyncio.gather(*tasks)
    await c.close()
    return out


async def run(kinds: list[str], a, budget: Budget, res: Result) -> None:
    n = a.requests or (60 if a.smoke else 300 if a.quick else 4000)
    todo = cases(n, a.seed)
    got: dict[str, list[str | None]] = {}
    for kind in kinds:
        srv = lab_server(kind)
        try:
            srv.start()
            replies = await run_cases(srv, todo, Budget(budget.left() / (len(kinds) - len(got))))
            alive = srv.proc.poll() is None
            res.row("requests sent", kind, sum(r is not None for r in replies))
            for label, pred in (("ok replies", lambda r: r.startswith("ok:")),
                                ("JSON error replies", lambda r: r.startswith("err ")),
                                ("header-only status replies", lambda r: r.startswith("status")),
                                ("non-JSON replies", lambda r: r == "non-JSON"),
                                ("no reply in 1 s", lambda r: r == "no reply")):
                res.row(label, kind, sum(1 for r in replies if r is not None and pred(r)))
            res.row("server alive after", kind, alive)
            res.row("tracebacks in log", kind, tracebacks(srv))
            if tracebacks(srv):
                res.details.setdefault("traceback", {})[kind] = first_traceback(srv)
            got[kind] = replies
        finally:
            srv.cleanup()
    if len(got) == 2:
        sk, ns = got["skiff"], got["nats-server"]
        same = desc = code = outcome = 0
        diffs = []
        for (subject, payload), x, y in zip(todo, sk, ns):
            if x is None or y is None:
                continue
            if x == y:
                same += 1
                continue
            if x.startswith("err ") and y.startswith("err ") and x.split(" ")[1] == y.split(" ")[1]:
                desc += 1
                kind_ = "description"
            elif x.startswith("err ") and y.startswith("err "):
                code += 1
                kind_ = "code"
            else:
                outcome += 1
                kind_ = "outcome"
            diffs.append({"subject": subject, "payload": payload[:160].decode(errors="replace"), "skiff": x,
                          "nats-server": y, "differs_in": kind_})
        res.row("compared: identical replies", "skiff", same)
        res.row("compared: only description differs", "skiff", desc)
        res.row("compared: code/err_code differs", "skiff", code)
        res.row("compared: outcome differs (ok/err/none)", "skiff", outcome)
        # the first few of each kind, most telling first
        order = {"outcome": 0, "code": 1, "description": 2}
        res.details["differences"] = sorted(diffs, key=lambda d: order[d["differs_in"]])[:40]
        for d in res.details["differences"][:8]:
            res.note(f"{d['differs_in']}: {d['subject']} {d['payload'][:60]!r}: Skiff {d['skiff'][:70]!r} / "
                     f"nats-server {d['nats-server'][:70]!r}")
