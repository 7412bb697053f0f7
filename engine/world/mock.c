/* mock.c - the mock transport: NCCL-shaped calls between the coroutine
 * ranks of one process.
 *
 * Every call is a scheduling point. Sends and receives match FIFO per
 * (sender, receiver, communicator). Send semantics as in `ppv check`:
 * eager sends are copied and complete at once, rendezvous sends complete
 * when their receive is posted, eager:BYTES picks by size. Operations
 * between group_start and group_end are posted together at group_end and
 * the rank continues when all complete. Collectives match by
 * per-communicator sequence number; kind, root and size must agree, and
 * reductions add in communicator rank order so results never depend on
 * arrival order.
 */
#include <stdlib.h>
#include <string.h>

#include "world_internal.h"

static int eager(const ppv_world *w, const p2p_op *op) {
    const ppv_semantics *s = &w->opt.sem;
    if (w->eager_link && op->comm == w->link_comm && op->rank == w->link_from &&
        op->peer == w->link_to && op->bytes <= w->link_bytes)
        return 1; /* PPV_FAULT_EAGER */
    return s->kind == PPV_SEM_EAGER ||
           (s->kind == PPV_SEM_EAGER_BYTES && (int64_t)op->bytes <= s->eager_limit);
}

/* Copies an op's name (cut to fit) without printf's cost: every call names
 * its op. */
static void set_what(char *dst, size_t n, const char *what) {
    size_t len = strnlen(what, n - 1);
    memcpy(dst, what, len);
    dst[len] = 0;
}

static void queue_push(p2p_op **head, p2p_op **tail, p2p_op *op) {
    op->next = NULL;
    if (*tail) (*tail)->next = op;
    else *head = op;
    *tail = op;
}

static p2p_op *queue_pop(p2p_op **head, p2p_op **tail) {
    p2p_op *op = *head;
    *head = op->next;
    if (!*head) *tail = NULL;
    op->next = NULL;
    return op;
}

/* An eager copy's block: an op with room for bytes behind it, reused from
 * the received ones when one is large enough. NULL when out of memory. */
static p2p_op *msg_take(ppv_world *w, size_t bytes) {
    p2p_op **at = &w->spare_msgs;
    for (int k = 0; *at && k < 4; k++, at = &(*at)->next)
        if ((*at)->cap >= bytes) {
            p2p_op *m = *at;
            *at = m->next;
            return m;
        }
    size_t cap = bytes < 512 ? 512 : bytes;
    p2p_op *m = malloc(sizeof *m + cap);
    if (m) m->cap = cap;
    return m;
}

/* A received eager copy, kept for the next eager send. */
static void msg_release(ppv_world *w, p2p_op *m) {
    m->next = w->spare_msgs;
    w->spare_msgs = m;
}

/* Op completed: a blocking one (or an async one its rank waits for now)
 * wakes its rank; an async one not waited for is only marked done. */
static void op_done(ppv_world *w, p2p_op *op) {
    op->done = 1;
    rank_ctx *rc = &w->ranks[op->rank];
    if (op->waited && rc->some) { /* one of a wait_some's: the first wakes the rank */
        op->waited = 0;
        if (!rc->some_fired) {
            rc->some_fired = 1;
            ppv_world_complete(w, op->rank);
            return;
        }
    } else if (!op->async || op->waited) {
        ppv_world_complete(w, op->rank);
        return;
    }
    w->last_progress = w->steps;
    if (op->rank != w->current) world_after(w, op->rank, world_step(w));
}

/* Delivers send s into receive r; both are the heads of their queues. */
static int deliver(ppv_world *w, p2p_op *s, p2p_op *r) {
    if (s->bytes != r->bytes) {
        ppv_world_fail(&w->transport, r->rank,
                       "%s receives %zu bytes but rank %d's %s sends %zu (communicator %d)",
                       r->what, r->bytes, s->rank, s->what, s->bytes, r->comm);
        /* neither completes nor sits in a queue now: the world frees them
         * (a buffered send is freed by its caller) */
        r->next = w->orphans;
        w->orphans = r;
        if (!s->owned) {
            s->next = w->orphans;
            w->orphans = s;
        }
        return PPV_ERR_MISMATCH;
    }
    memcpy(r->rbuf, s->owned ? s->owned : s->sbuf, r->bytes);
    op_done(w, r);
    if (!s->owned) op_done(w, s);
    return 0;
}

/* Posts op (its rank's pending count already includes it). */
/* A message became visible on (comm, -> to): a receive from any rank
 * waiting there goes on. */
static void wake_any(ppv_world *w, int32_t comm, int32_t to) {
    rank_ctx *rc = &w->ranks[to];
    int hit = rc->any_wait && rc->any_comm == comm;
    for (int32_t j = 0; !hit && rc->any_wait && rc->some && j < rc->nsome_any; j++)
        hit = rc->some_any[j] == comm;
    if (hit) {
        rc->any_wait = 0;
        if (rc->some && rc->some_fired) return; /* a wait_some already woken */
        if (rc->some) {
            rc->some_fired = 1;
            rc->some_any_hit = comm;
        }
        ppv_world_complete(w, to);
    }
}

static int post(ppv_world *w, p2p_op *op) {
    op->step = world_step(w);
    if (op->send) {
        channel *ch = world_channel(w, op->comm, op->rank, op->peer);
        world_touch(w, PPV_TOUCH_SEND, op->comm, op->rank, op->peer, ++ch->nsends);
        if (ch->recvs && !op->held && !(ch->sends && ch->sends->held)) {
            p2p_op *r = queue_pop(&ch->recvs, &ch->recvs_tail);
            /* a rendezvous send goes on because the receive was there; an
             * eager one would have gone on anyway */
            if (!eager(w, op)) world_after(w, op->rank, r->step);
            return deliver(w, op, r);
        }
        if (eager(w, op)) {
            p2p_op *msg = msg_take(w, op->bytes); /* the copy right behind it */
            if (!msg) {
                ppv_world_fail_env(&w->transport, op->rank, "out of memory buffering a send");
                return PPV_ERR_ABORTED;
            }
            size_t cap = msg->cap;
            *msg = *op;
            msg->cap = cap;
            msg->owned = msg + 1;
            memcpy(msg->owned, op->sbuf, op->bytes);
            msg->done = 1;
            msg->async = 0;
            queue_push(&ch->sends, &ch->sends_tail, msg);
            op_done(w, op);
            if (!msg->held) wake_any(w, op->comm, op->peer);
            return 0;
        }
        queue_push(&ch->sends, &ch->sends_tail, op);
        if (!op->held) wake_any(w, op->comm, op->peer);
        return 0;
    }
    channel *ch = world_channel(w, op->comm, op->peer, op->rank);
    ch->nrecvs++;
    if (ch->sends && !ch->sends->held) {
        p2p_op *s = queue_pop(&ch->sends, &ch->sends_tail);
        world_after(w, op->rank, s->step);
        int rc = deliver(w, s, op);
        if (s->owned) msg_release(w, s); /* its copy goes with it */
        return rc;
    }
    queue_push(&ch->recvs, &ch->recvs_tail, op);
    return 0;
}

/* A finished op (from make_op) kept for the next call: every call makes
 * one, and malloc was a tenth of a control-plane run. */
static void op_release(ppv_world *w, p2p_op *op) {
    op->next = w->spare_ops;
    w->spare_ops = op;
}

/* Validates a point-to-point call and builds its op. */
static int make_op(ppv_world *w, int32_t rank, int send, const void *sbuf, void *rbuf,
                   size_t bytes, int32_t peer, int32_t comm, const char *what, p2p_op **out) {
    *out = NULL;
    if (w->aborted) return PPV_ERR_ABORTED;
    if (comm < 0 || comm >= w->ncomms || w->comms[comm].member_of[rank] < 0 || peer < 0 ||
        peer >= w->P || peer == rank || w->comms[comm].member_of[peer] < 0) {
        ppv_world_fail(&w->transport, rank, "%s: rank %d cannot %s rank %d on communicator %d",
                       what, rank, send ? "send to" : "receive from", peer, comm);
        return PPV_ERR_USAGE;
    }
    p2p_op *op = w->spare_ops;
    if (op) { /* every field is set below */
        w->spare_ops = op->next;
    } else
        op = malloc(sizeof *op);
    if (!op) {
        ppv_world_fail_env(&w->transport, rank, "out of memory");
        return PPV_ERR_ABORTED;
    }
    op->send = send;
    op->rank = rank;
    op->peer = peer;
    op->comm = comm;
    op->sbuf = sbuf;
    op->rbuf = rbuf;
    op->owned = NULL;
    op->bytes = bytes;
    op->done = 0;
    op->step = 0;
    op->held = 0;
    op->async = 0;
    op->waited = 0;
    op->next = NULL;
    set_what(op->what, sizeof op->what, what ? what : (send ? "SEND" : "RECV"));
    *out = op;
    return 0;
}

/* A single (ungrouped) op: post it and wait for it. */
static int run_op(ppv_world *w, int32_t rank, p2p_op *op) {
    rank_ctx *rc = &w->ranks[rank];
    if (rc->in_group) {
        queue_push(&rc->group, &rc->group_tail, op); /* posted at group_end */
        return 0;
    }
    rc->pending++;
    rc->waiting = op;
    int rc2 = post(w, op);
    if (rc2 == 0) rc2 = ppv_world_wait(w, rank);
    rc->waiting = NULL;
    /* a completed op left every queue; an aborted one may still sit in a
     * channel, which ppv_world_free releases */
    if (op->done) op_release(w, op);
    return rc2;
}

/* A buffered copy of buf queued to peer, as an eager send is (a
 * duplicated message's second arrival). */
static int post_copy(ppv_world *w, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                     int32_t comm, const char *what) {
    p2p_op *op;
    int rc = make_op(w, rank, 1, buf, NULL, bytes, peer, comm, what, &op);
    if (rc) return rc;
    op->step = world_step(w);
    channel *ch = world_channel(w, comm, rank, peer);
    world_touch(w, PPV_TOUCH_SEND, comm, rank, peer, ++ch->nsends);
    if (ch->recvs) { /* a receive already waits: it takes the copy now */
        p2p_op *r = queue_pop(&ch->recvs, &ch->recvs_tail);
        w->ranks[rank].pending++;
        rc = deliver(w, op, r);
        w->ranks[rank].pending--;
        if (rc == 0) op_release(w, op); /* after a mismatch the world holds it */
        return rc;
    }
    p2p_op *msg = msg_take(w, bytes); /* the copy right behind it */
    if (!msg) {
        op_release(w, op);
        ppv_world_fail_env(&w->transport, rank, "out of memory duplicating a send");
        return PPV_ERR_ABORTED;
    }
    size_t cap = msg->cap;
    *msg = *op;
    msg->cap = cap;
    op_release(w, op);
    msg->owned = msg + 1;
    memcpy(msg->owned, buf, bytes);
    msg->done = 1;
    queue_push(&ch->sends, &ch->sends_tail, msg);
    wake_any(w, comm, peer);
    return 0;
}

static int mock_send(void *impl, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                     int32_t comm, const char *what) {
    ppv_world *w = impl;
    ppv_world_switch(w, rank);
    if (w->ranks[rank].dead) return PPV_ERR_ABORTED;
    const ppv_fault *fault = &w->opt.fault;
    int hit = !w->aborted && fault->kind != PPV_FAULT_NONE && fault->kind != PPV_FAULT_CUT &&
              w->nsends == fault->message;
    world_note(w, "sends %s to rank %d (%zu bytes)%s%s", what ? what : "a message", peer, bytes,
               hit ? ": the fault hits it, " : "", hit ? ppv_fault_name(fault->kind) : "");
    w->nsends++;
    if (hit) {
        w->fault_applied = 1;
        w->last_progress = w->steps;
        switch (fault->kind) {
        case PPV_FAULT_DROP: /* the sender believes it sent */
            return w->aborted ? PPV_ERR_ABORTED : 0;
        case PPV_FAULT_KILL:
            w->ranks[rank].dead = 1;
            return PPV_ERR_ABORTED;
        case PPV_FAULT_EAGER:
            w->eager_link = 1;
            w->link_comm = comm;
            w->link_from = rank;
            w->link_to = peer;
            w->link_bytes = bytes;
            break;
        case PPV_FAULT_DELAY: {
            p2p_op *op;
            int rc = make_op(w, rank, 1, buf, NULL, bytes, peer, comm, what, &op);
            if (rc) return rc;
            op->held = 1;
            w->held = 1;
            w->release_at = w->steps + PPV_FAULT_DELAY_STEPS;
            return run_op(w, rank, op);
        }
        case PPV_FAULT_CORRUPT: {
            unsigned char *bad = malloc(bytes ? bytes : 1);
            if (!bad) {
                ppv_world_fail_env(&w->transport, rank, "out of memory corrupting a send");
                return PPV_ERR_ABORTED;
            }
            memcpy(bad, buf, bytes);
            if (bytes) bad[(size_t)fault->message % bytes] ^= 1;
            p2p_op *op;
            int rc = make_op(w, rank, 1, bad, NULL, bytes, peer, comm, what, &op);
            if (!rc) rc = run_op(w, rank, op);
            free(bad);
            return rc;
        }
        default:
            break;
        }
    }
    p2p_op *op;
    int rc = make_op(w, rank, 1, buf, NULL, bytes, peer, comm, what, &op);
    if (!rc) rc = run_op(w, rank, op);
    if (!rc && hit && fault->kind == PPV_FAULT_DUPLICATE)
        rc = post_copy(w, rank, buf, bytes, peer, comm, what);
    return rc;
}

static int mock_recv(void *impl, int32_t rank, void *buf, size_t bytes, int32_t peer,
                     int32_t comm, const char *what) {
    ppv_world *w = impl;
    ppv_world_switch(w, rank);
    if (w->ranks[rank].dead) return PPV_ERR_ABORTED;
    world_note(w, "receives %s from rank %d", what ? what : "a message", peer);
    p2p_op *op;
    int rc = make_op(w, rank, 0, NULL, buf, bytes, peer, comm, what, &op);
    return rc ? rc : run_op(w, rank, op);
}

/* ---- torch.distributed's isend and irecv ----------------------------------------- */

int world_post_async(ppv_world *w, int32_t rank, int send, const void *sbuf, void *rbuf,
                     size_t bytes, int32_t peer, int32_t comm, const char *what, int64_t *id) {
    *id = 0;
    ppv_world_switch(w, rank);
    rank_ctx *rc = &w->ranks[rank];
    if (rc->dead) return PPV_ERR_ABORTED;
    if (rc->in_group) {
        ppv_world_fail(&w->transport, rank, "%s inside an open group", what);
        return PPV_ERR_USAGE;
    }
    p2p_op *op;
    int err = make_op(w, rank, send, sbuf, rbuf, bytes, peer, comm, what, &op);
    if (err) return err;
    if (send) { /* its own block: the data copied behind the op, whatever the caller does next */
        p2p_op *big = malloc(sizeof *big + (bytes ? bytes : 1));
        if (!big) {
            op_release(w, op);
            ppv_world_fail_env(&w->transport, rank, "out of memory posting %s", what);
            return PPV_ERR_ABORTED;
        }
        *big = *op;
        op_release(w, op);
        op = big;
        memcpy(op + 1, sbuf, bytes);
        op->sbuf = op + 1;
    }
    if (rc->nasync == rc->capasync) {
        int64_t cap = rc->capasync ? 2 * rc->capasync : 16;
        p2p_op **grown = realloc(rc->async, (size_t)cap * sizeof *grown);
        if (!grown) {
            free(op);
            ppv_world_fail_env(&w->transport, rank, "out of memory posting %s", what);
            return PPV_ERR_ABORTED;
        }
        rc->async = grown;
        rc->capasync = cap;
    }
    op->async = 1;
    rc->async[rc->nasync++] = op;
    *id = rc->nasync;
    world_note(w, "posts %s %s rank %d (%zu bytes)", what, send ? "to" : "from", peer, bytes);
    if (send) {
        const ppv_fault *fault = &w->opt.fault;
        int hit = fault->kind != PPV_FAULT_NONE && fault->kind != PPV_FAULT_CUT &&
                  w->nsends == fault->message;
        w->nsends++;
        if (hit) {
            w->fault_applied = 1;
            w->last_progress = w->steps;
            world_note(w, "the fault hits it: %s", ppv_fault_name(fault->kind));
            switch (fault->kind) {
            case PPV_FAULT_DROP: op->done = 1; return 0; /* the sender believes it sent */
            case PPV_FAULT_KILL: rc->dead = 1; op->done = 1; return PPV_ERR_ABORTED;
            case PPV_FAULT_CORRUPT:
                if (bytes) ((unsigned char *)(op + 1))[(size_t)fault->message % bytes] ^= 1;
                break;
            case PPV_FAULT_DELAY:
                op->held = 1;
                w->held = 1;
                w->release_at = w->steps + PPV_FAULT_DELAY_STEPS;
                break;
            case PPV_FAULT_DUPLICATE: {
                int e = post(w, op);
                return e ? e : post_copy(w, rank, op + 1, bytes, peer, comm, what);
            }
            default: break;
            }
        }
    }
    return post(w, op);
}

/* Rank's async op id: 0 with *op (NULL once waited for), or -1. */
static int async_op(ppv_world *w, int32_t rank, int64_t id, p2p_op ***slot) {
    rank_ctx *rc = &w->ranks[rank];
    if (id < 1 || id > rc->nasync) {
        ppv_world_fail(&w->transport, rank, "no posted operation %lld on rank %d", (long long)id,
                       rank);
        return -1;
    }
    *slot = &rc->async[id - 1];
    return 0;
}

int world_wait_async(ppv_world *w, int32_t rank, int64_t id, const char *what) {
    ppv_world_switch(w, rank);
    rank_ctx *rc = &w->ranks[rank];
    if (w->aborted || rc->dead) return PPV_ERR_ABORTED;
    p2p_op **slot;
    if (async_op(w, rank, id, &slot) < 0) return PPV_ERR_USAGE;
    p2p_op *op = *slot;
    if (!op) return 0; /* waited for before */
    int err = 0;
    if (!op->done) {
        world_note(w, "waits for %s", op->what);
        set_what(op->what, sizeof op->what, what ? what : op->what);
        op->waited = 1;
        rc->pending++;
        rc->waiting = op;
        err = ppv_world_wait(w, rank);
        rc->waiting = NULL;
        op->waited = 0;
    }
    if (op->done) {
        *slot = NULL;
        free(op);
    }
    return err;
}

/* Whether a message from another member of comm is there for rank to
 * receive; each such channel is touched as a probe (for an explorer). */
static int any_there(ppv_world *w, int32_t rank, int32_t comm) {
    const world_comm *c = &w->comms[comm];
    int there = 0;
    for (int32_t k = 0; k < c->n; k++) {
        int32_t p = c->ranks[k];
        if (p == rank) continue;
        channel *ch = world_channel(w, comm, p, rank);
        world_touch(w, PPV_TOUCH_PROBE, comm, p, rank, ch->nrecvs + 1);
        there |= ch->sends && !ch->sends->held;
    }
    return there;
}

/* The first of anys[0..nany) on which a message from another member is
 * there for rank (each probed), or -1. */
static int32_t any_there_of(ppv_world *w, int32_t rank, const int32_t *anys, int32_t nany) {
    int32_t first = -1;
    for (int32_t j = 0; j < nany; j++)
        if (any_there(w, rank, anys[j]) && first < 0) first = j;
    return first;
}

int world_wait_some(ppv_world *w, int32_t rank, const int64_t *ids, int32_t n,
                    const int32_t *anys, int32_t nany, int block, double deadline,
                    const char *what, int32_t *which) {
    *which = -1;
    ppv_world_switch(w, rank);
    rank_ctx *rc = &w->ranks[rank];
    if (w->aborted || rc->dead) return PPV_ERR_ABORTED;
    if (n < 0 || n > 4096 || nany < 0 || nany > 64 || (n == 0 && nany == 0 && !(deadline >= 0))) {
        ppv_world_fail(&w->transport, rank, "%s: a wait on %d operations and %d groups",
                       what ? what : "wait", (int)n, (int)nany);
        return PPV_ERR_USAGE;
    }
    for (int32_t j = 0; j < nany; j++)
        if (anys[j] < 0 || anys[j] >= w->ncomms || w->comms[anys[j]].member_of[rank] < 0) {
            ppv_world_fail(&w->transport, rank, "%s: rank %d is not on communicator %d",
                           what ? what : "wait", rank, anys[j]);
            return PPV_ERR_USAGE;
        }
    p2p_op **ops = n ? malloc((size_t)n * sizeof *ops) : NULL;
    if (n && !ops) {
        ppv_world_fail_env(&w->transport, rank, "out of memory waiting");
        return PPV_ERR_ABORTED;
    }
    for (int32_t k = 0; k < n; k++) {
        p2p_op **slot;
        if (async_op(w, rank, ids[k], &slot) < 0) {
            free(ops);
            return PPV_ERR_USAGE;
        }
        ops[k] = *slot;
        if ((!ops[k] || ops[k]->done) && *which < 0) *which = k;
    }
    if (*which < 0 && nany > 0) {
        int32_t j = any_there_of(w, rank, anys, nany);
        if (j >= 0) *which = n + j;
    }
    int err = 0;
    if (*which < 0 && block) {
        world_note(w, "waits for the first of %d calls%s", (int)n,
                   nany ? " or a message from any rank" : "");
        for (int32_t k = 0; k < n; k++)
            ops[k]->waited = 1;
        rc->some = 1;
        rc->some_fired = 0;
        rc->some_any_hit = -1;
        rc->some_ops = ops;
        rc->nsome = n;
        rc->timed = deadline >= 0;
        rc->timed_out = 0;
        rc->deadline = deadline;
        if (nany > 0) {
            rc->any_wait = 1;
            rc->any_comm = anys[0];
            rc->some_any = anys;
            rc->nsome_any = nany;
            set_what(rc->any_what, sizeof rc->any_what, what ? what : "RECV from any");
        }
        rc->pending++;
        err = ppv_world_wait(w, rank);
        for (int32_t k = 0; k < n; k++)
            ops[k]->waited = 0;
        rc->some = rc->some_fired = rc->timed = 0;
        rc->some_ops = NULL;
        rc->nsome = 0;
        rc->some_any = NULL;
        rc->nsome_any = 0;
        rc->any_wait = 0;
        for (int32_t k = 0; k < n && *which < 0 && !rc->timed_out; k++)
            if (ops[k]->done) *which = k;
        for (int32_t j = 0; j < nany && *which < 0 && !rc->timed_out; j++)
            if (anys[j] == rc->some_any_hit) *which = n + j; /* the group a message came on */
        rc->some_any_hit = -1;
        rc->timed_out = 0;
    }
    if (err == 0 && *which >= 0 && *which < n) { /* taken, as world_wait_async takes it */
        p2p_op **slot = NULL;
        if (async_op(w, rank, ids[*which], &slot) == 0) {
            free(*slot);
            *slot = NULL;
        }
    }
    free(ops);
    return err;
}

int world_test_async(ppv_world *w, int32_t rank, int64_t id, int *done) {
    *done = 0;
    ppv_world_switch(w, rank);
    if (w->aborted || w->ranks[rank].dead) return PPV_ERR_ABORTED;
    p2p_op **slot;
    if (async_op(w, rank, id, &slot) < 0) return PPV_ERR_USAGE;
    *done = !*slot || (*slot)->done;
    return 0;
}

/* Unlinks op from the queue at *head (tail *tail): 1 if it was there. */
static int queue_remove(p2p_op **head, p2p_op **tail, p2p_op *op) {
    p2p_op *prev = NULL;
    for (p2p_op *q = *head; q; prev = q, q = q->next)
        if (q == op) {
            if (prev) prev->next = q->next;
            else *head = q->next;
            if (*tail == q) *tail = prev;
            q->next = NULL;
            return 1;
        }
    return 0;
}

void world_end_async(ppv_world *w, int32_t rank) {
    rank_ctx *rc = &w->ranks[rank];
    for (int64_t k = 0; k < rc->nasync; k++) {
        p2p_op *op = rc->async[k];
        if (!op) continue;
        if (op->done) { /* completed, never waited for */
            free(op);
        } else if (!op->send) { /* a receive nobody will read: taken back */
            channel *ch = world_channel(w, op->comm, op->peer, op->rank);
            if (queue_remove(&ch->recvs, &ch->recvs_tail, op)) free(op);
        } else {
            continue; /* a send in its channel, the channel's (receivable still) */
        }
        rc->async[k] = NULL;
    }
}

static int mock_release(ppv_world *w) {
    w->held = 0;
    w->last_progress = w->steps;
    int32_t P = w->P;
    for (int32_t c = 0; c < w->ncomms; c++)
        for (int32_t a = 0; a < P; a++)
            for (int32_t b = 0; b < P; b++) {
                channel *ch = world_channel(w, c, a, b);
                for (p2p_op *op = ch->sends; op; op = op->next) op->held = 0;
                if (ch->sends) wake_any(w, c, b);
                while (ch->sends && ch->recvs && !w->aborted) {
                    p2p_op *s = queue_pop(&ch->sends, &ch->sends_tail);
                    p2p_op *r = queue_pop(&ch->recvs, &ch->recvs_tail);
                    int rc = deliver(w, s, r);
                    if (s->owned) msg_release(w, s); /* its copy goes with it */
                    if (rc) return 0; /* a mismatch: the run has failed */
                }
            }
    return 0;
}

static int mock_probe(void *impl, int32_t rank, int32_t peer, int32_t comm, int *arrived) {
    ppv_world *w = impl;
    *arrived = 0;
    ppv_world_switch(w, rank);
    if (w->aborted || w->ranks[rank].dead) return PPV_ERR_ABORTED;
    if (comm < 0 || comm >= w->ncomms || w->comms[comm].member_of[rank] < 0 || peer < 0 ||
        peer >= w->P || peer == rank || w->comms[comm].member_of[peer] < 0) {
        ppv_world_fail(&w->transport, rank, "probe: rank %d cannot receive from rank %d on "
                       "communicator %d", rank, peer, comm);
        return PPV_ERR_USAGE;
    }
    /* every receive the rank posted has completed (it runs): the next
     * message it would find is the channel's nrecvs + 1-th */
    channel *ch = world_channel(w, comm, peer, rank);
    world_touch(w, PPV_TOUCH_PROBE, comm, peer, rank, ch->nrecvs + 1);
    *arrived = ch->sends && !ch->sends->held;
    world_note(w, "probes rank %d: %s", peer, *arrived ? "a message is there" : "nothing yet");
    return 0;
}

int world_wait_any(ppv_world *w, int32_t rank, int32_t comm, const char *what) {
    ppv_world_switch(w, rank);
    if (w->aborted || w->ranks[rank].dead) return PPV_ERR_ABORTED;
    if (comm < 0 || comm >= w->ncomms || w->comms[comm].member_of[rank] < 0) {
        ppv_world_fail(&w->transport, rank, "%s: rank %d is not on communicator %d",
                       what ? what : "receive from any rank", rank, comm);
        return PPV_ERR_USAGE;
    }
    int there = any_there(w, rank, comm);
    world_note(w, "waits for a message from any rank%s", there ? ": one is there" : "");
    if (there) return 0;
    rank_ctx *rc = &w->ranks[rank];
    rc->any_wait = 1;
    rc->any_comm = comm;
    set_what(rc->any_what, sizeof rc->any_what, what ? what : "RECV from any");
    rc->pending++;
    int r = ppv_world_wait(w, rank);
    rc->any_wait = 0;
    return r;
}

static int mock_group_start(void *impl, int32_t rank) {
    ppv_world *w = impl;
    if (w->aborted) return PPV_ERR_ABORTED;
    if (w->ranks[rank].in_group) {
        ppv_world_fail(&w->transport, rank, "group_start inside an open group");
        return PPV_ERR_USAGE;
    }
    w->ranks[rank].in_group = 1;
    return 0;
}

static int mock_group_end(void *impl, int32_t rank) {
    ppv_world *w = impl;
    rank_ctx *rc = &w->ranks[rank];
    ppv_world_switch(w, rank);
    if (w->aborted) return PPV_ERR_ABORTED;
    world_note(w, "posts its group's calls");
    if (!rc->in_group) {
        ppv_world_fail(&w->transport, rank, "group_end without group_start");
        return PPV_ERR_USAGE;
    }
    rc->in_group = 0;
    p2p_op *list = rc->group;
    rc->group = rc->group_tail = NULL;
    int err = 0;
    for (p2p_op *op = list; op; op = op->next) rc->pending++;
    rc->waiting = list;
    /* post in call order; op->next is reused by the channel queues, so walk
     * a saved chain */
    p2p_op *ops[256], **all = ops;
    size_t n = 0;
    for (p2p_op *op = list; op; op = op->next) n++;
    if (n > 256 && !(all = malloc(n * sizeof *all))) {
        ppv_world_fail_env(&w->transport, rank, "out of memory");
        return PPV_ERR_ABORTED;
    }
    n = 0;
    for (p2p_op *op = list; op; op = op->next) all[n++] = op;
    for (size_t k = 0; k < n && !err; k++) err = post(w, all[k]);
    /* report the first op not yet done while the rank waits */
    for (size_t k = 0; k < n; k++)
        if (!all[k]->done) {
            rc->waiting = all[k];
            break;
        }
    if (!err) err = ppv_world_wait(w, rank);
    rc->waiting = NULL;
    for (size_t k = 0; k < n; k++)
        if (all[k]->done) op_release(w, all[k]);
    if (all != ops) free(all);
    return err;
}

/* A collective call in words: "all-reduce 'tp all-reduce', 8 bytes". */
static void describe_call(char *buf, size_t n, int kind, const char *what, size_t bytes,
                          int32_t root) {
    static const char *const kinds[] = {"all-reduce", "broadcast", "all-gather"};
    const char *k = kind >= 0 && kind < 3 ? kinds[kind] : "collective";
    if (kind == COLL_BCAST)
        snprintf(buf, n, "%s '%.40s', %zu bytes from member %d", k, what, bytes, root);
    else
        snprintf(buf, n, "%s '%.40s', %zu bytes", k, what, bytes);
}

/* Joins rank to the next collective of comm; the last member to arrive
 * performs it. */
static int collective(ppv_world *w, int32_t rank, int kind, void *buf, const void *src,
                      size_t bytes, int32_t root, int32_t comm, const char *what) {
    ppv_world_switch(w, rank);
    if (w->aborted || w->ranks[rank].dead) return PPV_ERR_ABORTED;
    rank_ctx *rc = &w->ranks[rank];
    if (w->opt.policy.note_steps && comm >= 0 && comm < w->ncomms) {
        char name[96];
        world_comm_name(w, comm, name, sizeof name);
        world_note(w, "joins %s on %s", what, name);
    }
    if (comm < 0 || comm >= w->ncomms || w->comms[comm].member_of[rank] < 0 || rc->in_group) {
        ppv_world_fail(&w->transport, rank, "%s: rank %d is not a member of communicator %d%s",
                       what, rank, comm, rc->in_group ? " (or calls it inside a group)" : "");
        return PPV_ERR_USAGE;
    }
    world_comm *c = &w->comms[comm];
    int32_t me = c->member_of[rank];
    int64_t seq = c->seq[me]++;
    if (seq >= c->nslots) {
        if (seq >= c->capslots) {
            int64_t cap = c->capslots ? 2 * c->capslots : 64;
            while (cap <= seq)
                cap *= 2;
            coll_slot **sl = realloc(c->slots, (size_t)cap * sizeof *sl);
            if (!sl) goto oom;
            c->slots = sl;
            c->capslots = cap;
        }
        for (int64_t k = c->nslots; k <= seq; k++)
            c->slots[k] = NULL;
        c->nslots = seq + 1;
    }
    coll_slot *s = c->slots[seq];
    if (!s) {
        /* one block: the slot, then its members' arrival steps and
         * buffers */
        size_t block =
            sizeof *s + (size_t)c->n * (sizeof *s->arrive + sizeof *s->bufs + sizeof *s->src);
        if ((s = c->spare_slots)) {
            c->spare_slots = s->next_spare;
            memset(s, 0, block);
        } else if (!(s = calloc(1, block)))
            goto oom;
        s->arrive = (int64_t *)(s + 1);
        s->bufs = (void **)(s->arrive + c->n);
        s->src = (const void **)(s->bufs + c->n);
        s->kind = kind;
        s->root = root;
        s->bytes = bytes;
        s->first = me;
        set_what(s->what, sizeof s->what, what ? what : "COLLECTIVE");
        c->slots[seq] = s;
    } else if (s->kind != kind || s->root != root || s->bytes != bytes) {
        ppv_coll_mismatch *mm = &w->mismatch;
        memset(mm, 0, sizeof *mm);
        mm->seq = seq;
        mm->comm = comm;
        mm->member = me;
        mm->other = s->first;
        mm->member_rank = rank;
        mm->other_rank = c->ranks[s->first];
        mm->agreeing = s->arrived;
        mm->property = s->kind != kind ? "kind" : s->bytes != bytes ? "size" : "root";
        describe_call(mm->call, sizeof mm->call, kind, what, bytes, root);
        describe_call(mm->other_call, sizeof mm->other_call, s->kind, s->what, s->bytes, s->root);
        if (!w->aborted) w->has_mismatch = 1;
        ppv_world_fail(&w->transport, rank,
                       "collective #%lld on communicator %d: member %d (rank %d) calls %s, member "
                       "%d (rank %d) %s: the %s differs",
                       (long long)seq, comm, me, rank, mm->call, s->first, mm->other_rank,
                       mm->other_call, mm->property);
        return PPV_ERR_MISMATCH;
    }
    s->bufs[me] = buf;
    s->src[me] = src;
    s->arrive[me] = world_step(w);
    rc->pending++;
    rc->waiting_coll = s;
    rc->waiting_comm = comm;
    if (++s->arrived == c->n) {
        for (int32_t k = 0; k < c->n; k++) world_after(w, rank, s->arrive[k]);
        if (kind == COLL_ALLREDUCE) {
            size_t count = bytes / sizeof(float);
            for (size_t i = 0; i < count; i++) {
                float acc = 0.0f; /* member order, whoever arrived last */
                for (int32_t k = 0; k < c->n; k++) acc += ((float *)s->bufs[k])[i];
                for (int32_t k = 0; k < c->n; k++) ((float *)s->bufs[k])[i] = acc;
            }
        } else if (kind == COLL_BCAST) {
            for (int32_t k = 0; k < c->n; k++)
                if (k != root) memcpy(s->bufs[k], s->bufs[root], bytes);
        } else {
            for (int32_t k = 0; k < c->n; k++)
                for (int32_t j = 0; j < c->n; j++)
                    memcpy((char *)s->bufs[k] + (size_t)j * bytes, s->src[j], bytes);
        }
        s->done = 1;
        for (int32_t k = 0; k < c->n; k++) ppv_world_complete(w, c->ranks[k]);
    }
    int err = ppv_world_wait(w, rank);
    c = &w->comms[comm]; /* a rank may have added a communicator meanwhile (ppv_ext_new_group) */
    rc->waiting_coll = NULL;
    if (s->done && ++s->departed == c->n) { /* everyone has left it: recycle */
        c->slots[seq] = NULL;
        s->next_spare = c->spare_slots;
        c->spare_slots = s;
    }
    return err;
oom:
    ppv_world_fail_env(&w->transport, rank, "out of memory");
    return PPV_ERR_ABORTED;
}

static int mock_allreduce_f32(void *impl, int32_t rank, float *buf, size_t count, int32_t comm,
                              const char *what) {
    return collective(impl, rank, COLL_ALLREDUCE, buf, NULL, count * sizeof(float), -1, comm,
                      what ? what : "ALLREDUCE");
}

static int mock_broadcast(void *impl, int32_t rank, void *buf, size_t bytes, int32_t root,
                          int32_t comm, const char *what) {
    ppv_world *w = impl;
    if (comm >= 0 && comm < w->ncomms && (root < 0 || root >= w->comms[comm].n)) {
        ppv_world_fail(&w->transport, rank, "broadcast root %d is outside communicator %d", root,
                       comm);
        return PPV_ERR_USAGE;
    }
    return collective(w, rank, COLL_BCAST, buf, NULL, bytes, root, comm, what ? what : "BCAST");
}

static int mock_allgather(void *impl, int32_t rank, const void *send, void *recv, size_t bytes,
                          int32_t comm, const char *what) {
    return collective(impl, rank, COLL_ALLGATHER, recv, send, bytes, -1, comm,
                      what ? what : "ALLGATHER");
}

static int mock_abort(void *impl, int32_t rank, const char *why) {
    ppv_world *w = impl;
    ppv_world_fail(&w->transport, rank, "aborted: %s", why ? why : "(no reason)");
    return 0;
}

static int mock_async_error(void *impl, int32_t rank) {
    (void)rank;
    return ((ppv_world *)impl)->aborted ? PPV_ERR_ABORTED : 0;
}

static void mock_fail(void *impl, int32_t rank, int env, const char *msg) {
    ppv_world_abort_with(impl, rank, env, msg);
}

static int mock_mismatch(void *impl, ppv_coll_mismatch *out) {
    ppv_world *w = impl;
    if (!w->has_mismatch) return 0;
    *out = w->mismatch;
    return 1;
}

static void mock_progress(void *impl, int32_t rank) {
    ppv_world *w = impl;
    (void)rank;
    w->last_progress = w->steps;
}

static void mock_yield(void *impl, int32_t rank) {
    ppv_world *w = impl;
    ppv_world_switch(w, rank);
    world_note(w, "polls again");
}

/* Virtual time: a microsecond for every scheduler step taken. */
static int64_t mock_clock_ns(void *impl) {
    const ppv_world *w = impl;
    return w->steps * 1000;
}

static const ppv_transport_ops mock_ops = {
    .send = mock_send,
    .recv = mock_recv,
    .group_start = mock_group_start,
    .group_end = mock_group_end,
    .allreduce_f32 = mock_allreduce_f32,
    .broadcast = mock_broadcast,
    .allgather = mock_allgather,
    .abort = mock_abort,
    .async_error = mock_async_error,
    .probe = mock_probe,
    .fail = mock_fail,
    .mismatch = mock_mismatch,
    .progress = mock_progress,
    .yield = mock_yield,
    .clock_ns = mock_clock_ns,
};

ppv_world *ppv_world_new(const ppv_world_options *opt, char *err, size_t errlen) {
    ppv_world *w = ppv_world_make(opt, err, errlen);
    if (!w) return NULL;
    w->transport.ops = &mock_ops;
    w->release = mock_release;
    return w;
}
