/* The NATS C client (libnats 3.4, Debian's libnats-dev) against one server: a fixed scenario whose client-visible
 * results are printed as one JSON object on one line, for tests/client/test_cclient.py.
 *
 *   compat nats://127.0.0.1:PORT
 *
 * The object is flat: each key names one observation ("core.hdr.msg", "js.pub.dup", "kv.watch", ...) and its value
 * is a string, a number, a boolean, null, a list or a small object.  Only deterministic values are printed: no
 * timestamps, inboxes, nuids or ephemeral consumer names (a Nats-Time-Stamp header's value is printed as "<ts>").
 * An operation that fails is printed as {"status": <natsStatus name>, "jerr": <jsErrCode>, "error": <the client's
 * last error text, null for a timeout>}, one that succeeds as its result.  Exit status 0 once the transcript is
 * printed; a step that hangs is ended by a 60 s watchdog (exit 3, the step's name on stderr) so the test fails
 * rather than waits; a call the scenario cannot go on without exits 2 (what failed on stderr).
 *
 * Acks whose effect a later step reads are sent as requests (natsMsg_AckSync, or ack_req for -NAK, +WPI, +TERM):
 * nats-server processes acks on the consumer's own goroutine, so a fire-and-forget ack may not be seen yet.
 *
 * Everything here is written against the public API of /usr/include/nats/nats.h only.
 */
#include <nats/nats.h>

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- transcript (one JSON object) */

static FILE *J;
static char *jbuf;
static size_t jlen;
static int nkeys;
static const char *volatile step = "start";

static void jstr(const char *s) {
    if (s == NULL) {
        fputs("null", J);
        return;
    }
    fputc('"', J);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(J, "\\%c", *p);
        else if (*p < 0x20) fprintf(J, "\\u%04x", *p);
        else fputc(*p, J);
    }
    fputc('"', J);
}

static void key(const char *k) {
    fputs(nkeys++ ? ", " : "{", J);
    jstr(k);
    fputs(": ", J);
}

static void I(const char *k, int64_t v) { key(k); fprintf(J, "%lld", (long long)v); }
static void U(const char *k, uint64_t v) { key(k); fprintf(J, "%llu", (unsigned long long)v); }

/* Inside an object value: the same with a leading comma after the first member. */
static int nmem;
static void mopen(void) { fputc('{', J); nmem = 0; }
static void mclose(void) { fputc('}', J); }
static void mkey(const char *k) { if (nmem++) fputs(", ", J); jstr(k); fputs(": ", J); }
static void mS(const char *k, const char *v) { mkey(k); jstr(v); }
static void mI(const char *k, int64_t v) { mkey(k); fprintf(J, "%lld", (long long)v); }
static void mU(const char *k, uint64_t v) { mkey(k); fprintf(J, "%llu", (unsigned long long)v); }
static void mB(const char *k, bool v) { mkey(k); fputs(v ? "true" : "false", J); }

static const char *stname(natsStatus s) {
    switch (s) {
    case NATS_OK: return "OK";
    case NATS_ERR: return "ERR";
    case NATS_NOT_FOUND: return "NOT_FOUND";
    case NATS_NO_RESPONDERS: return "NO_RESPONDERS";
    case NATS_TIMEOUT: return "TIMEOUT";
    case NATS_INVALID_ARG: return "INVALID_ARG";
    case NATS_INVALID_SUBSCRIPTION: return "INVALID_SUBSCRIPTION";
    case NATS_ILLEGAL_STATE: return "ILLEGAL_STATE";
    case NATS_MISMATCH: return "MISMATCH";
    case NATS_NOT_PERMITTED: return "NOT_PERMITTED";
    case NATS_CONNECTION_CLOSED: return "CONNECTION_CLOSED";
    default: return natsStatus_GetText(s);
    }
}

/* The outcome of a call: {"status", "jerr", "error"}; the error text only for a failure, and only when the
 * client's last error is that failure's (same status). */
static void E(const char *k, natsStatus s, jsErrCode jerr) {
    natsStatus last = NATS_OK;
    const char *text = nats_GetLastError(&last);
    key(k);
    mopen();
    mS("status", stname(s));
    mI("jerr", (int64_t)jerr);
    /* without the "(file.c:line): " the client puts before its text */
    if (text != NULL && text[0] == '(' && strstr(text, "): ") != NULL) text = strstr(text, "): ") + 3;
    /* a timeout's text says whether the server's 408 or the client's own timer came first: a race, left out */
    mS("error", s != NATS_OK && s != NATS_TIMEOUT && last == s ? text : NULL);
    mclose();
}

/* E for a call that takes &jerr (in scope, reset first): the call runs before jerr is read. */
#define EJ(k, call)                 \
    do {                            \
        jerr = 0;                   \
        natsStatus s_ = (call);     \
        E(k, s_, jerr);             \
    } while (0)

static int cmpstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* {"Key": ["v1", ...], ...} sorted by key; a Nats-Time-Stamp value as "<ts>". */
static void headers(natsMsg *m) {
    const char **keys = NULL;
    int n = 0;
    fputc('{', J);
    if (natsMsgHeader_Keys(m, &keys, &n) == NATS_OK) {
        qsort(keys, n, sizeof *keys, cmpstr);
        for (int i = 0; i < n; i++) {
            const char **vals = NULL;
            int nv = 0;
            if (i) fputs(", ", J);
            jstr(keys[i]);
            fputs(": [", J);
            if (natsMsgHeader_Values(m, keys[i], &vals, &nv) == NATS_OK) {
                for (int j = 0; j < nv; j++) {
                    if (j) fputs(", ", J);
                    jstr(strcmp(keys[i], "Nats-Time-Stamp") == 0 ? "<ts>" : vals[j]);
                }
                free((void *)vals);
            }
            fputc(']', J);
        }
        free((void *)keys);
    }
    fputc('}', J);
}

/* A message as an object member list (no braces): subject, data, headers, and JetStream metadata when it has. */
static void msg_members(natsMsg *m, bool meta) {
    char data[256];
    int len = natsMsg_GetDataLength(m);
    snprintf(data, sizeof data, "%.*s", len, natsMsg_GetData(m) ? natsMsg_GetData(m) : "");
    mS("subject", natsMsg_GetSubject(m));
    mS("data", data);
    mkey("headers");
    headers(m);
    if (meta) {
        jsMsgMetaData *md = NULL;
        if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
            mU("sseq", md->Sequence.Stream);
            mU("dseq", md->Sequence.Consumer);
            mU("delivered", md->NumDelivered);
            mU("pending", md->NumPending);
            mS("stream", md->Stream);
            jsMsgMetaData_Destroy(md);
        } else {
                }
    }
}

/* A stored message (js_GetMsg, js_DirectGetMsg): its sequence too. */
static void SM(const char *k, natsMsg *m) {
    key(k);
    mopen();
    msg_members(m, false);
    mU("seq", natsMsg_GetSequence(m));
    mclose();
}

static void strlist(const char *const *v, int n) {
    fputc('[', J);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", J);
        jstr(v[i]);
    }
    fputc(']', J);
}

static void stream_info(const char *k, jsStreamInfo *si) {
    jsStreamConfig *c = si->Config;
    jsStreamState *st = &si->State;
    key(k);
    mopen();
    mS("name", c->Name);
    mS("description", c->Description);
    mkey("subjects");
    strlist(c->Subjects, c->SubjectsLen);
    mI("retention", c->Retention);
    mI("max_consumers", c->MaxConsumers);
    mI("max_msgs", c->MaxMsgs);
    mI("max_bytes", c->MaxBytes);
    mI("max_age", c->MaxAge);
    mI("max_msgs_per_subject", c->MaxMsgsPerSubject);
    mI("max_msg_size", c->MaxMsgSize);
    mI("discard", c->Discard);
    mI("storage", c->Storage);
    mI("replicas", c->Replicas);
    mB("no_ack", c->NoAck);
    mI("duplicates", c->Duplicates);
    mB("sealed", c->Sealed);
    mB("deny_delete", c->DenyDelete);
    mB("deny_purge", c->DenyPurge);
    mB("allow_rollup", c->AllowRollup);
    mB("allow_direct", c->AllowDirect);
    mB("mirror_direct", c->MirrorDirect);
    mB("discard_new_per_subject", c->DiscardNewPerSubject);
    mU("msgs", st->Msgs);
    mU("bytes", st->Bytes);
    mU("first_seq", st->FirstSeq);
    mU("last_seq", st->LastSeq);
    mI("num_subjects", st->NumSubjects);
    mU("num_deleted", st->NumDeleted);
    mI("consumers", st->Consumers);
    mclose();
}

static void consumer_info(const char *k, jsConsumerInfo *ci, bool with_name) {
    jsConsumerConfig *c = ci->Config;
    key(k);
    mopen();
    mS("stream", ci->Stream);
    if (with_name) mS("name", ci->Name);
    mS("durable", c->Durable);
    mI("deliver_policy", c->DeliverPolicy);
    mI("ack_policy", c->AckPolicy);
    mI("ack_wait", c->AckWait);
    mI("max_deliver", c->MaxDeliver);
    mS("filter_subject", c->FilterSubject);
    mI("replay_policy", c->ReplayPolicy);
    mI("max_waiting", c->MaxWaiting);
    mI("max_ack_pending", c->MaxAckPending);
    mB("flow_control", c->FlowControl);
    mI("heartbeat", c->Heartbeat);
    mB("has_deliver_subject", c->DeliverSubject != NULL);
    mU("delivered_consumer", ci->Delivered.Consumer);
    mU("delivered_stream", ci->Delivered.Stream);
    mU("ack_floor_consumer", ci->AckFloor.Consumer);
    mU("ack_floor_stream", ci->AckFloor.Stream);
    mI("num_ack_pending", ci->NumAckPending);
    mI("num_redelivered", ci->NumRedelivered);
    mI("num_waiting", ci->NumWaiting);
    mU("num_pending", ci->NumPending);
    mB("push_bound", ci->PushBound);
    mclose();
}

static const char *opname(kvOperation op) {
    switch (op) {
    case kvOp_Put: return "PUT";
    case kvOp_Delete: return "DEL";
    case kvOp_Purge: return "PURGE";
    default: return "?";
    }
}

/* A KV entry as an object (not a transcript member): key, value, revision, operation, delta. */
static void entry(kvEntry *e) {
    mopen();
    mS("key", kvEntry_Key(e));
    mS("value", kvEntry_ValueLen(e) > 0 ? kvEntry_ValueString(e) : "");
    mU("revision", kvEntry_Revision(e));
    mS("op", opname(kvEntry_Operation(e)));
    mU("delta", kvEntry_Delta(e));
    mclose();
}

/* ---------------------------------------------------------------- the scenario */

static natsConnection *nc;
static jsCtx *js;

#define CHECK(call)                                                                                        \
    do {                                                                                                   \
        natsStatus _s = (call);                                                                            \
        if (_s != NATS_OK) {                                                                               \
            fprintf(stderr, "compat: %s failed at step %s: %s (%s)\n", #call, step, natsStatus_GetText(_s), \
                    nats_GetLastError(NULL));                                                              \
            exit(2);                                                                                       \
        }                                                                                                  \
    } while (0)

static void on_alarm(int sig) {
    (void)sig;
    const char *p = step;
    (void)!write(2, "compat: watchdog at step ", 25);
    (void)!write(2, p, strlen(p));
    (void)!write(2, "\n", 1);
    _exit(3);
}

/* Responder of core.request: replies "re:<data>" with header X-Re = the request's X-Q. */
static void responder(natsConnection *c, natsSubscription *sub, natsMsg *m, void *closure) {
    (void)sub;
    (void)closure;
    char data[128];
    const char *q = NULL;
    natsMsg *r = NULL;
    snprintf(data, sizeof data, "re:%.*s", natsMsg_GetDataLength(m), natsMsg_GetData(m));
    if (natsMsg_Create(&r, natsMsg_GetReply(m), NULL, data, (int)strlen(data)) == NATS_OK) {
        if (natsMsgHeader_Get(m, "X-Q", &q) == NATS_OK) natsMsgHeader_Set(r, "X-Re", q);
        natsConnection_PublishMsg(c, r);
        natsMsg_Destroy(r);
    }
    natsMsg_Destroy(m);
}

static void core(void) {
    natsSubscription *sub = NULL, *svc = NULL, *q1 = NULL, *q2 = NULL, *plain = NULL;
    natsMsg *m = NULL, *r = NULL;
    natsStatus s;

    step = "core.headers";
    CHECK(natsConnection_SubscribeSync(&sub, nc, "c.hdr.*"));
    CHECK(natsMsg_Create(&m, "c.hdr.1", "c.reply.to", "hello", 5));
    CHECK(natsMsgHeader_Set(m, "X-A", "1"));
    CHECK(natsMsgHeader_Add(m, "X-B", "b1"));
    CHECK(natsMsgHeader_Add(m, "X-B", "b2"));
    CHECK(natsMsgHeader_Set(m, "X-C", "a: b  c"));
    CHECK(natsConnection_PublishMsg(nc, m));
    natsMsg_Destroy(m);
    CHECK(natsMsg_Create(&m, "c.hdr.2", NULL, NULL, 0)); /* headers, empty payload */
    CHECK(natsMsgHeader_Set(m, "X-Only", "yes"));
    CHECK(natsConnection_PublishMsg(nc, m));
    natsMsg_Destroy(m);
    CHECK(natsConnection_PublishString(nc, "c.hdr.3", "plain")); /* no headers at all */
    for (int i = 1; i <= 3; i++) {
        char k[32];
        snprintf(k, sizeof k, "core.hdr.msg%d", i);
        CHECK(natsSubscription_NextMsg(&m, sub, 2000));
        key(k);
        mopen();
        msg_members(m, false);
        mS("reply", natsMsg_GetReply(m));
        mclose();
        natsMsg_Destroy(m);
    }
    natsSubscription_Destroy(sub);

    step = "core.request";
    CHECK(natsConnection_Subscribe(&svc, nc, "c.svc", responder, NULL));
    CHECK(natsConnection_Flush(nc));
    CHECK(natsMsg_Create(&m, "c.svc", NULL, "ping", 4));
    CHECK(natsMsgHeader_Set(m, "X-Q", "q1"));
    s = natsConnection_RequestMsg(&r, nc, m, 2000);
    natsMsg_Destroy(m);
    if (s == NATS_OK) {
        key("core.request.reply");
        mopen();
        mB("subject_is_inbox", strncmp(natsMsg_GetSubject(r), "_INBOX.", 7) == 0);
        mS("data", natsMsg_GetData(r));
        mkey("headers");
        headers(r);
        mclose();
        natsMsg_Destroy(r);
    } else {
        E("core.request.reply", s, 0);
    }
    natsSubscription_Destroy(svc);

    step = "core.no_responders";
    r = NULL;
    s = natsConnection_RequestString(&r, nc, "c.nobody", "hi", 2000);
    E("core.no_responders", s, 0);
    if (r) natsMsg_Destroy(r);

    step = "core.queue";
    CHECK(natsConnection_QueueSubscribeSync(&q1, nc, "c.q.>", "workers"));
    CHECK(natsConnection_QueueSubscribeSync(&q2, nc, "c.q.>", "workers"));
    CHECK(natsConnection_SubscribeSync(&plain, nc, "c.q.*"));
    CHECK(natsConnection_Flush(nc));
    for (int i = 0; i < 10; i++) CHECK(natsConnection_PublishString(nc, "c.q.x", "work"));
    CHECK(natsConnection_PublishString(nc, "c.q.x.y", "deep")); /* the queue group's only */
    CHECK(natsConnection_Flush(nc));
    {
        int n1 = 0, n2 = 0, np = 0, b = 0;
        natsSubscription_GetPending(q1, &n1, &b);
        natsSubscription_GetPending(q2, &n2, &b);
        natsSubscription_GetPending(plain, &np, &b);
        I("core.queue.group_total", n1 + n2);
        I("core.queue.plain", np);
    }
    natsSubscription_Destroy(q1);
    natsSubscription_Destroy(q2);
    natsSubscription_Destroy(plain);
}

static void publish(const char *k, const char *subj, const char *data, jsPubOptions *po, const char *hk,
                    const char *hv) {
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    natsMsg *m = NULL;
    natsStatus s;
    CHECK(natsMsg_Create(&m, subj, NULL, data, (int)strlen(data)));
    if (hk) CHECK(natsMsgHeader_Set(m, hk, hv));
    s = js_PublishMsg(&pa, js, m, po, &jerr);
    natsMsg_Destroy(m);
    if (s == NATS_OK) {
        key(k);
        mopen();
        mS("stream", pa->Stream);
        mU("seq", pa->Sequence);
        mB("duplicate", pa->Duplicate);
        mclose();
        jsPubAck_Destroy(pa);
    } else {
        E(k, s, jerr);
    }
}

static void get_stream(const char *k, const char *name) {
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, js, name, NULL, &jerr);
    if (s == NATS_OK) {
        stream_info(k, si);
        jsStreamInfo_Destroy(si);
    } else {
        E(k, s, jerr);
    }
}

static void get_consumer(const char *k, const char *stream, const char *name) {
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetConsumerInfo(&ci, js, stream, name, NULL, &jerr);
    if (s == NATS_OK) {
        consumer_info(k, ci, true);
        jsConsumerInfo_Destroy(ci);
    } else {
        E(k, s, jerr);
    }
}

static void get_msg(const char *k, uint64_t seq, const char *last_subject) {
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    natsStatus s = last_subject ? js_GetLastMsg(&m, js, "CS", last_subject, NULL, &jerr)
                                : js_GetMsg(&m, js, "CS", seq, NULL, &jerr);
    if (s == NATS_OK) {
        SM(k, m);
        natsMsg_Destroy(m);
    } else {
        E(k, s, jerr);
    }
}

static void direct_get(const char *k, uint64_t seq, const char *last_by, const char *next_by) {
    natsMsg *m = NULL;
    jsDirectGetMsgOptions o;
    jsDirectGetMsgOptions_Init(&o);
    o.Sequence = seq;
    o.LastBySubject = last_by;
    o.NextBySubject = next_by;
    natsStatus s = js_DirectGetMsg(&m, js, "CS", NULL, &o);
    if (s == NATS_OK) {
        SM(k, m);
        natsMsg_Destroy(m);
    } else {
        E(k, s, 0);
    }
}

/* An ack of the given kind ("-NAK", "+WPI", "+TERM") sent as a request, as natsMsg_AckSync sends "+ACK": the server
 * answers once it processed it, so what follows sees its effect (natsMsg_Nak & co. publish and return at once, and
 * nats-server processes acks on the consumer's own goroutine: a consumer info right after may or may not see them). */
static natsStatus ack_req(natsMsg *m, const char *kind) {
    natsMsg *r = NULL;
    natsStatus s = natsConnection_RequestString(&r, nc, natsMsg_GetReply(m), kind, 2000);
    if (r) natsMsg_Destroy(r);
    return s;
}

/* k: the fetched messages, with their metadata, as a list. */
static void msg_list(const char *k, natsMsgList *list) {
    key(k);
    fputc('[', J);
    for (int i = 0; i < list->Count; i++) {
        if (i) fputs(", ", J);
        mopen();
        msg_members(list->Msgs[i], true);
        mclose();
    }
    fputc(']', J);
}

/* Fetch up to batch messages; print them (with metadata) and ack each as the scenario says:
 * 'a' AckSync, 'n' a nak (ack_req), '-' nothing. */
static void fetch(const char *k, natsSubscription *sub, int batch, int64_t timeout, const char *acks) {
    natsMsgList list = {0};
    jsErrCode jerr = 0;
    natsStatus s = natsSubscription_Fetch(&list, sub, batch, timeout, &jerr);
    if (s != NATS_OK) {
        E(k, s, jerr);
        return;
    }
    msg_list(k, &list);
    for (int i = 0; i < list.Count; i++) {
        char a = acks[i < (int)strlen(acks) ? i : (int)strlen(acks) - 1];
        if (a == 'a') CHECK(natsMsg_AckSync(list.Msgs[i], NULL, NULL));
        else if (a == 'n') CHECK(ack_req(list.Msgs[i], "-NAK"));
    }
    natsMsgList_Destroy(&list);
}

/* The push subscription's callback: keep the message's description, AckSync it. */
static pthread_mutex_t push_mu = PTHREAD_MUTEX_INITIALIZER;
static int push_n;
static char push_desc[4][320];

static void on_push(natsConnection *c, natsSubscription *sub, natsMsg *m, void *closure) {
    (void)c;
    (void)sub;
    (void)closure;
    jsMsgMetaData *md = NULL;
    char d[256] = "";
    if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
        snprintf(d, sizeof d, "%s %.*s sseq=%llu dseq=%llu delivered=%llu pending=%llu", natsMsg_GetSubject(m),
                 natsMsg_GetDataLength(m), natsMsg_GetData(m), (unsigned long long)md->Sequence.Stream,
                 (unsigned long long)md->Sequence.Consumer, (unsigned long long)md->NumDelivered,
                 (unsigned long long)md->NumPending);
        jsMsgMetaData_Destroy(md);
    }
    natsStatus s = natsMsg_AckSync(m, NULL, NULL);
    pthread_mutex_lock(&push_mu);
    if (push_n < 4) snprintf(push_desc[push_n], sizeof push_desc[0], "%s ack=%s", d, stname(s));
    push_n++;
    pthread_mutex_unlock(&push_mu);
    natsMsg_Destroy(m);
}

static void jetstream(void) {
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    natsStatus s;
    const char *subjects[] = {"cs.>"};
    const char *subjects2[] = {"cs.>", "cs2.>"};

    step = "js.stream.add";
    jsStreamConfig_Init(&cfg);
    cfg.Name = "CS";
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    s = js_AddStream(&si, js, &cfg, NULL, &jerr);
    if (s == NATS_OK) stream_info("js.stream.add", si);
    else E("js.stream.add", s, jerr);
    jsStreamInfo_Destroy(si);
    si = NULL;

    step = "js.stream.add_again";
    cfg.MaxMsgs = 10; /* a different configuration under the same name */
    s = js_AddStream(&si, js, &cfg, NULL, &jerr);
    E("js.stream.add_different", s, jerr);
    jsStreamInfo_Destroy(si);
    si = NULL;
    cfg.MaxMsgs = -1;

    step = "js.publish";
    jsPubOptions_Init(&po);
    po.MsgId = "m1";
    publish("js.pub.first", "cs.a", "one", &po, NULL, NULL);
    publish("js.pub.dup", "cs.a", "one again", &po, NULL, NULL);
    publish("js.pub.b", "cs.b", "two", NULL, "X-J", "j");
    publish("js.pub.a2", "cs.a", "three", NULL, NULL, NULL);

    step = "js.expect";
    jsPubOptions_Init(&po);
    po.ExpectLastSeq = 1;
    publish("js.expect.last_seq", "cs.c", "x", &po, NULL, NULL);
    jsPubOptions_Init(&po);
    po.ExpectLastSubjectSeq = 1;
    publish("js.expect.last_subject_seq", "cs.a", "x", &po, NULL, NULL);
    jsPubOptions_Init(&po);
    po.ExpectNoMessage = true;
    publish("js.expect.no_message", "cs.a", "x", &po, NULL, NULL);
    jsPubOptions_Init(&po);
    po.ExpectLastMsgId = "m1";
    publish("js.expect.last_msg_id", "cs.c", "x", &po, NULL, NULL);
    jsPubOptions_Init(&po);
    po.ExpectStream = "OTHER";
    publish("js.expect.stream", "cs.c", "x", &po, NULL, NULL);
    jsPubOptions_Init(&po);
    po.ExpectLastSeq = 3;
    po.ExpectStream = "CS";
    publish("js.expect.ok", "cs.c", "four", &po, NULL, NULL);
    publish("js.pub.no_stream", "nostream.x", "x", NULL, NULL, NULL);

    step = "js.stream.info";
    get_stream("js.stream.info", "CS");

    step = "js.pull";
    {
        natsSubscription *sub = NULL;
        jsConsumerInfo *ci = NULL;
        s = js_PullSubscribe(&sub, js, "cs.>", "pull1", NULL, NULL, &jerr);
        if (s != NATS_OK) {
            E("js.pull.subscribe", s, jerr);
        } else {
            /* two of the three: ack the first (AckSync), nak the second (Nak: redelivered by the next fetch) */
            fetch("js.pull.fetch1", sub, 2, 2000, "an");
            step = "js.pull.info1";
            s = natsSubscription_GetConsumerInfo(&ci, sub, NULL, &jerr);
            if (s == NATS_OK) consumer_info("js.pull.info1", ci, true);
            else E("js.pull.info1", s, jerr);
            jsConsumerInfo_Destroy(ci);
            ci = NULL;
            step = "js.pull.fetch2";
            fetch("js.pull.fetch2", sub, 5, 2000, "a");
            step = "js.pull.info2";
            get_consumer("js.pull.info2", "CS", "pull1");
            step = "js.pull.fetch_empty";
            fetch("js.pull.fetch_empty", sub, 3, 300, "-");
            step = "js.pull.unsubscribe";
            E("js.pull.unsubscribe", natsSubscription_Unsubscribe(sub), 0);
            natsSubscription_Destroy(sub);
            get_consumer("js.pull.after_unsubscribe", "CS", "pull1");
        }
    }

    step = "js.push";
    {
        natsSubscription *sub = NULL;
        jsSubOptions so;
        jsConsumerInfo *ci = NULL;
        jsSubOptions_Init(&so);
        so.ManualAck = true;
        so.Config.Durable = "push1";
        s = js_Subscribe(&sub, js, "cs.a", on_push, NULL, NULL, &so, &jerr);
        if (s != NATS_OK) {
            E("js.push.subscribe", s, jerr);
        } else {
            for (int i = 0; i < 200; i++) {
                pthread_mutex_lock(&push_mu);
                int n = push_n;
                pthread_mutex_unlock(&push_mu);
                if (n >= 2) break;
                nats_Sleep(10);
            }
            nats_Sleep(50); /* a third message would be a bug: give it the time to show */
            pthread_mutex_lock(&push_mu);
            I("js.push.count", push_n);
            key("js.push.msgs");
            strlist((const char *const[]){push_desc[0], push_desc[1]}, push_n < 2 ? push_n : 2);
            pthread_mutex_unlock(&push_mu);
            s = natsSubscription_GetConsumerInfo(&ci, sub, NULL, &jerr);
            if (s == NATS_OK) consumer_info("js.push.info", ci, true);
            else E("js.push.info", s, jerr);
            jsConsumerInfo_Destroy(ci);
            E("js.push.unsubscribe", natsSubscription_Unsubscribe(sub), 0);
            natsSubscription_Destroy(sub);
        }
    }

    step = "js.ordered";
    {
        natsSubscription *sub = NULL;
        jsSubOptions so;
        natsMsg *m = NULL;
        jsSubOptions_Init(&so);
        so.Ordered = true;
        s = js_SubscribeSync(&sub, js, "cs.>", NULL, &so, &jerr);
        if (s != NATS_OK) {
            E("js.ordered.subscribe", s, jerr);
        } else {
            key("js.ordered.msgs");
            fputc('[', J);
            for (int i = 0; i < 4; i++) {
                if (natsSubscription_NextMsg(&m, sub, 2000) != NATS_OK) break;
                if (i) fputs(", ", J);
                mopen();
                msg_members(m, true);
                mclose();
                natsMsg_Destroy(m);
            }
            fputc(']', J);
                    s = natsSubscription_NextMsg(&m, sub, 100);
            E("js.ordered.then", s, 0);
            if (s == NATS_OK) natsMsg_Destroy(m);
            jsConsumerInfo *ci = NULL;
            s = natsSubscription_GetConsumerInfo(&ci, sub, NULL, &jerr);
            if (s == NATS_OK) consumer_info("js.ordered.info", ci, false);
            else E("js.ordered.info", s, jerr);
            jsConsumerInfo_Destroy(ci);
            natsSubscription_Unsubscribe(sub);
            natsSubscription_Destroy(sub);
        }
    }

    step = "js.get";
    get_msg("js.get.1", 1, NULL);
    get_msg("js.get.2", 2, NULL);
    get_msg("js.get.last_a", 0, "cs.a");
    get_msg("js.get.missing", 99, NULL);
    get_msg("js.get.last_missing", 0, "cs.zzz");
    direct_get("js.direct.disabled", 2, NULL, NULL);

    step = "js.stream.update";
    jsStreamConfig_Init(&cfg);
    cfg.Name = "CS";
    cfg.Description = "updated";
    cfg.Subjects = subjects2;
    cfg.SubjectsLen = 2;
    cfg.Storage = js_FileStorage;
    cfg.MaxMsgsPerSubject = 5;
    cfg.AllowDirect = true;
    s = js_UpdateStream(&si, js, &cfg, NULL, &jerr);
    if (s == NATS_OK) stream_info("js.stream.update", si);
    else E("js.stream.update", s, jerr);
    jsStreamInfo_Destroy(si);
    si = NULL;
    cfg.Storage = js_MemoryStorage;
    s = js_UpdateStream(&si, js, &cfg, NULL, &jerr);
    E("js.stream.update_storage", s, jerr);
    jsStreamInfo_Destroy(si);
    si = NULL;
    cfg.Storage = js_FileStorage;
    cfg.Name = "NOPE";
    s = js_UpdateStream(&si, js, &cfg, NULL, &jerr);
    E("js.stream.update_missing", s, jerr);
    jsStreamInfo_Destroy(si);
    si = NULL;

    step = "js.direct";
    direct_get("js.direct.seq", 2, NULL, NULL);
    direct_get("js.direct.last_by", 0, "cs.a", NULL);
    direct_get("js.direct.next_by", 2, NULL, "cs.a");
    direct_get("js.direct.missing", 99, NULL, NULL);
    direct_get("js.direct.last_by_missing", 0, "cs.zzz", NULL);

    step = "js.purge";
    {
        jsOptions o;
        jsOptions_Init(&o);
        o.Stream.Purge.Subject = "cs.a";
        EJ("js.purge.filter", js_PurgeStream(js, "CS", &o, &jerr));
        get_stream("js.purge.filter.info", "CS");
        jsOptions_Init(&o);
        o.Stream.Purge.Keep = 1;
        EJ("js.purge.keep", js_PurgeStream(js, "CS", &o, &jerr));
        get_stream("js.purge.keep.info", "CS");
    }

    step = "js.errors";
    get_stream("js.err.stream_info", "NOPE");
    get_consumer("js.err.consumer_info", "CS", "nope");
    get_consumer("js.err.consumer_info_no_stream", "NOPE", "nope");
    EJ("js.err.delete_consumer", js_DeleteConsumer(js, "CS", "nope", NULL, &jerr));
    EJ("js.err.delete_stream", js_DeleteStream(js, "NOPE", NULL, &jerr));
    EJ("js.err.purge_stream", js_PurgeStream(js, "NOPE", NULL, &jerr));
    {
        natsSubscription *sub = NULL;
        jsSubOptions so;
        jsSubOptions_Init(&so);
        so.Stream = "CS";
        so.Consumer = "ghost";
        s = js_PullSubscribe(&sub, js, "cs.>", "ghost", NULL, &so, &jerr);
        E("js.err.bind_missing_consumer", s, jerr);
        if (s == NATS_OK) natsSubscription_Destroy(sub);
    }
    {
        natsMsg *m = NULL;
        s = js_GetMsg(&m, js, "NOPE", 1, NULL, &jerr);
        E("js.err.get_msg_no_stream", s, jerr);
        if (s == NATS_OK) natsMsg_Destroy(m);
    }

    step = "js.stream.delete";
    EJ("js.stream.delete", js_DeleteStream(js, "CS", NULL, &jerr));
    get_stream("js.stream.after_delete", "CS");
}

/* Stream info with the subjects (">") and the deleted sequences: {"subjects": ["subj=n", ...], "deleted": [...]}. */
static void get_stream_detail(const char *k, const char *name) {
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    jsOptions o;
    jsOptions_Init(&o);
    o.Stream.Info.SubjectsFilter = ">";
    o.Stream.Info.DeletedDetails = true;
    natsStatus s = js_GetStreamInfo(&si, js, name, &o, &jerr);
    if (s != NATS_OK) {
        E(k, s, jerr);
        return;
    }
    jsStreamState *st = &si->State;
    char items[32][128];
    const char *ptrs[32];
    int n = 0;
    for (int i = 0; st->Subjects != NULL && i < st->Subjects->Count && n < 32; i++, n++) {
        snprintf(items[n], sizeof items[n], "%s=%llu", st->Subjects->List[i].Subject,
                 (unsigned long long)st->Subjects->List[i].Msgs);
        ptrs[n] = items[n];
    }
    qsort(ptrs, n, sizeof *ptrs, cmpstr);
    key(k);
    mopen();
    mU("msgs", st->Msgs);
    mU("bytes", st->Bytes);
    mU("first_seq", st->FirstSeq);
    mU("last_seq", st->LastSeq);
    mI("num_subjects", st->NumSubjects);
    mkey("subjects");
    strlist(ptrs, n);
    mU("num_deleted", st->NumDeleted);
    mkey("deleted");
    fputc('[', J);
    for (int i = 0; i < st->DeletedLen; i++) fprintf(J, i ? ", %llu" : "%llu", (unsigned long long)st->Deleted[i]);
    fputc(']', J);
    mclose();
    jsStreamInfo_Destroy(si);
}

static void add_stream(const char *k, jsStreamConfig *cfg) {
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_AddStream(&si, js, cfg, NULL, &jerr);
    if (s == NATS_OK) stream_info(k, si);
    else E(k, s, jerr);
    jsStreamInfo_Destroy(si);
}

static void consumer_call(const char *k, bool update, const char *stream, jsConsumerConfig *cc) {
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus s = update ? js_UpdateConsumer(&ci, js, stream, cc, NULL, &jerr)
                          : js_AddConsumer(&ci, js, stream, cc, NULL, &jerr);
    if (s == NATS_OK) consumer_info(k, ci, true);
    else E(k, s, jerr);
    jsConsumerInfo_Destroy(ci);
}

/* The LIM stream: 4 messages, 1 per subject, 16 bytes each, discard new (per subject too). */
static void lim_config(jsStreamConfig *cfg, const char **subjects) {
    jsStreamConfig_Init(cfg);
    cfg->Name = "LIM";
    cfg->Subjects = subjects;
    cfg->SubjectsLen = 1;
    cfg->Storage = js_FileStorage;
    cfg->MaxMsgs = 4;
    cfg->MaxMsgsPerSubject = 1;
    cfg->MaxMsgSize = 16;
    cfg->Discard = js_DiscardNew;
    cfg->DiscardNewPerSubject = true;
}

/* Limits, message deletion, consumer management, lists, async publish and a work queue. */
static void jetstream_more(void) {
    jsStreamConfig cfg;
    jsConsumerConfig cc;
    jsErrCode jerr = 0;
    natsStatus s;
    const char *lim_subjects[] = {"lim.>"};
    const char *wq_subjects[] = {"wq.>"};

    step = "js2.limits";
    lim_config(&cfg, lim_subjects);
    add_stream("js2.lim.add", &cfg);
    publish("js2.lim.a", "lim.a", "x", NULL, NULL, NULL);
    publish("js2.lim.a_again", "lim.a", "y", NULL, NULL, NULL);
    publish("js2.lim.b", "lim.b", "x", NULL, NULL, NULL);
    publish("js2.lim.c", "lim.c", "x", NULL, NULL, NULL);
    publish("js2.lim.d", "lim.d", "x", NULL, NULL, NULL);
    publish("js2.lim.e", "lim.e", "x", NULL, NULL, NULL);
    publish("js2.lim.too_big", "lim.f", "0123456789abcdefg", NULL, NULL, NULL);

    step = "js2.delete_msg";
    EJ("js2.delete_msg", js_DeleteMsg(js, "LIM", 2, NULL, &jerr));
    EJ("js2.erase_msg", js_EraseMsg(js, "LIM", 3, NULL, &jerr));
    EJ("js2.delete_msg.again", js_DeleteMsg(js, "LIM", 2, NULL, &jerr));
    EJ("js2.delete_msg.beyond", js_DeleteMsg(js, "LIM", 99, NULL, &jerr));
    get_stream_detail("js2.lim.detail", "LIM");

    step = "js2.consumers";
    jsConsumerConfig_Init(&cc);
    cc.Durable = "dc";
    cc.FilterSubject = "lim.a";
    cc.MaxAckPending = 10;
    consumer_call("js2.consumer.add", false, "LIM", &cc);
    cc.MaxAckPending = 20;
    consumer_call("js2.consumer.update", true, "LIM", &cc);
    cc.DeliverPolicy = js_DeliverLast;
    consumer_call("js2.consumer.update_deliver_policy", true, "LIM", &cc);
    jsConsumerConfig_Init(&cc);
    cc.Durable = "other";
    cc.FilterSubject = "elsewhere.x";
    consumer_call("js2.consumer.bad_filter", false, "LIM", &cc);
    jsConsumerConfig_Init(&cc);
    cc.Durable = "ghost";
    consumer_call("js2.consumer.update_missing", true, "LIM", &cc);
    {
        jsConsumerNamesList *cl = NULL;
        jsStreamNamesList *sl = NULL;
        s = js_ConsumerNames(&cl, js, "LIM", NULL, &jerr);
        if (s == NATS_OK) {
            key("js2.consumer_names");
            qsort(cl->List, cl->Count, sizeof *cl->List, cmpstr);
            strlist((const char *const *)cl->List, cl->Count);
            jsConsumerNamesList_Destroy(cl);
        } else {
            E("js2.consumer_names", s, jerr);
        }
        s = js_StreamNames(&sl, js, NULL, &jerr);
        if (s == NATS_OK) {
            key("js2.stream_names");
            qsort(sl->List, sl->Count, sizeof *sl->List, cmpstr);
            strlist((const char *const *)sl->List, sl->Count);
            jsStreamNamesList_Destroy(sl);
        } else {
            E("js2.stream_names", s, jerr);
        }
    }

    step = "js2.sealed";
    lim_config(&cfg, lim_subjects);
    cfg.Sealed = true;
    {
        jsStreamInfo *si = NULL;
        s = js_UpdateStream(&si, js, &cfg, NULL, &jerr);
        if (s == NATS_OK) stream_info("js2.sealed.update", si);
        else E("js2.sealed.update", s, jerr);
        jsStreamInfo_Destroy(si);
    }
    EJ("js2.sealed.purge", js_PurgeStream(js, "LIM", NULL, &jerr));
    EJ("js2.sealed.delete_msg", js_DeleteMsg(js, "LIM", 1, NULL, &jerr));
    EJ("js2.lim.delete", js_DeleteStream(js, "LIM", NULL, &jerr));

    step = "js2.workqueue";
    jsStreamConfig_Init(&cfg);
    cfg.Name = "WQ";
    cfg.Subjects = wq_subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Retention = js_WorkQueuePolicy;
    add_stream("js2.wq.add", &cfg);
    for (int i = 0; i < 3; i++) {
        char data[16];
        snprintf(data, sizeof data, "job%d", i);
        CHECK(js_PublishAsync(js, "wq.job", data, (int)strlen(data), NULL));
    }
    {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = 5000;
        EJ("js2.wq.async_complete", js_PublishAsyncComplete(js, &po));
    }
    get_stream_detail("js2.wq.before", "WQ");
    {
        natsSubscription *sub = NULL;
        natsMsgList list = {0};
        s = js_PullSubscribe(&sub, js, "wq.job", "worker", NULL, NULL, &jerr);
        if (s != NATS_OK) {
            E("js2.wq.subscribe", s, jerr);
        } else {
            s = natsSubscription_Fetch(&list, sub, 3, 2000, &jerr);
            if (s == NATS_OK && list.Count == 3) {
                I("js2.wq.fetched", list.Count);
                CHECK(natsMsg_AckSync(list.Msgs[0], NULL, NULL));
                E("js2.wq.in_progress", ack_req(list.Msgs[1], "+WPI"), 0);
                E("js2.wq.term", ack_req(list.Msgs[1], "+TERM"), 0);
                /* the third stays unacknowledged */
            } else {
                E("js2.wq.fetched", s, jerr);
            }
            natsMsgList_Destroy(&list);
            jsConsumerConfig_Init(&cc);
            cc.Durable = "second";
            consumer_call("js2.wq.overlapping_consumer", false, "WQ", &cc);
            get_consumer("js2.wq.info", "WQ", "worker");
            get_stream_detail("js2.wq.after", "WQ");
            natsSubscription_Unsubscribe(sub);
            natsSubscription_Destroy(sub);
        }
    }
    EJ("js2.wq.delete", js_DeleteStream(js, "WQ", NULL, &jerr));
}

/* Pull-subscribe bound to an existing consumer of a stream. */
static natsSubscription *bind_pull(const char *k, const char *stream, const char *consumer, const char *subject,
                                   bool headers_only) {
    natsSubscription *sub = NULL;
    jsSubOptions so;
    jsErrCode jerr = 0;
    jsSubOptions_Init(&so);
    so.Stream = stream;
    so.Consumer = consumer;
    so.Config.HeadersOnly = headers_only; /* the client checks what it asks for against the consumer's */
    natsStatus s = js_PullSubscribe(&sub, js, subject, consumer, NULL, &so, &jerr);
    if (s != NATS_OK) {
        E(k, s, jerr);
        return NULL;
    }
    return sub;
}

/* natsSubscription_FetchRequest: the messages (subject + data + sseq) or the status. */
static void fetch_req(const char *k, natsSubscription *sub, int batch, int64_t max_bytes, bool no_wait,
                      int64_t expires_ms) {
    natsMsgList list = {0};
    jsFetchRequest req;
    jsFetchRequest_Init(&req);
    req.Batch = batch;
    req.MaxBytes = max_bytes;
    req.NoWait = no_wait;
    req.Expires = expires_ms * 1000000LL;
    natsStatus s = natsSubscription_FetchRequest(&list, sub, &req);
    if (s != NATS_OK) {
        E(k, s, 0);
        return;
    }
    msg_list(k, &list);
    natsMsgList_Destroy(&list);
}

static void add_consumer(const char *k, const char *stream, jsConsumerConfig *cc) {
    consumer_call(k, false, stream, cc);
}

/* Republish, rollup, deliver policies, ack all, headers only, fetch limits, deliver groups, flow control,
 * interest retention. */
static void jetstream_third(void) {
    jsStreamConfig cfg;
    jsConsumerConfig cc;
    jsErrCode jerr = 0;
    natsStatus s;
    natsSubscription *rp = NULL, *sub = NULL;
    natsMsg *m = NULL;
    const char *j3_subjects[] = {"j3.>"};
    jsRePublish rpc = {.Source = "j3.>", .Destination = "rp.>", .HeadersOnly = false};

    step = "js3.republish";
    CHECK(natsConnection_SubscribeSync(&rp, nc, "rp.>"));
    CHECK(natsConnection_Flush(nc));
    jsStreamConfig_Init(&cfg);
    cfg.Name = "J3";
    cfg.Subjects = j3_subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.AllowRollup = true;
    cfg.RePublish = &rpc;
    add_stream("js3.add", &cfg);
    publish("js3.pub.a1", "j3.a", "a1", NULL, NULL, NULL);
    publish("js3.pub.b1", "j3.b", "b1", NULL, NULL, NULL);
    publish("js3.pub.a2", "j3.a", "a2", NULL, "X-H", "h");
    publish("js3.pub.c1", "j3.c", "c1", NULL, NULL, NULL);
    key("js3.republished");
    fputc('[', J);
    for (int i = 0; i < 4; i++) {
        if (natsSubscription_NextMsg(&m, rp, 2000) != NATS_OK) break;
        if (i) fputs(", ", J);
        mopen();
        msg_members(m, false);
        mclose();
        natsMsg_Destroy(m);
    }
    fputc(']', J);
    natsSubscription_Destroy(rp);

    step = "js3.rollup";
    publish("js3.pub.rollup_sub", "j3.a", "a3", NULL, "Nats-Rollup", "sub");
    publish("js3.pub.rollup_bad", "j3.a", "a4", NULL, "Nats-Rollup", "everything");
    publish("js3.pub.ttl_disabled", "j3.a", "a4", NULL, "Nats-TTL", "1s");
    get_stream_detail("js3.after_rollup", "J3");

    step = "js3.last_per_subject";
    jsConsumerConfig_Init(&cc);
    cc.Durable = "lps";
    cc.DeliverPolicy = js_DeliverLastPerSubject;
    add_consumer("js3.lps.add_no_filter", "J3", &cc); /* 10094: needs a filter */
    cc.FilterSubject = "j3.>";
    add_consumer("js3.lps.add", "J3", &cc);
    if ((sub = bind_pull("js3.lps.bind", "J3", "lps", "j3.>", false)) != NULL) {
        fetch("js3.lps.fetch", sub, 5, 1000, "a");
        fetch_req("js3.lps.no_wait_empty", sub, 5, 0, true, 200);
        natsSubscription_Destroy(sub);
    }

    step = "js3.start_seq_ack_all";
    jsConsumerConfig_Init(&cc);
    cc.Durable = "seq2";
    cc.DeliverPolicy = js_DeliverByStartSequence;
    cc.OptStartSeq = 2;
    cc.AckPolicy = js_AckAll;
    add_consumer("js3.seq2.add", "J3", &cc);
    if ((sub = bind_pull("js3.seq2.bind", "J3", "seq2", "j3.>", false)) != NULL) {
        natsMsgList list = {0};
        s = natsSubscription_Fetch(&list, sub, 2, 1000, &jerr);
        if (s == NATS_OK) {
            I("js3.seq2.fetched", list.Count);
            CHECK(natsMsg_AckSync(list.Msgs[list.Count - 1], NULL, NULL)); /* acks all before it */
            natsMsgList_Destroy(&list);
        } else {
            E("js3.seq2.fetched", s, jerr);
        }
        get_consumer("js3.seq2.info", "J3", "seq2");
        natsSubscription_Destroy(sub);
    }

    step = "js3.headers_only";
    jsConsumerConfig_Init(&cc);
    cc.Durable = "ho";
    cc.HeadersOnly = true;
    cc.FilterSubject = "j3.b";
    add_consumer("js3.ho.add", "J3", &cc);
    if ((sub = bind_pull("js3.ho.bind", "J3", "ho", "j3.b", true)) != NULL) {
        fetch("js3.ho.fetch", sub, 1, 1000, "a");
        natsSubscription_Destroy(sub);
    }

    step = "js3.max_ack_pending";
    jsConsumerConfig_Init(&cc);
    cc.Durable = "map1";
    cc.MaxAckPending = 1;
    add_consumer("js3.map1.add", "J3", &cc);
    if ((sub = bind_pull("js3.map1.bind", "J3", "map1", "j3.>", false)) != NULL) {
        fetch("js3.map1.fetch", sub, 3, 300, "-");
        fetch_req("js3.map1.no_wait_blocked", sub, 2, 0, true, 200);
        natsSubscription_Destroy(sub);
    }

    step = "js3.max_bytes";
    jsConsumerConfig_Init(&cc);
    cc.Durable = "mb";
    add_consumer("js3.mb.add", "J3", &cc);
    if ((sub = bind_pull("js3.mb.bind", "J3", "mb", "j3.>", false)) != NULL) {
        fetch_req("js3.mb.fetch", sub, 10, 100, false, 1000);
        fetch_req("js3.mb.too_small", sub, 10, 10, false, 1000);
        natsSubscription_Destroy(sub);
    }

    step = "js3.queue";
    {
        natsSubscription *qa = NULL, *qb = NULL;
        jsSubOptions so;
        jsSubOptions_Init(&so);
        so.Queue = "grp";
        so.Config.AckPolicy = js_AckNone;
        s = js_SubscribeSync(&qa, js, "j3.>", NULL, &so, &jerr);
        if (s == NATS_OK) s = js_SubscribeSync(&qb, js, "j3.>", NULL, &so, &jerr);
        if (s != NATS_OK) {
            E("js3.queue.subscribe", s, jerr);
        } else {
            int na = 0, nb = 0, b = 0;
            for (int i = 0; i < 200 && na + nb < 3; i++) {
                nats_Sleep(10);
                natsSubscription_GetPending(qa, &na, &b);
                natsSubscription_GetPending(qb, &nb, &b);
            }
            nats_Sleep(50);
            natsSubscription_GetPending(qa, &na, &b);
            natsSubscription_GetPending(qb, &nb, &b);
            I("js3.queue.total", na + nb);
            get_consumer("js3.queue.info", "J3", "grp");
        }
        if (qa) natsSubscription_Unsubscribe(qa), natsSubscription_Destroy(qa);
        if (qb) natsSubscription_Unsubscribe(qb), natsSubscription_Destroy(qb);
    }
    step = "js3.purge_seq";
    {
        jsOptions o;
        jsOptions_Init(&o);
        o.Stream.Purge.Sequence = 5;
        EJ("js3.purge.seq", js_PurgeStream(js, "J3", &o, &jerr));
        get_stream_detail("js3.purge.seq.detail", "J3");
    }

    EJ("js3.delete", js_DeleteStream(js, "J3", NULL, &jerr));

    step = "js3.flow_control";
    {
        const char *big_subjects[] = {"big.>"};
        static char payload[512];
        memset(payload, 'p', sizeof payload);
        jsStreamConfig_Init(&cfg);
        cfg.Name = "BIG";
        cfg.Subjects = big_subjects;
        cfg.SubjectsLen = 1;
        cfg.Storage = js_FileStorage;
        add_stream("js3.big.add", &cfg);
        for (int i = 0; i < 3000; i++) CHECK(js_PublishAsync(js, "big.x", payload, sizeof payload, NULL));
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = 20000;
        EJ("js3.big.async_complete", js_PublishAsyncComplete(js, &po));
        jsSubOptions so;
        jsSubOptions_Init(&so);
        so.Ordered = true;
        s = js_SubscribeSync(&sub, js, "big.>", NULL, &so, &jerr);
        if (s != NATS_OK) {
            E("js3.big.ordered", s, jerr);
        } else {
            uint64_t n = 0, last = 0;
            bool in_order = true;
            while (n < 3000 && natsSubscription_NextMsg(&m, sub, 3000) == NATS_OK) {
                uint64_t seq = natsMsg_GetSequence(m);
                jsMsgMetaData *md = NULL;
                if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
                    seq = md->Sequence.Stream;
                    jsMsgMetaData_Destroy(md);
                }
                if (seq != last + 1) in_order = false;
                last = seq;
                n++;
                natsMsg_Destroy(m);
            }
            U("js3.big.received", n);
            U("js3.big.last_seq", last);
            key("js3.big.in_order");
            fputs(in_order ? "true" : "false", J);
            natsSubscription_Unsubscribe(sub);
            natsSubscription_Destroy(sub);
        }
        EJ("js3.big.delete", js_DeleteStream(js, "BIG", NULL, &jerr));
    }

    step = "js3.interest";
    {
        const char *int_subjects[] = {"int.>"};
        jsStreamConfig_Init(&cfg);
        cfg.Name = "INT";
        cfg.Subjects = int_subjects;
        cfg.SubjectsLen = 1;
        cfg.Storage = js_FileStorage;
        cfg.Retention = js_InterestPolicy;
        add_stream("js3.int.add", &cfg);
        publish("js3.int.before_consumer", "int.x", "lost", NULL, NULL, NULL);
        jsConsumerConfig_Init(&cc);
        cc.Durable = "ic";
        add_consumer("js3.int.consumer", "INT", &cc);
        publish("js3.int.pub1", "int.x", "kept1", NULL, NULL, NULL);
        publish("js3.int.pub2", "int.x", "kept2", NULL, NULL, NULL);
        if ((sub = bind_pull("js3.int.bind", "INT", "ic", "int.>", false)) != NULL) {
            fetch("js3.int.fetch", sub, 1, 1000, "a");
            natsSubscription_Destroy(sub);
        }
        get_stream_detail("js3.int.after_ack", "INT");
        EJ("js3.int.delete", js_DeleteStream(js, "INT", NULL, &jerr));
    }
}

static void kv_watch(const char *k, kvStore *kv, const char *keys, bool history, bool ignore_deletes, bool meta_only) {
    kvWatcher *w = NULL;
    kvEntry *e = NULL;
    kvWatchOptions o;
    kvWatchOptions_Init(&o);
    o.IncludeHistory = history;
    o.IgnoreDeletes = ignore_deletes;
    o.MetaOnly = meta_only;
    natsStatus s = kvStore_Watch(&w, kv, keys, &o);
    if (s != NATS_OK) {
        E(k, s, 0);
        return;
    }
    key(k);
    fputc('[', J);
    for (int n = 0; n < 20; n++) {
        if (kvWatcher_Next(&e, w, 2000) != NATS_OK) {
            fputs(n ? ", \"timeout\"" : "\"timeout\"", J);
            break;
        }
        if (n) fputs(", ", J);
        if (e == NULL) {
            fputs("null", J);
            break;
        }
        entry(e);
        kvEntry_Destroy(e);
    }
    fputc(']', J);
    kvWatcher_Stop(w);
    kvWatcher_Destroy(w);
}

static void kv_get(const char *k, kvStore *kv, const char *name, uint64_t rev) {
    kvEntry *e = NULL;
    natsStatus s = rev ? kvStore_GetRevision(&e, kv, name, rev) : kvStore_Get(&e, kv, name);
    if (s == NATS_OK) {
        key(k);
        entry(e);
        kvEntry_Destroy(e);
    } else {
        E(k, s, 0);
    }
}

static void kv_rev(const char *k, natsStatus s, uint64_t rev) {
    if (s == NATS_OK) U(k, rev);
    else E(k, s, 0);
}

static void kv(void) {
    kvStore *kv = NULL;
    kvConfig kc;
    uint64_t rev = 0;
    natsStatus s;

    step = "kv.create";
    kvConfig_Init(&kc);
    kc.Bucket = "CKV";
    kc.History = 5;
    s = js_CreateKeyValue(&kv, js, &kc);
    E("kv.create", s, 0);
    if (s != NATS_OK) return;
    get_stream("kv.stream", "KV_CKV");

    step = "kv.put";
    s = kvStore_PutString(&rev, kv, "a", "1");
    kv_rev("kv.put.a", s, rev);
    s = kvStore_PutString(&rev, kv, "b", "2");
    kv_rev("kv.put.b", s, rev);
    kv_get("kv.get.a", kv, "a", 0);
    kv_get("kv.get.missing", kv, "zz", 0);
    s = kvStore_UpdateString(&rev, kv, "a", "x", 5);
    kv_rev("kv.update.wrong", s, rev);
    {
        /* the KV API keeps the code to itself: what kvStore_Update publishes, with the code */
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.ExpectLastSubjectSeq = 5;
        publish("kv.update.wrong.as_publish", "$KV.CKV.a", "x", &po, NULL, NULL);
    }
    s = kvStore_UpdateString(&rev, kv, "a", "11", 1);
    kv_rev("kv.update.ok", s, rev);
    s = kvStore_CreateString(&rev, kv, "a", "x");
    kv_rev("kv.create_key.exists", s, rev);
    s = kvStore_CreateString(&rev, kv, "c", "3");
    kv_rev("kv.create_key.new", s, rev);

    step = "kv.delete";
    E("kv.delete.b", kvStore_Delete(kv, "b"), 0);
    kv_get("kv.get.deleted", kv, "b", 0);
    s = kvStore_CreateString(&rev, kv, "b", "22");
    kv_rev("kv.create_key.after_delete", s, rev);
    E("kv.purge.c", kvStore_Purge(kv, "c", NULL), 0);
    kv_get("kv.get.purged", kv, "c", 0);
    kv_get("kv.get.a_rev1", kv, "a", 1);
    kv_get("kv.get.a_rev2", kv, "a", 2); /* revision 2 is b's */

    step = "kv.history";
    {
        const char *names[] = {"a", "b", "zz"};
        for (int i = 0; i < 3; i++) {
            kvEntryList l = {0};
            char k[32];
            snprintf(k, sizeof k, "kv.history.%s", names[i]);
            s = kvStore_History(&l, kv, names[i], NULL);
            if (s != NATS_OK) {
                E(k, s, 0);
                continue;
            }
            key(k);
            fputc('[', J);
            for (int j = 0; j < l.Count; j++) {
                if (j) fputs(", ", J);
                entry(l.Entries[j]);
            }
            fputc(']', J);
            kvEntryList_Destroy(&l);
        }
    }

    step = "kv.keys";
    {
        kvKeysList l = {0};
        s = kvStore_Keys(&l, kv, NULL);
        if (s == NATS_OK) {
            key("kv.keys");
            strlist((const char *const *)l.Keys, l.Count);
            kvKeysList_Destroy(&l);
        } else {
            E("kv.keys", s, 0);
        }
    }

    step = "kv.watch";
    {
        kvWatcher *w = NULL;
        kvEntry *e = NULL;
        s = kvStore_WatchAll(&w, kv, NULL);
        if (s != NATS_OK) {
            E("kv.watch", s, 0);
        } else {
            key("kv.watch");
            fputc('[', J);
            int n = 0;
            /* initial values, then the nil marker, then the update put after it */
            for (;;) {
                s = kvWatcher_Next(&e, w, 2000);
                if (s != NATS_OK) break;
                if (n++) fputs(", ", J);
                if (e == NULL) {
                    fputs("null", J);
                    uint64_t r = 0;
                    CHECK(kvStore_PutString(&r, kv, "d", "4"));
                    continue;
                }
                entry(e);
                bool last = strcmp(kvEntry_Key(e), "d") == 0;
                kvEntry_Destroy(e);
                if (last) break;
            }
            fputc(']', J);
            E("kv.watch.end", s, 0);
            kvWatcher_Stop(w);
            kvWatcher_Destroy(w);
        }
    }

    step = "kv.watch_options";
    kv_watch("kv.watch.a_history", kv, "a", true, false, false);
    kv_watch("kv.watch.b_history_no_deletes", kv, "b", true, true, false);
    kv_watch("kv.watch.meta_only", kv, "*", false, false, true);
    kv_watch("kv.watch.none", kv, "nothing.here", false, false, false);

    step = "kv.status";
    {
        kvStatus *st = NULL;
        s = kvStore_Status(&st, kv);
        if (s == NATS_OK) {
            key("kv.status");
            mopen();
            mS("bucket", kvStatus_Bucket(st));
            mU("values", kvStatus_Values(st));
            mI("history", kvStatus_History(st));
            mI("ttl", kvStatus_TTL(st));
            mI("replicas", kvStatus_Replicas(st));
            mclose();
            kvStatus_Destroy(st);
        } else {
            E("kv.status", s, 0);
        }
    }

    step = "kv.purge_deletes";
    {
        kvPurgeOptions po;
        kvPurgeOptions_Init(&po);
        po.DeleteMarkersOlderThan = -1;
        E("kv.purge_deletes", kvStore_PurgeDeletes(kv, &po), 0);
        get_stream("kv.stream.after_purge_deletes", "KV_CKV");
    }
    kvStore_Destroy(kv);

    step = "kv.errors";
    kv = NULL;
    s = js_KeyValue(&kv, js, "NOPE");
    E("kv.err.open_missing", s, 0);
    if (s == NATS_OK) kvStore_Destroy(kv);
    E("kv.err.delete_missing", js_DeleteKeyValue(js, "NOPE"), 0);
}

static void account(void) {
    jsAccountInfo *ai = NULL;
    jsErrCode jerr = 0;
    step = "account";
    natsStatus s = js_GetAccountInfo(&ai, js, NULL, &jerr);
    if (s != NATS_OK) {
        E("js.account", s, jerr);
        return;
    }
    key("js.account");
    mopen();
    mU("memory", ai->Memory);
    mU("store", ai->Store);
    mI("streams", ai->Streams);
    mI("consumers", ai->Consumers);
    mU("api_total", ai->API.Total);
    mU("api_errors", ai->API.Errors);
    mclose();
    jsAccountInfo_Destroy(ai);
}

int main(int argc, char **argv) {
    natsOptions *opts = NULL;
    jsOptions jo;

    if (argc != 2) {
        fprintf(stderr, "usage: compat nats://host:port\n");
        return 1;
    }
    signal(SIGALRM, on_alarm);
    alarm(60);
    J = open_memstream(&jbuf, &jlen);

    step = "connect";
    CHECK(natsOptions_Create(&opts));
    CHECK(natsOptions_SetURL(opts, argv[1]));
    CHECK(natsOptions_SetName(opts, "skiff-c-compat"));
    CHECK(natsOptions_SetAllowReconnect(opts, false));
    CHECK(natsOptions_SetTimeout(opts, 5000));
    CHECK(natsConnection_Connect(&nc, opts));
    jsOptions_Init(&jo);
    jo.Wait = 5000;
    CHECK(natsConnection_JetStream(&js, nc, &jo));
    I("conn.max_payload", natsConnection_GetMaxPayload(nc));
    key("conn.headers");
    fputs(natsConnection_HasHeaderSupport(nc) == NATS_OK ? "true" : "false", J);

    core();
    jetstream();
    jetstream_more();
    jetstream_third();
    kv();
    account();

    fputs("}\n", J);
    fclose(J);
    fputs(jbuf, stdout);
    fflush(stdout);
    free(jbuf);

    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    natsOptions_Destroy(opts);
    nats_Close();
    return 0;
}
