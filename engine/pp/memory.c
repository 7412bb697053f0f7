/* memory.c - the inference pipeline's byte accounting: every tensor buffer
 * a rank holds, charged as it is allocated and given back as it is freed,
 * per rank and per kind, with each row's peak (when, what held it) and,
 * when asked, its timeline. On the mock every rank runs in this process
 * one at a time, so one ledger sees them all in the world's order.
 */
#include <stdlib.h>
#include <string.h>

#include "pp_internal.h"

const char *ppv_pp_role_name(int32_t rank) {
    return rank == 0 ? "stage 0" : rank == 1 ? "leader" : "worker";
}

const char *ppv_pp_mem_kind_name(int k) {
    static const char *const names[] = {
#define PPV_PP_MEM_NAME(ID, name) name,
        PPV_PP_MEM_KINDS(PPV_PP_MEM_NAME)
#undef PPV_PP_MEM_NAME
    };
    return k >= 0 && k < PPV_MEM_KIND_COUNT ? names[k] : "?";
}

const char *ppv_pp_phase_name(int p) {
    static const char *const names[] = {
#define PPV_PP_PHASE_NAME(ID, name) name,
        PPV_PP_PHASES(PPV_PP_PHASE_NAME)
#undef PPV_PP_PHASE_NAME
    };
    return p >= 0 && p < PPV_PHASE_COUNT ? names[p] : "?";
}

int pp_mem_row_change(ppv_pp_mem_row *r, ppv_pp_mem_kind kind, int64_t delta, int64_t chunk,
                      int64_t call_id, ppv_pp_phase phase, int64_t t_ns, int timeline) {
    r->now[kind] += (uint64_t)delta; /* wraps back for a negative delta */
    r->total += (uint64_t)delta;
    if (delta > 0 && r->total > r->peak) {
        r->peak = r->total;
        memcpy(r->at_peak, r->now, sizeof r->at_peak);
        r->peak_chunk = chunk;
        r->peak_call_id = call_id;
        r->peak_phase = phase;
        r->peak_t_ns = t_ns;
    }
    if (!timeline) return 0;
    if (r->ntimeline == r->timeline_cap) {
        int64_t cap = r->timeline_cap ? 2 * r->timeline_cap : 64;
        ppv_pp_mem_sample *grown = realloc(r->timeline, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        r->timeline = grown;
        r->timeline_cap = cap;
    }
    r->timeline[r->ntimeline++] = (ppv_pp_mem_sample){t_ns, r->total, phase};
    return 0;
}

void pp_mem_stamp(pp_ctx *c, int64_t call_id) {
    if (!c->stamps || call_id < 0) return;
    if (c->o->proc && call_id < ((int64_t)1 << 40)) { /* kept whole: read at the end */
        if (call_id >= c->nsent_phase) {
            int64_t n = c->nsent_phase ? 2 * c->nsent_phase : 64;
            while (n <= call_id)
                n *= 2;
            int8_t *grown = realloc(c->sent_phase, (size_t)n);
            if (grown) {
                memset(grown + c->nsent_phase, -1, (size_t)(n - c->nsent_phase));
                c->sent_phase = grown;
                c->nsent_phase = n;
            }
        }
        if (call_id < c->nsent_phase) c->sent_phase[call_id] = (int8_t)c->phase;
    }
    struct pp_stamp *s = &c->stamps[call_id % c->nstamps];
    s->call_id = call_id;
    s->phase = c->phase;
}

/* The phase call_id was sent in; stage 0's now when it is not known (a
 * buffer of no call, or one sent before the ring's reach). */
static ppv_pp_phase stamped(const pp_ctx *c, int64_t call_id) {
    if (call_id >= 0 && c->stamps) {
        const struct pp_stamp *s = &c->stamps[call_id % c->nstamps];
        if (s->call_id == call_id) return s->phase;
    }
    return c->phase;
}

void pp_mem(pp_ctx *c, ppv_transport *t, int32_t rank, ppv_pp_mem_kind kind, int64_t delta,
            int64_t chunk, int64_t call_id) {
    ppv_pp_report *r = c->rep;
    if (!r || !r->mem || delta == 0 || rank < 0 || rank >= r->nmem) return;
    /* on processes the link's copies are MPI's or NCCL's, and its two ends
     * are in two processes: not counted */
    if (c->o->proc && rank == c->nranks) return;
    ppv_pp_phase phase = rank == 0 ? c->phase : stamped(c, call_id);
    if (pp_mem_row_change(&r->mem[rank], kind, delta, chunk, call_id, phase,
                          ppv_transport_clock_ns(t), c->o->mem_timeline) < 0)
        pp_fail(c, t, (pp_where){rank, PP_GROUP_WORLD, NULL}, PPV_FAIL_RULE, PPV_POINT_NONE,
                "out of memory for the memory timeline");
}

uint64_t pp_envelope_bytes(const ppv_envelope *e) {
    uint64_t n = 0;
#define PPV_ENV_TENSOR(name, dtype, rank, when) n += ppv_tensor_bytes(&e->name);
#include "contract.def"
#undef PPV_ENV_TENSOR
    return n;
}

int pp_gen_bytes_open(pp_gen_bytes *b, const ppv_generator *g, const ppv_generator_setup *s,
                      int32_t elem_bytes, ppv_generator_memory *resident, char *err,
                      size_t errlen) {
    memset(b, 0, sizeof *b);
    memset(resident, 0, sizeof *resident);
    b->g = g;
    b->s = *s;
    b->elem = elem_bytes > 0 ? elem_bytes : 4;
    b->direct = g == ppv_generator_builtin() && b->elem != 4;
    b->fn = pp_generator_memory(g);
    if (!b->fn && !b->direct) return 0; /* it reports nothing */
    b->reported = 1;
    b->window = s->kv_window;
    size_t n = (size_t)PPV_GENERATOR_FRAMES * (size_t)(b->window + 1) * 3;
    if (!(b->memo = malloc(n * sizeof *b->memo))) return ppv_errf(err, errlen, "out of memory");
    memset(b->memo, 0xff, n * sizeof *b->memo);
    if (b->direct) {
        if (ppv_gen_config_parse(s->params, s->cond_dim, &b->cfg, err, errlen) < 0 ||
            ppv_gen_config_check(&b->cfg, err, errlen) < 0)
            return -1;
        if (b->cfg.n_heads % s->mesh_size)
            return ppv_errf(err, errlen, "a mesh of %d must divide the generator's %d heads",
                            s->mesh_size, b->cfg.n_heads);
        int32_t tpf = (s->latent_h / 2) * (s->latent_w / 2);
        resident->weights = ppv_genmodel_weight_bytes(&b->cfg, b->elem);
        resident->kv_cache = ppv_kv_cache_bytes(&b->cfg, s->mesh_size, s->kv_window, tpf, b->elem);
        return 0;
    }
    char why[256] = "";
    if (b->fn(s, NULL, resident, why, sizeof why) != 0)
        return ppv_errf(err, errlen, "generator %s %s failed in memory: %s", g->name, g->version,
                        why[0] ? why : "(it gave no reason)");
    resident->working = 0;
    return 0;
}

int pp_gen_bytes_call(pp_gen_bytes *b, int32_t frames, int32_t cached, int32_t cond_len,
                      int32_t kind, uint64_t *bytes, char *err, size_t errlen) {
    *bytes = 0;
    if (!b->reported) return 0;
    if (frames < 1 || frames > PPV_GENERATOR_FRAMES || cached < 0 || cached > b->window ||
        kind < 0 || kind > 2)
        return ppv_errf(err, errlen, "a call of %d frames against %d cached is not one a chunk "
                        "makes", frames, cached);
    if (cond_len != b->cond_len) { /* the memo is for one conditioning length */
        size_t n = (size_t)PPV_GENERATOR_FRAMES * (size_t)(b->window + 1) * 3;
        memset(b->memo, 0xff, n * sizeof *b->memo);
        b->cond_len = cond_len;
    }
    uint64_t *slot = &b->memo[((size_t)(frames - 1) * (size_t)(b->window + 1) + (size_t)cached) * 3 +
                              (size_t)kind];
    if (*slot != UINT64_MAX) {
        *bytes = *slot;
        return 0;
    }
    if (b->direct) {
        int32_t tpf = (b->s.latent_h / 2) * (b->s.latent_w / 2);
        *slot = ppv_gen_call_work_bytes(&b->cfg, b->s.mesh_size, tpf, frames, cached, cond_len,
                                        b->elem);
    } else {
        ppv_generator_shape shape = {frames, cached, cond_len, kind};
        ppv_generator_memory m;
        memset(&m, 0, sizeof m);
        char why[256] = "";
        if (b->fn(&b->s, &shape, &m, why, sizeof why) != 0)
            return ppv_errf(err, errlen, "generator %s %s failed in memory: %s", b->g->name,
                            b->g->version, why[0] ? why : "(it gave no reason)");
        *slot = m.working;
    }
    *bytes = *slot;
    return 0;
}

void pp_gen_bytes_close(pp_gen_bytes *b) {
    free(b->memo);
    b->memo = NULL;
}

int32_t ppv_pp_mem_over(const ppv_pp_mem_row *rows, int32_t nranks, const double *caps,
                        int32_t ncaps) {
    if (!rows || !caps || ncaps < 1) return -1;
    for (int32_t k = 0; k < nranks; k++) {
        double cap = caps[k < ncaps ? k : ncaps - 1];
        if ((double)rows[k].peak > cap) return k;
    }
    return -1;
}
