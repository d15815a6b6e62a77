/* A minimal NATS protocol client on raw sockets, for the load generators where a client library's own threads
 * would be measured instead of the server: request/reply latency (rr.c) and the connection flood (conns.c).
 *
 * Handshake (blocking): read INFO, send CONNECT (verbose off) and PING, wait for PONG.  After that the caller
 * switches the socket to non-blocking and feeds received bytes to raw_parse(), which calls back once per
 * complete MSG and answers PINGs.  A MSG whose payload has not fully arrived stays in the buffer until it has.
 */
#ifndef BENCH_RAW_H
#define BENCH_RAW_H

#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

typedef struct {
    char host[128];
    int port;
} hostport_t;

static inline hostport_t parse_url(const char *url) {
    hostport_t hp;
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *colon = strrchr(p, ':');
    if (!colon) fail("url %s: no port", url);
    size_t n = (size_t)(colon - p);
    if (n >= sizeof hp.host) n = sizeof hp.host - 1;
    memcpy(hp.host, p, n);
    hp.host[n] = 0;
    hp.port = atoi(colon + 1);
    return hp;
}

static inline void raw_write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
                continue;
            }
            fail("write: %s", strerror(errno));
        }
        buf += w;
        len -= (size_t)w;
    }
}

static inline void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static inline void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/* Read (blocking) until a line starting with `want` arrives; other lines (INFO, +OK, PING) are handled. */
static inline void raw_expect(int fd, const char *want, const char *what) {
    char line[8192];
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, line + n, 1, 0);
        if (r <= 0) fail("%s: connection closed while waiting for %s", what, want);
        n++;
        if (n >= 2 && line[n - 2] == '\r' && line[n - 1] == '\n') {
            line[n - 2] = 0;
            if (!strncmp(line, want, strlen(want))) return;
            if (!strncmp(line, "-ERR", 4)) fail("%s: server said %s", what, line);
            if (!strncmp(line, "PING", 4)) raw_write_all(fd, "PONG\r\n", 6);
            n = 0;
        } else if (n == sizeof line) {
            n = 0; /* a long INFO line: keep scanning for its end */
        }
    }
}

/* Connect and handshake; `extra` (SUB lines etc.) is sent before the PING so the PONG confirms it. */
static inline int raw_connect(const hostport_t *hp, const char *extra) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) fail("socket: %s", strerror(errno));
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)hp->port);
    if (inet_pton(AF_INET, hp->host, &sa.sin_addr) != 1) fail("bad host %s (IPv4 address expected)", hp->host);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) fail("connect: %s", strerror(errno));
    set_nodelay(fd);
    raw_expect(fd, "INFO", "handshake");
    static const char connect_line[] =
        "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":false,\"protocol\":1,\"lang\":\"c-raw\","
        "\"version\":\"0\"}\r\n";
    raw_write_all(fd, connect_line, sizeof connect_line - 1);
    if (extra) raw_write_all(fd, extra, strlen(extra));
    raw_write_all(fd, "PING\r\n", 6);
    raw_expect(fd, "PONG", "handshake");
    return fd;
}

/* Receive buffer of one connection. */
typedef struct {
    char *buf;
    size_t len, cap;
} rbuf_t;

typedef void (*raw_msg_cb)(void *conn, const char *subject, const char *reply, const char *data, size_t len);

/* Read what is available (non-blocking); returns 0 on EOF/error. */
static inline int raw_fill(int fd, rbuf_t *rb) {
    for (;;) {
        if (rb->cap - rb->len < 65536) {
            rb->cap = rb->cap ? rb->cap * 2 : 131072;
            rb->buf = realloc(rb->buf, rb->cap);
        }
        ssize_t r = recv(fd, rb->buf + rb->len, rb->cap - rb->len, 0);
        if (r > 0) {
            rb->len += (size_t)r;
            if ((size_t)r < rb->cap - rb->len) return 1;
            continue;
        }
        if (r == 0) return 0;
        if (errno == EAGAIN || errno == EINTR) return 1;
        return 0;
    }
}

/* Consume every complete operation in the buffer. */
static inline void raw_parse(int fd, rbuf_t *rb, void *conn, raw_msg_cb cb) {
    size_t pos = 0;
    for (;;) {
        char *start = rb->buf + pos;
        size_t avail = rb->len - pos;
        char *eol = avail >= 2 ? memmem(start, avail, "\r\n", 2) : NULL;
        if (!eol) break;
        size_t line_len = (size_t)(eol - start);
        if (line_len >= 4 && !strncmp(start, "MSG ", 4)) {
            /* MSG <subject> <sid> [reply] <size> */
            char *tok[5];
            int nt = 0;
            char *p = start + 4, *end = eol;
            while (p < end && nt < 5) {
                while (p < end && *p == ' ') p++;
                if (p >= end) break;
                tok[nt++] = p;
                while (p < end && *p != ' ') p++;
            }
            if (nt < 3) fail("bad MSG line");
            size_t size = (size_t)strtoul(tok[nt - 1], NULL, 10);
            size_t need = line_len + 2 + size + 2;
            if (avail < need) break;
            /* NUL-terminate subject and reply in place (the spaces after them). */
            char *subject = tok[0];
            *(subject + strcspn(subject, " ")) = 0;
            char *reply = NULL;
            if (nt == 4) {
                reply = tok[2];
                *(reply + strcspn(reply, " ")) = 0;
            }
            cb(conn, subject, reply, eol + 2, size);
            pos += need;
        } else {
            if (line_len >= 4 && !strncmp(start, "PING", 4)) raw_write_all(fd, "PONG\r\n", 6);
            else if (line_len >= 4 && !strncmp(start, "-ERR", 4)) {
                *eol = 0;
                fail("server said %s", start);
            }
            pos += line_len + 2;
        }
    }
    if (pos) {
        memmove(rb->buf, rb->buf + pos, rb->len - pos);
        rb->len -= pos;
    }
}

#endif
