// nats.js (@nats-io/nats-core wsconnect) over WebSocket: publish with headers, a 100 KB message, request/reply.
// Prints one JSON line of what it received; tests/client/test_websocket_js.py compares it on both servers.
import { headers, wsconnect } from "@nats-io/nats-core";

const nc = await wsconnect({ servers: process.argv[2], timeout: 5000 });
const sub = nc.subscribe("js.>", { max: 2 });
const h = headers();
h.set("X-Test", "1");
nc.publish("js.a", "hello", { headers: h });
nc.publish("js.b", new Uint8Array(100000).fill(7));
const got = [];
for await (const m of sub) {
  got.push([m.subject, m.data.length, m.headers ? m.headers.get("X-Test") : ""]);
}
nc.subscribe("svc", { callback: (err, m) => m.respond("re:" + m.string()) });
const r = await nc.request("svc", "q", { timeout: 2000 });
got.push(r.string());
await nc.close();
console.log(JSON.stringify(got));
