/* passthrough.c - the least a generator plug-in can do: copy its latents
 * to out and make one all-reduce of one float on the mesh. ppv_bench_generator
 * times it beside passthrough.py to measure what the Python bridge costs a
 * call. */
#include <string.h>

#include "ppv_generator.h"

typedef struct pass {
    ppv_generator_comm comm;
    size_t frame; /* values of one latent frame */
} pass;

static pass states[64]; /* one per mesh rank: no allocation to time */

static int pass_create(const ppv_generator_setup *s, const ppv_generator_comm *comm, void **state,
                       char *err, size_t errlen) {
    (void)err, (void)errlen;
    if (s->mesh_rank >= 64) return -1;
    pass *p = &states[s->mesh_rank];
    p->comm = *comm;
    p->frame = (size_t)s->channels * (size_t)(s->latent_h * s->latent_w);
    *state = p;
    return 0;
}

static int pass_kv_reset(void *state, char *err, size_t errlen) {
    (void)state, (void)err, (void)errlen;
    return 0;
}

static int pass_call(void *state, const ppv_generator_call *a, char *err, size_t errlen) {
    (void)err, (void)errlen;
    pass *p = state;
    if (!a->out) return 0;
    float v = 1.0f;
    int rc = p->comm.all_reduce_sum(p->comm.ctx, PPV_GENERATOR_GROUP_MESH, &v, 1);
    if (!rc) memcpy(a->out, a->latents, (size_t)a->frames * p->frame * sizeof *a->out);
    return rc;
}

static int pass_destroy(void *state, char *err, size_t errlen) {
    (void)state, (void)err, (void)errlen;
    return 0;
}

static const ppv_generator table = {
    .abi = PPV_GENERATOR_ABI,
    .name = "passthrough",
    .version = "1",
    .create = pass_create,
    .kv_reset = pass_kv_reset,
    .call = pass_call,
    .destroy = pass_destroy,
};

const ppv_generator *ppv_generator_entry(void) {
    return &table;
}
