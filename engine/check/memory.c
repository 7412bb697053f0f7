/* memory.c - memory in bytes per rank for a GPT-style model run on a
 * schedule (spec/memory-model.md): weights, gradients and optimizer state
 * from the parameters each rank's stages hold, activations from the
 * schedule's per-rank peak of live forwards weighted by each stage's
 * per-microbatch activation bytes.
 *
 * Sources: a GPT layer has 12h^2 + 13h parameters; mixed-precision Adam
 * keeps 16 bytes a parameter (16-bit weight and gradient, fp32 master
 * weight, momentum and variance: Rajbhandari et al., ZeRO, 2020); a
 * layer's activations are sbh(34 + 5as/h) bytes, divided by t under
 * tensor and sequence parallelism, 34sbh/t with selective recompute and
 * 2sbh/t (its input) with full recompute (Korthikanti et al., 2022,
 * table 2).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_internal.h"

static int set_int(const char *key, const char *val, int64_t lo, int64_t hi, int64_t *out,
                   char *err, size_t errlen) {
    int64_t v;
    if (ppv_parse_whole(val, lo, hi, &v) < 0)
        return ppv_errf(err, errlen, "--model: %s needs a whole number from %lld to %lld, not '%s'",
                        key, (long long)lo, (long long)hi, val);
    *out = v;
    return 0;
}

int ppv_model_spec_parse(const char *text, ppv_model_spec *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->mbs = 1;
    m->dtype_bytes = 2;
    m->optimizer = PPV_OPT_ADAM;
    m->tp = 1;
    m->recompute = PPV_MEMRC_NONE;
    ppv_pair items[16];
    char why[256];
    int n = ppv_parse_pairs(text, items, 16, why, sizeof why);
    if (n < 0) return ppv_errf(err, errlen, "--model: %s", why);
    int rc = 0;
    int64_t v = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const char *k = items[i].key, *val = items[i].value;
        if (strcmp(k, "layers") == 0) rc = set_int(k, val, 1, 1 << 20, &m->layers, err, errlen);
        else if (strcmp(k, "hidden") == 0) rc = set_int(k, val, 1, 1 << 24, &m->hidden, err, errlen);
        else if (strcmp(k, "heads") == 0) rc = set_int(k, val, 1, 1 << 16, &m->heads, err, errlen);
        else if (strcmp(k, "seq") == 0) rc = set_int(k, val, 1, 1 << 24, &m->seq, err, errlen);
        else if (strcmp(k, "mbs") == 0) rc = set_int(k, val, 1, 1 << 20, &m->mbs, err, errlen);
        else if (strcmp(k, "vocab") == 0) rc = set_int(k, val, 0, 1 << 26, &m->vocab, err, errlen);
        else if (strcmp(k, "tp") == 0) {
            rc = set_int(k, val, 1, 1 << 12, &v, err, errlen);
            m->tp = (int32_t)v;
        } else if (strcmp(k, "sp") == 0) {
            rc = set_int(k, val, 0, 1, &v, err, errlen);
            m->sp = (int)v;
        } else if (strcmp(k, "dtype") == 0) {
            if (strcmp(val, "bf16") != 0 && strcmp(val, "fp16") != 0)
                rc = ppv_errf(err, errlen, "--model: dtype is bf16 or fp16 (the byte formulas "
                              "are for 16-bit training), not '%s'", val);
        } else if (strcmp(k, "optimizer") == 0) {
            if (strcmp(val, "adam") == 0) m->optimizer = PPV_OPT_ADAM;
            else if (strcmp(val, "none") == 0) m->optimizer = PPV_OPT_NONE;
            else rc = ppv_errf(err, errlen, "--model: optimizer is adam or none, not '%s'", val);
        } else if (strcmp(k, "recompute") == 0) {
            if (strcmp(val, "none") == 0) m->recompute = PPV_MEMRC_NONE;
            else if (strcmp(val, "selective") == 0) m->recompute = PPV_MEMRC_SELECTIVE;
            else if (strcmp(val, "full") == 0) m->recompute = PPV_MEMRC_FULL;
            else rc = ppv_errf(err, errlen, "--model: recompute is none, selective or full, not "
                               "'%s'", val);
        } else {
            rc = ppv_errf(err, errlen, "--model: unknown key '%s' (layers hidden heads seq vocab "
                          "mbs dtype optimizer tp sp recompute)", k);
        }
    }
    if (rc < 0) return rc;
    if (!m->layers || !m->hidden || !m->heads || !m->seq)
        return ppv_errf(err, errlen, "--model needs layers, hidden, heads and seq (and vocab for "
                        "the embeddings), e.g. layers=24,hidden=2048,heads=16,seq=2048,vocab=50257");
    if (m->hidden % m->heads)
        return ppv_errf(err, errlen, "--model: hidden=%lld is not a multiple of heads=%lld",
                        (long long)m->hidden, (long long)m->heads);
    if (m->hidden % m->tp || m->heads % m->tp)
        return ppv_errf(err, errlen, "--model: tp=%d must divide hidden=%lld and heads=%lld",
                        m->tp, (long long)m->hidden, (long long)m->heads);
    if (m->sp && m->tp == 1)
        return ppv_errf(err, errlen, "--model: sp=1 (sequence parallelism) needs tp > 1%s", "");
    return 0;
}

/* One layer's parameters on one tensor-parallel rank: the QKV, projection
 * and MLP matrices (12h^2) and the QKV and first MLP biases (7h) are split
 * t ways; the projection and second MLP biases and both layer norms (6h)
 * are replicated. */
static double layer_params(const ppv_model_spec *m) {
    double h = (double)m->hidden;
    return (12 * h * h + 7 * h) / m->tp + 6 * h;
}

double ppv_layer_activation_bytes(const ppv_model_spec *m) {
    double s = (double)m->seq, b = (double)m->mbs, h = (double)m->hidden, a = (double)m->heads,
           t = (double)m->tp, sbh = s * b * h;
    int split = m->sp || m->tp == 1; /* everything in the layer divided by t */
    switch (m->recompute) {
    case PPV_MEMRC_FULL: return split ? 2 * sbh / t : 2 * sbh;
    case PPV_MEMRC_SELECTIVE: return split ? 34 * sbh / t : sbh * (10 + 24 / t);
    default: return split ? sbh * (34 + 5 * a * s / h) / t : sbh * (10 + 24 / t + 5 * a * s / (h * t));
    }
}

void ppv_memory_bytes_free(ppv_memory_bytes *b) {
    free(b->params);
    free(b->activations);
    free(b->peak_index);
    memset(b, 0, sizeof *b);
}

int ppv_schedule_memory_bytes(const ppv_schedule *s, const ppv_model_spec *m,
                              ppv_memory_bytes *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int32_t S = s->nstages, P = s->nranks;
    if (S < 1) return ppv_errf(err, errlen, "%s names no stage: no layers to place", s->name);
    if (m->layers < S)
        return ppv_errf(err, errlen, "--model: %lld layers cannot fill %d stages", (long long)m->layers,
                        S);
    double *stage_w = malloc((size_t)S * sizeof *stage_w);
    out->params = calloc((size_t)P, sizeof *out->params);
    out->activations = calloc((size_t)P, sizeof *out->activations);
    out->peak_index = calloc((size_t)P, sizeof *out->peak_index);
    if (!stage_w || !out->params || !out->activations || !out->peak_index) {
        free(stage_w);
        ppv_memory_bytes_free(out);
        return ppv_errf(err, errlen, "out of memory");
    }
    out->nranks = P;
    double per_layer = ppv_layer_activation_bytes(m), lp = layer_params(m);
    for (int32_t st = 0; st < S; st++) {
        /* layers split evenly, the first stages taking one more */
        int64_t layers = m->layers / S + (st < m->layers % S);
        stage_w[st] = (double)layers * per_layer;
        out->params[s->stage_rank[st]] += (double)layers * lp;
    }
    /* the word embedding (split t ways by vocabulary) and the position
     * embedding on stage 0's rank; the final layer norm and the output
     * layer, tied to a copy of the word embedding, on the last stage's */
    double h = (double)m->hidden, word = (double)m->vocab * h / m->tp;
    int32_t first = s->stage_rank[0], last = s->stage_rank[S - 1];
    out->params[first] += word + (double)m->seq * h;
    out->params[last] += 2 * h + (last == first ? 0 : word);
    ppv_mem_model mm = {1, 0, 0};
    int rc = ppv_schedule_peak_weighted(s, &mm, stage_w, out->activations, out->peak_index);
    free(stage_w);
    if (rc < 0) {
        ppv_memory_bytes_free(out);
        return ppv_errf(err, errlen, "out of memory");
    }
    return 0;
}

void ppv_memory_split(const ppv_model_spec *m, double params, double *weights, double *grads,
                      double *optimizer) {
    *weights = params * m->dtype_bytes;
    *grads = m->optimizer == PPV_OPT_NONE ? 0 : params * m->dtype_bytes;
    *optimizer = m->optimizer == PPV_OPT_ADAM ? params * 12 : 0;
}
