/* make_frame_seeds.c - writes the frame harness's seeds into the folder
 * named on the command line: frames as ppv_envelope_frame and
 * ppv_result_frame build them (header words, then the metadata text; the
 * tensor payloads, which unframe never reads, are left out). Build with
 * `cmake --build BUILD --target fuzz_frame_seeds`, then run
 * `BUILD/fuzz/harness/fuzz_frame_seeds tests/data/fuzz/frame/seed`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppv_engine.h"

static char payload[1]; /* framing looks only at whether a tensor is there */

static void set_tensor(ppv_tensor *t, ppv_dtype dtype, int rank, const int64_t *dims) {
    t->dtype = dtype;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    t->data = payload;
}

/* Writes f to dir/name; 0 or -1. */
static int write_frame(const char *dir, const char *name, const ppv_frame *f) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *out = fopen(path, "wb");
    if (!out) {
        fprintf(stderr, "make_frame_seeds: cannot write %s\n", path);
        return -1;
    }
    fwrite(f->header, sizeof f->header, 1, out);
    if (f->meta) fwrite(f->meta, 1, (size_t)f->header[6], out);
    return fclose(out) == 0 ? 0 : -1;
}

/* An INFER envelope for a 32x32 chunk of 2 denoising steps. */
static ppv_envelope infer(int64_t call_id, int64_t chunk, int recompute) {
    ppv_envelope e;
    ppv_envelope_init(&e);
    e.call_id = call_id;
    e.chunk_index = chunk;
    e.height = e.width = 32;
    e.current_start_frame = 3 * chunk;
    e.num_denoise_steps = 2;
    e.do_kv_recompute = recompute;
    e.expected_generator_calls = ppv_expected_generator_calls(recompute, 2);
    e.init_cache = chunk == 0;
    e.base_seed = 42;
    e.noise_scale = 1.0;
    set_tensor(&e.conditioning_embeds, PPV_DTYPE_BF16, 3, (int64_t[]){1, 4, 32});
    set_tensor(&e.latents_in, PPV_DTYPE_BF16, 5, (int64_t[]){1, 3, 16, 4, 4});
    set_tensor(&e.current_denoising_step_list, PPV_DTYPE_I64, 1, (int64_t[]){2});
    if (recompute) set_tensor(&e.context_frames, PPV_DTYPE_BF16, 5, (int64_t[]){1, 3, 16, 4, 4});
    return e;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    char msg[512];
    int rc = 0;
    ppv_frame f;
    ppv_contract_order o = ppv_contract_order_start();

    ppv_envelope e0 = infer(0, 0, 0);
    if (ppv_envelope_frame(&e0, &o, &f, msg, sizeof msg) != PPV_FAIL_NONE) goto fail;
    rc |= write_frame(dir, "envelope_infer_chunk0", &f);
    ppv_frame_free(&f);
    ppv_contract_order_advance(&o, &e0);

    ppv_envelope e1 = infer(1, 1, 1);
    if (ppv_envelope_frame(&e1, &o, &f, msg, sizeof msg) != PPV_FAIL_NONE) goto fail;
    rc |= write_frame(dir, "envelope_infer_recompute", &f);
    ppv_frame_free(&f);
    ppv_contract_order_advance(&o, &e1);

    static const struct {
        int64_t action;
        const char *name;
    } bare[] = {{PPV_PP_NOOP, "envelope_noop"},
                {PPV_PP_SHUTDOWN, "envelope_shutdown"},
                {PPV_PP_ERROR, "envelope_error"}};
    for (int k = 0; k < 3; k++) {
        ppv_envelope e;
        ppv_envelope_init(&e);
        e.action = bare[k].action;
        e.call_id = 2 + k;
        e.cache_epoch = 1;
        if (ppv_envelope_frame(&e, &o, &f, msg, sizeof msg) != PPV_FAIL_NONE) goto fail;
        rc |= write_frame(dir, bare[k].name, &f);
        ppv_frame_free(&f);
    }

    ppv_result r;
    ppv_result_init(&r, &e0);
    r.observed_generator_calls = e0.expected_generator_calls;
    r.output_digest_i64 = 123456789;
    r.tB_ms = 1.5;
    set_tensor(&r.latents_out, PPV_DTYPE_BF16, 5, (int64_t[]){1, 3, 16, 4, 4});
    if (ppv_result_frame(&r, &f, msg, sizeof msg) != PPV_FAIL_NONE) goto fail;
    rc |= write_frame(dir, "result_ok", &f);
    ppv_frame_free(&f);

    ppv_result_init(&r, &e1);
    r.ok = 0;
    snprintf(r.error_message, sizeof r.error_message, "FM-02: generator calls 4, expected 3");
    if (ppv_result_frame(&r, &f, msg, sizeof msg) != PPV_FAIL_NONE) goto fail;
    rc |= write_frame(dir, "result_error", &f);
    ppv_frame_free(&f);
    return rc ? 1 : 0;
fail:
    fprintf(stderr, "make_frame_seeds: %s\n", msg);
    return 1;
}
