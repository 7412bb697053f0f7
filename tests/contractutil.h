/* contractutil.h - valid PP contract messages for the tests (test_contract,
 * test_inference): a builder each test then breaks or records. */
#ifndef PPV_CONTRACTUTIL_H
#define PPV_CONTRACTUTIL_H

#include <stdint.h>
#include <string.h>

#include "ppv_engine.h"

/* Tensors of one envelope (64 x 64 pixels: latents 8 x 8). */
typedef struct bufs {
    uint16_t cond[1 * 4 * 8], lat[1 * 3 * 16 * 8 * 8], ctx[1 * 2 * 16 * 8 * 8];
    int64_t steps[8];
} bufs;

static inline void set_tensor(ppv_tensor *t, int dtype, void *data, int rank, const int64_t *dims) {
    t->dtype = dtype;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    t->data = data;
}

/* A valid INFER: call_id, chunk_index, cache_epoch as given, steps
 * denoising steps, recompute from 2 context frames when asked. */
static inline void make_infer(ppv_envelope *e, bufs *b, int64_t call, int64_t chunk, int64_t epoch,
                              int recompute, int steps) {
    ppv_envelope_init(e);
    e->call_id = call;
    e->chunk_index = chunk;
    e->cache_epoch = epoch;
    e->height = e->width = 64;
    e->current_start_frame = 3 * chunk;
    e->init_cache = !recompute && chunk == 0;
    e->do_kv_recompute = recompute;
    e->num_denoise_steps = steps;
    e->expected_generator_calls = ppv_expected_generator_calls(recompute, steps);
    e->base_seed = 42;
    e->noise_scale = 0.75;
    for (size_t k = 0; k < sizeof b->lat / 2; k++)
        b->lat[k] = (uint16_t)(0x3f80 + k % 64);
    for (size_t k = 0; k < sizeof b->cond / 2; k++)
        b->cond[k] = (uint16_t)(0x4000 + k);
    for (size_t k = 0; k < sizeof b->ctx / 2; k++)
        b->ctx[k] = (uint16_t)(0x3c00 + k % 32);
    for (int k = 0; k < 8; k++)
        b->steps[k] = 1000 - 250 * k;
    set_tensor(&e->conditioning_embeds, PPV_DTYPE_BF16, b->cond, 3, (int64_t[]){1, 4, 8});
    set_tensor(&e->latents_in, PPV_DTYPE_BF16, b->lat, 5, (int64_t[]){1, 3, 16, 8, 8});
    set_tensor(&e->current_denoising_step_list, PPV_DTYPE_I64, b->steps, 1, (int64_t[]){steps});
    if (recompute)
        set_tensor(&e->context_frames, PPV_DTYPE_BF16, b->ctx, 5, (int64_t[]){1, 2, 16, 8, 8});
}

#endif
