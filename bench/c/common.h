/* Shared helpers for the benchmark load generators (the programs in bench/c/).
 *
 * Every program takes `--name value` options, runs one measurement and prints exactly one JSON object on one line
 * on stdout: {"ok": true, ...figures...} or {"ok": false, "error": "..."} (exit status 1).  The orchestrator
 * (bench/run.py) reads the last line of stdout.  A watchdog alarm() ends a program that overstays --timeout even
 * if the orchestrator's own hard timeout did not fire.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif

#include <nats/nats.h>

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *mode;
    const char *url;
    const char *stream;
    const char *subject;
    int size;          /* payload bytes */
    double duration;   /* seconds of measurement (a cap when count is set) */
    long count;        /* messages / operations / objects; 0 = run for duration */
    int subs;          /* subscribers (fan-out, queue group) */
    int clients;       /* concurrent request/reply clients */
    int responders;    /* responders in the request/reply queue group */
    int window;        /* async publish window (max pending acks) */
    int batch;         /* pull fetch batch size */
    int keys;          /* KV distinct keys */
    int threads;       /* worker threads for bulk creation */
    int concurrency;   /* in-flight handshakes for the connection flood */
    double timeout;    /* watchdog, seconds */
    int fresh;         /* JetStream publishers: delete and re-create the stream first */
    const char *bucket; /* KV bucket */
    int subjects;      /* JetStream async publish: spread messages over <stream>.0 .. <stream>.<subjects-1> */
    const char *filter; /* pull consumer filter subject (default "<stream>.>") */
} args_t;

static args_t A;

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Print {"ok":false,"error":...} with the text JSON-escaped, and exit. */
static inline void fail(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("{\"ok\": false, \"mode\": \"%s\", \"error\": \"", A.mode ? A.mode : "?");
    for (const char *p = buf; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf(" ");
        else putchar(c);
    }
    printf("\"}\n");
    fflush(stdout);
    _exit(1);
}

static inline void check(natsStatus s, const char *what) {
    if (s != NATS_OK) {
        const char *last = nats_GetLastError(NULL);
        fail("%s: %s%s%s", what, natsStatus_GetText(s), last ? ": " : "", last ? last : "");
    }
}

static inline void check_js(natsStatus s, jsErrCode jerr, const char *what) {
    if (s != NATS_OK) {
        const char *last = nats_GetLastError(NULL);
        fail("%s: %s (js err %d)%s%s", what, natsStatus_GetText(s), (int)jerr, last ? ": " : "", last ? last : "");
    }
}

static inline void on_alarm(int sig) {
    (void)sig;
    fail("watchdog: still running after %.0fs", A.timeout);
}

static inline void on_async_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure) {
    (void)nc; (void)sub; (void)closure;
    /* Slow-consumer notices and the like: reported on stderr, the figures say what happened. */
    fprintf(stderr, "async error: %s\n", natsStatus_GetText(err));
}

static inline void parse_args(int argc, char **argv) {
    static struct option opts[] = {
        {"url", required_argument, 0, 'u'},      {"stream", required_argument, 0, 'S'},
        {"subject", required_argument, 0, 'j'},  {"size", required_argument, 0, 's'},
        {"duration", required_argument, 0, 'd'}, {"count", required_argument, 0, 'n'},
        {"subs", required_argument, 0, 'b'},     {"clients", required_argument, 0, 'c'},
        {"responders", required_argument, 0, 'r'}, {"window", required_argument, 0, 'w'},
        {"batch", required_argument, 0, 'B'},    {"keys", required_argument, 0, 'k'},
        {"threads", required_argument, 0, 't'},  {"concurrency", required_argument, 0, 'C'},
        {"timeout", required_argument, 0, 'T'},  {"fresh", required_argument, 0, 'F'},
        {"bucket", required_argument, 0, 'K'},   {"subjects", required_argument, 0, 'N'},
        {"filter", required_argument, 0, 'f'},   {0, 0, 0, 0}};
    A.url = "nats://127.0.0.1:4222";
    A.stream = "BENCH";
    A.subject = NULL;
    A.size = 128;
    A.duration = 3.0;
    A.count = 0;
    A.subs = 1;
    A.clients = 1;
    A.responders = 1;
    A.window = 256;
    A.batch = 100;
    A.keys = 1000;
    A.threads = 4;
    A.concurrency = 256;
    A.timeout = 120;
    A.fresh = 1;
    A.bucket = "BENCHKV";
    A.subjects = 0;
    A.filter = NULL;
    if (argc >= 2 && argv[1][0] != '-') {
        A.mode = argv[1];
        optind = 2;
    } else { /* a program with a single mode */
        const char *slash = strrchr(argv[0], '/');
        A.mode = slash ? slash + 1 : argv[0];
        optind = 1;
    }
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'u': A.url = optarg; break;
        case 'S': A.stream = optarg; break;
        case 'j': A.subject = optarg; break;
        case 's': A.size = atoi(optarg); break;
        case 'd': A.duration = atof(optarg); break;
        case 'n': A.count = atol(optarg); break;
        case 'b': A.subs = atoi(optarg); break;
        case 'c': A.clients = atoi(optarg); break;
        case 'r': A.responders = atoi(optarg); break;
        case 'w': A.window = atoi(optarg); break;
        case 'B': A.batch = atoi(optarg); break;
        case 'k': A.keys = atoi(optarg); break;
        case 't': A.threads = atoi(optarg); break;
        case 'C': A.concurrency = atoi(optarg); break;
        case 'T': A.timeout = atof(optarg); break;
        case 'F': A.fresh = atoi(optarg); break;
        case 'K': A.bucket = optarg; break;
        case 'N': A.subjects = atoi(optarg); break;
        case 'f': A.filter = optarg; break;
        default: fail("unknown option");
        }
    }
    signal(SIGALRM, on_alarm);
    alarm((unsigned)ceil(A.timeout));
}

/* A connection with the options every workload wants: no reconnects (a dead server is an error, not a stall),
 * a generous pending limit and, for latency work, send-as-soon-as-possible. */
static inline natsConnection *connect_to(const char *name, bool send_asap) {
    natsOptions *o = NULL;
    natsConnection *nc = NULL;
    check(natsOptions_Create(&o), "options");
    check(natsOptions_SetURL(o, A.url), "url");
    check(natsOptions_SetName(o, name), "name");
    check(natsOptions_SetAllowReconnect(o, false), "reconnect");
    check(natsOptions_SetTimeout(o, 10000), "timeout");
    check(natsOptions_SetMaxPendingMsgs(o, 10000000), "max pending");
    check(natsOptions_SetErrorHandler(o, on_async_error, NULL), "error handler");
    if (send_asap) check(natsOptions_SetSendAsap(o, true), "send asap");
    check(natsConnection_Connect(&nc, o), "connect");
    natsOptions_Destroy(o);
    return nc;
}

static inline char *payload(int size) {
    char *p = malloc(size > 0 ? size : 1);
    for (int i = 0; i < size; i++) p[i] = 'a' + (i % 26);
    return p;
}

/* Latency samples in nanoseconds; percentiles by sorting. */
typedef struct {
    int64_t *v;
    size_t n, cap;
} samples_t;

static inline void samples_add(samples_t *s, int64_t x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4096;
        s->v = realloc(s->v, s->cap * sizeof(int64_t));
    }
    s->v[s->n++] = x;
}

static inline int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static inline double pct_us(samples_t *s, double p) {
    if (s->n == 0) return NAN;
    size_t i = (size_t)(p / 100.0 * (double)(s->n - 1) + 0.5);
    return (double)s->v[i] / 1000.0;
}

static inline void samples_sort(samples_t *s) { qsort(s->v, s->n, sizeof(int64_t), cmp_i64); }

/* How long to wait for one server answer (API request, stalled publish window, fetch), in ms: a quarter of the
 * program's --timeout, between 2 s and 30 s, so a server that never answers shows as an error well before the
 * watchdog or the orchestrator's hard timeout. */
static inline int64_t wait_ms(void) {
    double w = A.timeout * 250.0;
    if (w < 2000) w = 2000;
    if (w > 30000) w = 30000;
    return (int64_t)w;
}

static inline double safe_rate(double n, double secs) { return secs > 0 ? n / secs : 0.0; }

#endif
