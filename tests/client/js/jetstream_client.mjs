// nats.js over TCP (@nats-io/transport-node): JetStream streams and consumers, KV and the object store, the paths
// this client takes and nats-py does not (consumer create with an `action`, ordered pull consumers, `consume()` with
// idle heartbeats and across expired pulls, `fetch` with expires and max_bytes, KV watch/keys/history with
// `filter_subjects`, direct get of one message, batches and `multi_last`, chunked objects with digests, priority
// groups, pause and reset, atomic batches, per-message TTLs, message schedules, refused configurations).
// Prints one JSON line (the last) of what the client saw, only what is the same on every run: no times, server ids
// or nuids.  tests/client/test_natsjs_jetstream.py runs it against Skiff and nats-server and checks every value.
// On stderr: the name of each result as it comes (where a run that hangs stopped), with its value when JS_DEBUG=1.
//
//   node jetstream_client.mjs nats://127.0.0.1:4222
import { connect } from "@nats-io/transport-node";
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import { createHash } from "node:crypto";

const nc = await connect({ servers: process.argv[2], timeout: 5000 });
const jsm = await jetstreamManager(nc, { timeout: 5000 });
const js = jetstream(nc, { timeout: 5000 });
const out = new Proxy({}, { set(o, k, v) {
  console.error(process.env.JS_DEBUG ? `${k} ${JSON.stringify(v)}` : k);
  o[k] = v;
  return true;
} });
const td = new TextDecoder();

// An error as the client reports it: its class, `code` (the API's err_code, or a status code) and message.
function failure(e) {
  return { error: e.constructor.name, code: e.code ?? null, status: e.status ?? null, message: e.message };
}
async function attempt(fn) {
  try {
    const v = await fn();
    return { ok: v === undefined ? null : v };
  } catch (e) {
    return failure(e);
  }
}
const ack = (a) => ({ stream: a.stream, seq: a.seq, duplicate: a.duplicate });
const state = (s) => ({ messages: s.messages, bytes: s.bytes, first_seq: s.first_seq, last_seq: s.last_seq,
  num_subjects: s.num_subjects ?? 0, num_deleted: s.num_deleted ?? 0 });
const streamCfg = (c) => ({ name: c.name, subjects: c.subjects, description: c.description ?? null,
  retention: c.retention, storage: c.storage, discard: c.discard, max_msgs: c.max_msgs, max_bytes: c.max_bytes,
  max_age: c.max_age, max_msgs_per_subject: c.max_msgs_per_subject, max_msg_size: c.max_msg_size,
  duplicate_window: c.duplicate_window, num_replicas: c.num_replicas, allow_direct: c.allow_direct,
  allow_rollup_hdrs: c.allow_rollup_hdrs, deny_delete: c.deny_delete, deny_purge: c.deny_purge,
  mirror_direct: c.mirror_direct, sealed: c.sealed });
const seqs = (s) => [s.consumer_seq, s.stream_seq]; // not last_active: a time
const consumerState = (ci) => ({ delivered: seqs(ci.delivered), ack_floor: seqs(ci.ack_floor),
  num_ack_pending: ci.num_ack_pending,
  num_redelivered: ci.num_redelivered, num_waiting: ci.num_waiting, num_pending: ci.num_pending });
const msg = (m) => [m.subject, m.string(), m.info.streamSequence, m.info.deliverySequence, m.info.deliveryCount,
  m.info.pending, m.redelivered];

// --- streams ---------------------------------------------------------------------------------------------------
const cfg = { name: "ORDERS", subjects: ["orders.>"], max_msgs_per_subject: 10, allow_direct: true };
let si = await jsm.streams.add(cfg);
out.streamCreate = { config: streamCfg(si.config), state: state(si.state) };
out.streamCreateAgain = await attempt(async () => (await jsm.streams.add(cfg)).config.name);
out.streamCreateOther = await attempt(() => jsm.streams.add({ ...cfg, max_msgs_per_subject: 3 }));
si = await jsm.streams.update("ORDERS", { ...cfg, subjects: ["orders.>", "returns.*"], description: "orders" });
out.streamUpdate = streamCfg(si.config);
out.streamUpdateBad = await attempt(() => jsm.streams.update("ORDERS", { ...si.config, storage: "memory" }));
await jsm.streams.add({ name: "OTHER", subjects: ["other"], storage: "memory" });
out.streamList = (await jsm.streams.list().next()).map((s) => [s.config.name, s.config.storage, s.state.messages])
  .sort();
out.streamNames = (await jsm.streams.names().next()).sort();
out.streamFind = [await jsm.streams.find("returns.x"), await attempt(() => jsm.streams.find("nowhere"))];
out.streamNotFound = await attempt(() => jsm.streams.info("NOPE"));
out.streamDeleteNotFound = await attempt(() => jsm.streams.delete("NOPE"));
out.streamDelete = await jsm.streams.delete("OTHER");

// --- publish: dedupe and expectations ----------------------------------------------------------------------------
out.publish = [];
out.publish.push(ack(await js.publish("orders.new", "o1", { msgID: "m1" })));
out.publish.push(ack(await js.publish("orders.new", "o1 again", { msgID: "m1" })));
out.publish.push(ack(await js.publish("orders.paid", "o2", { msgID: "m2", expect: { lastSequence: 1 } })));
out.publish.push(await attempt(() => js.publish("orders.paid", "x", { expect: { lastSequence: 1 } })));
out.publish.push(await attempt(() => js.publish("orders.paid", "x", { expect: { lastSubjectSequence: 1 } })));
out.publish.push(await attempt(() => js.publish("orders.paid", "x", { expect: { streamName: "OTHER" } })));
out.publish.push(await attempt(() => js.publish("orders.paid", "x", { expect: { lastMsgID: "m1" } })));
out.publish.push(ack(await js.publish("orders.paid", "o3", { expect: { lastMsgID: "m2", lastSubjectSequence: 2 } })));
out.publish.push(await attempt(() => js.publish("nostream.x", "x", { retries: 0 })));
for (let i = 4; i <= 6; i++) await js.publish(`orders.new`, `o${i}`);
await js.publish("returns.1", "r1");
si = await jsm.streams.info("ORDERS", { subjects_filter: ">" });
out.streamInfo = { state: state(si.state), subjects: si.state.subjects };

// --- configurations the server refuses (or not): the errors as nats.js reports them ------------------------------
const streamCfgs = [
  { name: "BAD1", subjects: ["orders.x"] }, // overlaps ORDERS
  { name: "BAD2", subjects: ["bad2"], sealed: true },
  { name: "BAD3", subjects: ["bad3"], duplicate_window: 120_000_000_000, max_age: 60_000_000_000 },
  { name: "BAD4", subjects: ["bad4"], discard_new_per_subject: true },
  { name: "BAD5", subjects: ["bad5"], subject_delete_marker_ttl: 60_000_000_000 },
  { name: "BAD6", subjects: ["bad6"], mirror: { name: "ORDERS" } },
  { name: "BAD7", subjects: ["bad7.*", "bad7.>"] },
  { name: "BAD8", subjects: ["bad8"], retention: "workqueue", max_msgs_per_subject: 1 },
  { name: "BAD9", subjects: ["bad9"], max_msg_size: 2_000_000 },
  { name: "BAD10", subjects: ["$JS.API.foo"] },
];
out.streamConfigErrors = [];
for (const c of streamCfgs) {
  out.streamConfigErrors.push(await attempt(async () => {
    const i = await jsm.streams.add(c);
    await jsm.streams.delete(c.name);
    return [i.config.name, i.config.subjects];
  }));
}
const consumerCfgs = [
  { durable_name: "c1", ack_policy: AckPolicy.Explicit, idle_heartbeat: 1_000_000_000 },
  { durable_name: "c2", ack_policy: AckPolicy.Explicit, flow_control: true },
  { durable_name: "c3", ack_policy: AckPolicy.Explicit, deliver_group: "q" },
  { durable_name: "c4", ack_policy: AckPolicy.Explicit, rate_limit_bps: 1000 },
  { durable_name: "c5", ack_policy: AckPolicy.Explicit, filter_subject: "orders.a", filter_subjects: ["orders.b"] },
  { durable_name: "c6", ack_policy: AckPolicy.Explicit, filter_subjects: ["orders.*", "orders.a"] },
  { durable_name: "c7", ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.StartSequence },
  { durable_name: "c8", ack_policy: AckPolicy.Explicit, opt_start_seq: 3 },
  { durable_name: "c9", ack_policy: AckPolicy.Explicit, backoff: [1_000_000_000, 2_000_000_000], max_deliver: 2 },
  { durable_name: "c10", ack_policy: AckPolicy.Explicit, filter_subject: "nowhere.>" },
  { durable_name: "c11", name: "other", ack_policy: AckPolicy.Explicit },
  { durable_name: "c12", ack_policy: AckPolicy.None, max_ack_pending: 5 },
  { durable_name: "c13", ack_policy: AckPolicy.Explicit, max_waiting: 0 },
  { durable_name: "c14", ack_policy: AckPolicy.Explicit, deliver_subject: "push.c14", max_waiting: 10 },
  { durable_name: "c15", ack_policy: AckPolicy.Explicit, priority_policy: "overflow" },
  { durable_name: "c16", ack_policy: AckPolicy.Explicit, max_deliver: 0 },
  { durable_name: "c17", ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.StartTime },
  { durable_name: "c18", ack_policy: AckPolicy.Explicit, inactive_threshold: -1 },
];
out.consumerConfigErrors = [];
for (const c of consumerCfgs) {
  out.consumerConfigErrors.push(await attempt(async () => {
    const i = await jsm.consumers.add("ORDERS", c);
    await jsm.consumers.delete("ORDERS", i.name);
    return [i.name, i.config.max_waiting ?? null, i.config.max_deliver, i.config.max_ack_pending ?? null];
  }));
}

// --- a durable pull consumer: fetch, ack kinds, counters ---------------------------------------------------------
let ci = await jsm.consumers.add("ORDERS", { durable_name: "pull", ack_policy: AckPolicy.Explicit,
  filter_subject: "orders.>", max_deliver: 5 });
out.consumerCreate = { name: ci.name, config: { durable_name: ci.config.durable_name, ack_policy: ci.config.ack_policy,
  deliver_policy: ci.config.deliver_policy, filter_subject: ci.config.filter_subject,
  max_deliver: ci.config.max_deliver,
  ack_wait: ci.config.ack_wait, max_ack_pending: ci.config.max_ack_pending, max_waiting: ci.config.max_waiting,
  replay_policy: ci.config.replay_policy, num_replicas: ci.config.num_replicas }, state: consumerState(ci) };
out.consumerCreateSame = await attempt(async () => (await jsm.consumers.add("ORDERS", { durable_name: "pull",
  ack_policy: AckPolicy.Explicit, filter_subject: "orders.>", max_deliver: 5 })).name);
out.consumerCreateOther = await attempt(() => jsm.consumers.add("ORDERS", { durable_name: "pull",
  ack_policy: AckPolicy.Explicit, filter_subject: "orders.new" }));
out.consumerUpdate = await attempt(async () => (await jsm.consumers.update("ORDERS", "pull",
  { description: "the pull one", max_deliver: 6 })).config.max_deliver);
out.consumerUpdateMissing = await attempt(() => jsm.consumers.update("ORDERS", "missing", { description: "x" }));
out.consumerNotFound = await attempt(() => jsm.consumers.info("ORDERS", "missing"));
out.consumerGetNotFound = await attempt(() => js.consumers.get("ORDERS", "missing"));
out.consumerStreamNotFound = await attempt(() => jsm.consumers.info("NOPE", "pull"));

const pull = await js.consumers.get("ORDERS", "pull");
let batch = await pull.fetch({ max_messages: 3, expires: 2000 });
const fetched = [];
for await (const m of batch) {
  fetched.push(msg(m));
  if (fetched.length === 1) m.ack();
  else if (fetched.length === 2) m.nak();
  else fetched.push(await m.ackAck());
}
out.fetch = fetched;
out.afterFetch = consumerState(await pull.info());
const redelivered = await pull.next({ expires: 2000 });
out.next = msg(redelivered);
redelivered.term("no thanks");
batch = await pull.fetch({ max_messages: 3, expires: 2000 });
const rest = [];
for await (const m of batch) {
  rest.push(msg(m));
  await m.ackAck();
}
out.fetchRest = rest;
const empty = await pull.fetch({ max_messages: 5, expires: 1000 });
let emptyCount = 0;
for await (const m of empty) emptyCount++; // eslint-disable-line no-unused-vars
out.fetchEmpty = emptyCount;
out.afterAll = consumerState(await pull.info());
out.consumerList = (await jsm.consumers.list("ORDERS").next()).map((c) => c.name);

// --- consume() with idle heartbeats, on a second durable ---------------------------------------------------------
await jsm.consumers.add("ORDERS", { durable_name: "work", ack_policy: AckPolicy.Explicit,
  filter_subjects: ["orders.new", "returns.*"], deliver_policy: DeliverPolicy.All });
const work = await js.consumers.get("ORDERS", "work");
const consumed = [];
const messages = await work.consume({ max_messages: 2, idle_heartbeat: 1000, expires: 5000 });
for await (const m of messages) {
  consumed.push(msg(m));
  await m.ackAck();
  if (m.info.pending === 0) break;
}
await messages.close();
out.consume = consumed;
ci = await work.info();
out.consumeInfo = { filter_subjects: ci.config.filter_subjects, ...consumerState(ci) };
out.consumerDelete = [await jsm.consumers.delete("ORDERS", "work"),
  await attempt(() => jsm.consumers.delete("ORDERS", "work"))];

// --- pull requests over the consumer's limits, idle heartbeats, and a consumer deleted under a waiting fetch -----
await jsm.consumers.add("ORDERS", { durable_name: "lim", ack_policy: AckPolicy.None, max_batch: 2,
  max_expires: 1_500_000_000, max_bytes: 1000 });
const lim = await js.consumers.get("ORDERS", "lim");
const drain = async (it) => {
  const got = [];
  for await (const m of it) got.push(m.info.streamSequence);
  return got;
};
out.limitBatch = await attempt(async () => drain(await lim.fetch({ max_messages: 3, expires: 1000 })));
out.limitExpires = await attempt(async () => drain(await lim.fetch({ max_messages: 1, expires: 2000 })));
await jsm.consumers.add("ORDERS", { durable_name: "lim2", ack_policy: AckPolicy.None, max_bytes: 1000 });
const lim2 = await js.consumers.get("ORDERS", "lim2");
out.limitBytes = await attempt(async () => drain(await lim2.fetch({ max_bytes: 2000, expires: 1000 })));
out.limitBytesOk = await attempt(async () => drain(await lim2.fetch({ max_bytes: 200, expires: 1000 })));
out.limitOk = await attempt(async () => drain(await lim.fetch({ max_messages: 2, expires: 1000 })));
await jsm.consumers.add("ORDERS", { durable_name: "gone", ack_policy: AckPolicy.Explicit,
  deliver_policy: DeliverPolicy.New });
const gone = await js.consumers.get("ORDERS", "gone");
const waiting = await gone.fetch({ max_messages: 1, expires: 5000, idle_heartbeat: 250 });
const notes = [];
(async () => {
  for await (const n of waiting.status()) notes.push(n.type === "consumer_deleted" ? [n.type, n.code, n.description]
    : n.type);
})();
setTimeout(() => jsm.consumers.delete("ORDERS", "gone"), 700);
out.consumerDeletedWhileWaiting = await attempt(() => drain(waiting));
out.notifications = [notes.includes("heartbeat"), notes.filter((n) => Array.isArray(n)),
  notes.filter((n) => typeof n === "string" && !["heartbeat", "next", "debug"].includes(n))];
await jsm.consumers.delete("ORDERS", "lim");
await jsm.consumers.delete("ORDERS", "lim2");

// --- consume() across an expired pull (408 with the pending counts: the client pulls again), by count and by bytes
// Each publishes once its first pull expired, the second after the first (the stream's order is the same each run).
async function consumeAcrossExpiry(durable, opts, before, published) {
  await jsm.consumers.add("ORDERS", { durable_name: durable, ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.New, filter_subject: `orders.${durable}` });
  const it = await (await js.consumers.get("ORDERS", durable)).consume(opts);
  const seen = [];
  (async () => {
    for await (const n of it.status()) {
      if (n.type === "discard") {
        seen.push([n.type, n.messagesLeft, n.bytesLeft]);
        if (seen.length === 1) {
          await before;
          await js.publish(`orders.${durable}`, "late");
          published();
        }
      } else if (!["heartbeat", "next", "debug"].includes(n.type)) seen.push(n.type);
    }
  })();
  for await (const m of it) { // the client pulls only once it is iterated
    seen.push([m.subject, m.string(), m.info.deliverySequence]);
    await m.ackAck();
    break;
  }
  await it.close();
  await jsm.consumers.delete("ORDERS", durable);
  return seen;
}
let firstPublished;
const first = new Promise((resolve) => { firstPublished = resolve; });
out.consumeAcrossExpiry = await Promise.all([
  consumeAcrossExpiry("late1", { max_messages: 5, expires: 1000, idle_heartbeat: 500 }, null, firstPublished),
  consumeAcrossExpiry("late2", { max_bytes: 4096, expires: 1000 }, first, () => {}),
]);

// --- ordered consumers (ephemeral, recreated by the client) ------------------------------------------------------
const ordered = await js.consumers.get("ORDERS", { filter_subjects: ["orders.paid", "returns.>"] });
const oc = [];
for await (const m of await ordered.fetch({ max_messages: 3, expires: 2000 })) {
  oc.push([m.subject, m.string(), m.info.streamSequence, m.info.deliverySequence]);
}
out.orderedFetch = oc;
const ordered2 = await js.consumers.get("ORDERS", { deliver_policy: DeliverPolicy.LastPerSubject });
const oc2 = [];
const iter = await ordered2.consume();
for await (const m of iter) {
  oc2.push([m.subject, m.string(), m.info.streamSequence, m.info.pending]);
  if (m.info.pending === 0) break;
}
await iter.close();
out.orderedConsume = oc2;

// --- stream message get: the API and direct get ------------------------------------------------------------------
let sm = await jsm.streams.getMessage("ORDERS", { seq: 1 });
out.msgGet = [sm.subject, sm.seq, sm.string(), sm.header?.get("Nats-Msg-Id") ?? null];
sm = await jsm.streams.getMessage("ORDERS", { last_by_subj: "orders.paid" });
out.msgGetLast = [sm.subject, sm.seq, sm.string()];
out.msgGetMissing = await attempt(() => jsm.streams.getMessage("ORDERS", { seq: 999 }));
out.msgGetDeleted = await attempt(async () => {
  await jsm.streams.deleteMessage("ORDERS", 4);
  return jsm.streams.getMessage("ORDERS", { seq: 4 });
});
sm = await jsm.direct.getMessage("ORDERS", { last_by_subj: "orders.new" });
out.directLast = [sm.subject, sm.seq, sm.stream, sm.string()];
sm = await jsm.direct.getMessage("ORDERS", { seq: 2 });
out.directSeq = [sm.subject, sm.seq, sm.string()];
sm = await jsm.direct.getMessage("ORDERS", { seq: 4, next_by_subj: "orders.new" });
out.directNext = [sm.subject, sm.seq, sm.string()];
out.directMissing = [await jsm.direct.getMessage("ORDERS", { last_by_subj: "orders.none" }),
  await jsm.direct.getMessage("ORDERS", { seq: 999 })];
const directBatch = [];
for await (const m of await jsm.direct.getBatch("ORDERS", { seq: 1, batch: 3 })) {
  directBatch.push([m.subject, m.seq, m.string(), m.pending, m.lastSequence]);
}
out.directBatch = directBatch;
const lastFor = [];
for await (const m of await jsm.direct.getLastMessagesFor("ORDERS", { multi_last: ["orders.*"] })) {
  lastFor.push([m.subject, m.seq, m.string()]);
}
out.directLastFor = lastFor;
const directVariants = async (opts) => attempt(async () => {
  const got = [];
  for await (const m of await jsm.direct.getBatch("ORDERS", opts)) got.push([m.subject, m.seq, m.pending]);
  return got;
});
out.directBatchVariants = [
  await directVariants({ start_time: new Date("2001-01-01T00:00:00Z"), batch: 2 }),
  await directVariants({ seq: 2, batch: 10, max_bytes: 60 }),
  await directVariants({ seq: 1, batch: 3, next_by_subj: "orders.new" }),
  await directVariants({ seq: 100, batch: 3 }),
];
const lastForVariants = async (opts) => attempt(async () => {
  const got = [];
  for await (const m of await jsm.direct.getLastMessagesFor("ORDERS", opts)) got.push([m.subject, m.seq, m.pending]);
  return got;
});
out.directLastForVariants = [
  await lastForVariants({ multi_last: ["orders.*", "returns.*"], up_to_seq: 5 }),
  await lastForVariants({ multi_last: [">"], batch: 2 }),
  await lastForVariants({ multi_last: ["nothing.*"] }),
];
out.directStreamNotFound = await attempt(() => jsm.direct.getMessage("NOPE", { seq: 1 }));

// --- KV ----------------------------------------------------------------------------------------------------------
const kvm = new Kvm(nc);
const kv = await kvm.create("cfg", { history: 5 });
let ks = await kv.status();
out.kvStatus = { bucket: ks.bucket, history: ks.history, values: ks.values, ttl: ks.ttl,
  stream: streamCfg(ks.streamInfo.config) };
const entry = (e) => (e === null ? null : [e.key, e.string(), e.revision, e.operation, e.delta ?? null]);
out.kvPut = [await kv.put("a", "1"), await kv.put("b", "2"), await kv.put("a", "3"), await kv.put("sub.x", "4")];
out.kvGet = [entry(await kv.get("a")), entry(await kv.get("a", { revision: 1 })), entry(await kv.get("nope"))];
out.kvCreateExisting = await attempt(() => kv.create("a", "x"));
out.kvUpdateWrong = await attempt(() => kv.update("a", "x", 1));
out.kvUpdate = await kv.update("a", "5", 3);
out.kvCreate = await kv.create("c", "6");
await kv.delete("b");
out.kvGetDeleted = entry(await kv.get("b"));
out.kvCreateAfterDelete = await kv.create("b", "7");
await kv.purge("c");
out.kvGetPurged = entry(await kv.get("c"));
const hist = [];
for await (const e of await kv.history({ key: "a" })) hist.push(entry(e));
out.kvHistory = hist;
const histMulti = [];
for await (const e of await kv.history({ key: ["b", "c"] })) histMulti.push(entry(e));
out.kvHistoryMulti = histMulti;
const keys = [];
for await (const k of await kv.keys()) keys.push(k);
out.kvKeys = keys.sort();
const keysFiltered = [];
for await (const k of await kv.keys(["a", "sub.*"])) keysFiltered.push(k);
out.kvKeysFiltered = keysFiltered.sort();
const watched = [];
const watch = await kv.watch({ key: ["a", "sub.>", "d"] });
let initial = 0;
for await (const e of watch) {
  watched.push([...entry(e), e.isUpdate ?? null]);
  if (e.delta === 0 && initial === 0) {
    initial = watched.length;
    await kv.put("d", "8");
    await kv.put("ignored", "9");
    await kv.delete("a");
  }
  if (e.key === "a" && e.operation === "DEL") break;
}
watch.stop();
out.kvWatch = watched;
const watchedAll = [];
const watchAll = await kv.watch({ include: "history" });
for await (const e of watchAll) {
  watchedAll.push([e.key, e.string(), e.revision, e.operation]);
  if (e.delta === 0) break;
}
watchAll.stop();
out.kvWatchHistory = watchedAll;
out.kvDeleteWrongRevision = await attempt(() => kv.delete("d", { previousSeq: 1 }));
const upd = [];
const watchUpdates = await kv.watch({ include: "updates", key: "u.*" });
await kv.put("u.1", "x");
await kv.put("u.2", "y");
for await (const e of watchUpdates) {
  upd.push(entry(e));
  if (upd.length === 2) break;
}
watchUpdates.stop();
out.kvWatchUpdates = upd;
const resumed2 = [];
const watchResume = await kv.watch({ resumeFromRevision: 10, headers_only: true });
for await (const e of watchResume) {
  resumed2.push([e.key, e.length, e.revision, e.operation]);
  if (e.delta === 0) break;
}
watchResume.stop();
out.kvWatchResume = resumed2;
out.kvList = await (async () => {
  const names = [];
  for await (const st of kvm.list()) names.push(st.bucket);
  return names.sort();
})();
const kvt = await kvm.create("ttl", { ttl: 3600_000, markerTTL: 60_000 });
ks = await kvt.status();
out.kvTtlStatus = { ttl: ks.ttl, markerTTL: ks.markerTTL, allow_msg_ttl: ks.streamInfo.config.allow_msg_ttl,
  subject_delete_marker_ttl: ks.streamInfo.config.subject_delete_marker_ttl };
out.kvTtlCreate = await attempt(() => kvt.create("k", "v", "5m"));
out.kvTtlPurge = await attempt(async () => {
  await kvt.purge("k", { ttl: "2m" });
  const m = await jsm.streams.getMessage("KV_ttl", { last_by_subj: "$KV.ttl.k" });
  return [m.header.get("KV-Operation"), m.header.get("Nats-TTL"), m.header.get("Nats-Rollup")];
});
await kvt.destroy();
ks = await kv.status();
out.kvStatusAfter = { values: ks.values, size: ks.size };
out.kvOpenMissing = await attempt(() => kvm.open("missing").then((b) => b.status()));
out.kvDestroy = await kv.destroy();

// --- object store ------------------------------------------------------------------------------------------------
const objm = new Objm(nc);
const os = await objm.create("files", { description: "files" });
const big = new Uint8Array(300 * 1024);
for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 10)) % 251;
// the client's digest: "SHA-256=" and base64url with its padding
const sha = (b) => "SHA-256=" + createHash("sha256").update(b).digest("base64").replaceAll("+", "-")
  .replaceAll("/", "_");
const objInfo = (i) => (i === null ? null : { name: i.name, bucket: i.bucket, size: i.size, chunks: i.chunks,
  digest: i.digest, deleted: i.deleted, description: i.description ?? null,
  max_chunk_size: i.options?.max_chunk_size ?? null });
out.objExpectedDigest = sha(big);
out.objPut = objInfo(await os.putBlob({ name: "big.bin", description: "300 KB" }, big));
out.objPutSmall = objInfo(await os.putBlob({ name: "dir/small.txt" }, new TextEncoder().encode("hello object")));
out.objPutEmpty = objInfo(await os.putBlob({ name: "empty" }, new Uint8Array(0)));
out.objPutChunked = objInfo(await os.putBlob({ name: "chunked", options: { max_chunk_size: 1000 } },
  big.subarray(0, 5500)));
const got = await os.getBlob("big.bin");
out.objGet = { length: got.length, equal: Buffer.compare(Buffer.from(got), Buffer.from(big)) === 0, digest: sha(got) };
const res = await os.get("chunked");
const parts = [];
for await (const c of res.data) parts.push(c.length);
out.objGetChunked = { total: parts.reduce((a, b) => a + b, 0), error: (await res.error)?.message ?? null };
out.objGetSmall = td.decode(await os.getBlob("dir/small.txt"));
out.objGetMissing = await os.getBlob("missing");
out.objInfo = objInfo(await os.info("big.bin"));
out.objList = (await os.list()).map((i) => [i.name, i.size, i.chunks]).sort();
let ost = await os.status();
out.objStatus = { bucket: ost.bucket, description: ost.description, sealed: ost.sealed, storage: ost.storage,
  size: ost.size, stream: streamCfg(ost.streamInfo.config), messages: ost.streamInfo.state.messages };
out.objReplace = objInfo(await os.putBlob({ name: "dir/small.txt" }, new TextEncoder().encode("replaced")));
out.objDelete = await os.delete("big.bin").then((r) => [r.success, r.purged]);
out.objInfoDeleted = objInfo(await os.info("big.bin"));
out.objGetDeleted = await os.getBlob("big.bin");
out.objListAfter = (await os.list()).map((i) => [i.name, i.size]).sort();
ost = await os.status();
out.objStatusAfter = { size: ost.size, messages: ost.streamInfo.state.messages };
out.objLink = await attempt(async () => {
  const l = await os.link("alias", await os.info("chunked"));
  const li = await os.info("alias");
  return [l.name, l.options?.link ?? null, li.options?.link ?? null, (await os.getBlob("alias"))?.length ?? null];
});
out.objRename = await attempt(async () => {
  await os.update("empty", { name: "renamed", description: "was empty" });
  return [objInfo(await os.info("renamed")), await os.info("empty")];
});
const objWatch = [];
const ow = await os.watch({ includeHistory: true });
for await (const i of ow) {
  objWatch.push([i.name, i.size, i.deleted]);
  if (i.isUpdate) break; // the last of the initial values
}
ow.stop();
out.objWatch = objWatch.sort();
out.objStoreList = await (async () => {
  const names = [];
  for await (const st of objm.list()) names.push(st.bucket);
  return names;
})();
out.objSeal = await os.seal().then((s) => s.sealed);
out.objPutSealed = await attempt(() => os.putBlob({ name: "late" }, new Uint8Array(1)));
out.objDestroy = await os.destroy();

// --- less common paths: pause, reset, priority groups, fetch by bytes, per-message TTL, batches, purge -----------
await jsm.streams.add({ name: "EXTRA", subjects: ["extra.>"], allow_atomic: true, allow_msg_ttl: true });
for (let i = 1; i <= 4; i++) await js.publish(`extra.${i % 2 ? "odd" : "even"}`, `e${i}`);
await jsm.consumers.add("EXTRA", { durable_name: "p", ack_policy: AckPolicy.Explicit });
const paused = await jsm.consumers.pause("EXTRA", "p", new Date(Date.now() + 3600_000));
ci = await jsm.consumers.info("EXTRA", "p");
const resumed = await jsm.consumers.resume("EXTRA", "p");
out.pause = [paused.paused, ci.paused ?? false, resumed.paused,
  (await jsm.consumers.info("EXTRA", "p")).paused ?? false];
const p1 = await js.consumers.get("EXTRA", "p");
for await (const m of await p1.fetch({ max_messages: 2, expires: 2000 })) await m.ackAck();
out.reset = await attempt(async () => {
  const r = await jsm.consumers.reset("EXTRA", "p", 1);
  const i = await jsm.consumers.info("EXTRA", "p");
  return [r.reset_seq ?? null, consumerState(i)];
});
out.resetNext = await attempt(async () => msg(await p1.next({ expires: 2000 })));
await jsm.consumers.add("EXTRA", { durable_name: "g", ack_policy: AckPolicy.Explicit, priority_groups: ["grp"],
  priority_policy: "pinned_client", priority_timeout: 60_000_000_000 });
const g = await js.consumers.get("EXTRA", "g");
out.pinnedNoGroup = await attempt(async () => {
  const it = await g.fetch({ max_messages: 1, expires: 1000 });
  const got = [];
  for await (const m of it) got.push(m.subject);
  return got;
});
out.pinned = await attempt(async () => {
  const got = [];
  for await (const m of await g.fetch({ max_messages: 2, expires: 2000, group: "grp" })) {
    got.push([m.subject, m.headers?.has("Nats-Pin-Id") ?? false]);
    m.ack();
  }
  return got;
});
ci = await jsm.consumers.info("EXTRA", "g");
out.pinnedInfo = (ci.priority_groups ?? []).map((x) => [x.group, typeof x.pinned_client_id === "string"]);
out.unpin = await attempt(() => jsm.consumers.unpin("EXTRA", "g", "grp"));
out.unpinBadGroup = await attempt(() => jsm.consumers.unpin("EXTRA", "g", "nope"));
await js.publish("extra.big", new Uint8Array(200));
await jsm.consumers.add("EXTRA", { durable_name: "b", ack_policy: AckPolicy.None, filter_subject: "extra.big" });
const b = await js.consumers.get("EXTRA", "b");
out.fetchMaxBytes = await attempt(async () => {
  const got = [];
  const it = await b.fetch({ max_bytes: 50, expires: 1000 });
  for await (const m of it) got.push(m.subject);
  return got;
});
out.ttlPublish = [ack(await js.publish("extra.ttl", "t", { ttl: "1h" })),
  await attempt(() => js.publish("orders.new", "t", { ttl: "1h" }))];
sm = await jsm.streams.getMessage("EXTRA", { last_by_subj: "extra.ttl" });
out.ttlHeader = sm.header?.get("Nats-TTL") ?? null;
out.batch = await attempt(async () => {
  const bt = await js.startBatch("extra.b1", "b1");
  bt.add("extra.b2", "b2");
  const a = await bt.commit("extra.b3", "b3");
  return [a.stream, a.seq, a.count];
});
out.batchNotAllowed = await attempt(async () => {
  const bt = await js.startBatch("orders.b1", "b1");
  return (await bt.commit("orders.b2", "b2")).count;
});
out.purgeKeep = await jsm.streams.purge("EXTRA", { filter: "extra.odd", keep: 1 }).then((r) => r.purged);
out.purgeSeq = await jsm.streams.purge("EXTRA", { seq: 3 }).then((r) => r.purged);
out.deleteMissing = await attempt(() => jsm.streams.deleteMessage("EXTRA", 999));
out.deleteNoErase = await attempt(() => jsm.streams.deleteMessage("EXTRA", 5, false));
si = await jsm.streams.info("EXTRA", { deleted_details: true, subjects_filter: "extra.*" });
out.extraInfo = { state: state(si.state), deleted: si.state.deleted ?? null, subjects: si.state.subjects ?? null };
out.extraDelete = await jsm.streams.delete("EXTRA");

// --- message schedules as nats.js writes their headers, and the expected last sequence of a wildcard subject -----
await jsm.streams.add({ name: "SCHED", subjects: ["sched.>"], allow_msg_schedules: true, allow_rollup_hdrs: true,
  allow_msg_ttl: true });
const later = new Date("2099-01-01T00:00:00Z");
const past = new Date("2001-01-01T00:00:00Z");
const schedule = (subj, data, opts) => attempt(async () => ack(await js.publish(subj, data, opts)));
out.schedulePublish = [
  await schedule("sched.a", "A", { schedule: { specification: later, target: "sched.out.a" } }),
  await schedule("sched.src", "source data"),
  await schedule("sched.b", "B", { schedule: { specification: past, target: "sched.out.b", source: "sched.src",
    ttl: "5m" } }),
  await schedule("sched.c", "C", { schedule: { specification: { cron: "0 0 0 1 1 *" }, target: "sched.out.c",
    timezone: "Europe/Amsterdam", rollup: "sub" } }),
  await schedule("sched.d", "D", { schedule: { specification: "@bogus", target: "sched.out.d" } }),
  await schedule("sched.e", "E", { schedule: { specification: later, target: "sched.e" } }),
  await schedule("sched.f", "F", { schedule: { specification: { every: "1h" }, target: "sched.out.f",
    timezone: "Nowhere/Atlantis" } }),
  await schedule("orders.sched", "X", { schedule: { specification: later, target: "orders.out" } }),
  await schedule("sched.cancel", "", { cancelSchedule: { scheduleSubject: "sched.a" } }),
];
let fired = null;
for (let i = 0; i < 100 && fired === null; i++) { // up to 5 s
  fired = await jsm.streams.getMessage("SCHED", { last_by_subj: "sched.out.b" });
  if (fired === null) await new Promise((r) => setTimeout(r, 50));
}
out.scheduleFired = fired && [fired.subject, fired.string(), fired.header.get("Nats-Scheduler"),
  fired.header.get("Nats-Schedule-Next"), fired.header.get("Nats-TTL"), fired.header.get("Nats-Schedule")];
si = await jsm.streams.info("SCHED", { subjects_filter: ">" });
out.scheduleSubjects = si.state.subjects;
await jsm.streams.delete("SCHED");
await js.publish("orders.x.1", "x1");
await js.publish("orders.x.2", "x2");
const expectSubject = (seq) => attempt(async () => ack(await js.publish("orders.x.3", "x3",
  { expect: { lastSubjectSequence: seq, lastSubjectSequenceSubject: "orders.x.*" } })));
out.expectSubjectSubject = [await expectSubject(10), await expectSubject(11)];

// --- the account, at the end -------------------------------------------------------------------------------------
const ai = await jsm.getAccountInfo();
out.account = { streams: ai.streams, durables: (await jsm.consumers.list("ORDERS").next())
  .filter((c) => c.config.durable_name).map((c) => c.name) }; // not the ordered consumers: they go when idle
out.streamPurge = await jsm.streams.purge("ORDERS", { filter: "orders.new" }).then((r) => [r.success, r.purged]);
si = await jsm.streams.info("ORDERS");
out.streamAfterPurge = state(si.state);

await nc.close();
console.log(JSON.stringify(out));
