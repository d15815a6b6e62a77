"""The NATS C client (libnats 3.4, Debian's libnats-dev) against both servers: core, JetStream, KV and error paths.

``tests/client/c/compat.c`` runs one fixed scenario and prints what the client saw as one JSON object (one key per
observation; see the program's header).  It is compiled once per worker (module fixture, into a temporary
directory, with bench/build.py's pkg-config lookup and install step) and run once per target: the first test of a
target starts the ``server`` and runs the program, the others read the same transcript.  Each test asserts the
concrete values of one part, so a run checks what the C client gets, not only that both servers agree.

Skipped, with the reason, only when libnats or gcc cannot be had (``bench/install-deps.sh`` installs them in CI).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench import build as bench_build

SOURCE = Path(__file__).resolve().parent / "c" / "compat.c"


@pytest.fixture(scope="module")
def compat(tmp_path_factory):
    """The compiled scenario program (once per worker), built outside the tree."""
    try:
        flags = bench_build.libnats_flags()  # apt-get libnats-dev gcc pkg-config when missing, as root or sudo -n
    except bench_build.BuildError as e:
        pytest.skip(str(e))
    exe = tmp_path_factory.mktemp("cclient") / "compat"
    cmd = ["gcc", "-O1", "-std=gnu11", "-Wall", "-o", str(exe), str(SOURCE), *flags, "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"gcc failed:\n{r.stderr[-3000:]}"
    return exe


_transcripts: dict[str, dict | str] = {}


@pytest.fixture
def t(target, request, compat) -> dict:
    """The transcript of the scenario against a fresh server of the target, run once per target."""
    if target not in _transcripts:
        server = request.getfixturevalue("server")
        try:
            r = subprocess.run([str(compat), server.url], capture_output=True, text=True, timeout=90)
        except subprocess.TimeoutExpired as e:
            _transcripts[target] = f"the scenario overstayed 90 s: {e.stderr!r}"
        else:
            if r.returncode != 0:
                _transcripts[target] = f"exit {r.returncode}: {r.stderr[-3000:]}\n{server.log()[-3000:]}"
            else:
                _transcripts[target] = json.loads(r.stdout)
    got = _transcripts[target]
    if isinstance(got, str):
        pytest.fail(got)
    return got


def ok() -> dict:
    return {"status": "OK", "jerr": 0, "error": None}


def err(status: str, jerr: int, error: str | None) -> dict:
    return {"status": status, "jerr": jerr, "error": error}


def subset(d: dict, expected: dict) -> dict:
    """The members of d that expected names, for an equality assertion on a part of an info reply."""
    return {k: d.get(k, "<absent>") for k in expected}


def published(stream: str, seq: int, duplicate: bool = False) -> dict:
    return {"stream": stream, "seq": seq, "duplicate": duplicate}


def jsmsg(subject: str, data: str, sseq: int, dseq: int, pending: int, delivered: int = 1, headers=None,
          stream: str = "CS") -> dict:
    """A message delivered by a consumer, with its metadata (the reply subject's tokens)."""
    return {"subject": subject, "data": data, "headers": headers or {}, "sseq": sseq, "dseq": dseq,
            "delivered": delivered, "pending": pending, "stream": stream}


def kve(key: str, value: str, revision: int, op: str = "PUT", delta: int = 0) -> dict:
    return {"key": key, "value": value, "revision": revision, "op": op, "delta": delta}


# ---------------------------------------------------------------------------------------------------- core


def test_connection_and_core_messages(t):
    assert (t["conn.max_payload"], t["conn.headers"]) == (1048576, True)
    # natsMsgHeader_Set/Add: several values of one key, a value with ": " and double spaces, kept as sent
    assert t["core.hdr.msg1"] == {"subject": "c.hdr.1", "data": "hello", "reply": "c.reply.to",
                                  "headers": {"X-A": ["1"], "X-B": ["b1", "b2"], "X-C": ["a: b  c"]}}
    assert t["core.hdr.msg2"] == {"subject": "c.hdr.2", "data": "", "headers": {"X-Only": ["yes"]}, "reply": None}
    assert t["core.hdr.msg3"] == {"subject": "c.hdr.3", "data": "plain", "headers": {}, "reply": None}
    # natsConnection_RequestMsg: the responder's reply (with a header copied from the request) to the inbox
    assert t["core.request.reply"] == {"subject_is_inbox": True, "data": "re:ping", "headers": {"X-Re": ["q1"]}}
    assert t["core.no_responders"]["status"] == "NO_RESPONDERS"
    # 10 messages on c.q.x: one of the two queue members each; c.q.x.y only matches the group's c.q.>
    assert (t["core.queue.group_total"], t["core.queue.plain"]) == (11, 10)


# ---------------------------------------------------------------------------------------------------- streams

CS_DEFAULTS = {"retention": 0, "max_consumers": -1, "max_msgs": -1, "max_bytes": -1, "max_age": 0,
               "max_msg_size": -1, "discard": 0, "storage": 0, "replicas": 1, "no_ack": False,
               "duplicates": 120_000_000_000, "sealed": False, "deny_delete": False, "deny_purge": False,
               "allow_rollup": False, "mirror_direct": False, "discard_new_per_subject": False}


def test_stream_add_info_update_delete(t):
    add = t["js.stream.add"]
    assert subset(add, CS_DEFAULTS) == CS_DEFAULTS
    assert subset(add, {"name": 0, "subjects": 0, "max_msgs_per_subject": 0, "allow_direct": 0, "msgs": 0,
                        "first_seq": 0, "last_seq": 0, "consumers": 0}) == {
        "name": "CS", "subjects": ["cs.>"], "max_msgs_per_subject": -1, "allow_direct": False, "msgs": 0,
        "first_seq": 0, "last_seq": 0, "consumers": 0}
    assert t["js.stream.add_different"] == err(
        "ERR", 10058, "stream name already in use with a different configuration")
    # 4 messages on 3 subjects; the file store's byte accounting (record overhead, headers included)
    assert subset(t["js.stream.info"], {"msgs": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "num_subjects": 0,
                                        "num_deleted": 0}) == {
        "msgs": 4, "bytes": 282, "first_seq": 1, "last_seq": 4, "num_subjects": 3, "num_deleted": 0}
    upd = t["js.stream.update"]
    assert subset(upd, {"description": 0, "subjects": 0, "max_msgs_per_subject": 0, "allow_direct": 0,
                        "msgs": 0}) == {
        "description": "updated", "subjects": ["cs.>", "cs2.>"], "max_msgs_per_subject": 5, "allow_direct": True,
        "msgs": 4}
    assert t["js.stream.update_storage"] == err(
        "ERR", 10052, "stream configuration update can not change storage type")
    assert t["js.stream.update_missing"] == err("NOT_FOUND", 10059, None)
    assert t["js.stream.delete"] == ok()
    assert t["js.stream.after_delete"] == err("NOT_FOUND", 10059, None)


def test_publish_dedupe_and_expectations(t):
    assert t["js.pub.first"] == published("CS", 1)
    assert t["js.pub.dup"] == published("CS", 1, duplicate=True)  # same Nats-Msg-Id: the first one's sequence
    assert t["js.pub.b"] == published("CS", 2)
    assert t["js.pub.a2"] == published("CS", 3)
    assert t["js.expect.last_seq"] == err("ERR", 10071, "wrong last sequence: 3")
    assert t["js.expect.last_subject_seq"] == err("ERR", 10071, "wrong last sequence: 3")
    assert t["js.expect.no_message"] == err("ERR", 10071, "wrong last sequence: 3")
    # the last message (seq 3) had no id: the description ends with the empty id
    assert t["js.expect.last_msg_id"] == err("ERR", 10070, "wrong last msg ID: ")
    assert t["js.expect.stream"] == err("ERR", 10060, "expected stream does not match")
    assert t["js.expect.ok"] == published("CS", 4)
    # no stream listens: the client turns the 503 status into NO_RESPONDERS and JSNoStreamResponseErr
    assert t["js.pub.no_stream"] == err("NO_RESPONDERS", 10076, None)


def test_pull_consumer_fetch_ack_nak_and_info(t):
    assert t["js.pull.fetch1"] == [
        jsmsg("cs.a", "one", 1, 1, 3, headers={"Nats-Msg-Id": ["m1"]}),
        jsmsg("cs.b", "two", 2, 2, 2, headers={"X-J": ["j"]})]
    counters = {"delivered_consumer": 0, "delivered_stream": 0, "ack_floor_consumer": 0, "ack_floor_stream": 0,
                "num_ack_pending": 0, "num_redelivered": 0, "num_waiting": 0, "num_pending": 0}
    # the first acked (AckSync), the second nak'ed: still pending an ack until redelivered
    assert subset(t["js.pull.info1"], counters) == {
        "delivered_consumer": 2, "delivered_stream": 2, "ack_floor_consumer": 1, "ack_floor_stream": 1,
        "num_ack_pending": 1, "num_redelivered": 0, "num_waiting": 0, "num_pending": 2}
    assert subset(t["js.pull.info1"], {"name": 0, "durable": 0, "filter_subject": 0, "max_waiting": 0,
                                       "max_ack_pending": 0, "ack_wait": 0, "has_deliver_subject": 0}) == {
        "name": "pull1", "durable": "pull1", "filter_subject": "cs.>", "max_waiting": 512, "max_ack_pending": 1000,
        "ack_wait": 30_000_000_000, "has_deliver_subject": False}
    # batch 5 (no_wait first): the nak'ed message again (delivered twice), then the rest, then 404 ends it
    assert t["js.pull.fetch2"] == [
        jsmsg("cs.b", "two", 2, 3, 2, delivered=2, headers={"X-J": ["j"]}),
        jsmsg("cs.a", "three", 3, 4, 1),
        jsmsg("cs.c", "four", 4, 5, 0, headers={"Nats-Expected-Last-Sequence": ["3"], "Nats-Expected-Stream": ["CS"]})]
    assert subset(t["js.pull.info2"], counters) == {
        "delivered_consumer": 5, "delivered_stream": 4, "ack_floor_consumer": 5, "ack_floor_stream": 4,
        "num_ack_pending": 0, "num_redelivered": 0, "num_waiting": 0, "num_pending": 0}
    assert t["js.pull.fetch_empty"]["status"] == "TIMEOUT"
    # the client deletes the durable it created when unsubscribing
    assert t["js.pull.unsubscribe"] == ok()
    assert t["js.pull.after_unsubscribe"] == err("NOT_FOUND", 10014, None)


def test_push_and_ordered_consumers(t):
    assert t["js.push.count"] == 2
    assert t["js.push.msgs"] == ["cs.a one sseq=1 dseq=1 delivered=1 pending=1 ack=OK",
                                 "cs.a three sseq=3 dseq=2 delivered=1 pending=0 ack=OK"]
    assert subset(t["js.push.info"], {"name": 0, "filter_subject": 0, "has_deliver_subject": 0, "push_bound": 0,
                                      "delivered_consumer": 0, "delivered_stream": 0, "ack_floor_stream": 0,
                                      "num_ack_pending": 0, "num_pending": 0}) == {
        "name": "push1", "filter_subject": "cs.a", "has_deliver_subject": True, "push_bound": True,
        "delivered_consumer": 2, "delivered_stream": 3, "ack_floor_stream": 3, "num_ack_pending": 0,
        "num_pending": 0}
    assert t["js.push.unsubscribe"] == ok()
    assert t["js.ordered.msgs"] == [
        jsmsg("cs.a", "one", 1, 1, 3, headers={"Nats-Msg-Id": ["m1"]}),
        jsmsg("cs.b", "two", 2, 2, 2, headers={"X-J": ["j"]}),
        jsmsg("cs.a", "three", 3, 3, 1),
        jsmsg("cs.c", "four", 4, 4, 0, headers={"Nats-Expected-Last-Sequence": ["3"], "Nats-Expected-Stream": ["CS"]})]
    assert t["js.ordered.then"]["status"] == "TIMEOUT"
    # what the client asks for an ordered consumer: ack none, max_deliver 1, flow control, 5 s heartbeats
    assert subset(t["js.ordered.info"], {"ack_policy": 0, "max_deliver": 0, "flow_control": 0, "heartbeat": 0,
                                         "ack_wait": 0, "delivered_stream": 0, "num_pending": 0}) == {
        "ack_policy": 1, "max_deliver": 1, "flow_control": True, "heartbeat": 5_000_000_000,
        "ack_wait": 86_400_000_000_000, "delivered_stream": 4, "num_pending": 0}


def test_get_msg_and_direct_get(t):
    assert t["js.get.1"] == {"subject": "cs.a", "data": "one", "headers": {"Nats-Msg-Id": ["m1"]}, "seq": 1}
    assert t["js.get.2"] == {"subject": "cs.b", "data": "two", "headers": {"X-J": ["j"]}, "seq": 2}
    assert t["js.get.last_a"] == {"subject": "cs.a", "data": "three", "headers": {}, "seq": 3}
    assert t["js.get.missing"] == err("NOT_FOUND", 10037, None)
    assert t["js.get.last_missing"] == err("NOT_FOUND", 10037, None)
    # allow_direct off: nobody answers $JS.API.DIRECT.GET.CS
    assert t["js.direct.disabled"]["status"] == "NO_RESPONDERS"

    def direct(subject, data, seq, extra=None):
        return {"subject": subject, "data": data, "seq": seq,
                "headers": {"Nats-Sequence": [str(seq)], "Nats-Stream": ["CS"], "Nats-Subject": [subject],
                            "Nats-Time-Stamp": ["<ts>"], **(extra or {})}}

    assert t["js.direct.seq"] == direct("cs.b", "two", 2, {"X-J": ["j"]})
    assert t["js.direct.last_by"] == direct("cs.a", "three", 3)
    assert t["js.direct.next_by"] == direct("cs.a", "three", 3)  # from seq 2 on, the next on cs.a
    assert t["js.direct.missing"] == err("NOT_FOUND", 0, "Not Found")
    assert t["js.direct.last_by_missing"] == err("NOT_FOUND", 0, "Not Found")


def test_purge_and_error_codes(t):
    state = {"msgs": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "num_subjects": 0, "num_deleted": 0}
    assert t["js.purge.filter"] == ok()
    # cs.a's seqs 1 and 3 gone: 2 and 4 left, 3 an interior gap
    assert subset(t["js.purge.filter.info"], state) == {
        "msgs": 2, "bytes": 173, "first_seq": 2, "last_seq": 4, "num_subjects": 2, "num_deleted": 1}
    assert t["js.purge.keep"] == ok()
    assert subset(t["js.purge.keep.info"], state) == {
        "msgs": 1, "bytes": 112, "first_seq": 4, "last_seq": 4, "num_subjects": 1, "num_deleted": 0}
    assert t["js.err.stream_info"] == err("NOT_FOUND", 10059, None)
    assert t["js.err.consumer_info"] == err("NOT_FOUND", 10014, None)
    assert t["js.err.consumer_info_no_stream"] == err("ERR", 10059, "stream not found")
    assert t["js.err.delete_consumer"] == err("NOT_FOUND", 10014, None)
    assert t["js.err.delete_stream"] == err("NOT_FOUND", 10059, None)
    assert t["js.err.purge_stream"] == err("NOT_FOUND", 10059, None)
    assert t["js.err.bind_missing_consumer"]["status"] == "NOT_FOUND"
    assert t["js.err.bind_missing_consumer"]["jerr"] == 10014
    assert t["js.err.get_msg_no_stream"] == err("ERR", 10059, "stream not found")


def test_limits_message_deletes_consumer_updates_and_seal(t):
    assert subset(t["js2.lim.add"], {"max_msgs": 0, "max_msgs_per_subject": 0, "max_msg_size": 0, "discard": 0,
                                     "discard_new_per_subject": 0}) == {
        "max_msgs": 4, "max_msgs_per_subject": 1, "max_msg_size": 16, "discard": 1, "discard_new_per_subject": True}
    assert t["js2.lim.a"] == published("LIM", 1)
    assert t["js2.lim.a_again"] == err("ERR", 10077, "maximum messages per subject exceeded")
    assert [t[f"js2.lim.{k}"] for k in "bcd"] == [published("LIM", n) for n in (2, 3, 4)]
    assert t["js2.lim.e"] == err("ERR", 10077, "maximum messages exceeded")
    assert t["js2.lim.too_big"] == err("ERR", 10054, "message size exceeds maximum allowed")
    assert t["js2.delete_msg"] == ok()
    assert t["js2.erase_msg"] == ok()
    assert t["js2.delete_msg.again"] == err("ERR", 10043, "sequence 2 not found")
    assert t["js2.delete_msg.beyond"] == err("ERR", 10057, "stream store EOF")
    assert t["js2.lim.detail"] == {"msgs": 2, "bytes": 72, "first_seq": 1, "last_seq": 4, "num_subjects": 2,
                                   "subjects": ["lim.a=1", "lim.d=1"], "num_deleted": 2, "deleted": [2, 3]}
    assert subset(t["js2.consumer.add"], {"name": 0, "filter_subject": 0, "max_ack_pending": 0,
                                          "num_pending": 0}) == {
        "name": "dc", "filter_subject": "lim.a", "max_ack_pending": 10, "num_pending": 1}
    assert t["js2.consumer.update"]["max_ack_pending"] == 20
    assert t["js2.consumer.update_deliver_policy"] == err("ERR", 10012, "deliver policy can not be updated")
    # nats-server 2.15 takes a filter outside the stream's subjects; libnats 3.4's update is a create
    assert subset(t["js2.consumer.bad_filter"], {"name": 0, "filter_subject": 0, "num_pending": 0}) == {
        "name": "other", "filter_subject": "elsewhere.x", "num_pending": 0}
    assert subset(t["js2.consumer.update_missing"], {"name": 0, "num_pending": 0}) == {"name": "ghost",
                                                                                      "num_pending": 2}
    assert t["js2.consumer_names"] == ["dc", "ghost", "other"]
    assert t["js2.stream_names"] == ["LIM"]
    # sealing turns deny_delete and deny_purge on
    assert subset(t["js2.sealed.update"], {"sealed": 0, "deny_delete": 0, "deny_purge": 0, "consumers": 0}) == {
        "sealed": True, "deny_delete": True, "deny_purge": True, "consumers": 3}
    assert t["js2.sealed.purge"] == err("ERR", 10109, "invalid operation on sealed stream")
    assert t["js2.sealed.delete_msg"] == err("ERR", 10109, "invalid operation on sealed stream")
    assert t["js2.lim.delete"] == ok()


def test_async_publish_and_work_queue(t):
    assert t["js2.wq.add"]["retention"] == 2
    assert t["js2.wq.async_complete"] == ok()
    assert t["js2.wq.before"] == {"msgs": 3, "bytes": 120, "first_seq": 1, "last_seq": 3, "num_subjects": 1,
                                  "subjects": ["wq.job=3"], "num_deleted": 0, "deleted": []}
    assert t["js2.wq.fetched"] == 3
    assert (t["js2.wq.in_progress"], t["js2.wq.term"]) == (ok(), ok())  # +WPI and +TERM as requests: answered
    assert t["js2.wq.overlapping_consumer"] == err(
        "ERR", 10099, "multiple non-filtered consumers not allowed on workqueue stream")
    # first acked, second in progress then terminated: both gone from the work queue; the third still pending
    assert subset(t["js2.wq.info"], {"delivered_stream": 0, "ack_floor_stream": 0, "num_ack_pending": 0,
                                     "num_pending": 0}) == {
        "delivered_stream": 3, "ack_floor_stream": 2, "num_ack_pending": 1, "num_pending": 0}
    assert t["js2.wq.after"] == {"msgs": 1, "bytes": 40, "first_seq": 3, "last_seq": 3, "num_subjects": 1,
                                 "subjects": ["wq.job=1"], "num_deleted": 0, "deleted": []}
    assert t["js2.wq.delete"] == ok()


def test_republish_rollup_and_deliver_policies(t):
    assert [t[f"js3.pub.{k}"] for k in ("a1", "b1", "a2", "c1")] == [published("J3", n) for n in (1, 2, 3, 4)]

    def rp(subject, data, seq, last, extra=None):
        return {"subject": "rp." + subject, "data": data,
                "headers": {"Nats-Last-Sequence": [str(last)], "Nats-Sequence": [str(seq)], "Nats-Stream": ["J3"],
                            "Nats-Subject": ["j3." + subject], "Nats-Time-Stamp": ["<ts>"], **(extra or {})}}

    assert t["js3.republished"] == [rp("a", "a1", 1, 0), rp("b", "b1", 2, 0), rp("a", "a2", 3, 1, {"X-H": ["h"]}),
                                    rp("c", "c1", 4, 0)]
    assert t["js3.pub.rollup_sub"] == published("J3", 5)
    assert t["js3.pub.rollup_bad"] == err("ERR", 10111, 'rollup value invalid: "everything"')
    assert t["js3.pub.ttl_disabled"] == err("ERR", 10166, "per-message TTL is disabled")
    assert t["js3.after_rollup"] == {"msgs": 3, "bytes": 142, "first_seq": 2, "last_seq": 5, "num_subjects": 3,
                                     "subjects": ["j3.a=1", "j3.b=1", "j3.c=1"], "num_deleted": 1, "deleted": [3]}
    assert t["js3.lps.add_no_filter"] == err(
        "ERR", 10094, "consumer delivery policy is deliver last per subject, but optional filter subject is not set")
    assert t["js3.lps.fetch"] == [jsmsg("j3.b", "b1", 2, 1, 2, stream="J3"), jsmsg("j3.c", "c1", 4, 2, 1, stream="J3"),
                                  jsmsg("j3.a", "a3", 5, 3, 0, headers={"Nats-Rollup": ["sub"]}, stream="J3")]
    assert t["js3.lps.no_wait_empty"]["status"] == "TIMEOUT"
    # from seq 2 (AckAll): acking the second acks the first too
    assert subset(t["js3.seq2.add"], {"deliver_policy": 0, "ack_policy": 0, "delivered_stream": 0,
                                      "num_pending": 0}) == {
        "deliver_policy": 3, "ack_policy": 2, "delivered_stream": 1, "num_pending": 3}
    assert t["js3.seq2.fetched"] == 2
    assert subset(t["js3.seq2.info"], {"delivered_consumer": 0, "delivered_stream": 0, "ack_floor_consumer": 0,
                                       "ack_floor_stream": 0, "num_ack_pending": 0, "num_pending": 0}) == {
        "delivered_consumer": 2, "delivered_stream": 4, "ack_floor_consumer": 2, "ack_floor_stream": 4,
        "num_ack_pending": 0, "num_pending": 1}
    assert t["js3.ho.fetch"] == [jsmsg("j3.b", "", 2, 1, 0, headers={"Nats-Msg-Size": ["2"]}, stream="J3")]


def test_fetch_limits_deliver_group_flow_control_interest(t):
    # max_ack_pending 1: one message of the batch of 3, then nothing until it is acked
    assert t["js3.map1.fetch"] == [jsmsg("j3.b", "b1", 2, 1, 2, stream="J3")]
    assert t["js3.map1.no_wait_blocked"]["status"] == "TIMEOUT"
    # max_bytes 100: two messages fit; 10 bytes fit none (409 Message Size Exceeds MaxBytes)
    assert t["js3.mb.fetch"] == [jsmsg("j3.b", "b1", 2, 1, 2, stream="J3"), jsmsg("j3.c", "c1", 4, 2, 1, stream="J3")]
    assert t["js3.mb.too_small"] == err("ERR", 0, "Message Size Exceeds MaxBytes")
    # two js_SubscribeSync with the same Queue: one consumer "grp" with a deliver group, each message once
    assert t["js3.queue.total"] == 3
    assert subset(t["js3.queue.info"], {"name": 0, "ack_policy": 0, "delivered_consumer": 0, "delivered_stream": 0,
                                        "push_bound": 0}) == {
        "name": "grp", "ack_policy": 1, "delivered_consumer": 3, "delivered_stream": 5, "push_bound": True}
    assert t["js3.purge.seq"] == ok()
    assert t["js3.purge.seq.detail"] == {"msgs": 1, "bytes": 70, "first_seq": 5, "last_seq": 5, "num_subjects": 1,
                                         "subjects": ["j3.a=1"], "num_deleted": 0, "deleted": []}
    # 3000 x 512 bytes through an ordered consumer: flow control replies, nothing lost or reordered
    assert t["js3.big.async_complete"] == ok()
    assert (t["js3.big.received"], t["js3.big.last_seq"], t["js3.big.in_order"]) == (3000, 3000, True)
    # interest retention: the message before any consumer is not kept; an acked one goes
    assert t["js3.int.before_consumer"] == published("INT", 1)
    assert t["js3.int.fetch"] == [jsmsg("int.x", "kept1", 2, 1, 1, stream="INT")]
    assert t["js3.int.after_ack"] == {"msgs": 1, "bytes": 40, "first_seq": 3, "last_seq": 3, "num_subjects": 1,
                                      "subjects": ["int.x=1"], "num_deleted": 0, "deleted": []}


# ---------------------------------------------------------------------------------------------------- KV


def test_kv_operations_and_errors(t):
    assert t["kv.create"] == ok()
    assert subset(t["kv.stream"], {"name": 0, "subjects": 0, "max_msgs_per_subject": 0, "discard": 0,
                                   "deny_delete": 0, "allow_rollup": 0, "allow_direct": 0, "max_bytes": 0,
                                   "max_msg_size": 0}) == {
        "name": "KV_CKV", "subjects": ["$KV.CKV.>"], "max_msgs_per_subject": 5, "discard": 1, "deny_delete": True,
        "allow_rollup": True, "allow_direct": True, "max_bytes": -1, "max_msg_size": -1}
    assert (t["kv.put.a"], t["kv.put.b"]) == (1, 2)
    assert t["kv.get.a"] == kve("a", "1", 1)
    assert t["kv.get.missing"]["status"] == "NOT_FOUND"
    # update with a wrong revision: the server's 10071 (the KV API shows only the text)
    assert t["kv.update.wrong"] == err("ERR", 0, "wrong last sequence: 1")
    assert t["kv.update.wrong.as_publish"] == err("ERR", 10071, "wrong last sequence: 1")
    assert t["kv.update.ok"] == 3
    assert t["kv.create_key.exists"] == err("ERR", 0, "wrong last sequence: 3")
    assert t["kv.create_key.new"] == 4
    assert t["kv.delete.b"] == ok()
    assert t["kv.get.deleted"]["status"] == "NOT_FOUND"
    assert t["kv.create_key.after_delete"] == 6  # create over a delete marker (revision 5)
    assert t["kv.purge.c"] == ok()
    assert t["kv.get.purged"]["status"] == "NOT_FOUND"
    assert t["kv.get.a_rev1"] == kve("a", "1", 1)
    assert t["kv.get.a_rev2"]["status"] == "NOT_FOUND"  # revision 2 is b's
    assert t["kv.history.a"] == [kve("a", "1", 1, delta=1), kve("a", "11", 3)]
    assert t["kv.history.b"] == [kve("b", "2", 2, delta=2), kve("b", "", 5, "DEL", delta=1), kve("b", "22", 6)]
    assert t["kv.history.zz"]["status"] == "NOT_FOUND"
    assert t["kv.keys"] == ["a", "b"]
    assert t["kv.status"] == {"bucket": "CKV", "values": 7, "history": 5, "ttl": 0, "replicas": 1}
    # purge deletes (markers of any age): c's purge marker goes
    assert t["kv.purge_deletes"] == ok()
    assert subset(t["kv.stream.after_purge_deletes"], {"msgs": 0, "bytes": 0, "first_seq": 0, "last_seq": 0,
                                                       "num_subjects": 0, "num_deleted": 0}) == {
        "msgs": 6, "bytes": 388, "first_seq": 1, "last_seq": 8, "num_subjects": 3, "num_deleted": 2}
    assert t["kv.err.open_missing"]["status"] == "NOT_FOUND"
    assert t["kv.err.delete_missing"]["status"] == "NOT_FOUND"


def test_kv_watchers(t):
    # initial values (the last of each key, c's purge marker included), the nil marker, then a new put
    assert t["kv.watch"] == [kve("a", "11", 3, delta=2), kve("b", "22", 6, delta=1), kve("c", "", 7, "PURGE"), None,
                             kve("d", "4", 8)]
    assert t["kv.watch.end"] == ok()
    assert t["kv.watch.a_history"] == [kve("a", "1", 1, delta=1), kve("a", "11", 3), None]
    assert t["kv.watch.b_history_no_deletes"] == [kve("b", "2", 2, delta=2), kve("b", "22", 6), None]
    # headers-only consumer: revisions and operations without values
    assert t["kv.watch.meta_only"] == [kve("a", "", 3, delta=3), kve("b", "", 6, delta=2), kve("c", "", 7, "PURGE", 1),
                                       kve("d", "", 8), None]
    assert t["kv.watch.none"] == [None]


def test_account_info_after_the_scenario(t):
    # one stream left (the bucket's); every API request of the scenario counted, the error replies apart (a
    # MSG.DELETE that finds no message is an answer, not an error: jsMsgDeleteRequest)
    assert t["js.account"] == {"memory": 0, "store": 388, "streams": 1, "consumers": 0, "api_total": 136,
                               "api_errors": 26}
