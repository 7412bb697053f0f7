/* runtime.c - the rank runtime: one training step of the built-in model,
 * each rank executing its schedule program on real tensors through the
 * transport, under the mock world's scheduler.
 *
 * Determinism: every kernel is deterministic and batch invariant, and the
 * gradients of each microbatch are kept apart and summed in microbatch
 * order at the end, so any schedule, policy and seed gives the gradients of
 * the one-rank reference bit for bit.
 *
 * Activation memory is what the engine's allocator holds for backwards:
 * the forward's saved tensors, the backward-for-inputs' state for the
 * weight backward, and a recomputed stage's stashed input.
 */
#include <stdlib.h>
#include <string.h>

#include "lower.h"

/* Per (stage, microbatch) buffers, owned by the stage's rank. */
typedef struct slot {
    ppv_bf16 *x;     /* stage input (T, C) */
    ppv_bf16 *y;     /* stage output, until sent or handed on */
    ppv_bf16 *dy;    /* gradient of the output */
    ppv_bf16 *dx;    /* gradient of the input, until sent or handed on */
    void *saved;     /* forward state for the backward */
    void *wstate;    /* backward-for-inputs state for the weight backward */
    ppv_bf16 *stash; /* recomputed stage: the kept input */
    float *dparams;  /* this microbatch's weight gradients, until folded */
} slot;

typedef struct run_ctx {
    const ppv_schedule *s;
    const ppv_run_options *o;
    const ppv_model *model;
    int32_t S, m, T, C;
    size_t tc;               /* T * C elements */
    int32_t *stage_layer;    /* [S + 1] */
    ppv_stage_bytes *bytes;  /* [S] */
    slot *slots;             /* [S * m] */
    ppv_mb_inputs *inputs;   /* [m], loaded on first use, freed after the last W */
    int32_t *wdone;          /* [m] weight backwards done */
    float **gsum;            /* [S] weight gradients of microbatches 0..folded-1 */
    int32_t *folded;         /* [S] microbatches added to gsum */
    int32_t held, held_peak; /* gradient buffers not yet added */
    float *loss;             /* [m] */
    int64_t *cur, *peak;     /* [P] activation bytes */
    int64_t actions_done, actions_total;
    int32_t *forwards; /* [S * m] forward passes run, recomputes included */
} run_ctx;

/* ---- activation accounting ------------------------------------------------- */

static void *act_alloc(run_ctx *c, int32_t rank, int64_t bytes) {
    void *p = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!p) return NULL;
    c->cur[rank] += bytes;
    if (c->cur[rank] > c->peak[rank]) c->peak[rank] = c->cur[rank];
    return p;
}

static void act_free(run_ctx *c, int32_t rank, void **p, int64_t bytes) {
    if (!*p) return;
    free(*p);
    *p = NULL;
    c->cur[rank] -= bytes;
}

int ppv_predict_activation_bytes(const ppv_schedule *s, const ppv_stage_bytes *bytes,
                                 const uint8_t *recompute, int64_t *peak) {
    int32_t S = s->nstages, m = s->nmb;
    uint8_t *regen = calloc((size_t)S * (size_t)m + 1, 1);
    if (!regen) return -1;
    for (int32_t r = 0; r < s->nranks; r++) {
        int64_t cur = 0, top = 0;
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            const ppv_action *a = &s->prog[r].acts[i];
            if (a->stage < 0 || a->mb < 0) continue;
            const ppv_stage_bytes *b = &bytes[a->stage];
            int rc = recompute && recompute[a->stage];
            uint8_t *g = &regen[(size_t)a->stage * m + a->mb];
            switch (a->kind) {
            case PPV_ACT_F:
                if (rc) { /* stash the input; saved lives only while the forward runs */
                    cur += b->input;
                    if (cur + b->saved > top) top = cur + b->saved;
                } else {
                    cur += b->saved;
                }
                break;
            case PPV_ACT_R:
            case PPV_ACT_I:
            case PPV_ACT_B:
                /* a recomputed stage regenerates saved beside its stashed
                 * input, which goes as soon as saved is back */
                if (rc && !*g) {
                    cur += b->saved;
                    if (cur > top) top = cur;
                    cur -= b->input, *g = 1;
                }
                if (a->kind == PPV_ACT_R) break;
                /* saved and wstate live together while the input backward
                 * runs; then saved goes, and a full backward's wstate too */
                cur += b->wstate;
                if (cur > top) top = cur;
                cur -= b->saved + (a->kind == PPV_ACT_B ? b->wstate : 0);
                break;
            case PPV_ACT_W:
                cur -= b->wstate;
                break;
            default:
                break;
            }
            if (cur > top) top = cur;
        }
        peak[r] = top;
    }
    free(regen);
    return 0;
}

/* ---- executing actions ---------------------------------------------------- */

static slot *slot_of(run_ctx *c, int32_t stage, int32_t mb) {
    return &c->slots[(size_t)stage * c->m + mb];
}

static int is_recomputed(const run_ctx *c, int32_t stage) {
    return c->o->recompute && c->o->recompute[stage];
}

/* Microbatch mb's inputs: drawn from the RNG, or from o->load_inputs, on
 * first use; released after the microbatch's last weight backward, so only
 * microbatches in flight hold inputs. NULL after failing the run. */
static const ppv_mb_inputs *inputs_of(run_ctx *c, ppv_transport *t, int32_t rank, int32_t mb) {
    ppv_mb_inputs *in = &c->inputs[mb];
    if (in->x) return in;
    char err[256] = "out of memory";
    int rc = c->o->load_inputs ? c->o->load_inputs(c->o->inputs_ctx, mb, in, err, sizeof err)
                               : ppv_mb_inputs_init(c->model, mb, in);
    if (rc < 0) {
        ppv_world_fail_env(t, rank, "inputs of microbatch %d: %s", mb, err);
        return NULL;
    }
    return in;
}

/* Runs the forward of stage s into a fresh saved buffer. */
static int forward_into(run_ctx *c, int32_t rank, int32_t s, const ppv_mb_inputs *in, slot *sl,
                        const ppv_bf16 *x) {
    c->forwards[sl - c->slots]++; /* evidence for verify-recompute: counted where it runs */
    sl->saved = act_alloc(c, rank, c->bytes[s].saved);
    ppv_bf16 *y = malloc(c->tc * sizeof *y);
    if (!sl->saved || !y) {
        free(y);
        return -1;
    }
    int l0 = c->stage_layer[s], l1 = c->stage_layer[s + 1];
    int rc = l0 < l1 ? ppv_layers_forward(c->model, l0, l1, in, x, y, sl->saved)
                     : (memcpy(y, x, c->tc * sizeof *y), 0);
    free(sl->y);
    sl->y = y;
    return rc;
}

static int do_forward(run_ctx *c, ppv_transport *t, int32_t rank, const ppv_action *a) {
    int32_t s = a->stage, mb = a->mb;
    slot *sl = slot_of(c, s, mb);
    const ppv_mb_inputs *in = inputs_of(c, t, rank, mb);
    if (!in) return -1;
    const ppv_bf16 *x = s == 0 ? in->x : sl->x;
    if (!x) {
        ppv_world_fail(t, rank, "%dF%d has no input: nothing received or computed for it", s, mb);
        return -1;
    }
    if (sl->saved) {
        ppv_world_fail(t, rank, "%dF%d runs twice", s, mb);
        return -1;
    }
    if (is_recomputed(c, s)) {
        sl->stash = act_alloc(c, rank, c->bytes[s].input);
        if (!sl->stash) return -1;
        memcpy(sl->stash, x, c->tc * sizeof *x);
    }
    if (forward_into(c, rank, s, in, sl, x) < 0) return -1;
    if (is_recomputed(c, s)) act_free(c, rank, &sl->saved, c->bytes[s].saved);
    if (s == c->S - 1)
        c->loss[mb] = ppv_loss_forward(c->model, in, sl->y);
    else if (c->s->stage_rank[s + 1] == rank) { /* the next stage is here: hand it over */
        slot *nx = slot_of(c, s + 1, mb);
        free(nx->x);
        nx->x = sl->y;
        sl->y = NULL;
    }
    free(sl->x);
    sl->x = NULL;
    ppv_world_progress(t, rank);
    return 0;
}

/* Rebuilds a recomputed stage's saved tensors from its stashed input. */
static int recompute(run_ctx *c, ppv_transport *t, int32_t rank, int32_t s, int32_t mb) {
    slot *sl = slot_of(c, s, mb);
    if (!is_recomputed(c, s)) return 0;
    if (sl->saved && !sl->stash) return 0; /* regenerated already (an R before this) */
    if (sl->saved) { /* what recompute promises: nothing kept from the forward */
        ppv_world_fail(t, rank, "%dR%d: stage %d is recomputed but still holds its forward's saved "
                       "tensors", s, mb, s);
        return -1;
    }
    if (!sl->stash) {
        ppv_world_fail(t, rank, "%dR%d: no stashed input (forward missing)", s, mb);
        return -1;
    }
    const ppv_mb_inputs *in = inputs_of(c, t, rank, mb);
    if (!in) return -1;
    ppv_bf16 *keep = sl->y;
    sl->y = NULL;
    int rc = forward_into(c, rank, s, in, sl, sl->stash);
    free(sl->y);
    sl->y = keep;
    /* saved holds the stage's input among its tensors: the stash is done */
    if (rc == 0) act_free(c, rank, (void **)&sl->stash, c->bytes[s].input);
    ppv_world_progress(t, rank);
    return rc;
}

static int do_backward_input(run_ctx *c, ppv_transport *t, int32_t rank, const ppv_action *a) {
    int32_t s = a->stage, mb = a->mb;
    slot *sl = slot_of(c, s, mb);
    if (recompute(c, t, rank, s, mb) < 0) return -1;
    if (!sl->saved) {
        ppv_world_fail(t, rank, "%d%s%d before its forward", s, ppv_action_token(a->kind), mb);
        return -1;
    }
    const ppv_mb_inputs *in = inputs_of(c, t, rank, mb);
    if (!in) return -1;
    if (s == c->S - 1) {
        free(sl->dy);
        sl->dy = malloc(c->tc * sizeof *sl->dy);
        if (!sl->dy || !sl->y || ppv_loss_backward(c->model, in, sl->y, sl->dy) < 0) return -1;
        free(sl->y);
        sl->y = NULL;
    }
    if (!sl->dy) {
        ppv_world_fail(t, rank, "%d%s%d has no output gradient: nothing received or computed", s,
                       ppv_action_token(a->kind), mb);
        return -1;
    }
    sl->wstate = act_alloc(c, rank, c->bytes[s].wstate);
    ppv_bf16 *dx = malloc(c->tc * sizeof *dx);
    if (!sl->wstate || !dx) {
        free(dx);
        return -1;
    }
    int l0 = c->stage_layer[s], l1 = c->stage_layer[s + 1];
    if (l0 < l1) {
        if (ppv_layers_backward_input(c->model, l0, l1, in, sl->saved, sl->dy, dx, sl->wstate) <
            0) {
            free(dx);
            return -1;
        }
    } else
        memcpy(dx, sl->dy, c->tc * sizeof *dx);
    /* the weight backward reads wstate alone: the forward's saved tensors
     * go now */
    act_free(c, rank, &sl->saved, c->bytes[s].saved);
    if (s > 0 && c->s->stage_rank[s - 1] == rank) {
        slot *pv = slot_of(c, s - 1, mb);
        free(pv->dy);
        pv->dy = dx;
    } else if (s > 0) {
        free(sl->dx);
        sl->dx = dx;
    } else {
        free(dx);
    }
    ppv_world_progress(t, rank);
    return 0;
}

/* Adds the stage's finished weight gradients to its sum in microbatch
 * order (0, 1, 2, ...), so the sum is the same whatever order the W
 * actions ran in, and frees each once added: memory holds only the
 * microbatches that finished ahead of an earlier one. */
static int fold_grads(run_ctx *c, int32_t s) {
    size_t n = ppv_model_grad_count(c->model, c->stage_layer[s], c->stage_layer[s + 1]);
    while (c->folded[s] < c->m) {
        slot *sl = slot_of(c, s, c->folded[s]);
        if (!sl->dparams) break;
        if (!c->gsum[s] && !(c->gsum[s] = calloc(n ? n : 1, sizeof *c->gsum[s]))) return -1;
        for (size_t k = 0; k < n; k++)
            c->gsum[s][k] += sl->dparams[k];
        free(sl->dparams);
        sl->dparams = NULL;
        c->folded[s]++;
        c->held--;
    }
    return 0;
}

static int do_backward_weight(run_ctx *c, ppv_transport *t, int32_t rank, const ppv_action *a) {
    int32_t s = a->stage, mb = a->mb;
    slot *sl = slot_of(c, s, mb);
    if (!sl->wstate) {
        ppv_world_fail(t, rank, "%dW%d before its I", s, mb);
        return -1;
    }
    const ppv_mb_inputs *in = inputs_of(c, t, rank, mb);
    if (!in) return -1;
    int l0 = c->stage_layer[s], l1 = c->stage_layer[s + 1];
    size_t n = ppv_model_grad_count(c->model, l0, l1);
    sl->dparams = malloc((n ? n : 1) * sizeof *sl->dparams);
    if (!sl->dparams) return -1;
    if (++c->held > c->held_peak) c->held_peak = c->held;
    if (l0 < l1 && ppv_layers_backward_weight(c->model, l0, l1, in, sl->wstate, sl->dparams) < 0)
        return -1;
    if (fold_grads(c, s) < 0) {
        ppv_world_fail_env(t, rank, "out of memory");
        return -1;
    }
    act_free(c, rank, &sl->wstate, c->bytes[s].wstate);
    free(sl->dy);
    sl->dy = NULL;
    if (++c->wdone[mb] == c->S) ppv_mb_inputs_free(&c->inputs[mb]);
    ppv_world_progress(t, rank);
    return 0;
}

/* Point-to-point actions: the buffer, its peer and direction. */
static int do_message(run_ctx *c, ppv_transport *t, int32_t rank, const ppv_action *a) {
    int32_t s = a->stage, mb = a->mb;
    slot *sl = slot_of(c, s, mb);
    size_t bytes = c->tc * sizeof(ppv_bf16);
    char what[64];
    ppv_action_format(c->s, a, what, sizeof what);
    int rc;
    switch (a->kind) {
    case PPV_ACT_SEND_F:
        if (!sl->y) goto missing;
        rc = t->ops->send(t->impl, rank, sl->y, bytes, c->s->stage_rank[s + 1], 0, what);
        free(sl->y);
        sl->y = NULL;
        return rc;
    case PPV_ACT_SEND_B:
        if (!sl->dx) goto missing;
        rc = t->ops->send(t->impl, rank, sl->dx, bytes, c->s->stage_rank[s - 1], 0, what);
        free(sl->dx);
        sl->dx = NULL;
        return rc;
    case PPV_ACT_RECV_F:
        free(sl->x);
        if (!(sl->x = malloc(bytes))) return -1;
        return t->ops->recv(t->impl, rank, sl->x, bytes, c->s->stage_rank[s - 1], 0, what);
    case PPV_ACT_RECV_B:
        free(sl->dy);
        if (!(sl->dy = malloc(bytes))) return -1;
        return t->ops->recv(t->impl, rank, sl->dy, bytes, c->s->stage_rank[s + 1], 0, what);
    default:
        return 0;
    }
missing:
    ppv_world_fail(t, rank, "%s sends a tensor not computed yet", what);
    return -1;
}

static int do_action(run_ctx *c, ppv_transport *t, int32_t rank, const ppv_action *a) {
    switch (a->kind) {
    case PPV_ACT_F:
        return do_forward(c, t, rank, a);
    case PPV_ACT_R:
        return recompute(c, t, rank, a->stage, a->mb);
    case PPV_ACT_I:
        return do_backward_input(c, t, rank, a);
    case PPV_ACT_W:
        return do_backward_weight(c, t, rank, a);
    case PPV_ACT_B:
        if (do_backward_input(c, t, rank, a) < 0) return -1;
        return do_backward_weight(c, t, rank, a);
    case PPV_ACT_SEND_F:
    case PPV_ACT_SEND_B:
    case PPV_ACT_RECV_F:
    case PPV_ACT_RECV_B:
        return do_message(c, t, rank, a);
    case PPV_ACT_UNSHARD:
    case PPV_ACT_RESHARD:
    case PPV_ACT_REDUCE_GRAD:
        return 0; /* parameters are replicated: nothing to do */
    default:
        ppv_world_fail(t, rank, "ppv run does not execute %s actions", ppv_action_token(a->kind));
        return -1;
    }
}

static void rank_main(ppv_transport *t, int32_t rank, void *arg) {
    run_ctx *c = arg;
    const ppv_program *p = &c->s->prog[rank];
    /* the memory self-test: rank 0 holds extra bytes through the allocator
     * the activations use, for the whole step */
    void *extra = rank == 0 && c->o->extra_bytes > 0 ? act_alloc(c, rank, c->o->extra_bytes) : NULL;
    if (rank == 0 && c->o->extra_bytes > 0 && !extra) {
        ppv_world_fail_env(t, rank, "out of memory holding the self-test's extra bytes");
        return;
    }
    for (int32_t i = 0; i < p->n; i++) {
        int rc = do_action(c, t, rank, &p->acts[i]);
        if (rc == -1 && t->ops->async_error(t->impl, rank) == 0)
            ppv_world_fail_env(t, rank, "out of memory running %s", ppv_action_token(p->acts[i].kind));
        if (rc != 0) break;
        c->actions_done++;
        if (c->o->progress) c->o->progress(c->o->progress_ctx, c->actions_done, c->actions_total);
    }
    act_free(c, rank, &extra, c->o->extra_bytes);
}

/* ---- the step --------------------------------------------------------------- */

int ppv_recompute_parse(const char *text, int32_t nstages, uint8_t *mask) {
    memset(mask, 0, (size_t)nstages);
    if (strcmp(text, "none") == 0) return 0;
    if (strcmp(text, "all") == 0) {
        memset(mask, 1, (size_t)nstages);
        return 0;
    }
    for (const char *p = text; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= nstages || (*end != ',' && *end)) return -1;
        mask[v] = 1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

ppv_model_config ppv_run_model_config(const ppv_run_options *o, const ppv_schedule *s) {
    if (o->weights) return *ppv_model_config_of(o->weights); /* layers split as they come */
    ppv_model_config cfg = o->model;
    if (cfg.layers < s->nstages) cfg.layers = s->nstages; /* at least one layer per stage */
    return cfg;
}

ppv_run_options ppv_run_defaults(void) {
    ppv_run_options o;
    memset(&o, 0, sizeof o);
    o.sem.kind = PPV_SEM_RENDEZVOUS;
    o.policy.kind = PPV_POLICY_RR;
    o.model = ppv_model_config_default();
    o.watchdog_steps = 100000;
    return o;
}

uint64_t ppv_digest(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ULL;
    for (size_t k = 0; k < n; k++) {
        h ^= p[k];
        h *= 1099511628211ULL;
    }
    return h;
}

void ppv_grads_compare(const float *a, const float *b, size_t n, ppv_grad_diff *d) {
    memset(d, 0, sizeof *d);
    d->bitwise_equal = 1;
    d->first_index = -1;
    for (size_t k = 0; k < n; k++) {
        uint32_t ua, ub;
        memcpy(&ua, &a[k], 4);
        memcpy(&ub, &b[k], 4);
        if (ua == ub) continue;
        if (d->bitwise_equal) {
            d->bitwise_equal = 0;
            d->first_index = (int64_t)k;
            d->first_a = a[k];
            d->first_b = b[k];
        }
        uint64_t ulp = ppv_ulp_distance(ua, ub, 32);
        double abs = (double)a[k] - (double)b[k];
        abs = abs < 0 ? -abs : abs;
        double mag = (double)b[k] < 0 ? -(double)b[k] : (double)b[k];
        double rel = mag > 0 ? abs / mag : (abs > 0 ? 1.0 / 0.0 : 0.0);
        if (ulp > d->max_ulp) d->max_ulp = ulp;
        if (abs > d->max_abs) d->max_abs = abs;
        if (rel > d->max_rel) d->max_rel = rel;
    }
}

static void free_ctx(run_ctx *c) {
    if (c->slots)
        for (size_t k = 0; k < (size_t)c->S * (size_t)c->m; k++) {
            slot *sl = &c->slots[k];
            free(sl->x), free(sl->y), free(sl->dy), free(sl->dx), free(sl->saved);
            free(sl->wstate), free(sl->stash), free(sl->dparams);
        }
    if (c->inputs)
        for (int32_t mb = 0; mb < c->m; mb++)
            ppv_mb_inputs_free(&c->inputs[mb]);
    if (c->gsum)
        for (int32_t st = 0; st < c->S; st++)
            free(c->gsum[st]);
    free(c->gsum);
    free(c->folded);
    free(c->slots);
    free(c->inputs);
    free(c->wdone);
    free(c->loss);
    free(c->forwards);
    free(c->bytes);
    free(c->cur);
    free(c->peak);
}

/* ppv run executes training steps: every (stage, microbatch) needs its
 * forward and a full backward (B, or I then W). */
static int require_training(const ppv_schedule *s, char *err, size_t errlen) {
    size_t n = (size_t)s->nstages * (size_t)s->nmb;
    uint8_t *seen = calloc(n + 1, 1); /* bit 1 F, 2 B or I, 4 B or W */
    if (!seen) return ppv_errf(err, errlen, "out of memory");
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            const ppv_action *a = &s->prog[r].acts[i];
            if (a->stage < 0 || a->mb < 0) continue;
            uint8_t *b = &seen[(size_t)a->stage * s->nmb + a->mb];
            if (a->kind == PPV_ACT_F) *b |= 1;
            if (a->kind == PPV_ACT_B || a->kind == PPV_ACT_I) *b |= 2;
            if (a->kind == PPV_ACT_B || a->kind == PPV_ACT_W) *b |= 4;
        }
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++)
        if (seen[k] != 7)
            rc = ppv_errf(err, errlen,
                          "%s: stage %d microbatch %d has no %s; ppv run executes a training "
                          "step, which needs F and B (or I and W) for every stage and microbatch",
                          s->name, (int)(k / (size_t)s->nmb), (int)(k % (size_t)s->nmb),
                          !(seen[k] & 1)   ? "forward (F)"
                          : !(seen[k] & 2) ? "backward (B or I)"
                                           : "weight backward (B or W)");
    free(seen);
    return rc;
}

/* Layers of stage s: floor(L * s / S) to floor(L * (s + 1) / S), so when L
 * does not divide evenly the later stages hold one layer more. */
static void split_layers(int32_t L, int32_t S, int32_t *stage_layer) {
    for (int32_t s = 0; s <= S; s++)
        stage_layer[s] = (int32_t)(((int64_t)L * s) / S);
}

int ppv_run(const ppv_schedule *s_in, const ppv_run_options *o, ppv_run_report **out, char *err,
            size_t errlen) {
    *out = NULL;
    if (s_in->nstages < 1 || s_in->nmb < 1)
        return ppv_errf(err, errlen, "%s: no stage or microbatch to run", s_in->name);
    if (o->fault.kind == PPV_FAULT_CUT)
        return ppv_errf(err, errlen, "a cut fault is the pipeline's (ppv pp): a training step "
                        "has no chunks to cut");
    if (o->policy.kind == PPV_POLICY_PCT && o->policy.pct_steps <= 0) {
        /* PCT draws its change points over the run's length: measure it with a
         * round-robin run of the same step first (deterministic, so the PCT
         * run, and its replay, see the same length) */
        ppv_run_options probe = *o;
        probe.policy.kind = PPV_POLICY_RR;
        probe.perturb = 0;
        probe.progress = NULL;
        probe.fault.kind = PPV_FAULT_NONE;
        ppv_run_report *pr = NULL;
        if (ppv_run(s_in, &probe, &pr, err, errlen) < 0) return -1;
        ppv_run_options measured = *o;
        measured.policy.pct_steps = pr->world.steps > 0 ? pr->world.steps : 1;
        ppv_run_report_free(pr);
        return ppv_run(s_in, &measured, out, err, errlen);
    }
    ppv_check_options co = ppv_check_defaults();
    co.sem = o->sem;
    ppv_check_report *chk = NULL;
    if (ppv_schedule_check(s_in, &co, &chk, err, errlen) < 0) return -1;
    if (chk->errors_total > 0) {
        const ppv_problem *e = &chk->errors[0];
        if (e->index >= 0)
            ppv_errf(err, errlen, "%s: %s (rank %d, action %d); run 'ppv check' for every error",
                     s_in->name, e->message, e->rank, e->index);
        else
            ppv_errf(err, errlen, "%s: %s (rank %d); run 'ppv check' for every error", s_in->name,
                     e->message, e->rank);
        ppv_check_report_free(chk);
        return -1;
    }
    if (require_training(s_in, err, errlen) < 0) {
        ppv_check_report_free(chk);
        return -1;
    }
    if (chk->deadlock && s_in->form == PPV_FORM_COMPUTE_ONLY) {
        /* the compute order itself cannot progress: nothing to lower or run */
        ppv_run_report *rep = calloc(1, sizeof *rep);
        if (!rep) return ppv_errf(err, errlen, "out of memory");
        rep->nranks = s_in->nranks;
        rep->nstages = s_in->nstages;
        rep->nmb = s_in->nmb;
        rep->world.status = PPV_RUN_DEADLOCK;
        rep->world.blocked = chk->blocked;
        rep->world.nblocked = chk->nblocked;
        rep->world.cycle = chk->cycle;
        rep->world.ncycle = chk->ncycle;
        chk->blocked = chk->cycle = NULL;
        snprintf(rep->world.message, sizeof rep->world.message,
                 "deadlock in the compute order itself (found before running): %d of %d ranks "
                 "can never finish",
                 rep->world.nblocked, rep->nranks);
        ppv_check_report_free(chk);
        *out = rep;
        return 0;
    }
    ppv_schedule *lowered = NULL;
    const ppv_schedule *s = s_in;
    if (s_in->form == PPV_FORM_COMPUTE_ONLY && chk->checked) {
        lowered = chk->checked;
        chk->checked = NULL;
        s = lowered;
    }
    ppv_check_report_free(chk);

    ppv_model_config cfg = ppv_run_model_config(o, s);
    ppv_model *owned = o->weights ? NULL : ppv_model_new(&cfg, err, errlen);
    const ppv_model *model = o->weights ? o->weights : owned;
    ppv_run_report *rep = calloc(1, sizeof *rep);
    run_ctx c;
    memset(&c, 0, sizeof c);
    int rc = -1;
    if (!model || !rep) goto done;
    c.s = s;
    c.o = o;
    c.model = model;
    c.S = s->nstages;
    c.m = s->nmb;
    c.T = cfg.seq_len;
    c.C = cfg.d_model;
    c.tc = (size_t)c.T * (size_t)c.C;
    for (int32_t r = 0; r < s->nranks; r++) c.actions_total += s->prog[r].n;
    rep->nranks = s->nranks;
    rep->nstages = c.S;
    rep->nmb = c.m;
    rep->nlayers = cfg.layers;
    rep->stage_layer = malloc((size_t)(c.S + 1) * sizeof *rep->stage_layer);
    c.bytes = calloc((size_t)c.S, sizeof *c.bytes);
    c.slots = calloc((size_t)c.S * (size_t)c.m, sizeof *c.slots);
    c.inputs = calloc((size_t)c.m, sizeof *c.inputs);
    c.wdone = calloc((size_t)c.m, sizeof *c.wdone);
    c.gsum = calloc((size_t)c.S, sizeof *c.gsum);
    c.folded = calloc((size_t)c.S, sizeof *c.folded);
    c.loss = calloc((size_t)c.m, sizeof *c.loss);
    c.forwards = calloc((size_t)c.S * (size_t)c.m, sizeof *c.forwards);
    c.cur = calloc((size_t)s->nranks, sizeof *c.cur);
    c.peak = calloc((size_t)s->nranks, sizeof *c.peak);
    rep->peak_bytes = calloc((size_t)s->nranks, sizeof *rep->peak_bytes);
    rep->predicted_bytes = calloc((size_t)s->nranks, sizeof *rep->predicted_bytes);
    if (!rep->stage_layer || !c.bytes || !c.slots || !c.inputs || !c.wdone || !c.gsum ||
        !c.folded || !c.loss || !c.forwards || !c.cur || !c.peak || !rep->peak_bytes ||
        !rep->predicted_bytes)
        goto oom;
    split_layers(cfg.layers, c.S, rep->stage_layer);
    c.stage_layer = rep->stage_layer;
    for (int32_t st = 0; st < c.S; st++) {
        int32_t l0 = c.stage_layer[st], l1 = c.stage_layer[st + 1];
        c.bytes[st].saved = l0 < l1 ? (int64_t)ppv_layers_saved_bytes(model, l0, l1) : 0;
        c.bytes[st].wstate = l0 < l1 ? (int64_t)ppv_layers_wstate_bytes(model, l0, l1) : 0;
        c.bytes[st].input = (int64_t)(c.tc * sizeof(ppv_bf16));
    }
    if (ppv_predict_activation_bytes(s, c.bytes, o->recompute, rep->predicted_bytes) < 0) goto oom;

    ppv_world_options wo;
    memset(&wo, 0, sizeof wo);
    wo.nranks = s->nranks;
    wo.sem = o->sem;
    wo.policy = o->policy;
    wo.watchdog_steps = o->watchdog_steps;
    wo.fault = o->fault;
    ppv_world *w = ppv_world_new(&wo, err, errlen);
    if (!w) goto done;
    rep->trace = w;
    if (ppv_world_run(w, rank_main, &c, &rep->world) < 0 ||
        (rep->world.status == PPV_RUN_FAILED && rep->world.env_error)) {
        /* the step could not be carried out: an error, not a finding */
        ppv_errf(err, errlen, "%s", rep->world.message);
        goto done;
    }
    memcpy(rep->peak_bytes, c.peak, (size_t)s->nranks * sizeof *c.peak);
    rep->pct_steps = o->policy.kind == PPV_POLICY_PCT ? o->policy.pct_steps : 0;
    rep->grad_buffers_peak = c.held_peak;
    if (rep->world.status == PPV_RUN_DONE) {
        /* gradients: per stage, microbatches added in order */
        rep->ngrads = ppv_model_grad_count(model, 0, cfg.layers);
        rep->grads = calloc(rep->ngrads ? rep->ngrads : 1, sizeof *rep->grads);
        if (!rep->grads) goto oom;
        for (int32_t st = 0; st < c.S; st++) {
            int32_t l0 = c.stage_layer[st], l1 = c.stage_layer[st + 1];
            size_t base = ppv_model_grad_count(model, 0, l0),
                   n = ppv_model_grad_count(model, l0, l1);
            if (c.folded[st] < c.m) {
                ppv_errf(err, errlen, "stage %d never ran the weight backward of microbatch %d", st,
                         c.folded[st]);
                goto done;
            }
            if (n) memcpy(rep->grads + base, c.gsum[st], n * sizeof *rep->grads);
        }
        if (o->perturb && rep->ngrads > 0) { /* tests: one path made wrong by one ULP */
            uint32_t bits;
            memcpy(&bits, &rep->grads[0], sizeof bits);
            bits ^= 1u;
            memcpy(&rep->grads[0], &bits, sizeof bits);
        }
        double loss = 0;
        for (int32_t mb = 0; mb < c.m; mb++)
            loss += c.loss[mb];
        rep->mb_loss = c.loss;
        c.loss = NULL;
        rep->forwards = c.forwards;
        c.forwards = NULL;
        rep->loss = loss / c.m;
        rep->grad_digest = ppv_digest(rep->grads, rep->ngrads * sizeof *rep->grads);
    }
    *out = rep;
    rep = NULL;
    rc = 0;
    goto done;
oom:
    ppv_errf(err, errlen, "out of memory");
done:
    free_ctx(&c);
    ppv_run_report_free(rep);
    ppv_model_free(owned);
    ppv_schedule_free(lowered);
    return rc;
}

void ppv_run_report_free(ppv_run_report *r) {
    if (!r) return;
    ppv_world_result_free(&r->world);
    ppv_world_free(r->trace);
    free(r->stage_layer);
    free(r->grads);
    free(r->mb_loss);
    free(r->forwards);
    free(r->peak_bytes);
    free(r->predicted_bytes);
    free(r);
}

int ppv_run_reference(const ppv_model_config *cfg, int32_t nmb, float **grads, size_t *ngrads,
                      double *loss, char *err, size_t errlen) {
    *grads = NULL;
    ppv_model *m = ppv_model_new(cfg, err, errlen);
    if (!m) return -1;
    int32_t L = cfg->layers;
    size_t tc = (size_t)cfg->seq_len * (size_t)cfg->d_model, n = ppv_model_grad_count(m, 0, L);
    void *saved = malloc(ppv_layers_saved_bytes(m, 0, L) + 1);
    void *wstate = malloc(ppv_layers_wstate_bytes(m, 0, L) + 1);
    ppv_bf16 *y = malloc(tc * sizeof *y), *dy = malloc(tc * sizeof *dy),
             *dx = malloc(tc * sizeof *dx);
    float *g = calloc(n ? n : 1, sizeof *g), *one = malloc((n ? n : 1) * sizeof *one);
    int rc = -1;
    double total = 0;
    if (!saved || !wstate || !y || !dy || !dx || !g || !one) {
        ppv_errf(err, errlen, "out of memory");
        goto done;
    }
    for (int32_t mb = 0; mb < nmb; mb++) {
        ppv_mb_inputs in;
        if (ppv_mb_inputs_init(m, mb, &in) < 0) {
            ppv_errf(err, errlen, "out of memory");
            goto done;
        }
        int bad = ppv_layers_forward(m, 0, L, &in, in.x, y, saved) < 0;
        if (!bad) {
            total += ppv_loss_forward(m, &in, y);
            bad = ppv_loss_backward(m, &in, y, dy) < 0 ||
                  ppv_layers_backward_input(m, 0, L, &in, saved, dy, dx, wstate) < 0 ||
                  ppv_layers_backward_weight(m, 0, L, &in, wstate, one) < 0;
        }
        if (bad) {
            ppv_mb_inputs_free(&in);
            ppv_errf(err, errlen, "out of memory");
            goto done;
        }
        for (size_t k = 0; k < n; k++)
            g[k] += one[k];
        ppv_mb_inputs_free(&in);
    }
    *grads = g;
    g = NULL;
    *ngrads = n;
    *loss = total / nmb;
    rc = 0;
done:
    free(saved), free(wstate), free(y), free(dy), free(dx), free(g), free(one);
    ppv_model_free(m);
    return rc;
}

/* Names gradient index k of the full model: its layer, parameter tensor and
 * index within that tensor. */
static void name_gradient(const ppv_model *m, int64_t k, ppv_recompute_verdict *v) {
    const ppv_model_config *cfg = ppv_model_config_of(m);
    for (int32_t l = 0; l < cfg->layers; l++) {
        int64_t lo = (int64_t)ppv_model_grad_count(m, 0, l);
        int64_t hi = (int64_t)ppv_model_grad_count(m, 0, l + 1);
        if (k < lo || k >= hi) continue;
        v->first_layer = l;
        for (int i = 0; i < PPV_MODEL_PARAM_TENSORS; i++) {
            ppv_param_tensor pt;
            ppv_model_param_tensor(m, i, &pt);
            int64_t off = k - lo - (int64_t)pt.offset;
            if (off >= 0 && off < (int64_t)pt.rows * pt.cols) {
                snprintf(v->first_tensor, sizeof v->first_tensor, "%s", pt.name);
                v->first_tensor_index = off;
            }
        }
        return;
    }
}

int ppv_verify_recompute(const ppv_schedule *s, const ppv_run_options *o, ppv_recompute_verdict *v,
                         char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    v->first_layer = -1;
    v->first_tensor_index = -1;
    uint8_t *all = NULL;
    ppv_run_options so = *o, ro = *o;
    so.recompute = NULL;
    so.perturb = 0;
    if (!ro.recompute) {
        if (!(all = malloc((size_t)s->nstages + 1))) return ppv_errf(err, errlen, "out of memory");
        memset(all, 1, (size_t)s->nstages);
        ro.recompute = all;
    }
    int rc = -1;
    if (ppv_run(s, &so, &v->stash, err, errlen) < 0) goto done;
    if (ppv_run(s, &ro, &v->recompute, err, errlen) < 0) goto done;
    rc = 0;
    if (v->stash->world.status != PPV_RUN_DONE || v->recompute->world.status != PPV_RUN_DONE)
        goto done; /* the caller reports the run that did not complete */
    ppv_grads_compare(v->recompute->grads, v->stash->grads, v->stash->ngrads, &v->diff);
    if (!v->diff.bitwise_equal) {
        ppv_model_config cfg = ppv_run_model_config(o, s);
        ppv_model *m = ppv_model_new(&cfg, err, errlen);
        if (!m) {
            rc = -1;
            goto done;
        }
        name_gradient(m, v->diff.first_index, v);
        ppv_model_free(m);
    }
done:
    free(all);
    return rc;
}

void ppv_recompute_verdict_free(ppv_recompute_verdict *v) {
    ppv_run_report_free(v->stash);
    ppv_run_report_free(v->recompute);
    v->stash = v->recompute = NULL;
}
