"""nats.js over TCP against both servers: its JetStream, KV and object store clients (js/jetstream_client.mjs).

nats.js takes other paths than nats-py: consumers created with an ``action``, ordered pull consumers, ``consume()``
with idle heartbeats and across expired pulls, ``fetch`` with expires and max_bytes, KV watch / keys / history with
``filter_subjects``, direct get (one message, batches, ``multi_last``), object store puts in chunks with a digest,
links and renames, priority groups, pause and reset, atomic batches, per-message TTLs, message schedules as it writes
their headers, and the errors of refused configurations and requests.  The script prints one transcript of what the
client saw; it is written out once below (nats-server's), and each server must produce it as it is.

The packages are the pinned ones of ``js/package.json``, installed by tests/nodejs.py (skipped, saying why, without
Node, npm or the registry).  One run is ~4 s, most of it waiting for pull requests to expire (1 s at least in nats.js).
"""
import json
import subprocess
from pathlib import Path

from tests.nodejs import node_package

JS = Path(__file__).resolve().parent / "js"


def api_error(code: int, status: int, message: str, cls: str = "JetStreamApiError") -> dict:
    """An API error as nats.js reports it: ``err_code`` as ``code``, the HTTP-like ``code`` as ``status``."""
    return {"error": cls, "code": code, "status": status, "message": message}


def status_error(code: int, message: str) -> dict:
    """A status message (409, 400, ...) ending a pull request, as nats.js reports it."""
    return {"error": "JetStreamStatusError", "code": code, "status": None, "message": message}


STREAM_NOT_FOUND = api_error(10059, 404, "stream not found", "StreamNotFoundError")
CONSUMER_NOT_FOUND = api_error(10014, 404, "consumer not found", "ConsumerNotFoundError")


def stream_config(name: str, subjects: list[str], **kw) -> dict:
    """The fields of a stream config the script reports, nats-server's defaults but for ``kw``."""
    return {"name": name, "subjects": subjects, "description": None, "retention": "limits", "storage": "file",
            "discard": "old", "max_msgs": -1, "max_bytes": -1, "max_age": 0, "max_msgs_per_subject": -1,
            "max_msg_size": -1, "duplicate_window": 120_000_000_000, "num_replicas": 1, "allow_direct": False,
            "allow_rollup_hdrs": False, "deny_delete": False, "deny_purge": False, "mirror_direct": False,
            "sealed": False, **kw}


def consumer_state(delivered, ack_floor, ack_pending=0, pending=0, redelivered=0) -> dict:
    return {"delivered": list(delivered), "ack_floor": list(ack_floor), "num_ack_pending": ack_pending,
            "num_redelivered": redelivered, "num_waiting": 0, "num_pending": pending}


def state(messages, nbytes, first, last, subjects, deleted=0) -> dict:
    return {"messages": messages, "bytes": nbytes, "first_seq": first, "last_seq": last, "num_subjects": subjects,
            "num_deleted": deleted}


def obj_info(name, size, chunks, digest, description="", deleted=False, max_chunk_size=131072) -> dict:
    return {"name": name, "bucket": "files", "size": size, "chunks": chunks, "digest": digest, "deleted": deleted,
            "description": description, "max_chunk_size": max_chunk_size}


ORDERS = stream_config("ORDERS", ["orders.>"], max_msgs_per_subject=10, allow_direct=True)
EMPTY_DIGEST = "SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU="  # sha256 of nothing
BIG_DIGEST = "SHA-256=6YeLaOQru2YSRjneOyLAjtXKqoK50BwZd6JNrWnTXMo="  # the 300 KB object

# A message from a consumer: [subject, data, stream seq, delivery seq, delivery count, pending, redelivered].
EXPECTED = {
    # streams
    "streamCreate": {"config": ORDERS, "state": state(0, 0, 0, 0, 0)},
    "streamCreateAgain": {"ok": "ORDERS"},
    "streamCreateOther": api_error(10058, 400, "stream name already in use with a different configuration"),
    "streamUpdate": {**ORDERS, "subjects": ["orders.>", "returns.*"], "description": "orders"},
    "streamUpdateBad": api_error(10052, 500, "stream configuration update can not change storage type"),
    "streamList": [["ORDERS", "file", 0], ["OTHER", "memory", 0]],
    "streamNames": ["ORDERS", "OTHER"],
    "streamFind": ["ORDERS", api_error(10059, 404, "no stream matches subject", "StreamNotFoundError")],
    "streamNotFound": STREAM_NOT_FOUND,
    "streamDeleteNotFound": STREAM_NOT_FOUND,
    "streamDelete": True,
    # publish: a duplicate msgID, the expected-* headers, and no stream for the subject (no responders)
    "publish": [
        {"stream": "ORDERS", "seq": 1, "duplicate": False},
        {"stream": "ORDERS", "seq": 1, "duplicate": True},
        {"stream": "ORDERS", "seq": 2, "duplicate": False},
        api_error(10071, 400, "wrong last sequence: 2"),  # lastSequence
        api_error(10071, 400, "wrong last sequence: 2"),  # lastSubjectSequence
        api_error(10060, 400, "expected stream does not match"),
        api_error(10070, 400, "wrong last msg ID: m2"),
        {"stream": "ORDERS", "seq": 3, "duplicate": False},
        {"error": "JetStreamNotEnabled", "code": None, "status": None, "message": "jetstream is not enabled"},
    ],
    "streamInfo": {"state": state(7, 480, 1, 7, 3), "subjects": {"orders.new": 4, "orders.paid": 2, "returns.1": 1}},
    # configurations refused (or not): streams, then pull consumers on ORDERS
    "streamConfigErrors": [
        api_error(10065, 400, "subjects overlap with an existing stream"),
        api_error(10052, 500, "stream configuration for create can not be sealed"),
        api_error(10052, 500, "duplicates window can not be larger then max age"),
        api_error(10052, 500, "discard new per subject requires discard new policy to be set"),
        {"ok": ["BAD5", ["bad5"]]},  # subject_delete_marker_ttl without allow_msg_ttl
        api_error(10034, 400, "stream mirrors can not contain subjects"),
        api_error(10052, 500, 'subject "bad7.*" overlaps with "bad7.>"'),
        {"ok": ["BAD8", ["bad8"]]},  # workqueue with max_msgs_per_subject
        {"ok": ["BAD9", ["bad9"]]},  # max_msg_size above max_payload
        api_error(10052, 500, "subjects that overlap with jetstream api require no-ack to be true"),
    ],
    "consumerConfigErrors": [  # [name, max_waiting, max_deliver, max_ack_pending] when created
        api_error(10088, 400, "consumer idle heartbeat requires a push based consumer"),
        api_error(10089, 400, "consumer flow control requires a push based consumer"),
        {"ok": ["c3", 512, -1, 1000]},  # a deliver_group on a pull consumer
        api_error(10086, 400, "consumer in pull mode can not have rate limit set"),
        api_error(10136, 400, "consumer cannot have both FilterSubject and FilterSubjects specified"),
        api_error(10138, 400, "consumer subject filters cannot overlap"),
        api_error(10094, 400, "consumer delivery policy is deliver by start sequence, but optional start sequence is "
                              "not set"),
        api_error(10094, 400, "consumer delivery policy is deliver all, but optional start sequence is also set"),
        {"ok": ["c9", 512, 2, 1000]},  # backoff longer than max_deliver
        {"ok": ["c10", 512, -1, 1000]},  # a filter no stream subject matches
        api_error(10017, 400, "consumer name in subject does not match durable name in request"),
        {"ok": ["c12", 512, -1, 5]},
        {"ok": ["c13", 512, -1, 1000]},  # max_waiting 0: the default
        api_error(10080, 400, "consumer in push mode can not set max waiting"),
        {"error": "InvalidArgumentError", "code": None, "status": None,
         "message": "'priority_groups' must be an array"},  # the client's own check
        {"ok": ["c16", 512, -1, 1000]},
        api_error(10094, 400, "consumer delivery policy is deliver by start time, but optional start time is not set"),
        {"ok": ["c18", 512, -1, 1000]},  # a negative inactive_threshold
    ],
    # a durable pull consumer
    "consumerCreate": {
        "name": "pull",
        "config": {"durable_name": "pull", "ack_policy": "explicit", "deliver_policy": "all",
                   "filter_subject": "orders.>", "max_deliver": 5, "ack_wait": 30_000_000_000,
                   "max_ack_pending": 1000, "max_waiting": 512, "replay_policy": "instant", "num_replicas": 0},
        "state": consumer_state((0, 0), (0, 0), pending=6),
    },
    "consumerCreateSame": {"ok": "pull"},
    "consumerCreateOther": api_error(10148, 400, "consumer already exists"),
    "consumerUpdate": {"ok": 6},
    "consumerUpdateMissing": CONSUMER_NOT_FOUND,
    "consumerNotFound": CONSUMER_NOT_FOUND,
    "consumerGetNotFound": CONSUMER_NOT_FOUND,
    "consumerStreamNotFound": STREAM_NOT_FOUND,
    "fetch": [["orders.new", "o1", 1, 1, 1, 5, False], ["orders.paid", "o2", 2, 2, 1, 4, False],
              ["orders.paid", "o3", 3, 3, 1, 3, False], True],  # ack, nak, ackAck (True)
    "afterFetch": consumer_state((3, 3), (1, 1), ack_pending=1, pending=3),
    "next": ["orders.paid", "o2", 2, 4, 2, 3, True],  # the nak'd one, then term'd
    "fetchRest": [["orders.new", "o4", 4, 5, 1, 2, False], ["orders.new", "o5", 5, 6, 1, 1, False],
                  ["orders.new", "o6", 6, 7, 1, 0, False]],
    "fetchEmpty": 0,
    "afterAll": consumer_state((7, 6), (7, 6)),
    "consumerList": ["pull"],
    # consume() on a consumer with filter_subjects
    "consume": [["orders.new", "o1", 1, 1, 1, 4, False], ["orders.new", "o4", 4, 2, 1, 3, False],
                ["orders.new", "o5", 5, 3, 1, 2, False], ["orders.new", "o6", 6, 4, 1, 1, False],
                ["returns.1", "r1", 7, 5, 1, 0, False]],
    "consumeInfo": {"filter_subjects": ["orders.new", "returns.*"], **consumer_state((5, 7), (5, 7))},
    "consumerDelete": [True, CONSUMER_NOT_FOUND],
    # pull requests over a consumer's max_batch / max_expires / max_bytes, and a consumer deleted under a fetch
    "limitBatch": status_error(409, "exceeded maxrequestbatch of 2"),
    "limitExpires": status_error(409, "exceeded maxrequestexpires of 1.5s"),
    "limitBytes": status_error(409, "exceeded maxrequestmaxbytes of 1000"),
    "limitBytesOk": status_error(409, "message size exceeds maxbytes"),
    "limitOk": {"ok": [1, 2]},
    "consumerDeletedWhileWaiting": status_error(409, "consumer deleted"),
    "notifications": [True, [["consumer_deleted", 409, "consumer deleted"]], []],  # heartbeats seen, 409, others
    # consume() pulls again after a 408 (the discard notification with the pending counts)
    "consumeAcrossExpiry": [[["discard", 5, 0], ["orders.late1", "late", 1]],
                            [["discard", 100, 4096], ["orders.late2", "late", 1]]],
    # ordered consumers: [subject, data, stream seq, delivery seq or pending]
    "orderedFetch": [["orders.paid", "o2", 2, 1], ["orders.paid", "o3", 3, 2], ["returns.1", "r1", 7, 3]],
    "orderedConsume": [["orders.paid", "o3", 3, 4], ["orders.new", "o6", 6, 3], ["returns.1", "r1", 7, 2],
                       ["orders.late1", "late", 8, 1], ["orders.late2", "late", 9, 0]],
    # STREAM.MSG.GET and DIRECT.GET
    "msgGet": ["orders.new", 1, "o1", "m1"],
    "msgGetLast": ["orders.paid", 3, "o3"],
    "msgGetMissing": {"ok": None},
    "msgGetDeleted": {"ok": None},
    "directLast": ["orders.new", 6, "ORDERS", "o6"],
    "directSeq": ["orders.paid", 2, "o2"],
    "directNext": ["orders.new", 5, "o5"],
    "directMissing": [None, None],
    "directBatch": [["orders.new", 1, "o1", 7, 0], ["orders.paid", 2, "o2", 6, 1], ["orders.paid", 3, "o3", 5, 2]],
    "directLastFor": [["orders.paid", 3, "o3"], ["orders.new", 6, "o6"], ["orders.late1", 8, "late"],
                      ["orders.late2", 9, "late"]],
    "directBatchVariants": [  # [subject, seq, pending]: start_time, max_bytes, next_by_subj, past the end
        {"ok": [["orders.new", 1, 7], ["orders.paid", 2, 6]]},
        {"ok": [["orders.paid", 2, 6]]},
        {"ok": [["orders.new", 1, 2], ["orders.new", 5, 1], ["orders.new", 6, 0]]},
        status_error(404, "message not found"),
    ],
    "directLastForVariants": [  # multi_last with up_to_seq, with batch, matching nothing
        {"ok": [["orders.paid", 3, 1], ["orders.new", 5, 0]]},
        {"ok": [["orders.paid", 3, 4], ["orders.new", 6, 3]]},
        {"ok": []},
    ],
    "directStreamNotFound": {"error": "RequestError", "code": None, "status": None,
                             "message": "no responders: '$JS.API.DIRECT.GET.NOPE'"},
    # KV: an entry is [key, value, revision, operation, delta]
    "kvStatus": {"bucket": "cfg", "history": 5, "values": 0, "ttl": 0,
                 "stream": stream_config("KV_cfg", ["$KV.cfg.>"], discard="new", max_msgs_per_subject=5,
                                         allow_direct=True, allow_rollup_hdrs=True)},
    "kvPut": [1, 2, 3, 4],
    "kvGet": [["a", "3", 3, "PUT", 0], ["a", "1", 1, "PUT", 0], None],
    "kvCreateExisting": api_error(10071, 400, "wrong last sequence: 3"),
    "kvUpdateWrong": api_error(10071, 400, "wrong last sequence: 3"),
    "kvUpdate": 5,
    "kvCreate": 6,
    "kvGetDeleted": ["b", "", 7, "DEL", 0],
    "kvCreateAfterDelete": 8,
    "kvGetPurged": ["c", "", 9, "PURGE", 0],
    "kvHistory": [["a", "1", 1, "PUT", 2], ["a", "3", 3, "PUT", 1], ["a", "5", 5, "PUT", 0]],
    "kvHistoryMulti": [["b", "2", 2, "PUT", 3], ["b", "", 7, "DEL", 2], ["b", "7", 8, "PUT", 1],
                       ["c", "", 9, "PURGE", 0]],
    "kvKeys": ["a", "b", "sub.x"],
    "kvKeysFiltered": ["a", "sub.x"],
    "kvWatch": [["sub.x", "4", 4, "PUT", 1, False], ["a", "5", 5, "PUT", 0, True], ["d", "8", 10, "PUT", 0, True],
                ["a", "", 12, "DEL", 0, True]],  # + isUpdate
    "kvWatchHistory": [["a", "1", 1, "PUT"], ["b", "2", 2, "PUT"], ["a", "3", 3, "PUT"], ["sub.x", "4", 4, "PUT"],
                       ["a", "5", 5, "PUT"], ["b", "", 7, "DEL"], ["b", "7", 8, "PUT"], ["c", "", 9, "PURGE"],
                       ["d", "8", 10, "PUT"], ["ignored", "9", 11, "PUT"], ["a", "", 12, "DEL"]],
    "kvDeleteWrongRevision": api_error(10071, 400, "wrong last sequence: 10"),
    "kvWatchUpdates": [["u.1", "x", 13, "PUT", 0], ["u.2", "y", 14, "PUT", 0]],
    "kvWatchResume": [["d", 1, 10, "PUT"], ["ignored", 1, 11, "PUT"], ["a", 0, 12, "DEL"], ["u.1", 1, 13, "PUT"],
                      ["u.2", 1, 14, "PUT"]],  # headers only: [key, length, revision, operation]
    "kvList": ["cfg"],
    "kvTtlStatus": {"ttl": 3600000, "markerTTL": 60000, "allow_msg_ttl": True,
                    "subject_delete_marker_ttl": 60_000_000_000},
    "kvTtlCreate": {"ok": 1},
    "kvTtlPurge": {"ok": ["PURGE", "2m", "sub"]},
    "kvStatusAfter": {"values": 13, "size": 768},
    "kvOpenMissing": STREAM_NOT_FOUND,
    "kvDestroy": True,
    # the object store
    "objExpectedDigest": BIG_DIGEST,
    "objPut": obj_info("big.bin", 307200, 3, BIG_DIGEST, "300 KB"),
    "objPutSmall": obj_info("dir/small.txt", 12, 1, "SHA-256=XNkommlmTmnF4sMBUGJ5ZZCi1u1fMv6dTsHzyUY25Fc="),
    "objPutEmpty": obj_info("empty", 0, 0, EMPTY_DIGEST),
    "objPutChunked": obj_info("chunked", 5500, 6, "SHA-256=rmIEF2k-UC-2dghBSYonRvR6uGWUGQOdaLtTxy6Bd7E=",
                              max_chunk_size=1000),
    "objGet": {"length": 307200, "equal": True, "digest": BIG_DIGEST},
    "objGetChunked": {"total": 5500, "error": None},
    "objGetSmall": "hello object",
    "objGetMissing": None,
    "objInfo": obj_info("big.bin", 307200, 3, BIG_DIGEST, "300 KB"),
    "objList": [["big.bin", 307200, 3], ["chunked", 5500, 6], ["dir/small.txt", 12, 1], ["empty", 0, 0]],
    "objStatus": {"bucket": "files", "description": "files", "sealed": False, "storage": "file", "size": 314731,
                  "stream": stream_config("OBJ_files", ["$O.files.C.>", "$O.files.M.>"], description="files",
                                          discard="new", allow_direct=True, allow_rollup_hdrs=True),
                  "messages": 14},
    "objReplace": obj_info("dir/small.txt", 8, 1, "SHA-256=bBqlBEKpPkLA6ykHz04BfNGVR4kfoZDz6kc1grBHkpA="),
    "objDelete": [True, 3],
    "objInfoDeleted": obj_info("big.bin", 0, 0, "", "300 KB", deleted=True),
    "objGetDeleted": None,
    "objListAfter": [["chunked", 5500], ["dir/small.txt", 8], ["empty", 0]],
    "objStatusAfter": {"size": 7292, "messages": 11},
    "objLink": {"ok": ["alias", {"bucket": "files", "name": "chunked"}, {"bucket": "files", "name": "chunked"},
                       5500]},
    "objRename": {"ok": [obj_info("renamed", 0, 0, EMPTY_DIGEST, "was empty", max_chunk_size=None), None]},
    "objWatch": [["alias", None, None], ["big.bin", 0, True], ["chunked", 5500, False], ["dir/small.txt", 8, False],
                 ["renamed", 0, False]],
    "objStoreList": ["files"],
    "objSeal": True,
    "objPutSealed": api_error(10109, 400, "invalid operation on sealed stream"),
    "objDestroy": True,
    # pause, reset, priority groups, fetch by bytes, per-message TTL, atomic batches, purges
    "pause": [True, True, False, False],
    "reset": {"ok": [1, consumer_state((0, 0), (0, 0), pending=4)]},
    "resetNext": {"ok": ["extra.odd", "e1", 1, 1, 1, 3, False]},
    "pinnedNoGroup": status_error(400, "bad request - priority group missing"),
    "pinned": {"ok": [["extra.odd", True], ["extra.even", True]]},
    "pinnedInfo": [["grp", True]],
    "unpin": {"ok": {"type": "io.nats.jetstream.api.v1.consumer_unpin_response"}},
    "unpinBadGroup": api_error(10160, 400, "Provided priority group does not exist for this consumer"),
    "fetchMaxBytes": status_error(409, "message size exceeds maxbytes"),
    "ttlPublish": [{"stream": "EXTRA", "seq": 6, "duplicate": False},
                   api_error(10166, 400, "per-message TTL is disabled")],
    "ttlHeader": "1h",
    "batch": {"ok": ["EXTRA", 9, 3]},
    "batchNotAllowed": api_error(10174, 400, "atomic publish is disabled"),
    "purgeKeep": 1,
    "purgeSeq": 1,
    "deleteMissing": api_error(10057, 500, "stream store EOF"),
    "deleteNoErase": {"ok": True},
    "extraInfo": {"state": state(6, 532, 3, 9, 6, deleted=1), "deleted": [5],
                  "subjects": {"extra.b1": 1, "extra.b2": 1, "extra.b3": 1, "extra.even": 1, "extra.odd": 1,
                               "extra.ttl": 1}},
    "extraDelete": True,
    # message schedules: @at later, @at past with a source and a TTL (fires at once), cron with a time zone and
    # rollup, an invalid pattern, a target that is the schedule's own subject, an unknown time zone, a stream without
    # schedules, and a cancel (Nats-Schedule-Next: purge) of the first
    "schedulePublish": [
        {"ok": {"stream": "SCHED", "seq": 1, "duplicate": False}},
        {"ok": {"stream": "SCHED", "seq": 2, "duplicate": False}},
        {"ok": {"stream": "SCHED", "seq": 3, "duplicate": False}},
        {"ok": {"stream": "SCHED", "seq": 4, "duplicate": False}},
        api_error(10189, 400, "message schedules pattern is invalid"),
        api_error(10190, 400, "message schedules target is invalid"),
        api_error(10223, 400, "message schedules time zone is invalid"),
        api_error(10188, 400, "message schedules is disabled"),
        {"ok": {"stream": "SCHED", "seq": 5, "duplicate": False}},
    ],
    "scheduleFired": ["sched.out.b", "source data", "sched.b", "purge", "5m", ""],
    "scheduleSubjects": {"sched.c": 1, "sched.cancel": 1, "sched.out.b": 1, "sched.src": 1},
    "expectSubjectSubject": [api_error(10071, 400, "wrong last sequence: 11"),
                             {"ok": {"stream": "ORDERS", "seq": 12, "duplicate": False}}],
    # the account at the end, and a filtered purge
    "account": {"streams": 1, "durables": ["pull"]},
    "streamPurge": [True, 3],
    "streamAfterPurge": state(8, 611, 2, 12, 7, deleted=3),
}


def test_nats_js_jetstream_kv_and_object_store(server):
    client = node_package(JS, "jetstream_client.mjs")
    p = subprocess.run(["node", str(client / "jetstream_client.mjs"), server.url], capture_output=True, text=True,
                       timeout=60, cwd=client)
    assert p.returncode == 0, p.stderr + server.log()[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    wrong = {k: {"got": got.get(k, "<missing>"), "expected": v} for k, v in EXPECTED.items() if got.get(k) != v}
    assert not wrong, json.dumps(wrong, indent=1)
    assert list(got) == list(EXPECTED)
