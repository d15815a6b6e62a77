// nats.js driving a Skiff process from outside Python: its clock and a fault, through the $SKIFF.> control API.
//
//   skiff -js --control --clock=manual -p 4222 &
//   npm install && node skiff_control.mjs nats://127.0.0.1:4222
//
// A consumer with a 30 s ack_wait gets a message and does not ack it.  Instead of waiting 30 s, the test moves
// Skiff's clock 31 s forward: the message is redelivered at once.  Then Skiff drops this very connection, as a
// network failure would, and the client reconnects by itself.  Prints one JSON line of what happened.
import { connect } from "@nats-io/transport-node";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";

const nc = await connect({
  servers: process.argv[2], name: "js-example", reconnectTimeWait: 50, maxReconnectAttempts: -1,
});

// One request per command; the reply is JSON, {"error": {"code", "description"}} when refused.
async function skiff(cmd, body = {}) {
  const reply = (await nc.request(`$SKIFF.${cmd}`, JSON.stringify(body), { timeout: 5000 })).json();
  if (reply.error) throw new Error(`$SKIFF.${cmd}: ${reply.error.code} ${reply.error.description}`);
  return reply;
}

const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: "ORDERS", subjects: ["orders.>"] });
await jsm.consumers.add("ORDERS", {
  durable_name: "worker", ack_policy: AckPolicy.Explicit, ack_wait: 30_000_000_000, // 30 s, in nanoseconds
});
const js = jetstream(nc);
await js.publish("orders.1", "first order");
const consumer = await js.consumers.get("ORDERS", "worker");

const m1 = await consumer.next({ expires: 5000 }); // delivered once, not acked
const t0 = Date.now();
const moved = await skiff("CLOCK.ADVANCE", { seconds: 31 }); // ack_wait runs out on Skiff's clock
const m2 = await consumer.next({ expires: 5000 }); // the redelivery, without waiting 30 s
const waitedMs = Date.now() - t0;
await m2.ackAck();
const { consumer: state } = await skiff("INSPECT.CONSUMER", { stream: "ORDERS", name: "worker" });

// A fault: Skiff cuts this connection; the client sees the disconnect and reconnects on its own.
const events = [];
const reconnected = (async () => {
  for await (const s of nc.status()) {
    events.push(s.type);
    if (s.type === "reconnect") return;
  }
})();
await skiff("FAULTS.DROP", { name: "js-example" });
await reconnected;
const after = await skiff("CLOCK.NOW"); // the connection works again

console.log(JSON.stringify({
  first: [m1.string(), m1.info.deliveryCount],
  second: [m2.string(), m2.info.deliveryCount, m2.redelivered],
  waitedMs,
  timersRan: moved.timers_ran,
  ackFloor: state.ack_floor,
  numAckPending: state.num_ack_pending,
  events,
  manual: after.manual,
}));
await nc.close();
