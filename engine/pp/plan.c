/* plan.c - ppv pp --plan: every rank's peak bytes from the buffers' shapes,
 * without running the pipeline or allocating anything of their size.
 *
 * Stage 0's moves are replayed as counts: the same choice stage0.c makes
 * at every step (send while both queues have room and nothing forces a
 * drain, else decode what is ready, else receive), with the bytes each
 * move allocates or frees. Without --poll those moves do not depend on
 * the interleaving, which is why the prediction is exact. Each mesh rank
 * runs the chunks in the order they were sent: the envelope's copy, the
 * generator calls of the chunk (a KV rebuild's blocks, the steps, the
 * cache write) with their working memory, and the buffers it keeps for
 * the whole run. The link's row is a bound, not a replay: what is on it
 * depends on the interleaving.
 */
#include <stdlib.h>
#include <string.h>

#include "pp_internal.h"

typedef struct held {
    uint64_t bytes;
    int64_t chunk, call_id;
} held;

typedef struct planner {
    const ppv_pp_options *o;
    ppv_pp_plan *p;
    pp_gen_bytes *gb; /* per mesh rank: what its generator reports */
    int32_t *cached;  /* per mesh rank: frames its cache holds */
    char *err;
    size_t errlen;
} planner;

static int change(ppv_pp_mem_row *r, ppv_pp_mem_kind k, int64_t delta, int64_t chunk,
                  int64_t call_id, ppv_pp_phase phase) {
    return pp_mem_row_change(r, k, delta, chunk, call_id, phase, -1, 0);
}

/* A mesh rank's start: the generator's weights and cache (create), the
 * chunk's output buffer, the leader's result cache, the loop's latents. */
static void mesh_start(planner *pl, int32_t mr, const ppv_generator_memory *res, uint64_t R) {
    ppv_pp_mem_row *r = &pl->p->mem[1 + mr];
    change(r, PPV_MEM_WEIGHTS, (int64_t)res->weights, -1, -1, PPV_PHASE_WARMUP);
    change(r, PPV_MEM_KV_CACHE, (int64_t)res->kv_cache, -1, -1, PPV_PHASE_WARMUP);
    change(r, PPV_MEM_BUFFERS, (int64_t)res->buffers, -1, -1, PPV_PHASE_WARMUP);
    change(r, PPV_MEM_BUFFERS, (int64_t)R, -1, -1, PPV_PHASE_WARMUP);
    if (mr == 0) change(r, PPV_MEM_RESULT_CACHE, (int64_t)R, -1, -1, PPV_PHASE_WARMUP);
    change(r, PPV_MEM_BUFFERS, 2 * (int64_t)R, -1, -1, PPV_PHASE_WARMUP);
}

/* One call on mesh rank mr: its working memory while it runs, and the
 * frames it writes to the cache. */
static int mesh_call(planner *pl, int32_t mr, int32_t frames, int32_t kind, int write,
                     int64_t chunk, int64_t call_id, ppv_pp_phase phase) {
    int32_t *cached = &pl->cached[mr];
    uint64_t w = 0;
    if (pp_gen_bytes_call(&pl->gb[mr], frames, *cached, pl->o->cond_len, kind, &w, pl->err,
                          pl->errlen) < 0)
        return -1;
    ppv_pp_mem_row *r = &pl->p->mem[1 + mr];
    change(r, PPV_MEM_WORKING, (int64_t)w, chunk, call_id, phase);
    change(r, PPV_MEM_WORKING, -(int64_t)w, chunk, call_id, phase);
    if (write) {
        int32_t total = *cached + frames;
        *cached = total < pl->o->kv_window ? total : pl->o->kv_window;
    }
    return 0;
}

/* Chunk k (its epoch's j-th, envelope bytes E with nf context frames) on
 * every mesh rank. */
static int mesh_chunk(planner *pl, int32_t j, int64_t nf, uint64_t E, int64_t chunk,
                      int64_t call_id, ppv_pp_phase phase) {
    const ppv_pp_options *o = pl->o;
    for (int32_t mr = 0; mr < o->mesh; mr++) {
        ppv_pp_mem_row *r = &pl->p->mem[1 + mr];
        change(r, PPV_MEM_ENVELOPES, (int64_t)E, chunk, call_id, phase);
        if (!o->control_only) {
            if (j == 0) pl->cached[mr] = 0; /* init_cache: a reset */
            if (pp_recomputes(o, j)) {
                pl->cached[mr] = 0;
                for (int64_t f = 0; f < nf; f += PP_FRAMES_PER_CHUNK) {
                    int32_t n = (int32_t)(nf - f < PP_FRAMES_PER_CHUNK ? nf - f : PP_FRAMES_PER_CHUNK);
                    if (mesh_call(pl, mr, n, PPV_GENERATOR_CALL_REBUILD, 1, chunk, call_id, phase))
                        return -1;
                }
            }
            for (int32_t s = 0; s < o->steps; s++)
                if (mesh_call(pl, mr, PP_FRAMES_PER_CHUNK, PPV_GENERATOR_CALL_STEP, 0, chunk,
                              call_id, phase))
                    return -1;
            if (mesh_call(pl, mr, PP_FRAMES_PER_CHUNK, PPV_GENERATOR_CALL_CACHE_WRITE, 1, chunk,
                          call_id, phase))
                return -1;
        }
        change(r, PPV_MEM_ENVELOPES, -(int64_t)E, chunk, call_id, phase);
    }
    return 0;
}

int ppv_pp_plan_run(const ppv_pp_options *o, int32_t elem_bytes, ppv_pp_plan *out, char *err,
                    size_t errlen) {
    memset(out, 0, sizeof *out);
    if (ppv_pp_options_check(o, err, errlen) < 0) return -1;
    if (o->poll || o->heartbeat_s > 0 || o->inject != PPV_INJECT_NONE || o->bug ||
        o->replay || o->fault.kind != PPV_FAULT_NONE || o->proc)
        return ppv_errf(err, errlen,
                        "--plan predicts the pipeline's own moves: with --poll, heartbeats, an "
                        "injection, a seeded bug, a replay or a fault they depend on the "
                        "interleaving or on time");
    const ppv_generator *g = o->control_only ? NULL : o->generator ? o->generator
                                                                   : ppv_generator_builtin();
    if (elem_bytes && elem_bytes != 4 && g != ppv_generator_builtin())
        return ppv_errf(err, errlen, "a model's dtype scales the built-in generator's bytes; "
                        "a plug-in reports its own");
    int32_t n = 1 + o->mesh;
    planner pl;
    memset(&pl, 0, sizeof pl);
    pl.o = o;
    pl.p = out;
    pl.err = err;
    pl.errlen = errlen;
    out->nmem = n + 1;
    out->mem = calloc((size_t)out->nmem, sizeof *out->mem);
    pl.cached = calloc((size_t)o->mesh, sizeof *pl.cached);
    pl.gb = calloc((size_t)o->mesh, sizeof *pl.gb);
    int32_t cap = o->d_in + o->d_out;
    held *ring = calloc((size_t)cap, sizeof *ring);
    if (!out->mem || !pl.cached || !pl.gb || !ring) {
        free(pl.cached);
        free(pl.gb);
        free(ring);
        ppv_pp_plan_free(out);
        return ppv_errf(err, errlen, "out of memory");
    }
    for (int32_t i = 0; i < out->nmem; i++)
        out->mem[i].peak_chunk = out->mem[i].peak_call_id = out->mem[i].peak_t_ns = -1;
    uint64_t frame = (uint64_t)PP_LATENT_CHANNELS * (uint64_t)(o->height / 8) *
                     (uint64_t)(o->width / 8) * 2;
    uint64_t R = PP_FRAMES_PER_CHUNK * frame;
    uint64_t E0 = R + (uint64_t)o->cond_len * (uint64_t)o->model.cond_dim * 2 +
                  (uint64_t)o->steps * 8;
    out->envelope_bytes = E0;
    out->result_bytes = R;
    out->reported = 1;
    int rc = 0;
    /* the mesh's start, each rank the generator's bytes for its setup */
    pp_ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.gen_params = o->generator_params ? o->generator_params : "";
    if (g && (rc = pp_gen_params_set(&c, err, errlen)) < 0) goto done;
    for (int32_t mr = 0; mr < o->mesh; mr++) {
        ppv_generator_memory res;
        memset(&res, 0, sizeof res);
        if (g) {
            ppv_generator_setup s;
            pp_generator_setup(&c, mr, &s);
            if ((rc = pp_gen_bytes_open(&pl.gb[mr], g, &s, elem_bytes, &res, err, errlen)) < 0)
                goto done;
            out->reported = pl.gb[mr].reported;
        }
        mesh_start(&pl, mr, &res, R);
    }
    /* stage 0, as stage0.c moves (without --poll) */
    ppv_pp_mem_row *s0 = &out->mem[0];
    ppv_pp_phase phase = PPV_PHASE_WARMUP;
    if (o->kv_recompute)
        change(s0, PPV_MEM_CONTEXT, (int64_t)((uint64_t)o->kv_window * frame), -1, -1, phase);
    int32_t k = 0, awaiting = 0, nready = 0, head = 0, nsent = 0;
    int64_t epoch = 0, ndecoded = 0, call_id = 0;
    uint64_t link_max = R;
    for (;;) {
        int can_send = k < o->chunks && awaiting < o->d_in && nready < o->d_out;
        int64_t ek = 0;
        int32_t j = 0;
        if (can_send) {
            pp_chunk_epoch(o, k, &ek, &j);
            int drain = ek != epoch || pp_recomputes(o, j);
            if (drain && nsent) {
                can_send = 0;
                if (ek != epoch) phase = PPV_PHASE_CUT_DRAIN;
            } else if (ek != epoch) {
                epoch = ek;
                ndecoded = 0;
                phase = PPV_PHASE_NEW_EPOCH;
            }
        }
        if (can_send) {
            int64_t nf = pp_recomputes(o, j) ? (ndecoded < o->kv_window ? ndecoded : o->kv_window)
                                             : 0;
            uint64_t E = E0 + (uint64_t)nf * frame;
            if ((uint64_t)nf * frame > out->context_max_bytes)
                out->context_max_bytes = (uint64_t)nf * frame;
            if (E > link_max) link_max = E;
            change(s0, PPV_MEM_ENVELOPES, (int64_t)E, k, call_id, phase);
            ring[(head + nsent) % cap] = (held){E, k, call_id};
            if ((rc = mesh_chunk(&pl, j, nf, E, k, call_id, phase)) < 0) goto done;
            nsent++;
            awaiting++;
            call_id++;
            if (++k == o->chunks) phase = PPV_PHASE_END;
        } else if (nready) {
            held *h = &ring[head];
            change(s0, PPV_MEM_RESULTS, -(int64_t)R, h->chunk, h->call_id, phase);
            change(s0, PPV_MEM_ENVELOPES, -(int64_t)h->bytes, h->chunk, h->call_id, phase);
            int64_t keep = o->kv_window - PP_FRAMES_PER_CHUNK;
            if (ndecoded > keep) ndecoded = keep;
            ndecoded += PP_FRAMES_PER_CHUNK;
            head = (head + 1) % cap;
            nsent--;
            nready--;
            if (phase == PPV_PHASE_WARMUP || phase == PPV_PHASE_NEW_EPOCH) phase = PPV_PHASE_STEADY;
        } else if (awaiting) {
            const held *h = &ring[(head + nsent - awaiting) % cap];
            change(s0, PPV_MEM_RESULTS, (int64_t)R, h->chunk, h->call_id, phase);
            awaiting--;
            nready++;
        } else
            break;
    }
    /* the link: at most D_in calls in flight, each an envelope or a result on it */
    ppv_pp_mem_row *link = &out->mem[n];
    change(link, PPV_MEM_LINK, (int64_t)((uint64_t)o->d_in * link_max), -1, -1, PPV_PHASE_WARMUP);
done:
    for (int32_t mr = 0; mr < o->mesh; mr++)
        pp_gen_bytes_close(&pl.gb[mr]);
    free(pl.gb);
    free(pl.cached);
    free(ring);
    if (rc < 0) ppv_pp_plan_free(out);
    return rc < 0 ? -1 : 0;
}

void ppv_pp_plan_free(ppv_pp_plan *p) {
    if (!p) return;
    free(p->mem);
    p->mem = NULL;
    p->nmem = 0;
}
