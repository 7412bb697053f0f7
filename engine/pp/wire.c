/* wire.c - frames on the transport: header, metadata text, tensors. A
 * receiver allocates only from the specs its metadata announces, and
 * refuses a bad header or metadata before it waits for anything more. */
#include <stdlib.h>
#include <string.h>

#include "pp_internal.h"

void pp_received_free(pp_received *m) {
    if (m->meta != m->small) free(m->meta);
    m->meta = NULL;
    m->norder = 0;
}

int pp_send_frame(ppv_transport *t, int32_t rank, int32_t peer, const ppv_frame *f,
                  const char *what) {
    int rc = t->ops->send(t->impl, rank, f->header, sizeof f->header, peer, 0, what);
    if (rc || !f->meta) return rc;
    if ((rc = t->ops->send(t->impl, rank, f->meta, (size_t)f->header[6], peer, 0, what)))
        return rc;
    for (int k = 0; k < f->ntensors; k++)
        if ((rc = t->ops->send(t->impl, rank, f->tensors[k]->data,
                               ppv_tensor_bytes(f->tensors[k]), peer, 0, what)))
            return rc;
    return 0;
}

/* The metadata text announced by m->header, received from peer (p2p) or
 * from the broadcast (comm >= 0). */
static int recv_meta(ppv_transport *t, int32_t rank, int32_t peer, int32_t comm, pp_received *m,
                     ppv_failure *mode, char *msg, size_t msglen) {
    int64_t n = m->header[6];
    if (n <= 0) return 0;
    if (n > (int64_t)1 << 20) {
        *mode = PPV_FAIL_FIELD;
        snprintf(msg, msglen, "a header announces %lld bytes of metadata (at most 1 MiB)",
                 (long long)n);
        return 0;
    }
    if ((size_t)n < sizeof m->small) { /* most metadata: no allocation */
        m->meta = m->small;
        m->meta[n] = 0;
    } else if (!(m->meta = calloc((size_t)n + 1, 1))) {
        *mode = PPV_FAIL_FIELD;
        snprintf(msg, msglen, "out of memory");
        return 0;
    }
    return comm >= 0 ? t->ops->broadcast(t->impl, rank, m->meta, (size_t)n, 0, comm, "meta")
                     : t->ops->recv(t->impl, rank, m->meta, (size_t)n, peer, 0, "meta");
}

static int recv_tensors(ppv_transport *t, int32_t rank, int32_t peer, int32_t comm,
                        pp_received *m) {
    for (int k = 0; k < m->norder; k++) {
        int rc = comm >= 0 ? t->ops->broadcast(t->impl, rank, m->order[k]->data,
                                               ppv_tensor_bytes(m->order[k]), 0, comm, "tensor")
                           : t->ops->recv(t->impl, rank, m->order[k]->data,
                                          ppv_tensor_bytes(m->order[k]), peer, 0, "tensor");
        if (rc) return rc;
    }
    return 0;
}

int pp_recv_envelope(ppv_transport *t, int32_t rank, int32_t peer, pp_received *m,
                     ppv_envelope *e, ppv_failure *mode, char *msg, size_t msglen) {
    *mode = PPV_FAIL_NONE;
    memset(m->header, 0, sizeof m->header);
    m->meta = NULL;
    m->norder = 0;
    int rc = t->ops->recv(t->impl, rank, m->header, sizeof m->header, peer, 0, "envelope header");
    if (rc) return rc;
    if ((rc = recv_meta(t, rank, peer, -1, m, mode, msg, msglen)) || *mode) return rc;
    *mode = ppv_envelope_unframe(m->header, m->meta, e, m->order, &m->norder, msg, msglen);
    if (*mode) return 0;
    return recv_tensors(t, rank, peer, -1, m);
}

int pp_recv_result(ppv_transport *t, int32_t rank, int32_t peer, pp_received *m, ppv_result *res,
                   ppv_failure *mode, char *msg, size_t msglen) {
    *mode = PPV_FAIL_NONE;
    memset(m->header, 0, sizeof m->header);
    m->meta = NULL;
    m->norder = 0;
    int rc = t->ops->recv(t->impl, rank, m->header, sizeof m->header, peer, 0, "result header");
    if (rc) return rc;
    if ((rc = recv_meta(t, rank, peer, -1, m, mode, msg, msglen)) || *mode) return rc;
    *mode = ppv_result_unframe(m->header, m->meta, res, m->order, &m->norder, msg, msglen);
    if (*mode) return 0;
    return recv_tensors(t, rank, peer, -1, m);
}

int pp_bcast_send(ppv_transport *t, int32_t rank, int32_t comm, pp_received *m) {
    int rc = t->ops->broadcast(t->impl, rank, m->header, sizeof m->header, 0, comm, "header");
    if (rc) return rc;
    if (m->header[6] > 0 &&
        (rc = t->ops->broadcast(t->impl, rank, m->meta, (size_t)m->header[6], 0, comm, "meta")))
        return rc;
    return recv_tensors(t, rank, -1, comm, m);
}

int pp_bcast_recv(ppv_transport *t, int32_t rank, int32_t comm, pp_received *m, ppv_envelope *e,
                  ppv_failure *mode, char *msg, size_t msglen) {
    *mode = PPV_FAIL_NONE;
    memset(m->header, 0, sizeof m->header);
    m->meta = NULL;
    m->norder = 0;
    int rc = t->ops->broadcast(t->impl, rank, m->header, sizeof m->header, 0, comm, "header");
    if (rc) return rc;
    if (m->header[0] == PPV_PP_ERROR || m->header[0] == PPV_PP_SHUTDOWN) return 0;
    if ((rc = recv_meta(t, rank, -1, comm, m, mode, msg, msglen)) || *mode) return rc;
    *mode = ppv_envelope_unframe(m->header, m->meta, e, m->order, &m->norder, msg, msglen);
    if (*mode) return 0;
    return recv_tensors(t, rank, -1, comm, m);
}
