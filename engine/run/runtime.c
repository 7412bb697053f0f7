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
 * the forward's saved tensors (until the input backward), the
 * backward-for-inputs' state for the weight backward (until W), and a
 * recomputed stage's kept inputs (one a segment under layers:K, each until
 * what it rebuilds is back; a selective stage's saved tensors without the
 * attention cores, and one layer's cores while its input backward rebuilds
 * them). The recompute policies are in ppv_engine.h
 * (ppv_recompute_kind); ppv_predict_activation_bytes follows the same
 * rules from the schedule alone.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../engine_internal.h"
#include "ppv_run.h"

/* Per (stage, microbatch) buffers, owned by the stage's rank. */
typedef struct slot {
    ppv_bf16 *x;     /* stage input (T, C) */
    ppv_bf16 *y;     /* stage output, until sent or handed on */
    ppv_bf16 *dy;    /* gradient of the output */
    ppv_bf16 *dx;    /* gradient of the input, until sent or handed on */
    void *saved;     /* forward state for the backward (a checkpointed stage: of the
                        segment being rebuilt) */
    uint8_t mode;    /* ppv_recompute_kind applied, decided at the forward (never MB) */
    int32_t nseg;    /* segments: 1, or the checkpoints of a LAYERS stage */
    ppv_bf16 **ckpt; /* [nseg] recomputed: each segment's kept input, until rebuilt */
    void **wstate;   /* [nseg] each segment's state for the weight backward */
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
    int64_t *layer_forwards; /* [S] layer forward passes run */
    int64_t *core_rebuilds;  /* [S] layers whose attention cores were rebuilt */
    int32_t *stashed;        /* [P] forwards a rank holds stashed (for MB) */
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

/* The policy of stage st (NONE without any). */
static ppv_recompute policy_of(const ppv_recompute *rc, int32_t st) {
    ppv_recompute none = {PPV_RC_NONE, 0};
    return rc ? rc[st] : none;
}

/* The mode a forward of a stage with policy p runs in when its rank holds
 * `stashed` stashed forwards. */
static uint8_t mode_for(ppv_recompute p, int32_t stashed) {
    if (p.kind == PPV_RC_MB) return stashed >= p.k ? PPV_RC_FULL : PPV_RC_NONE;
    if (p.kind == PPV_RC_LAYERS && p.k <= 0) return PPV_RC_FULL;
    return p.kind;
}

/* Segments of a stage of L layers under mode with policy p: k layers each
 * (the last may be shorter) for LAYERS, else one. */
static int32_t seg_count(int32_t L, uint8_t mode, ppv_recompute p) {
    if (mode != PPV_RC_LAYERS || L <= 0) return 1;
    return (L + p.k - 1) / p.k;
}

/* Layers of segment j, as offsets [*a, *b) into the stage. */
static void seg_range(int32_t L, uint8_t mode, ppv_recompute p, int32_t j, int32_t *a, int32_t *b) {
    if (mode != PPV_RC_LAYERS) {
        *a = 0, *b = L;
        return;
    }
    *a = j * p.k;
    *b = *a + p.k < L ? *a + p.k : L;
}

int ppv_recompute_modes(const ppv_schedule *s, const ppv_recompute *recompute, uint8_t *mode) {
    memset(mode, 0, (size_t)s->nstages * (size_t)s->nmb);
    for (int32_t r = 0; r < s->nranks; r++) {
        int32_t stashed = 0;
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            const ppv_action *a = &s->prog[r].acts[i];
            if (a->stage < 0 || a->mb < 0) continue;
            uint8_t *md = &mode[(size_t)a->stage * s->nmb + a->mb];
            if (a->kind == PPV_ACT_F) {
                *md = mode_for(policy_of(recompute, a->stage), stashed);
                stashed += *md == PPV_RC_NONE;
            } else if ((a->kind == PPV_ACT_I || a->kind == PPV_ACT_B) && *md == PPV_RC_NONE) {
                stashed--;
            }
        }
    }
    return 0;
}

int ppv_predict_activation_bytes(const ppv_schedule *s, const ppv_stage_bytes *bytes,
                                 const ppv_recompute *recompute, int64_t *peak) {
    int32_t S = s->nstages, m = s->nmb;
    uint8_t *mode = calloc((size_t)S * (size_t)m + 1, 1);
    uint8_t *regen = calloc((size_t)S * (size_t)m + 1, 1);
    if (!mode || !regen) {
        free(mode), free(regen);
        return -1;
    }
    ppv_recompute_modes(s, recompute, mode);
    for (int32_t r = 0; r < s->nranks; r++) {
        int64_t cur = 0, top = 0;
#define ADD(n) (cur += (n), top = cur > top ? cur : top)
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            const ppv_action *a = &s->prog[r].acts[i];
            if (a->stage < 0 || a->mb < 0) continue;
            const ppv_stage_bytes *b = &bytes[a->stage];
            ppv_recompute p = policy_of(recompute, a->stage);
            size_t cell = (size_t)a->stage * m + a->mb;
            uint8_t *md = &mode[cell], *g = &regen[cell];
            int32_t L = b->layers, n = seg_count(L, *md, p), sa, sb;
            switch (a->kind) {
            case PPV_ACT_F:
                if (*md == PPV_RC_NONE || *md == PPV_RC_SELECTIVE) {
                    ADD(*md == PPV_RC_NONE ? b->saved : b->selective_saved);
                    break;
                }
                /* each segment's input kept, its saved held while it runs */
                for (int32_t j = 0; j < n; j++) {
                    seg_range(L, *md, p, j, &sa, &sb);
                    ADD(b->input);
                    ADD((sb - sa) * b->layer_saved);
                    cur -= (sb - sa) * b->layer_saved;
                }
                break;
            case PPV_ACT_R:
            case PPV_ACT_I:
            case PPV_ACT_B:
                /* a FULL stage rebuilds saved beside its kept input, which
                 * goes as soon as saved is back */
                if (*md == PPV_RC_FULL && !*g) {
                    ADD(b->saved);
                    cur -= b->input, *g = 1;
                }
                if (a->kind == PPV_ACT_R) break;
                for (int32_t j = n - 1; j >= 0; j--) {
                    seg_range(L, *md, p, j, &sa, &sb);
                    int64_t sv = *md == PPV_RC_LAYERS      ? (sb - sa) * b->layer_saved
                                 : *md == PPV_RC_SELECTIVE ? b->selective_saved
                                                           : b->saved;
                    int64_t ws = *md == PPV_RC_LAYERS ? (sb - sa) * b->layer_wstate : b->wstate;
                    if (*md == PPV_RC_LAYERS) { /* this segment rebuilt from its input */
                        ADD(sv);
                        cur -= b->input;
                    }
                    /* saved and wstate live together while the input
                     * backward runs (with a layer's rebuilt attention
                     * cores, selective); then saved goes */
                    ADD(ws);
                    if (*md == PPV_RC_SELECTIVE) {
                        ADD(b->core);
                        cur -= b->core;
                    }
                    cur -= sv;
                }
                if (a->kind == PPV_ACT_B) cur -= b->wstate;
                break;
            case PPV_ACT_W:
                cur -= b->wstate;
                break;
            default:
                break;
            }
        }
#undef ADD
        peak[r] = top;
    }
    free(mode);
    free(regen);
    return 0;
}

/* ---- executing actions ---------------------------------------------------- */

static slot *slot_of(run_ctx *c, int32_t stage, int32_t mb) {
    return &c->slots[(size_t)stage * c->m + mb];
}

static ppv_recompute stage_policy(const run_ctx *c, int32_t s) {
    return policy_of(c->o->recompute, s);
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

/* Runs stage-relative layers [a, b) of stage s on x into a fresh *y,
 * saving into a fresh sl->saved (counted). */
static int seg_forward(run_ctx *c, int32_t rank, int32_t s, const ppv_mb_inputs *in, slot *sl,
                       int32_t a, int32_t b, const ppv_bf16 *x, ppv_bf16 **y) {
    int32_t l0 = c->stage_layer[s];
    int sel = sl->mode == PPV_RC_SELECTIVE; /* then a, b span the stage */
    *y = NULL;
    sl->saved = act_alloc(c, rank, sel ? c->bytes[s].selective_saved
                                       : (b - a) * c->bytes[s].layer_saved);
    ppv_bf16 *out = malloc(c->tc * sizeof *out);
    if (!sl->saved || !out) {
        free(out);
        return -1;
    }
    c->layer_forwards[s] += b - a; /* evidence for verify-recompute: counted where it runs */
    int rc = a >= b ? (memcpy(out, x, c->tc * sizeof *out), 0)
             : sel  ? ppv_layers_forward_selective(c->model, l0 + a, l0 + b, in, x, out, sl->saved)
                    : ppv_layers_forward(c->model, l0 + a, l0 + b, in, x, out, sl->saved);
    *y = out;
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
    if (sl->saved || sl->ckpt) {
        ppv_world_fail(t, rank, "%dF%d runs twice", s, mb);
        return -1;
    }
    ppv_recompute p = stage_policy(c, s);
    int32_t L = c->bytes[s].layers;
    sl->mode = mode_for(p, c->stashed[rank]);
    sl->nseg = seg_count(L, sl->mode, p);
    sl->wstate = calloc((size_t)sl->nseg, sizeof *sl->wstate);
    if (!sl->wstate) return -1;
    c->forwards[sl - c->slots]++;
    ppv_bf16 *y = NULL;
    if (sl->mode == PPV_RC_NONE || sl->mode == PPV_RC_SELECTIVE) {
        if (seg_forward(c, rank, s, in, sl, 0, L, x, &y) < 0) {
            free(y);
            return -1;
        }
        c->stashed[rank] += sl->mode == PPV_RC_NONE;
    } else {
        /* keep each segment's input; its saved tensors only while it runs */
        if (!(sl->ckpt = calloc((size_t)sl->nseg, sizeof *sl->ckpt))) return -1;
        const ppv_bf16 *xin = x;
        for (int32_t j = 0; j < sl->nseg; j++) {
            int32_t sa, sb;
            seg_range(L, sl->mode, p, j, &sa, &sb);
            if (!(sl->ckpt[j] = act_alloc(c, rank, c->bytes[s].input))) return -1;
            memcpy(sl->ckpt[j], xin, c->tc * sizeof *xin);
            free(y);
            if (seg_forward(c, rank, s, in, sl, sa, sb, sl->ckpt[j], &y) < 0) {
                free(y);
                return -1;
            }
            act_free(c, rank, &sl->saved, (sb - sa) * c->bytes[s].layer_saved);
            xin = y;
        }
    }
    free(sl->y);
    sl->y = y;
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

/* Rebuilds the saved tensors of segment j of a recomputed (s, mb) from its
 * kept input, which then goes (saved holds the segment's input). */
static int rebuild(run_ctx *c, ppv_transport *t, int32_t rank, int32_t s, int32_t mb, int32_t j) {
    slot *sl = slot_of(c, s, mb);
    if (sl->saved) { /* what recompute promises: nothing kept from the forward */
        ppv_world_fail(t, rank, "%dR%d: stage %d is recomputed but still holds its forward's saved "
                       "tensors", s, mb, s);
        return -1;
    }
    if (!sl->ckpt || !sl->ckpt[j]) {
        ppv_world_fail(t, rank, "%dR%d: no stashed input (forward missing)", s, mb);
        return -1;
    }
    const ppv_mb_inputs *in = inputs_of(c, t, rank, mb);
    if (!in) return -1;
    int32_t sa, sb;
    seg_range(c->bytes[s].layers, sl->mode, stage_policy(c, s), j, &sa, &sb);
    if (j == sl->nseg - 1) c->forwards[sl - c->slots]++; /* one more pass over the stage */
    ppv_bf16 *y = NULL;
    int rc = seg_forward(c, rank, s, in, sl, sa, sb, sl->ckpt[j], &y);
    free(y);
    if (rc == 0) act_free(c, rank, (void **)&sl->ckpt[j], c->bytes[s].input);
    ppv_world_progress(t, rank);
    return rc;
}

/* R: a FULL stage rebuilds its saved tensors now (once); a checkpointed
 * one rebuilds a segment at a time in its input backward. */
static int do_recompute(run_ctx *c, ppv_transport *t, int32_t rank, int32_t s, int32_t mb) {
    slot *sl = slot_of(c, s, mb);
    if (sl->mode != PPV_RC_FULL || (sl->saved && sl->ckpt && !sl->ckpt[0])) return 0;
    return rebuild(c, t, rank, s, mb, 0);
}

static int do_backward_input(run_ctx *c, ppv_transport *t, int32_t rank, const ppv_action *a) {
    int32_t s = a->stage, mb = a->mb;
    slot *sl = slot_of(c, s, mb);
    if (!sl->wstate) {
        ppv_world_fail(t, rank, "%d%s%d before its forward", s, ppv_action_token(a->kind), mb);
        return -1;
    }
    if (do_recompute(c, t, rank, s, mb) < 0) return -1;
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
    ppv_recompute p = stage_policy(c, s);
    int32_t L = c->bytes[s].layers, l0 = c->stage_layer[s];
    const ppv_bf16 *g = sl->dy;
    ppv_bf16 *dx = NULL;
    /* the last segment first; a checkpointed segment is rebuilt just
     * before its backward */
    for (int32_t j = sl->nseg - 1; j >= 0; j--) {
        int32_t sa, sb;
        seg_range(L, sl->mode, p, j, &sa, &sb);
        if (sl->mode == PPV_RC_LAYERS && rebuild(c, t, rank, s, mb, j) < 0) goto fail;
        if (!sl->saved) {
            ppv_world_fail(t, rank, "%d%s%d before its forward", s, ppv_action_token(a->kind), mb);
            goto fail;
        }
        int sel = sl->mode == PPV_RC_SELECTIVE;
        int64_t sv = sel ? c->bytes[s].selective_saved : (sb - sa) * c->bytes[s].layer_saved;
        sl->wstate[j] = act_alloc(c, rank, (sb - sa) * c->bytes[s].layer_wstate);
        ppv_bf16 *out = malloc(c->tc * sizeof *out);
        if (!sl->wstate[j] || !out) {
            free(out);
            goto fail;
        }
        if (sa < sb && sel) { /* the attention cores come back a layer at a time */
            void *core = act_alloc(c, rank, c->bytes[s].core);
            int n = core ? ppv_layers_backward_input_selective(c->model, l0 + sa, l0 + sb, in,
                                                               sl->saved, g, out, sl->wstate[j],
                                                               core)
                         : -1;
            act_free(c, rank, &core, c->bytes[s].core);
            if (n < 0) {
                free(out);
                goto fail;
            }
            c->core_rebuilds[s] += n;
        } else if (sa < sb) {
            if (ppv_layers_backward_input(c->model, l0 + sa, l0 + sb, in, sl->saved, g, out,
                                          sl->wstate[j]) < 0) {
                free(out);
                goto fail;
            }
        } else
            memcpy(out, g, c->tc * sizeof *out);
        /* the weight backward reads wstate alone: saved goes now */
        act_free(c, rank, &sl->saved, sv);
        free(dx);
        dx = out;
        g = dx;
    }
    if (sl->mode == PPV_RC_NONE) c->stashed[rank]--;
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
fail:
    free(dx);
    return -1;
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
    if (!sl->wstate || !sl->wstate[0]) {
        ppv_world_fail(t, rank, "%dW%d before its I", s, mb);
        return -1;
    }
    const ppv_mb_inputs *in = inputs_of(c, t, rank, mb);
    if (!in) return -1;
    ppv_recompute p = stage_policy(c, s);
    int32_t L = c->bytes[s].layers, l0 = c->stage_layer[s], l1 = c->stage_layer[s + 1];
    size_t n = ppv_model_grad_count(c->model, l0, l1);
    sl->dparams = malloc((n ? n : 1) * sizeof *sl->dparams);
    if (!sl->dparams) return -1;
    if (++c->held > c->held_peak) c->held_peak = c->held;
    for (int32_t j = 0; j < sl->nseg; j++) { /* each segment's layers from its own state */
        int32_t sa, sb;
        seg_range(L, sl->mode, p, j, &sa, &sb);
        float *dp = sl->dparams + ppv_model_grad_count(c->model, l0, l0 + sa);
        if (sa < sb &&
            ppv_layers_backward_weight(c->model, l0 + sa, l0 + sb, in, sl->wstate[j], dp) < 0)
            return -1;
    }
    if (fold_grads(c, s) < 0) {
        ppv_world_fail_env(t, rank, "out of memory");
        return -1;
    }
    for (int32_t j = 0; j < sl->nseg; j++) {
        int32_t sa, sb;
        seg_range(L, sl->mode, p, j, &sa, &sb);
        act_free(c, rank, &sl->wstate[j], (sb - sa) * c->bytes[s].layer_wstate);
    }
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
        return do_recompute(c, t, rank, a->stage, a->mb);
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

/* ---- the step on processes ------------------------------------------------------ */

/* After every rank's program ran in its own process, each process holds
 * what its stages computed: every stage's owner broadcasts its results
 * (gradient sums, forward counts), the last stage's owner the losses and
 * every rank its memory peak, so that every process ends with the whole
 * report. held_peak is the most one process held. 0, or -1 out of memory
 * (a failed broadcast ends the job). */
static int share_results(run_ctx *c, ppv_transport *t, int32_t me) {
    const ppv_schedule *s = c->s;
    const ppv_transport_ops *x = t->ops;
    for (int32_t st = 0; st < c->S; st++) {
        int32_t root = s->stage_rank[st];
        size_t n = ppv_model_grad_count(c->model, c->stage_layer[st], c->stage_layer[st + 1]);
        if (!c->gsum[st] && !(c->gsum[st] = calloc(n ? n : 1, sizeof *c->gsum[st]))) return -1;
        x->broadcast(t->impl, me, &c->folded[st], sizeof c->folded[st], root, 0, "folded");
        x->broadcast(t->impl, me, c->gsum[st], n * sizeof *c->gsum[st], root, 0, "gradients");
        x->broadcast(t->impl, me, c->forwards + (size_t)st * c->m,
                     (size_t)c->m * sizeof *c->forwards, root, 0, "forwards");
        x->broadcast(t->impl, me, &c->layer_forwards[st], sizeof *c->layer_forwards, root, 0,
                     "layer forwards");
        x->broadcast(t->impl, me, &c->core_rebuilds[st], sizeof *c->core_rebuilds, root, 0,
                     "core rebuilds");
    }
    x->broadcast(t->impl, me, c->loss, (size_t)c->m * sizeof *c->loss, s->stage_rank[c->S - 1], 0,
                 "losses");
    for (int32_t r = 0; r < s->nranks; r++)
        x->broadcast(t->impl, me, &c->peak[r], sizeof *c->peak, r, 0, "peak bytes");
    int32_t *held = malloc((size_t)s->nranks * sizeof *held);
    if (!held) return -1;
    x->allgather(t->impl, me, &c->held_peak, held, sizeof *held, 0, "gradient buffers");
    for (int32_t r = 0; r < s->nranks; r++)
        if (held[r] > c->held_peak) c->held_peak = held[r];
    free(held);
    return 0;
}

/* This process's rank of the step, on o->proc. A failure on any rank ends
 * the job there (the transport reports it), so a return is a finished
 * step. 0, or -1 with the reason. */
static int run_on_processes(run_ctx *c, const ppv_run_options *o, ppv_world_result *res, char *err,
                            size_t errlen) {
    const ppv_schedule *s = c->s;
    int32_t me = ppv_proc_rank(o->proc), n = ppv_proc_size(o->proc);
    if (n != s->nranks)
        return ppv_errf(err, errlen, "%s has %d ranks but the job has %d processes (mpirun -np %d)",
                        s->name, s->nranks, n, s->nranks);
    if (!(o->timeout_s > 0)) return ppv_errf(err, errlen, "the timeout must be positive");
    if (o->policy.kind != PPV_POLICY_RR || o->fault.kind != PPV_FAULT_NONE)
        return ppv_errf(err, errlen,
                        "policies, faults and replayed decisions are the mock's; on "
                        "processes the transport orders the ranks");
    ppv_proc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.sem = o->sem;
    cfg.timeout_s = o->timeout_s;
    ppv_transport t;
    if (ppv_proc_configure(o->proc, &cfg, &t, err, errlen) < 0) return -1;
    rank_main(&t, me, c);
    ppv_proc_settle(o->proc);
    if (share_results(c, &t, me) < 0) return ppv_errf(err, errlen, "out of memory");
    memset(res, 0, sizeof *res);
    res->status = PPV_RUN_DONE;
    res->failed_rank = -1;
    return 0;
}

/* ---- the step --------------------------------------------------------------- */

/* One POLICY word (and its count) into *p; 0 or -1 with the reason. */
static int parse_policy(const char *item, const char *w, ppv_recompute *p, char *err,
                        size_t errlen) {
    const char *colon = strchr(w, ':');
    size_t n = colon ? (size_t)(colon - w) : strlen(w);
    if ((n == 4 && strncmp(w, "none", 4) == 0) || (n == 4 && strncmp(w, "full", 4) == 0) ||
        (n == 3 && strncmp(w, "all", 3) == 0) || (n == 9 && strncmp(w, "selective", 9) == 0)) {
        if (colon) return ppv_errf(err, errlen, "'%s': %.*s takes no count", item, (int)n, w);
        *p = (ppv_recompute){w[0] == 'n'   ? PPV_RC_NONE
                             : w[0] == 's' ? PPV_RC_SELECTIVE
                                           : PPV_RC_FULL,
                             0};
        return 0;
    }
    int layers = n == 6 && strncmp(w, "layers", 6) == 0, mb = n == 2 && strncmp(w, "mb", 2) == 0;
    if (!layers && !mb)
        return ppv_errf(err, errlen,
                        "'%s': a policy is none, full, selective (rebuild the attention cores), "
                        "layers:K (a checkpoint every K layers) or mb:N (stash N forwards a "
                        "rank, recompute the rest)",
                        item);
    int64_t k = -1;
    if (!colon || ppv_parse_whole(colon + 1, layers ? 1 : 0, 1 << 30, &k) < 0)
        return ppv_errf(err, errlen, "'%s': %s needs a count %s", item, layers ? "layers" : "mb",
                        layers ? "of 1 or more layers a segment" : "of 0 or more forwards");
    *p = (ppv_recompute){layers ? PPV_RC_LAYERS : PPV_RC_MB, (int32_t)k};
    return 0;
}

int ppv_recompute_parse(const char *text, int32_t nstages, ppv_recompute *out, char *err,
                        size_t errlen) {
    for (int32_t st = 0; st < nstages; st++)
        out[st] = (ppv_recompute){PPV_RC_NONE, 0};
    if (!*text) return ppv_errf(err, errlen, "'': an empty list");
    int rc = 0, got;
    char item[256];
    const char *next = text;
    while (rc == 0 && (got = ppv_list_next(&next, item, sizeof item)) != 0) {
        if (got < 0) {
            rc = ppv_errf(err, errlen, "'%s': an empty item (or one of 256 characters or more)",
                          text);
            break;
        }
        int64_t st = -1;
        const char *pol = item;
        if (*item >= '0' && *item <= '9') {
            char *colon = strchr(item, ':');
            const char *end = colon ? colon : item + strlen(item);
            char num[32];
            size_t len = (size_t)(end - item);
            snprintf(num, sizeof num, "%.*s", (int)(len < sizeof num ? len : sizeof num - 1), item);
            if (len >= sizeof num || ppv_parse_whole(num, 0, INT32_MAX, &st) < 0) {
                rc = ppv_errf(err, errlen, "'%s' is not STAGE, STAGE:POLICY or POLICY", item);
                break;
            }
            if (nstages >= 0 && st >= nstages) {
                rc = ppv_errf(err, errlen, "'%s': the schedule's stages are 0..%d", item,
                              nstages - 1);
                break;
            }
            pol = *end ? end + 1 : "full";
        }
        ppv_recompute p;
        if ((rc = parse_policy(item, pol, &p, err, errlen)) < 0) break;
        for (int32_t k = 0; k < nstages; k++)
            if (st < 0 || k == st) out[k] = p;
    }
    return rc;
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
    o.timeout_s = 60;
    return o;
}

void ppv_grads_compare(const float *a, const float *b, size_t n, ppv_grad_diff *d) {
    memset(d, 0, sizeof *d);
    d->bitwise_equal = 1;
    d->first_index = -1;
    double dd = 0, bb = 0;
    for (size_t k = 0; k < n; k++) {
        double dk = (double)a[k] - (double)b[k];
        if (b[k] == b[k]) bb += (double)b[k] * b[k];
        if (dk == dk)
            dd += dk * dk;
        else if (a[k] == a[k] || b[k] == b[k]) /* NaN on one side only */
            dd = INFINITY;
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
    d->rel_l2 = bb > 0 ? sqrt(dd / bb) : (dd > 0 ? INFINITY : 0.0);
}

static void free_ctx(run_ctx *c) {
    if (c->slots)
        for (size_t k = 0; k < (size_t)c->S * (size_t)c->m; k++) {
            slot *sl = &c->slots[k];
            free(sl->x), free(sl->y), free(sl->dy), free(sl->dx), free(sl->saved);
            for (int32_t j = 0; j < sl->nseg; j++) {
                if (sl->ckpt) free(sl->ckpt[j]);
                if (sl->wstate) free(sl->wstate[j]);
            }
            free(sl->ckpt), free(sl->wstate), free(sl->dparams);
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
    free(c->layer_forwards);
    free(c->core_rebuilds);
    free(c->stashed);
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
    if (o->policy.kind == PPV_POLICY_PCT && o->policy.pct_steps <= 0 && !o->proc) {
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
    int refuse = o->proc && !o->allow_unsafe;
    if (chk->deadlock && (s_in->form == PPV_FORM_COMPUTE_ONLY || refuse)) {
        /* the compute order itself cannot progress: nothing to lower or
         * run; or processes would be launched into a deadlock the check
         * has already found */
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
        char sem[64];
        ppv_semantics_format(&o->sem, sem, sizeof sem);
        if (s_in->form == PPV_FORM_COMPUTE_ONLY)
            snprintf(rep->world.message, sizeof rep->world.message,
                     "deadlock in the compute order itself (found before running): %d of %d "
                     "ranks can never finish",
                     rep->world.nblocked, rep->nranks);
        else
            snprintf(rep->world.message, sizeof rep->world.message,
                     "deadlock under %s, found by the check before launching: %d of %d ranks "
                     "can never finish (--allow-unsafe launches it, and the watchdog reports "
                     "the hang)",
                     sem, rep->world.nblocked, rep->nranks);
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
    if (owned && o->device && ppv_model_set_device(owned, o->device, err, errlen) < 0) goto done;
    if (o->device && strcmp(ppv_model_device(model), o->device) != 0) {
        ppv_errf(err, errlen, "the given weights run on %s, not %s", ppv_model_device(model),
                 o->device);
        goto done;
    }
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
    c.layer_forwards = calloc((size_t)c.S + 1, sizeof *c.layer_forwards);
    c.core_rebuilds = calloc((size_t)c.S + 1, sizeof *c.core_rebuilds);
    c.stashed = calloc((size_t)s->nranks, sizeof *c.stashed);
    c.cur = calloc((size_t)s->nranks, sizeof *c.cur);
    c.peak = calloc((size_t)s->nranks, sizeof *c.peak);
    rep->peak_bytes = calloc((size_t)s->nranks, sizeof *rep->peak_bytes);
    rep->predicted_bytes = calloc((size_t)s->nranks, sizeof *rep->predicted_bytes);
    if (!rep->stage_layer || !c.bytes || !c.slots || !c.inputs || !c.wdone || !c.gsum ||
        !c.folded || !c.loss || !c.forwards || !c.layer_forwards || !c.core_rebuilds ||
        !c.stashed || !c.cur ||
        !c.peak || !rep->peak_bytes ||
        !rep->predicted_bytes)
        goto oom;
    split_layers(cfg.layers, c.S, rep->stage_layer);
    c.stage_layer = rep->stage_layer;
    for (int32_t st = 0; st < c.S; st++) {
        int32_t l0 = c.stage_layer[st], l1 = c.stage_layer[st + 1];
        c.bytes[st].saved = l0 < l1 ? (int64_t)ppv_layers_saved_bytes(model, l0, l1) : 0;
        c.bytes[st].wstate = l0 < l1 ? (int64_t)ppv_layers_wstate_bytes(model, l0, l1) : 0;
        c.bytes[st].input = (int64_t)(c.tc * sizeof(ppv_bf16));
        c.bytes[st].layers = l1 - l0;
        c.bytes[st].layer_saved = l0 < l1 ? c.bytes[st].saved / (l1 - l0) : 0;
        c.bytes[st].layer_wstate = l0 < l1 ? c.bytes[st].wstate / (l1 - l0) : 0;
        c.bytes[st].selective_saved =
            l0 < l1 ? (int64_t)ppv_layers_selective_saved_bytes(model, l0, l1) : 0;
        c.bytes[st].core = l0 < l1 ? (int64_t)ppv_layer_core_bytes(model) : 0;
    }
    if (ppv_predict_activation_bytes(s, c.bytes, o->recompute, rep->predicted_bytes) < 0) goto oom;

    if (o->proc) {
        if (run_on_processes(&c, o, &rep->world, err, errlen) < 0) goto done;
        goto results;
    }
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
results:
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
        rep->layer_forwards = c.layer_forwards;
        c.layer_forwards = NULL;
        rep->core_rebuilds = c.core_rebuilds;
        c.core_rebuilds = NULL;
        rep->loss = loss / c.m;
        rep->grad_digest = ppv_digest(rep->grads, rep->ngrads * sizeof *rep->grads);
    }
    if (ppv_model_device_status(model, err, errlen) < 0) goto done; /* results not to be trusted */
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
    free(r->layer_forwards);
    free(r->core_rebuilds);
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
    ppv_recompute *all = NULL;
    ppv_run_options so = *o, ro = *o;
    so.recompute = NULL;
    so.perturb = 0;
    if (!ro.recompute) {
        if (!(all = malloc(((size_t)s->nstages + 1) * sizeof *all)))
            return ppv_errf(err, errlen, "out of memory");
        for (int32_t st = 0; st < s->nstages; st++)
            all[st] = (ppv_recompute){PPV_RC_FULL, 0};
        ro.recompute = all;
    }
    int rc = -1;
    if (ppv_run(s, &so, &v->stash, err, errlen) < 0) goto done;
    if (ppv_run(s, &ro, &v->recompute, err, errlen) < 0) goto done;
    rc = 0;
    if (v->stash->world.status != PPV_RUN_DONE || v->recompute->world.status != PPV_RUN_DONE)
        goto done; /* the caller reports the run that did not complete */
    ppv_grads_compare(v->recompute->grads, v->stash->grads, v->stash->ngrads, &v->diff);
    if (ppv_recompute_evidence_of(s, o->recompute, v->stash, v->recompute, &v->evidence) < 0) {
        rc = ppv_errf(err, errlen, "out of memory");
        goto done;
    }
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

int ppv_recompute_evidence_of(const ppv_schedule *s, const ppv_recompute *recompute,
                              const ppv_run_report *stash, const ppv_run_report *rec,
                              ppv_recompute_evidence *ev) {
    memset(ev, 0, sizeof *ev);
    if (stash->world.status != PPV_RUN_DONE || rec->world.status != PPV_RUN_DONE ||
        stash->nstages != s->nstages || rec->nstages != s->nstages || stash->nmb != s->nmb ||
        rec->nmb != s->nmb || stash->nranks != s->nranks || rec->nranks != s->nranks)
        return -1;
    uint8_t *mode = calloc((size_t)s->nstages * (size_t)s->nmb + 1, 1);
    if (!mode) return -1;
    if (recompute)
        ppv_recompute_modes(s, recompute, mode);
    else
        memset(mode, PPV_RC_FULL, (size_t)s->nstages * (size_t)s->nmb);
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            const ppv_action *a = &s->prog[r].acts[i];
            int back =
                (a->kind == PPV_ACT_B || a->kind == PPV_ACT_I) && a->stage >= 0 && a->mb >= 0;
            uint8_t md = back ? mode[(size_t)a->stage * s->nmb + a->mb] : PPV_RC_NONE;
            ev->want_stash_forwards += a->kind == PPV_ACT_F;
            ev->want_recompute_forwards +=
                a->kind == PPV_ACT_F || (md != PPV_RC_NONE && md != PPV_RC_SELECTIVE);
            if (md == PPV_RC_SELECTIVE)
                ev->want_core_rebuilds +=
                    stash->stage_layer[a->stage + 1] - stash->stage_layer[a->stage];
        }
    free(mode);
    for (int64_t k = 0; k < (int64_t)s->nstages * s->nmb; k++)
        ev->stash_forwards += stash->forwards[k], ev->recompute_forwards += rec->forwards[k];
    for (int32_t st = 0; st < s->nstages; st++) {
        int32_t L = stash->stage_layer[st + 1] - stash->stage_layer[st];
        ev->core_rebuilds += rec->core_rebuilds[st] + stash->core_rebuilds[st];
        ev->stash_layer_forwards += stash->layer_forwards[st];
        ev->recompute_layer_forwards += rec->layer_forwards[st];
        if (L > 0)
            ev->extra_forward_units +=
                (double)(rec->layer_forwards[st] - stash->layer_forwards[st]) / L;
    }
    ev->forwards_ok = ev->stash_forwards == ev->want_stash_forwards &&
                      ev->recompute_forwards == ev->want_recompute_forwards &&
                      ev->core_rebuilds == ev->want_core_rebuilds;
    ev->peaks_ok = 1;
    for (int32_t r = 0; r < s->nranks; r++)
        ev->peaks_ok &= stash->peak_bytes[r] == stash->predicted_bytes[r] &&
                        rec->peak_bytes[r] == rec->predicted_bytes[r];
    return 0;
}

void ppv_recompute_verdict_free(ppv_recompute_verdict *v) {
    ppv_run_report_free(v->stash);
    ppv_run_report_free(v->recompute);
    v->stash = v->recompute = NULL;
}
