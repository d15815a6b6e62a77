"""A consumer's delivery of a run of new messages to one client's plain subscription: the path every busy push
and pull consumer takes (issue #13), with the one-message path's per-message work done once per run.

``RunDelivery`` is a base of :class:`~.delivery.Delivery` (delivery.py, which picks between this path and the
one-message path and holds the state both use).
"""
from __future__ import annotations

from skiff.protocol.encoder import CRLF, msg_parts


class RunDelivery:
    """The run path of ``Delivery`` (its attributes: ``c``, ``core``, and the consumer's parts)."""

    def _send_run(self, room: int) -> int:
        """Deliver a run of new messages, at most ``room``, to a destination that is one client's plain
        subscription; how many went out.  0 means "not here": a redelivery or a last-per-subject list to serve, a
        pacer, headers_only, a single literal filter or a filter whose last look missed, a pull queue of
        other than one request without a byte budget, a destination with queue groups, several subscribers, an
        internal subscriber or a route, or no message at ``sseq``; the one-message path then takes the next message
        and handles every such case.

        A run is the one-message path's work with its per-message parts done once: one store call for the
        messages (``load_run``: consecutive sequences from ``sseq``, up to the first the filters do not select,
        checked from the store's index once per subject), one clock read, one destination lookup, the
        frames appended to the client's output as ``Server.route`` does for a plain subscriber (head per subject,
        tail per message: encoder.msg_parts' layout), pending entries added in stream order, the consumer store told
        once (``update_delivered_run``), the ack timer and the stream's set of consumers with pending messages told
        once.  Nothing in a run calls out to other code that could publish into the stream or change this consumer
        (no route, no callback), so doing the bookkeeping after the frames changes nothing anyone can see; a
        flow-control request goes out between the frames exactly where the one-message path sends it."""
        c = self.c
        core = self.core
        if c.pacer is not None or core.rdq or c.lss or room < 2:
            return 0
        cfg = c._config
        if cfg.headers_only:
            return 0
        accept = None
        fs = c.filters
        if fs:  # even one that is the stream's only subject: older messages may be on others
            if self.probe_miss or (len(fs) == 1 and fs[0] in c.literal):
                # A filter whose last look missed, or one literal subject: the store's filtered search finds
                # the next message (_load_next), a run would end at the first message of another subject.
                return 0
            pre = c.fwc_prefix
            accept = (lambda subj: subj.startswith(pre)) if pre is not None else c.matches
        policy = core.ack_policy
        track = policy != "none"
        if not track and c.stream.config.retention != "limits":
            return 0  # each delivery is an ack there (ConsumerSet.ack_msg per message)
        pending = core.pending
        maxp = core.maxp
        if maxp > 0:
            room = min(room, maxp - len(pending))
            if room < 2:
                return 0
        clock = c.clock
        pull = c.pull
        wr = None
        if pull is None:
            dsubj = cfg.deliver_subject
        else:
            q = pull.waiting.q
            if len(q) != 1 or pull.priority is not None:
                return 0
            wr = q[0]
            if wr.b > 0 or wr.n < 2 or (wr.expires and clock.monotonic() >= wr.expires):
                return 0
            if wr.n < room:
                room = wr.n
            dsubj = wr.reply
        srv = c.server
        dest = self.dest.valid(srv)
        r = dest.cache.get(dsubj)
        if r is None:
            r = dest.match(dsubj)
        plain, queues = r
        if queues or len(plain) != 1:
            return 0
        sub = plain[0]
        conn = sub.conn
        if conn is None or conn.closed or sub.max_msgs or conn.replies is not None or conn.deny_delivery:
            return 0
        sseq = core.sseq
        if pending and next(reversed(pending)) >= sseq:
            return 0  # new deliveries keep pending in stream order (ConsumerCore.deliver)
        msgs = c.stream.store.load_run(sseq, room, accept)
        if not msgs:
            return 0
        np = c.num_pending()  # left to deliver from sseq on: the first of the run is one of them
        headers = conn.headers
        push = c.push
        fc = push is not None and push.maxpb > 0
        fc_acks = fc and policy == "flow_control"
        ack_pre = c.ack_pre
        ack_pre_b = ack_pre.encode("utf-8", "surrogateescape")
        # The ack reply and sizes as a str f-string, encoded: 0.39 us a message against 0.69 for bytes %-formatting
        # (timeit).  An ASCII ack prefix only (str.encode() then needs no error handler); else the bytes format.
        fast = not fc and ack_pre.isascii()
        pre1 = f" {ack_pre}1."
        sid = sub.sid_b
        out = conn.out
        if not out:
            srv.mark_pending(conn)
        now = clock.time_ns()
        dseq0 = dseq = core.dseq
        subject = None
        head = hhead = b""  # "MSG <subject> " / "HMSG <subject> " of the current subject (hhead: when needed)
        nbytes = 0
        if fast:
            # The common run (no flow control, an ASCII ack prefix): the loop below without its branches, the
            # record unpacked once (StoredMsg's field order: tests/jetstream/test_delivery_runs.py).
            for sm in msgs:
                subj, seq, ts, hdr, data = sm
                if hdr and not headers:
                    break  # the payload alone, re-counted: Server._deliver's case
                if subj is not subject:
                    subject = subj
                    head = msg_parts(subj, "", 0, 0)[0]
                    hhead = b""
                np -= 1
                if hdr:
                    if not hhead:
                        hhead = msg_parts(subj, "", 1, 0)[0]
                    hl = len(hdr)
                    size = hl + len(data)
                    out += (hhead, sid, f"{pre1}{seq}.{dseq}.{ts}.{np} {hl} {size}\r\n".encode(), hdr, data, CRLF)
                else:
                    size = len(data)
                    out += (head, sid, f"{pre1}{seq}.{dseq}.{ts}.{np} {size}\r\n".encode(), data, CRLF)
                nbytes += size
                if track:
                    pending[seq] = [dseq, now]
                dseq += 1
        else:
            for sm in msgs:
                hdr = sm.hdr
                if hdr and not headers:
                    break
                subj = sm.subject
                if subj is not subject:
                    subject = subj
                    head = msg_parts(subj, "", 0, 0)[0]
                    hhead = b""
                seq = sm.seq
                np -= 1
                data = sm.data
                if hdr:
                    if not hhead:
                        hhead = msg_parts(subj, "", 1, 0)[0]
                    hl = len(hdr)
                    size = hl + len(data)
                    if fc:
                        num = b"1.%d.%d.%d.%d" % (seq, dseq, sm.ts, np)
                        out += (hhead, sid, b" %s%s %d %d\r\n" % (ack_pre_b, num, hl, size), hdr, data, CRLF)
                    else:
                        out += (hhead, sid, b" %s1.%d.%d.%d.%d %d %d\r\n" % (ack_pre_b, seq, dseq, sm.ts, np, hl,
                                                                             size), hdr, data, CRLF)
                else:
                    size = len(data)
                    if fc:
                        num = b"1.%d.%d.%d.%d" % (seq, dseq, sm.ts, np)
                        out += (head, sid, b" %s%s %d\r\n" % (ack_pre_b, num, size), data, CRLF)
                    else:
                        out += (head, sid, b" %s1.%d.%d.%d.%d %d\r\n" % (ack_pre_b, seq, dseq, sm.ts, np, size),
                                data, CRLF)
                nbytes += size
                if track:
                    pending[seq] = [dseq, now]
                dseq += 1
                if fc:
                    psz = len(subj) + len(ack_pre) + len(num) + size
                    push.pbytes += psz
                    if push.fcid or fc_acks or push.pbytes > push.maxpb // 2:
                        core.dseq, core.sseq = dseq, seq + 1  # what the request's wait and a heartbeat would report
                        push.need_flow_control(psz)  # after the message, as nats-server deliverMsg
                        if push.pbytes > push.maxpb:
                            break  # PushDelivery.can_send: the window is full
        n = dseq - dseq0
        if n == 0:
            return 0
        run = msgs if n == len(msgs) else msgs[:n]
        last = run[-1].seq
        core.dseq, core.sseq = dseq, last + 1
        if track:
            if len(pending) == n:
                c.cset.has_pending(c)  # pending was empty: the consumer joins the set once (see _send)
            c.ack_timer.watch(sseq)
        else:
            core.adflr, core.asflr = dseq - 1, last
        if c.npc >= 0:
            c.npc = np
        c.state.delivered_run(dseq0, run)
        c.ldt = now
        conn.out_bytes += nbytes
        conn.out_msgs += n
        sub.delivered += n
        dest.hits += n
        if wr is not None:
            wr.d += n
            wr.n -= n
            if wr.n <= 0:
                del pull.waiting.q[0]
            elif wr.hb:
                wr.hbt = clock.monotonic() + wr.hb
            idle = c.idle
            if idle is not None and idle.thresh > 0:
                pull.waiting.last = clock.monotonic()
        return n
