/* fuzz_frame.c - libFuzzer harness for the receiver's side of the wire
 * framing (ppv_envelope_unframe, ppv_result_unframe; engine/pp/wire.c).
 *
 * The input is a frame as it travels: the header's PPV_FRAME_HEADER int64
 * words (56 bytes, host byte order), then the metadata text. The harness
 * receives it as wire.c does: a header that announces more than 1 MiB of
 * metadata is refused before unframe; otherwise exactly header[6] bytes
 * arrive (the input's, zero-padded when it is shorter) into a buffer of
 * header[6] + 1 zeroed bytes, and none when header[6] <= 0. Each input is
 * unframed as an envelope and as a result, with the header as given and,
 * when it announces another length, as a sender that announces what it
 * sends would have framed it (header[6] = the metadata's length), so that
 * mutated metadata is not all refused on its length.
 *
 * After a message is accepted: the order of tensors matches the header,
 * the receiver's next checks run, and a message that passes them frames
 * again (the contract's anti-stranding rule: what was accepted can be
 * sent), and reads back to the same fields, tensors and text.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ppv_engine.h"

#define META_MAX ((int64_t)1 << 20) /* wire.c's recv_meta limit */

#define SAME_INT(a, b) ((a) == (b))
#define SAME_BOOL(a, b) ((a) == (b))
#define SAME_FLOAT(a, b) (memcmp(&(a), &(b), sizeof(double)) == 0)
#define SAME_STR(a, b) (strcmp((a), (b)) == 0)

static int same_tensor(const ppv_tensor *a, const ppv_tensor *b) {
    return !a->data == !b->data && (!a->data || (a->dtype == b->dtype && a->rank == b->rank &&
                                                 memcmp(a->dims, b->dims, sizeof a->dims) == 0));
}

/* The tensors unframe listed: as many as the header announced, each
 * allocated. */
static void check_order(const int64_t *header, ppv_tensor **order, int norder) {
    HARNESS_CHECK(norder == header[4], "%d tensors listed, the header says %lld", norder,
                  (long long)header[4]);
    for (int k = 0; k < norder; k++)
        HARNESS_CHECK(order[k] && order[k]->data, "tensor %d of the order is missing", k);
}

/* Frames e, reads it back and frames that again: the same fields and
 * tensors, the same text. */
static void envelope_round_trip(const ppv_envelope *e, const ppv_contract_order *o) {
    ppv_frame f, g;
    char msg[1024] = "";
    ppv_failure rc = ppv_envelope_frame(e, o, &f, msg, sizeof msg);
    HARNESS_CHECK(rc == PPV_FAIL_NONE, "an envelope that passed its check cannot be framed: %s",
                  msg);
    ppv_envelope e2;
    ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
    int norder = 0;
    rc = ppv_envelope_unframe(f.header, f.meta, &e2, order, &norder, msg, sizeof msg);
    HARNESS_CHECK(rc == PPV_FAIL_NONE, "ppv cannot unframe the envelope it framed: %s\n%s", msg,
                  f.meta ? f.meta : "(no metadata)");
    check_order(f.header, order, norder);
#define PPV_ENV_FIELD(name, kind, when)                                                            \
    HARNESS_CHECK(SAME_##kind(e->name, e2.name), "%s differs when framed again", #name);
#define PPV_ENV_TENSOR(name, dtype, rank, when)                                                    \
    HARNESS_CHECK(same_tensor(&e->name, &e2.name), "%s differs when framed again", #name);
#include "contract.def"
#undef PPV_ENV_FIELD
#undef PPV_ENV_TENSOR
    rc = ppv_envelope_frame(&e2, o, &g, msg, sizeof msg);
    HARNESS_CHECK(rc == PPV_FAIL_NONE && memcmp(f.header, g.header, sizeof f.header) == 0 &&
                      !f.meta == !g.meta && (!f.meta || strcmp(f.meta, g.meta) == 0),
                  "framing is not canonical: '%s' then '%s'", f.meta ? f.meta : "",
                  g.meta ? g.meta : "");
    ppv_frame_free(&g);
    ppv_frame_free(&f);
    ppv_envelope_free_tensors(&e2);
}

static void result_round_trip(const ppv_result *r) {
    ppv_frame f, g;
    char msg[1024] = "";
    ppv_failure rc = ppv_result_frame(r, &f, msg, sizeof msg);
    HARNESS_CHECK(rc == PPV_FAIL_NONE, "a result that was accepted cannot be framed: %s", msg);
    ppv_result r2;
    ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
    int norder = 0;
    rc = ppv_result_unframe(f.header, f.meta, &r2, order, &norder, msg, sizeof msg);
    HARNESS_CHECK(rc == PPV_FAIL_NONE, "ppv cannot unframe the result it framed: %s\n%s", msg,
                  f.meta ? f.meta : "(no metadata)");
    check_order(f.header, order, norder);
    /* a field that travels only when ok is not framed when !ok */
    int travels_ALWAYS = 1, travels_OK = r->ok, travels_INFER = 1;
    (void)travels_INFER;
#define PPV_RES_FIELD(name, kind, when)                                                            \
    HARNESS_CHECK(!travels_##when || SAME_##kind(r->name, r2.name),                                \
                  "%s differs when framed again", #name);
#define PPV_RES_TENSOR(name, dtype, rank, when)                                                    \
    HARNESS_CHECK(same_tensor(&r->name, &r2.name), "%s differs when framed again", #name);
#include "contract.def"
#undef PPV_RES_FIELD
#undef PPV_RES_TENSOR
    (void)travels_ALWAYS;
    rc = ppv_result_frame(&r2, &g, msg, sizeof msg);
    HARNESS_CHECK(rc == PPV_FAIL_NONE && memcmp(f.header, g.header, sizeof f.header) == 0 &&
                      strcmp(f.meta, g.meta) == 0,
                  "framing is not canonical: '%s' then '%s'", f.meta, g.meta ? g.meta : "");
    ppv_frame_free(&g);
    ppv_frame_free(&f);
    ppv_result_free_tensors(&r2);
}

/* Unframes one received frame both ways and checks what follows. */
static void receive(const int64_t *header, const char *meta) {
    char msg[1024];
    ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
    int norder = -1;

    ppv_envelope e;
    ppv_failure rc = ppv_envelope_unframe(header, meta, &e, order, &norder, msg, sizeof msg);
    HARNESS_CHECK(rc >= PPV_FAIL_NONE && rc < PPV_FAIL_COUNT, "failure mode %d", (int)rc);
    if (rc == PPV_FAIL_NONE) {
        check_order(header, order, norder);
        /* the leader's next step: the contract's rules, from a fresh start
         * and once more after it (call_id must then have risen) */
        ppv_contract_order o = ppv_contract_order_start();
        if (ppv_envelope_check(&e, &o, msg, sizeof msg) == PPV_FAIL_NONE) {
            envelope_round_trip(&e, &o);
            ppv_contract_order_advance(&o, &e);
            HARNESS_CHECK(ppv_envelope_check(&e, &o, msg, sizeof msg) == PPV_FAIL_ORDER,
                          "the same envelope twice is not an order failure");
        }
    }
    ppv_envelope_free_tensors(&e);

    ppv_result r;
    norder = -1;
    rc = ppv_result_unframe(header, meta, &r, order, &norder, msg, sizeof msg);
    HARNESS_CHECK(rc >= PPV_FAIL_NONE && rc < PPV_FAIL_COUNT, "failure mode %d", (int)rc);
    if (rc == PPV_FAIL_NONE) {
        check_order(header, order, norder);
        /* stage 0's next step, as if it had sent the envelope this
         * result answers */
        ppv_envelope sent;
        ppv_envelope_init(&sent);
        sent.call_id = r.call_id;
        sent.chunk_index = r.chunk_index;
        sent.cache_epoch = r.cache_epoch;
        sent.expected_generator_calls = r.observed_generator_calls;
        memcpy(sent.latents_in.dims, r.latents_out.dims, sizeof sent.latents_in.dims);
        ppv_failure mode;
        ppv_result_verdict v =
            ppv_result_check(&r, &sent, r.cache_epoch, -1, &mode, msg, sizeof msg);
        HARNESS_CHECK(v >= PPV_RESULT_ACCEPT && v <= PPV_RESULT_REJECT, "verdict %d", (int)v);
        result_round_trip(&r);
    }
    ppv_result_free_tensors(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int64_t header[PPV_FRAME_HEADER];
    if (size < sizeof header) return 0; /* the transport delivers whole headers */
    memcpy(header, data, sizeof header);
    const char *text = (const char *)data + sizeof header;
    size_t len = size - sizeof header;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* a sender that announces what it sends */
            if ((int64_t)len == header[6] || (int64_t)len > META_MAX) break;
            header[6] = (int64_t)len;
        }
        int64_t n = header[6];
        if (n > META_MAX) continue; /* refused before unframe */
        char *meta = NULL;
        if (n > 0) {
            meta = calloc((size_t)n + 1, 1);
            HARNESS_CHECK(meta != NULL, "out of memory");
            memcpy(meta, text, len < (size_t)n ? len : (size_t)n);
        }
        receive(header, meta);
        free(meta);
    }
    return 0;
}
