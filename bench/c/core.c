/* Core NATS load generator: publish only, publish + subscribers (1:1, fan-out, queue group).
 * (Request/reply latency is measured by rr.c on raw sockets.)
 *
 *   core pub     --size N --duration S               one publisher, no subscribers
 *   core pubsub  --size N --duration S --subs K      one publisher, K subscribers on their own connections,
 *                                                     each receiving every message (K=1: 1 pub + 1 sub)
 *   core queue   --size N --duration S --subs K      one publisher, K subscribers in one queue group
 *
 * Throughput: the publisher sends as fast as the client library lets it for --duration, then flushes (a PING/PONG
 * round trip: the server has read everything).  Subscribers count what arrives; the receive rate is messages
 * received over the time from the first publish to the last receive, waiting for stragglers until nothing has
 * arrived for a while.  Messages lost (slow consumer) are reported, not hidden.
 */
#include "common.h"

static atomic_long received;
static atomic_llong last_recv_ns;

static void on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure) {
    (void)nc; (void)sub; (void)closure;
    atomic_fetch_add_explicit(&received, 1, memory_order_relaxed);
    atomic_store_explicit(&last_recv_ns, now_ns(), memory_order_relaxed);
    natsMsg_Destroy(msg);
}

static const char *subject(const char *dflt) { return A.subject ? A.subject : dflt; }

/* Publish for A.duration (or A.count messages), flush; returns messages sent and sets *elapsed. */
static long publish_loop(natsConnection *nc, const char *subj, double *elapsed) {
    char *data = payload(A.size);
    long n = 0;
    double t0 = now_s(), deadline = t0 + A.duration;
    for (;;) {
        natsStatus s = natsConnection_Publish(nc, subj, data, A.size);
        if (s != NATS_OK) check(s, "publish");
        n++;
        if (A.count && n >= A.count) break;
        if ((n & 1023) == 0 && now_s() >= deadline) break;
    }
    check(natsConnection_FlushTimeout(nc, 2 * wait_ms() + (int64_t)(A.duration * 1000)), "flush after publish");
    *elapsed = now_s() - t0;
    free(data);
    return n;
}

static void run_pub(void) {
    natsConnection *nc = connect_to("bench-pub", false);
    double el;
    long n = publish_loop(nc, subject("bench.core.pub"), &el);
    printf("{\"ok\": true, \"mode\": \"pub\", \"size\": %d, \"msgs\": %ld, \"elapsed\": %.6f, \"rate\": %.1f, "
           "\"mb_per_s\": %.3f}\n",
           A.size, n, el, safe_rate(n, el), safe_rate((double)n * A.size, el) / 1e6);
    natsConnection_Destroy(nc);
}

static void run_pubsub(bool queue) {
    const char *subj = subject("bench.core.ps");
    int k = A.subs < 1 ? 1 : A.subs;
    natsConnection **sc = calloc(k, sizeof *sc);
    natsSubscription **ss = calloc(k, sizeof *ss);
    for (int i = 0; i < k; i++) {
        sc[i] = connect_to("bench-sub", false);
        if (queue) check(natsConnection_QueueSubscribe(&ss[i], sc[i], subj, "bench-q", on_msg, NULL), "qsub");
        else check(natsConnection_Subscribe(&ss[i], sc[i], subj, on_msg, NULL), "sub");
        check(natsSubscription_SetPendingLimits(ss[i], -1, -1), "pending limits");
        check(natsConnection_Flush(sc[i]), "flush sub");
    }
    natsConnection *pc = connect_to("bench-pub", false);
    double t0 = now_s();
    double pel;
    long n = publish_loop(pc, subj, &pel);
    long expected = queue ? n : n * k;
    /* Wait for the subscribers: done when everything arrived, or nothing arrived for 2 s, or a hard cap. */
    double cap = now_s() + 10.0 + 2.0 * A.duration;
    long seen = -1;
    double idle_since = now_s();
    for (;;) {
        long r = atomic_load(&received);
        if (r >= expected) break;
        double t = now_s();
        if (r != seen) { seen = r; idle_since = t; }
        if (t - idle_since > 2.0 || t > cap) break;
        nats_Sleep(2);
    }
    long r = atomic_load(&received);
    int64_t last = atomic_load(&last_recv_ns);
    double el = last ? (double)last / 1e9 - t0 : 0;
    int64_t dropped = 0;
    for (int i = 0; i < k; i++) {
        int64_t d = 0;
        natsSubscription_GetDropped(ss[i], &d);
        dropped += d;
    }
    printf("{\"ok\": true, \"mode\": \"%s\", \"size\": %d, \"subs\": %d, \"published\": %ld, \"pub_rate\": %.1f, "
           "\"received\": %ld, \"expected\": %ld, \"lost\": %ld, \"client_dropped\": %lld, \"elapsed\": %.6f, "
           "\"rate\": %.1f}\n",
           queue ? "queue" : "pubsub", A.size, k, n, safe_rate(n, pel), r, expected, expected - r,
           (long long)dropped, el, safe_rate(r, el));
    natsConnection_Destroy(pc);
    for (int i = 0; i < k; i++) {
        natsSubscription_Destroy(ss[i]);
        natsConnection_Destroy(sc[i]);
    }
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(A.mode, "pub")) run_pub();
    else if (!strcmp(A.mode, "pubsub")) run_pubsub(false);
    else if (!strcmp(A.mode, "queue")) run_pubsub(true);
    else fail("unknown mode %s", A.mode);
    fflush(stdout);
    /* Skip library teardown: threads of destroyed connections may still be winding down. */
    _exit(0);
}
