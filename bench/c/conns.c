/* Connection flood: open --count idle client connections (raw sockets, one epoll thread) and hold them.
 *
 *   conns --url U --count N --concurrency K
 *
 * At most K handshakes are in flight at once (so the listen backlog is not what is measured).  A connection is
 * established when the server answered our CONNECT + PING with PONG.  When all N are, one JSON line is printed
 * (time to establish them all) and the program keeps them open, answering server PINGs, until stdin reaches
 * EOF or a line arrives; then it closes them and prints a second JSON line.
 */
#include "raw.h"

enum { CONNECTING, HANDSHAKE, READY, CLOSED };

typedef struct {
    int fd;
    int state;
    size_t len;
    char buf[2048];
} cconn_t;

static const char connect_line[] =
    "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":false,\"protocol\":1,\"lang\":\"c-raw\","
    "\"version\":\"0\"}\r\nPING\r\n";

static int open_one(int ep, const struct sockaddr_in *sa, cconn_t *c) {
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd < 0) fail("socket: %s (raise ulimit -n)", strerror(errno));
    int r = connect(c->fd, (const struct sockaddr *)sa, sizeof *sa);
    if (r < 0 && errno != EINPROGRESS) fail("connect: %s", strerror(errno));
    c->state = CONNECTING;
    c->len = 0;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    return 0;
}

/* Handle readable bytes; returns 1 when the connection became READY. */
static int on_readable(int ep, cconn_t *c) {
    for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (r == 0) fail("server closed connection %d during/after the handshake", c->fd);
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR) return 0;
            fail("recv: %s", strerror(errno));
        }
        c->len += (size_t)r;
        int became_ready = 0;
        for (;;) {
            char *eol = memmem(c->buf, c->len, "\r\n", 2);
            if (!eol) {
                if (c->len == sizeof c->buf) c->len = 0; /* an INFO longer than the buffer: drop its head */
                break;
            }
            size_t ll = (size_t)(eol - c->buf);
            if (ll >= 4 && !strncmp(c->buf, "INFO", 4) && c->state == HANDSHAKE) {
                raw_write_all(c->fd, connect_line, sizeof connect_line - 1);
            } else if (ll >= 4 && !strncmp(c->buf, "PONG", 4) && c->state == HANDSHAKE) {
                c->state = READY;
                became_ready = 1;
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            } else if (ll >= 4 && !strncmp(c->buf, "PING", 4)) {
                raw_write_all(c->fd, "PONG\r\n", 6);
            } else if (ll >= 4 && !strncmp(c->buf, "-ERR", 4)) {
                *eol = 0;
                fail("server said %s", c->buf);
            }
            memmove(c->buf, eol + 2, c->len - ll - 2);
            c->len -= ll + 2;
        }
        if (became_ready) return 1;
    }
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    hostport_t hp = parse_url(A.url);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)hp.port);
    if (inet_pton(AF_INET, hp.host, &sa.sin_addr) != 1) fail("bad host %s", hp.host);
    long n = A.count > 0 ? A.count : 1000;
    int k = A.concurrency > 0 ? A.concurrency : 256;
    cconn_t *cs = calloc((size_t)n, sizeof *cs);
    if (!cs) fail("out of memory");
    int ep = epoll_create1(0);
    struct epoll_event evs[512];
    long opened = 0, ready = 0;
    double t0 = now_s();
    while (ready < n) {
        while (opened < n && opened - ready < k) open_one(ep, &sa, &cs[opened++]);
        int m = epoll_wait(ep, evs, 512, 1000);
        if (m < 0 && errno != EINTR) fail("epoll: %s", strerror(errno));
        for (int i = 0; i < m; i++) {
            cconn_t *c = evs[i].data.ptr;
            if (c->state == CONNECTING) {
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err) fail("connect #%ld: %s", (long)(c - cs), strerror(err));
                set_nodelay(c->fd);
                c->state = HANDSHAKE;
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ready += on_readable(ep, c);
        }
    }
    double el = now_s() - t0;
    printf("{\"ok\": true, \"mode\": \"conns\", \"phase\": \"open\", \"connections\": %ld, \"elapsed\": %.6f, "
           "\"rate\": %.1f}\n",
           n, el, safe_rate(n, el));
    fflush(stdout);
    /* Hold until stdin says so, keeping up with PINGs. */
    alarm(0);
    struct epoll_event sev = {.events = EPOLLIN, .data.ptr = NULL};
    bool done = epoll_ctl(ep, EPOLL_CTL_ADD, 0, &sev) != 0; /* stdin not a pipe: nothing to wait for */
    while (!done) {
        int m = epoll_wait(ep, evs, 512, 1000);
        for (int i = 0; i < m; i++) {
            if (!evs[i].data.ptr) {
                done = true;
                continue;
            }
            on_readable(ep, evs[i].data.ptr);
        }
    }
    long closed_early = 0;
    for (long i = 0; i < n; i++) {
        int e = 0;
        socklen_t el2 = sizeof e;
        if (getsockopt(cs[i].fd, SOL_SOCKET, SO_ERROR, &e, &el2) == 0 && e) closed_early++;
        close(cs[i].fd);
    }
    printf("{\"ok\": true, \"mode\": \"conns\", \"phase\": \"closed\", \"connections\": %ld, \"errors\": %ld}\n", n,
           closed_early);
    _exit(0);
}
