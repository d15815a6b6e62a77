/* JetStream load generator (file storage): publish, consume, KV, many consumers.
 *
 *   js create    [--stream S] [--count N]         delete + create stream S (subjects "S.>", file storage),
 *                                                 with room for N consumers
 *   js pub       --size N --duration S            synchronous publish (one request per message): rate, latency
 *   js apub      --size N --duration S --window W async publish, at most W acks outstanding
 *                [--count N] [--fresh 0]          (--count: stop after N messages, used to prefill a stream)
 *                [--subjects K]                   message n on subject S.<n % K> instead of S.x
 *   js fetch     --count N --batch B              new durable pull consumer, fetch + ack each message
 *                [--filter F]                     its filter subject (default S.>)
 *   js push      --count N                        new push consumer (explicit ack), callback acks each message
 *   js ordered   --count N                        ordered push consumer (no acks, flow control)
 *   js kvsetup   --keys K --size N                delete + create bucket, put K keys
 *   js kvput     --keys K --size N --duration S   put random keys: rate, latency
 *   js kvget     --keys K --duration S            get random keys: rate, latency
 *   js consumers --count N --threads T            create N durable pull consumers on stream S
 *   js info                                       stream state (messages, consumers)
 *   js delete                                     delete stream S
 *   js purge                                      purge stream S
 *
 * Consumers read at most --count messages of what the stream holds (all of it with --count 0) and stop when they
 * have it, when nothing arrived for a while (see wait_ms), or at --duration x 4 + 10 s; the rate is messages over
 * the time from the subscription to the last message.
 */
#include "common.h"

static natsConnection *nc;
static jsCtx *js;

static const char *subject(void) {
    static char buf[256];
    if (A.subject) return A.subject;
    snprintf(buf, sizeof buf, "%s.x", A.stream);
    return buf;
}

static void js_connect(int64_t max_pending) {
    jsOptions o;
    nc = connect_to("bench-js", false);
    jsOptions_Init(&o);
    o.Wait = wait_ms();
    if (max_pending > 0) o.PublishAsync.MaxPending = max_pending;
    o.PublishAsync.StallWait = wait_ms();
    check(natsConnection_JetStream(&js, nc, &o), "jetstream context");
}

static void stream_create(void) {
    jsErrCode jerr = 0;
    js_DeleteStream(js, A.stream, NULL, &jerr); /* absent is fine */
    char subj[256];
    snprintf(subj, sizeof subj, "%s.>", A.stream);
    const char *subjects[] = {subj};
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = A.stream;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    /* nats-server 2.15 refuses the 1001st consumer of a stream whose max_consumers is unset (-1): give the
     * many-consumers workload room explicitly, the same for both servers. */
    if (!strcmp(A.mode, "create") && A.count > 0) cfg.MaxConsumers = A.count + 16;
    jsStreamInfo *si = NULL;
    jerr = 0;
    check_js(js_AddStream(&si, js, &cfg, NULL, &jerr), jerr, "add stream");
    jsStreamInfo_Destroy(si);
}

static uint64_t stream_msgs(int64_t *consumers) {
    jsErrCode jerr = 0;
    jsStreamInfo *si = NULL;
    check_js(js_GetStreamInfo(&si, js, A.stream, NULL, &jerr), jerr, "stream info");
    uint64_t n = si->State.Msgs;
    if (consumers) *consumers = si->State.Consumers;
    jsStreamInfo_Destroy(si);
    return n;
}

/* ---- publish ---- */

static void run_pub(void) {
    js_connect(0);
    if (A.fresh) stream_create();
    char *data = payload(A.size);
    samples_t lat = {0};
    double t0 = now_s(), deadline = t0 + A.duration;
    long n = 0;
    for (;;) {
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        int64_t a = now_ns();
        check_js(js_Publish(&pa, js, subject(), data, A.size, NULL, &jerr), jerr, "publish");
        int64_t b = now_ns();
        jsPubAck_Destroy(pa);
        samples_add(&lat, b - a);
        n++;
        if (A.count && n >= A.count) break;
        if ((double)b / 1e9 >= deadline) break;
    }
    double el = now_s() - t0;
    samples_sort(&lat);
    printf("{\"ok\": true, \"mode\": \"pub\", \"size\": %d, \"msgs\": %ld, \"elapsed\": %.6f, \"rate\": %.1f, "
           "\"p50_us\": %.1f, \"p99_us\": %.1f}\n",
           A.size, n, el, safe_rate(n, el), pct_us(&lat, 50), pct_us(&lat, 99));
}

static atomic_long acked, ack_errors;
static char ack_err_text[256];

static void on_puback(jsCtx *j, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure) {
    (void)j; (void)closure;
    if (pa) atomic_fetch_add(&acked, 1);
    else {
        if (atomic_fetch_add(&ack_errors, 1) == 0 && pae)
            snprintf(ack_err_text, sizeof ack_err_text, "%s (%d) %s", natsStatus_GetText(pae->Err),
                     (int)pae->ErrCode, pae->ErrText ? pae->ErrText : "");
    }
    natsMsg_Destroy(msg);
}

static void run_apub(void) {
    jsOptions o;
    nc = connect_to("bench-js", false);
    jsOptions_Init(&o);
    o.Wait = wait_ms();
    o.PublishAsync.MaxPending = A.window;
    o.PublishAsync.StallWait = wait_ms();
    o.PublishAsync.AckHandler = on_puback;
    check(natsConnection_JetStream(&js, nc, &o), "jetstream context");
    if (A.fresh) stream_create();
    char *data = payload(A.size);
    double t0 = now_s();
    double deadline = t0 + (A.count ? 1e9 : A.duration);
    long n = 0;
    char spread[256];
    for (;;) {
        const char *subj = subject();
        if (A.subjects > 0) { /* filtered-consumer workloads: message n on <stream>.<n % subjects> */
            snprintf(spread, sizeof spread, "%s.%ld", A.stream, n % A.subjects);
            subj = spread;
        }
        natsStatus s = js_PublishAsync(js, subj, data, A.size, NULL);
        if (s != NATS_OK) check(s, "publish async");
        n++;
        if (A.count && n >= A.count) break;
        if ((n & 63) == 0 && now_s() >= deadline) break;
        if (atomic_load(&ack_errors) > 0) break;
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 2 * wait_ms();
    natsStatus s = js_PublishAsyncComplete(js, &po);
    double el = now_s() - t0;
    if (atomic_load(&ack_errors) > 0) fail("%ld publish errors, first: %s", atomic_load(&ack_errors), ack_err_text);
    check(s, "waiting for the last acks");
    long a = atomic_load(&acked);
    printf("{\"ok\": true, \"mode\": \"apub\", \"size\": %d, \"window\": %d, \"msgs\": %ld, \"acked\": %ld, "
           "\"elapsed\": %.6f, \"rate\": %.1f}\n",
           A.size, A.window, n, a, el, safe_rate(a, el));
}

/* ---- consume ---- */

static atomic_long got;
static atomic_llong got_last_ns;

static void on_js_msg(natsConnection *c, natsSubscription *sub, natsMsg *msg, void *closure) {
    (void)c; (void)sub; (void)closure;
    atomic_fetch_add_explicit(&got, 1, memory_order_relaxed);
    atomic_store_explicit(&got_last_ns, now_ns(), memory_order_relaxed);
    natsMsg_Destroy(msg); /* push: the library acks after the callback returns (auto-ack) */
}

static long consume_target(void) {
    long have = (long)stream_msgs(NULL);
    if (have == 0) fail("stream %s is empty", A.stream);
    return (A.count && A.count < have) ? A.count : have;
}

static void print_consume(const char *mode, long target, long n, double el, long errs) {
    printf("{\"ok\": true, \"mode\": \"%s\", \"target\": %ld, \"msgs\": %ld, \"elapsed\": %.6f, \"rate\": %.1f, "
           "\"errors\": %ld}\n",
           mode, target, n, el, safe_rate(n, el), errs);
}

static void run_fetch(void) {
    js_connect(0);
    long target = consume_target();
    char durable[64];
    snprintf(durable, sizeof durable, "PULL%d", (int)getpid());
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = A.stream;
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.DeliverPolicy = js_DeliverAll;
    natsSubscription *sub = NULL;
    jsErrCode jerr = 0;
    char filter[256];
    snprintf(filter, sizeof filter, "%s", A.filter ? A.filter : "");
    if (!A.filter) snprintf(filter, sizeof filter, "%s.>", A.stream);
    double t0 = now_s();
    check_js(js_PullSubscribe(&sub, js, filter, durable, NULL, &so, &jerr), jerr, "pull subscribe");
    long n = 0, errs = 0;
    double cap = t0 + A.duration * 4 + 10;
    while (n < target && now_s() < cap) {
        natsMsgList list = {0};
        int want = A.batch;
        if (target - n < want) want = (int)(target - n);
        natsStatus s = natsSubscription_Fetch(&list, sub, want, wait_ms(), &jerr);
        if (s == NATS_TIMEOUT) break;
        check_js(s, jerr, "fetch");
        for (int i = 0; i < list.Count; i++) {
            if (natsMsg_Ack(list.Msgs[i], NULL) != NATS_OK) errs++;
            n++;
        }
        natsMsgList_Destroy(&list);
    }
    check(natsConnection_Flush(nc), "flush acks");
    double el = now_s() - t0;
    print_consume("fetch", target, n, el, errs);
    natsSubscription_Unsubscribe(sub);
    js_DeleteConsumer(js, A.stream, durable, NULL, &jerr);
}

static void run_push(bool ordered) {
    js_connect(0);
    long target = consume_target();
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = A.stream;
    so.Config.DeliverPolicy = js_DeliverAll;
    if (ordered) so.Ordered = true;
    else so.Config.AckPolicy = js_AckExplicit;
    natsSubscription *sub = NULL;
    jsErrCode jerr = 0;
    char filter[256];
    snprintf(filter, sizeof filter, "%s.>", A.stream);
    double t0 = now_s();
    check_js(js_Subscribe(&sub, js, filter, on_js_msg, NULL, NULL, &so, &jerr), jerr, "subscribe");
    check(natsSubscription_SetPendingLimits(sub, -1, -1), "pending limits");
    double cap = t0 + A.duration * 4 + 10, idle_since = now_s();
    long seen = -1;
    for (;;) {
        long r = atomic_load(&got);
        double t = now_s();
        if (r >= target) break;
        if (r != seen) { seen = r; idle_since = t; }
        if (t - idle_since > wait_ms() / 1000.0 || t > cap) break;
        nats_Sleep(1);
    }
    long r = atomic_load(&got);
    int64_t last = atomic_load(&got_last_ns);
    check(natsConnection_Flush(nc), "flush acks");
    double el = last ? (double)last / 1e9 - t0 : 0;
    print_consume(ordered ? "ordered" : "push", target, r, el, 0);
    natsSubscription_Unsubscribe(sub); /* deletes the library-created consumer */
}

/* ---- KV ---- */

static kvStore *kv;

static void kv_open(void) {
    js_connect(0);
    check(js_KeyValue(&kv, js, A.bucket), "bind KV bucket");
}

static void run_kvsetup(void) {
    js_connect(0);
    js_DeleteKeyValue(js, A.bucket);
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = A.bucket;
    cfg.History = 1;
    cfg.StorageType = js_FileStorage;
    check(js_CreateKeyValue(&kv, js, &cfg), "create KV bucket");
    char *data = payload(A.size);
    char key[64];
    for (int i = 0; i < A.keys; i++) {
        snprintf(key, sizeof key, "k%d", i);
        check(kvStore_Put(NULL, kv, key, data, A.size), "kv put");
    }
    printf("{\"ok\": true, \"mode\": \"kvsetup\", \"keys\": %d}\n", A.keys);
}

static void run_kv(bool put) {
    kv_open();
    char *data = payload(A.size);
    char key[64];
    samples_t lat = {0};
    unsigned int seed = 12345;
    double t0 = now_s(), deadline = t0 + A.duration;
    long n = 0;
    for (;;) {
        snprintf(key, sizeof key, "k%d", (int)(rand_r(&seed) % (unsigned)A.keys));
        int64_t a = now_ns();
        if (put) {
            check(kvStore_Put(NULL, kv, key, data, A.size), "kv put");
        } else {
            kvEntry *e = NULL;
            check(kvStore_Get(&e, kv, key), "kv get");
            kvEntry_Destroy(e);
        }
        int64_t b = now_ns();
        samples_add(&lat, b - a);
        n++;
        if (A.count && n >= A.count) break;
        if ((double)b / 1e9 >= deadline) break;
    }
    double el = now_s() - t0;
    samples_sort(&lat);
    printf("{\"ok\": true, \"mode\": \"%s\", \"ops\": %ld, \"elapsed\": %.6f, \"rate\": %.1f, \"p50_us\": %.1f, "
           "\"p99_us\": %.1f}\n",
           put ? "kvput" : "kvget", n, el, safe_rate(n, el), pct_us(&lat, 50), pct_us(&lat, 99));
}

/* ---- many consumers ---- */

typedef struct {
    pthread_t th;
    long from, to;
    char err[256];
} creator_t;

static void *creator_main(void *arg) {
    creator_t *c = arg;
    natsConnection *cn = connect_to("bench-creator", false);
    jsCtx *cj = NULL;
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = wait_ms();
    if (natsConnection_JetStream(&cj, cn, &o) != NATS_OK) {
        snprintf(c->err, sizeof c->err, "jetstream context");
        return NULL;
    }
    char name[64];
    for (long i = c->from; i < c->to; i++) {
        snprintf(name, sizeof name, "C%06ld", i);
        jsConsumerConfig cc;
        jsConsumerConfig_Init(&cc);
        cc.Durable = name;
        cc.AckPolicy = js_AckExplicit;
        jsConsumerInfo *ci = NULL;
        jsErrCode jerr = 0;
        natsStatus s = js_AddConsumer(&ci, cj, A.stream, &cc, NULL, &jerr);
        if (s != NATS_OK) {
            snprintf(c->err, sizeof c->err, "add consumer %s: %s (js err %d)", name, natsStatus_GetText(s), (int)jerr);
            break;
        }
        jsConsumerInfo_Destroy(ci);
    }
    natsConnection_Destroy(cn);
    return NULL;
}

static void run_consumers(void) {
    int t = A.threads < 1 ? 1 : A.threads;
    creator_t *cs = calloc(t, sizeof *cs);
    double t0 = now_s();
    for (int i = 0; i < t; i++) {
        cs[i].from = A.count * i / t;
        cs[i].to = A.count * (i + 1) / t;
        pthread_create(&cs[i].th, NULL, creator_main, &cs[i]);
    }
    for (int i = 0; i < t; i++) pthread_join(cs[i].th, NULL);
    double el = now_s() - t0;
    for (int i = 0; i < t; i++)
        if (cs[i].err[0]) fail("%s", cs[i].err);
    printf("{\"ok\": true, \"mode\": \"consumers\", \"consumers\": %ld, \"elapsed\": %.6f, \"rate\": %.1f}\n",
           A.count, el, safe_rate(A.count, el));
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(A.mode, "create")) {
        js_connect(0);
        stream_create();
        printf("{\"ok\": true, \"mode\": \"create\", \"stream\": \"%s\"}\n", A.stream);
    } else if (!strcmp(A.mode, "pub")) run_pub();
    else if (!strcmp(A.mode, "apub")) run_apub();
    else if (!strcmp(A.mode, "fetch")) run_fetch();
    else if (!strcmp(A.mode, "push")) run_push(false);
    else if (!strcmp(A.mode, "ordered")) run_push(true);
    else if (!strcmp(A.mode, "kvsetup")) run_kvsetup();
    else if (!strcmp(A.mode, "kvput")) run_kv(true);
    else if (!strcmp(A.mode, "kvget")) run_kv(false);
    else if (!strcmp(A.mode, "consumers")) run_consumers();
    else if (!strcmp(A.mode, "info")) {
        js_connect(0);
        int64_t consumers = 0;
        uint64_t n = stream_msgs(&consumers);
        printf("{\"ok\": true, \"mode\": \"info\", \"msgs\": %llu, \"consumers\": %lld}\n", (unsigned long long)n,
               (long long)consumers);
    } else if (!strcmp(A.mode, "delete")) {
        js_connect(0);
        jsErrCode jerr = 0;
        check_js(js_DeleteStream(js, A.stream, NULL, &jerr), jerr, "delete stream");
        printf("{\"ok\": true, \"mode\": \"delete\"}\n");
    } else if (!strcmp(A.mode, "purge")) {
        js_connect(0);
        jsErrCode jerr = 0;
        check_js(js_PurgeStream(js, A.stream, NULL, &jerr), jerr, "purge stream");
        printf("{\"ok\": true, \"mode\": \"purge\"}\n");
    } else fail("unknown mode %s", A.mode);
    fflush(stdout);
    _exit(0);
}
