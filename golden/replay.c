/* replay.c - `ppv replay`: rebuild a recorded run from its golden file
 * alone (weights, schedule, options, inputs), run it again and compare
 * the loss and gradients with the recorded ones. Memory: the model, the
 * run's own state, and one gradient tensor of the file at a time; inputs
 * are read per microbatch when the run first needs them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden_internal.h"

typedef struct replay_ctx {
    hid_t file, bf16;
    const ppv_model_config *cfg;
    char load_err[512]; /* set when reading a microbatch's inputs failed */
} replay_ctx;

/* Checks the root attributes: a ppv golden file of a supported version,
 * recording a training step. */
static int check_header(hid_t f, const char *path, char *err, size_t errlen) {
    int is = h5_ppv_file(f, path, err, errlen);
    if (is < 0) return -1;
    if (is == 0)
        return gerr(err, errlen, "%s: not a ppv golden file (no ppv_format = \"%s\" attribute)",
                    path, PPV_GOLDEN_FORMAT_NAME);
    char *kind = NULL;
    int rc = -1;
    if (h5_read_attr_str(f, "kind", &kind) < 0)
        gerr(err, errlen, "%s: no kind attribute", path);
    else if (strcmp(kind, "inference") == 0)
        gerr(err, errlen,
             "%s: an inference recording; replaying envelopes needs the generator stage of the "
             "PP inference contract, which this ppv does not have yet (it replays training files)",
             path);
    else if (strcmp(kind, "training") != 0)
        gerr(err, errlen, "%s: unknown kind '%s'", path, kind);
    else
        rc = 0;
    free(kind);
    return rc;
}

static int read_config(hid_t f, ppv_model_config *cfg, char *err, size_t errlen) {
    hid_t g = H5Lexists(f, "model", H5P_DEFAULT) > 0 ? H5Gopen2(f, "model", H5P_DEFAULT) : -1;
    if (g < 0) return gerr(err, errlen, "/model: missing");
    static const char *const names[] = {"layers",  "d_model",  "n_heads", "d_ff",
                                        "seq_len", "cond_len", "seed"};
    int64_t v[7];
    int rc = 0;
    for (int k = 0; k < 7 && rc == 0; k++)
        if (h5_read_attr_i64(g, names[k], &v[k]) < 0 || (k < 6 && (v[k] < 1 || v[k] > (1 << 20))))
            rc = gerr(err, errlen, "/model: attribute %s missing or out of range", names[k]);
    H5Gclose(g);
    if (rc < 0) return -1;
    *cfg = ppv_model_config_default();
    cfg->layers = (int32_t)v[0];
    cfg->d_model = (int32_t)v[1];
    cfg->n_heads = (int32_t)v[2];
    cfg->d_ff = (int32_t)v[3];
    cfg->seq_len = (int32_t)v[4];
    cfg->cond_len = (int32_t)v[5];
    cfg->seed = (uint64_t)v[6];
    return 0;
}

/* The model with the file's weights. */
static ppv_model *read_model(replay_ctx *c, char *err, size_t errlen) {
    ppv_model *m = ppv_model_new(c->cfg, err, errlen);
    if (!m) return NULL;
    size_t n = ppv_model_grad_count(m, 0, 1);
    ppv_bf16 *p = malloc(n * sizeof *p);
    int rc = p ? 0 : gerr(err, errlen, "out of memory");
    for (int32_t l = 0; rc == 0 && l < c->cfg->layers; l++) {
        char path[64];
        snprintf(path, sizeof path, "model/" PPV_GOLDEN_LAYER_FMT, l);
        hid_t g =
            H5Lexists(c->file, path, H5P_DEFAULT) > 0 ? H5Gopen2(c->file, path, H5P_DEFAULT) : -1;
        if (g < 0) {
            rc = gerr(err, errlen, "/%s: missing", path);
            break;
        }
        for (int i = 0; rc == 0 && i < PPV_MODEL_PARAM_TENSORS; i++) {
            ppv_param_tensor pt;
            ppv_model_param_tensor(m, i, &pt);
            hsize_t dims[2] = {(hsize_t)pt.rows, (hsize_t)pt.cols};
            char e2[256];
            if (h5_read(g, pt.name, c->bf16, pt.cols > 1 ? 2 : 1, dims, p + pt.offset, e2,
                        sizeof e2) < 0)
                rc = gerr(err, errlen, "/%s/%s", path, e2);
        }
        H5Gclose(g);
        if (rc == 0) ppv_model_set_layer_params(m, l, p);
    }
    free(p);
    if (rc < 0) {
        ppv_model_free(m);
        return NULL;
    }
    return m;
}

/* ppv_run_options.load_inputs: one microbatch from /training/inputs. */
static int load_inputs(void *arg, int32_t mb, ppv_mb_inputs *in, char *err, size_t errlen) {
    replay_ctx *c = arg;
    const ppv_model_config *cfg = c->cfg;
    char path[64];
    snprintf(path, sizeof path, "training/inputs/" PPV_GOLDEN_MB_FMT, mb);
    hid_t g = H5Lexists(c->file, "training/inputs", H5P_DEFAULT) > 0 &&
                      H5Lexists(c->file, path, H5P_DEFAULT) > 0
                  ? H5Gopen2(c->file, path, H5P_DEFAULT)
                  : -1;
    if (g < 0) return gerr(err, errlen, "/%s: missing", path);
    memset(in, 0, sizeof *in);
    int rc = 0;
    for (int k = 0; rc == 0 && k < golden_ninputs; k++) {
        const golden_input *gi = &golden_inputs[k];
        hsize_t dims[2];
        int rank = golden_input_dims(gi, cfg, dims), scalar = gi->shape == PPV_GOLDEN_SCALAR;
        char e2[256] = "out of memory";
        if (!scalar) *golden_input_tensor(gi, in) = malloc(dims[0] * dims[1] * sizeof(ppv_bf16));
        if ((!scalar && !*golden_input_tensor(gi, in)) ||
            h5_read(g, gi->name, scalar ? H5T_NATIVE_FLOAT : c->bf16, rank, dims,
                    golden_input_data(gi, in), e2, sizeof e2) < 0)
            rc = gerr(err, errlen, "/%s/%s", path, e2);
    }
    H5Gclose(g);
    if (rc < 0) {
        ppv_mb_inputs_free(in);
        snprintf(c->load_err, sizeof c->load_err, "microbatch %d: %.480s", mb, err);
    }
    return rc;
}

/* Compares n re-run values with the file's dataset at path (fp32). */
static int compare_f32(replay_ctx *c, const char *path, int rank, const hsize_t *dims,
                       const float *got, const ppv_diff_options *o, ppv_diff_report *rep, char *err,
                       size_t errlen) {
    char full[256];
    snprintf(full, sizeof full, "/%s", path);
    if (ppv_diff_path_excluded(o, full)) return 0; /* --exclude: not compared */
    size_t n = 1;
    for (int k = 0; k < rank; k++)
        n *= (size_t)dims[k];
    float *want = malloc(n * sizeof *want);
    if (!want) return gerr(err, errlen, "out of memory");
    char e2[256];
    if (h5_read(c->file, path, H5T_NATIVE_FLOAT, rank, dims, want, e2, sizeof e2) < 0) {
        free(want);
        return gerr(err, errlen, "/%s", e2);
    }
    ppv_diff_entry *e = diff_add(rep, full, "values");
    if (!e) {
        free(want);
        return gerr(err, errlen, "out of memory");
    }
    snprintf(e->type, sizeof e->type, "fp32");
    compare_block(e, ELEM_F32, 4, got, want, n, 0, dims, rank, o);
    rep->objects++;
    rep->datasets++;
    rep->elements += n;
    diff_values_done(rep, o);
    free(want);
    return 0;
}

static int compare_outputs(replay_ctx *c, const ppv_model *m, const ppv_run_report *run,
                           const ppv_diff_options *o, ppv_diff_report *rep, char *err,
                           size_t errlen) {
    hsize_t nmb = (hsize_t)run->nmb;
    if (compare_f32(c, "training/loss", 1, &nmb, run->mb_loss, o, rep, err, errlen) < 0) return -1;
    size_t at = 0;
    for (int32_t l = 0; l < c->cfg->layers; l++) {
        for (int i = 0; i < PPV_MODEL_PARAM_TENSORS; i++) {
            ppv_param_tensor pt;
            ppv_model_param_tensor(m, i, &pt);
            char path[96];
            snprintf(path, sizeof path, "training/grads/" PPV_GOLDEN_LAYER_FMT "/%s", l, pt.name);
            hsize_t dims[2] = {(hsize_t)pt.rows, (hsize_t)pt.cols};
            if (compare_f32(c, path, pt.cols > 1 ? 2 : 1, dims, run->grads + at + pt.offset, o, rep,
                            err, errlen) < 0)
                return -1;
        }
        at += ppv_model_grad_count(m, l, l + 1);
    }
    return 0;
}

/* ---- objects the layout does not have -------------------------------------------- */

typedef struct layout_check {
    const ppv_model *m;
    const ppv_diff_options *o;
    int32_t layers, nmb;
    ppv_diff_report *rep;
} layout_check;

/* 1 if s is group then fmt (one %d conversion, as record writes it)
 * rendering an index below limit; *rest is what follows. */
static int numbered(const char *s, const char *group, const char *fmt, int32_t limit,
                    const char **rest) {
    size_t n = strlen(group), lit = strcspn(fmt, "%"), digits = 0;
    if (strncmp(s, group, n) != 0 || strncmp(s + n, fmt, lit) != 0) return 0;
    const char *d = s + n + lit;
    long v = 0;
    while (d[digits] >= '0' && d[digits] <= '9' && digits < 9)
        v = v * 10 + (d[digits++] - '0');
    char canon[32];
    int len = digits && v < limit ? snprintf(canon, sizeof canon, fmt, (int)v) : -1;
    if (len < 0 || strncmp(canon, s + n, (size_t)len) != 0) return 0;
    *rest = s + n + len;
    return 1;
}

static int param_tensor_name(const ppv_model *m, const char *name) {
    for (int i = 0; i < PPV_MODEL_PARAM_TENSORS; i++) {
        ppv_param_tensor pt;
        ppv_model_param_tensor(m, i, &pt);
        if (strcmp(pt.name, name) == 0) return 1;
    }
    return 0;
}

/* 1 if path (no leading slash) is part of a training file's layout. */
static int in_layout(const layout_check *lc, const char *p) {
    const char *r;
    if (!strcmp(p, ".") || !strcmp(p, "model") || !strcmp(p, "training") ||
        !strcmp(p, "training/loss") || !strcmp(p, "training/inputs") ||
        !strcmp(p, "training/grads"))
        return 1;
    if (numbered(p, "model/", PPV_GOLDEN_LAYER_FMT, lc->layers, &r) ||
        numbered(p, "training/grads/", PPV_GOLDEN_LAYER_FMT, lc->layers, &r))
        return r[0] == '\0' || (r[0] == '/' && param_tensor_name(lc->m, r + 1));
    if (numbered(p, "training/inputs/", PPV_GOLDEN_MB_FMT, lc->nmb, &r)) {
        if (r[0] == '\0') return 1;
        for (int k = 0; r[0] == '/' && k < golden_ninputs; k++)
            if (strcmp(r + 1, golden_inputs[k].name) == 0) return 1;
    }
    return 0;
}

/* Lists every object of a training file that is not part of its layout
 * (spec/golden-format.md) as a difference: an extra dataset is a recorded
 * output the re-run does not reproduce. The objects are listed by diff's
 * walk (h5_list_objects), so the two commands judge a file's structure
 * alike. */
static int check_layout(hid_t f, const char *file, const ppv_model *m,
                        const ppv_diff_options *o, int32_t layers, int32_t nmb,
                        ppv_diff_report *rep, char *err, size_t errlen) {
    layout_check lc = {m, o, layers, nmb, rep};
    h5_objlist l = {0};
    int rc = h5_list_objects(f, file, &l, err, errlen);
    for (size_t k = 0; rc == 0 && k < l.n; k++) {
        const char *full = l.v[k].path; /* "/" and "/model/..." */
        const char *name = strcmp(full, "/") == 0 ? "." : full + 1;
        if (in_layout(&lc, name) || ppv_diff_path_excluded(o, full)) continue;
        if (diff_mismatch(rep, full, "%s the layout does not have (nothing re-runs it)",
                          l.v[k].type == H5O_TYPE_DATASET ? "a dataset" : "an object") < 0)
            rc = gerr(err, errlen, "out of memory");
    }
    h5_objlist_free(&l);
    return rc;
}

/* The run options the file recorded. */
static int read_options(hid_t f, const ppv_schedule *s, ppv_run_options *ro, ppv_recompute *mask,
                        char *err, size_t errlen) {
    char *sem = NULL, *pol = NULL, *rec = NULL, why[256];
    int64_t seed = 0;
    int rc = -1;
    if (h5_read_attr_str(f, "semantics", &sem) < 0 || ppv_semantics_parse(sem, &ro->sem) < 0)
        gerr(err, errlen, "root attribute semantics: missing or not eager|rendezvous|eager:BYTES");
    else if (h5_read_attr_str(f, "policy", &pol) < 0 || ppv_policy_parse(pol, &ro->policy) < 0 ||
             ro->policy.kind == PPV_POLICY_REPLAY)
        gerr(err, errlen, "root attribute policy: missing or not rr|random|pct");
    else if (h5_read_attr_i64(f, "policy_seed", &seed) < 0)
        gerr(err, errlen, "root attribute policy_seed: missing");
    else if (h5_read_attr_str(f, "recompute", &rec) < 0)
        gerr(err, errlen, "root attribute recompute: missing");
    else if (ppv_recompute_parse(rec, s->nstages, mask, why, sizeof why) < 0)
        gerr(err, errlen, "root attribute recompute: %s", why);
    else {
        ro->policy.seed = (uint64_t)seed;
        ro->recompute = mask;
        rc = 0;
    }
    free(sem);
    free(pol);
    free(rec);
    return rc;
}

int ppv_golden_replay(const char *path, const ppv_diff_options *o, int perturb,
                      ppv_replay_result *out, char *err, size_t errlen) {
    return ppv_golden_replay_on(path, o, perturb, NULL, 0, out, err, errlen);
}

int ppv_golden_replay_on(const char *path, const ppv_diff_options *o, int perturb, ppv_proc *proc,
                         double timeout_s, ppv_replay_result *out, char *err, size_t errlen) {
    h5_quiet();
    memset(out, 0, sizeof *out);
    hid_t f = h5_open_checked(path, err, errlen);
    if (f < 0) return -1;
    replay_ctx c = {f, h5_bf16_type(), NULL, ""};
    ppv_model_config cfg;
    ppv_model *m = NULL;
    ppv_schedule *s = NULL;
    ppv_recompute *mask = NULL;
    char *text = NULL;
    int64_t nmb = 0;
    int rc = -1;
    if (check_header(c.file, path, err, errlen) < 0 || read_config(c.file, &cfg, err, errlen) < 0)
        goto done;
    c.cfg = &cfg;
    if (!(m = read_model(&c, err, errlen))) goto done;
    if (o && o->device && ppv_model_set_device(m, o->device, err, errlen) < 0) goto done;
    if (h5_read_attr_str(c.file, "schedule", &text) < 0) {
        gerr(err, errlen, "%s: no schedule attribute", path);
        goto done;
    }
    char *name = NULL;
    if (h5_read_attr_str(c.file, "schedule_name", &name) == -2) {
        gerr(err, errlen, "%s: out of memory", path);
        goto done;
    }
    snprintf(out->schedule_name, sizeof out->schedule_name, "%s", name ? name : "");
    free(name);
    char e2[1024];
    if (ppv_schedule_parse_text(text, strlen(text), "schedule attribute", PPV_DIALECT_AUTO, &s, e2,
                                sizeof e2) < 0) {
        gerr(err, errlen, "%s: %s", path, e2);
        goto done;
    }
    hid_t tg = H5Lexists(c.file, "training", H5P_DEFAULT) > 0
                   ? H5Gopen2(c.file, "training", H5P_DEFAULT)
                   : -1;
    int have = tg >= 0 && h5_read_attr_i64(tg, "microbatches", &nmb) == 0;
    if (tg >= 0) H5Gclose(tg);
    if (!have || nmb != s->nmb) {
        gerr(err, errlen, "%s: /training microbatches attribute %s (the schedule has %d)", path,
             have ? "disagrees with the schedule" : "missing", s->nmb);
        goto done;
    }
    ppv_run_options ro = ppv_run_defaults();
    if (!(mask = calloc((size_t)s->nstages + 1, sizeof *mask))) goto done;
    if (read_options(c.file, s, &ro, mask, e2, sizeof e2) < 0) {
        gerr(err, errlen, "%s: %s", path, e2);
        goto done;
    }
    ro.weights = m;
    ro.device = ppv_model_device(m);
    ro.load_inputs = load_inputs;
    ro.inputs_ctx = &c;
    ro.perturb = perturb;
    if (proc) { /* the recorded policy ordered the mock's ranks; here the transport does */
        ro.proc = proc;
        ro.timeout_s = timeout_s;
        ro.policy.kind = PPV_POLICY_RR;
    }
    if (ppv_run(s, &ro, &out->run, e2, sizeof e2) < 0) {
        gerr(err, errlen, "%s: %s", path, e2);
        goto done;
    }
    out->microbatches = s->nmb;
    out->layers = cfg.layers;
    if (!(out->diff = calloc(1, sizeof *out->diff))) goto done;
    out->diff->ppv_files = 1;
    if (c.load_err[0]) { /* unreadable inputs end the run: an error, not a difference */
        gerr(err, errlen, "%s: inputs of %s", path, c.load_err);
        goto done;
    }
    if (out->run->world.status != PPV_RUN_DONE) {
        ppv_diff_entry *e = diff_add(out->diff, "/", "the re-run did not complete");
        if (e) {
            snprintf(e->what, sizeof e->what, "the re-run did not complete: %.280s",
                     out->run->world.message);
            e->count = 1;
        }
        rc = 0;
        goto done;
    }
    if (compare_outputs(&c, m, out->run, o, out->diff, err, errlen) < 0 ||
        check_layout(c.file, path, m, o, cfg.layers, s->nmb, out->diff, err, errlen) < 0)
        goto done;
    rc = 0;
done:
    if (rc < 0) ppv_replay_result_free(out);
    free(text);
    free(mask);
    ppv_schedule_free(s);
    ppv_model_free(m);
    if (c.bf16 >= 0) H5Tclose(c.bf16);
    if (c.file >= 0) H5Fclose(c.file);
    return rc;
}

void ppv_replay_result_free(ppv_replay_result *r) {
    ppv_run_report_free(r->run);
    ppv_diff_report_free(r->diff);
    r->run = NULL;
    r->diff = NULL;
}
