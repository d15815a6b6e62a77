/* Request/reply latency on raw sockets: C clients, R responders in one queue group, one epoll thread.
 *
 *   rr --url U --size N --duration S --clients C --responders R
 *
 * Each client connection subscribes to its own inbox and keeps exactly one request in flight: PUB with the inbox
 * as reply subject, wait for the MSG on the inbox, record the round trip, send the next.  Responders answer every
 * request by publishing the payload back to the reply subject.  Everything runs in one thread, so no time is
 * spent handing messages between client threads (what a client library with its own reader threads adds to
 * every round trip); what remains is two loopback hops through the server and back.
 * Requests during the first 0.2 s are a warm-up and not recorded.
 */
#include "raw.h"

enum { RESPONDER, CLIENT };

typedef struct {
    int fd;
    int role;
    rbuf_t rb;
    char inbox[64];
    int64_t sent_ns;
    char *out; /* pending writes of a responder, flushed after each read */
    size_t out_len, out_cap;
} conn_t;

static const char *subject = "bench.rr";
static char *data;
static samples_t lat;
static int64_t measure_from, measure_to;
static long requests, warmup;

static void send_request(conn_t *c) {
    /* PUB <subject> <inbox> <size>\r\n<payload>\r\n, written at once */
    char buf[65536 + 512];
    int n = snprintf(buf, sizeof buf, "PUB %s %s %d\r\n", subject, c->inbox, A.size);
    size_t total = (size_t)n + (size_t)A.size + 2;
    char *p = total <= sizeof buf ? buf : malloc(total);
    if (p != buf) memcpy(p, buf, (size_t)n);
    memcpy(p + n, data, (size_t)A.size);
    memcpy(p + n + A.size, "\r\n", 2);
    c->sent_ns = now_ns();
    raw_write_all(c->fd, p, total);
    if (p != buf) free(p);
}

static void out_append(conn_t *c, const char *s, size_t len) {
    if (c->out_len + len > c->out_cap) {
        c->out_cap = (c->out_len + len) * 2;
        c->out = realloc(c->out, c->out_cap);
    }
    memcpy(c->out + c->out_len, s, len);
    c->out_len += len;
}

static void on_msg(void *conn, const char *subj, const char *reply, const char *payload_, size_t len) {
    (void)subj;
    conn_t *c = conn;
    if (c->role == RESPONDER) {
        if (!reply) return;
        char head[512];
        int n = snprintf(head, sizeof head, "PUB %s %zu\r\n", reply, len);
        out_append(c, head, (size_t)n);
        out_append(c, payload_, len);
        out_append(c, "\r\n", 2);
        return;
    }
    int64_t t = now_ns();
    if (c->sent_ns >= measure_from && t <= measure_to) {
        samples_add(&lat, t - c->sent_ns);
        requests++;
    } else if (c->sent_ns < measure_from) {
        warmup++;
    }
    c->sent_ns = 0;
    if (t < measure_to) send_request(c);
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (A.subject) subject = A.subject;
    hostport_t hp = parse_url(A.url);
    data = payload(A.size);
    int r = A.responders < 1 ? 1 : A.responders;
    int k = A.clients < 1 ? 1 : A.clients;
    int ep = epoll_create1(0);
    conn_t *cs = calloc((size_t)(r + k), sizeof *cs);
    char sub[512];
    for (int i = 0; i < r + k; i++) {
        conn_t *c = &cs[i];
        c->role = i < r ? RESPONDER : CLIENT;
        if (c->role == RESPONDER) snprintf(sub, sizeof sub, "SUB %s bench-responders 1\r\n", subject);
        else {
            snprintf(c->inbox, sizeof c->inbox, "_INBOX.bench.%d.%d", (int)getpid(), i);
            snprintf(sub, sizeof sub, "SUB %s 1\r\n", c->inbox);
        }
        c->fd = raw_connect(&hp, sub);
        set_nonblocking(c->fd);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    int64_t start = now_ns();
    measure_from = start + 200000000LL;
    measure_to = measure_from + (int64_t)(A.duration * 1e9);
    for (int i = r; i < r + k; i++) send_request(&cs[i]);
    struct epoll_event evs[256];
    int64_t hard_end = measure_to + 10000000000LL;
    for (;;) {
        int64_t t = now_ns();
        if (t > measure_to) {
            bool busy = false;
            for (int i = r; i < r + k; i++)
                if (cs[i].sent_ns) busy = true;
            if (!busy) break;
            if (t > hard_end) fail("requests still unanswered 10 s after the end");
        }
        int n = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (!raw_fill(c->fd, &c->rb)) fail("server closed a connection");
            raw_parse(c->fd, &c->rb, c, on_msg);
            if (c->out_len) {
                raw_write_all(c->fd, c->out, c->out_len);
                c->out_len = 0;
            }
        }
    }
    if (lat.n == 0) fail("no request completed");
    samples_sort(&lat);
    printf("{\"ok\": true, \"mode\": \"rr\", \"size\": %d, \"clients\": %d, \"responders\": %d, \"requests\": %ld, "
           "\"rate\": %.1f, \"p50_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}\n",
           A.size, k, r, requests, safe_rate((double)requests, A.duration), pct_us(&lat, 50), pct_us(&lat, 90),
           pct_us(&lat, 99), pct_us(&lat, 100));
    _exit(0);
}
