/* record.c - `ppv record`: run the engine and write the run as a golden
 * file (spec/golden-format.md) through h5out.c's temporary file, so the
 * target is either untouched or complete, a signal during the write leaves
 * nothing, and the same run recorded twice (SOURCE_DATE_EPOCH set) gives
 * the same bytes. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden_internal.h"

typedef struct writer {
    hid_t file, bf16, gcpl;
    int written, fail_after, term_after;
} writer;

/* Every dataset goes through here, so a test can stop the program after
 * any number of them, as a crash (exit 3) or a kill (SIGTERM) would. */
static int put(writer *w, hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank,
               const hsize_t *dims, const void *data) {
    if (h5_write(loc, name, ftype, mtype, rank, dims, data) < 0) return -1;
    w->written++;
    if (w->written == w->fail_after) _exit(3);
    if (w->written == w->term_after) raise(SIGTERM);
    return 0;
}

/* A group with no modification time (see h5_write). */
static hid_t new_group(const writer *w, hid_t parent, const char *name) {
    return H5Gcreate2(parent, name, H5P_DEFAULT, w->gcpl, H5P_DEFAULT);
}

static int write_root(writer *w, const ppv_record_options *o, const ppv_model_config *cfg) {
    hid_t f = w->file;
    char sem[64], created[32];
    static const char *const policies[] = {"rr", "random", "pct", "replay", "explore"};
    ppv_semantics_format(&o->run.sem, sem, sizeof sem);
    h5_created_now(created, sizeof created);
    char *text = malloc(o->schedule_len + 1);
    if (!text) return -1;
    memcpy(text, o->schedule_text, o->schedule_len);
    text[o->schedule_len] = '\0';
    int rc =
        h5_attr_str(f, "ppv_format", PPV_GOLDEN_FORMAT_NAME) |
        h5_attr_i64(f, "format_version", PPV_GOLDEN_TRAINING_VERSION) |
        h5_attr_str(f, "producer", "ppv") | h5_attr_str(f, "producer_version", PPV_VERSION_STRING) |
        h5_attr_str(f, "created", created) | h5_attr_str(f, "kind", "training") |
        h5_attr_i64(f, "seed", (int64_t)cfg->seed) | h5_attr_str(f, "schedule", text) |
        h5_attr_str(f, "schedule_name", o->schedule_name ? o->schedule_name : "") |
        h5_attr_str(f, "semantics", sem) | h5_attr_str(f, "policy", policies[o->run.policy.kind]) |
        h5_attr_i64(f, "policy_seed", (int64_t)o->run.policy.seed) |
        h5_attr_str(f, "recompute", o->recompute_text ? o->recompute_text : "none");
    free(text);
    return rc ? -1 : 0;
}

/* parent/layer_NNNN: one layer's parameter-shaped tensors (weights or
 * gradients), from values laid out as the model's parameters. */
static int write_layer(writer *w, const ppv_model *m, hid_t parent, int32_t l, hid_t ftype,
                       hid_t mtype, const void *values) {
    char name[32];
    snprintf(name, sizeof name, PPV_GOLDEN_LAYER_FMT, l);
    hid_t lg = new_group(w, parent, name);
    if (lg < 0) return -1;
    size_t esize = H5Tget_size(mtype);
    int rc = 0;
    for (int i = 0; rc == 0 && i < PPV_MODEL_PARAM_TENSORS; i++) {
        ppv_param_tensor pt;
        ppv_model_param_tensor(m, i, &pt);
        hsize_t dims[2] = {(hsize_t)pt.rows, (hsize_t)pt.cols};
        rc = put(w, lg, pt.name, ftype, mtype, pt.cols > 1 ? 2 : 1, dims,
                 (const char *)values + pt.offset * esize);
    }
    H5Gclose(lg);
    return rc;
}

/* /model: the config as attributes, then each layer's tensors as bf16. */
static int write_model(writer *w, const ppv_model *m) {
    const ppv_model_config *c = ppv_model_config_of(m);
    hid_t g = new_group(w, w->file, "model");
    if (g < 0) return -1;
    int rc = h5_attr_i64(g, "layers", c->layers) | h5_attr_i64(g, "d_model", c->d_model) |
             h5_attr_i64(g, "n_heads", c->n_heads) | h5_attr_i64(g, "d_ff", c->d_ff) |
             h5_attr_i64(g, "seq_len", c->seq_len) | h5_attr_i64(g, "cond_len", c->cond_len) |
             h5_attr_i64(g, "seed", (int64_t)c->seed);
    for (int32_t l = 0; rc == 0 && l < c->layers; l++)
        rc = write_layer(w, m, g, l, w->bf16, w->bf16, ppv_model_layer_params(m, l));
    H5Gclose(g);
    return rc;
}

/* /training: inputs per microbatch (drawn again, one at a time), losses
 * and gradients. */
static int write_training(writer *w, const ppv_model *m, const ppv_run_report *rep) {
    const ppv_model_config *c = ppv_model_config_of(m);
    hid_t g = new_group(w, w->file, "training");
    hid_t ig = g < 0 ? -1 : new_group(w, g, "inputs");
    hid_t gg = ig < 0 ? -1 : new_group(w, g, "grads");
    int rc = gg < 0 ? -1 : h5_attr_i64(g, "microbatches", rep->nmb);
    for (int32_t mb = 0; rc == 0 && mb < rep->nmb; mb++) {
        char name[32];
        snprintf(name, sizeof name, PPV_GOLDEN_MB_FMT, mb);
        ppv_mb_inputs in;
        if (ppv_mb_inputs_init(m, mb, &in) < 0) {
            rc = -1;
            break;
        }
        hid_t mg = new_group(w, ig, name);
        rc = mg < 0 ? -1 : 0;
        for (int k = 0; rc == 0 && k < golden_ninputs; k++) {
            const golden_input *gi = &golden_inputs[k];
            hsize_t dims[2];
            int rank = golden_input_dims(gi, c, dims), scalar = gi->shape == PPV_GOLDEN_SCALAR;
            rc = put(w, mg, gi->name, scalar ? H5T_IEEE_F32LE : w->bf16,
                     scalar ? H5T_NATIVE_FLOAT : w->bf16, rank, dims, golden_input_data(gi, &in));
        }
        if (mg >= 0) H5Gclose(mg);
        ppv_mb_inputs_free(&in);
    }
    hsize_t nmb = (hsize_t)rep->nmb;
    if (rc == 0) rc = put(w, g, "loss", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, &nmb, rep->mb_loss);
    if (rc == 0) {
        hid_t d = H5Dopen2(g, "loss", H5P_DEFAULT);
        rc = d < 0 ? -1 : h5_attr_f64(d, "mean", rep->loss);
        if (d >= 0) H5Dclose(d);
    }
    for (int32_t l = 0; rc == 0 && l < c->layers; l++)
        rc = write_layer(w, m, gg, l, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                         rep->grads + ppv_model_grad_count(m, 0, l));
    if (gg >= 0) H5Gclose(gg);
    if (ig >= 0) H5Gclose(ig);
    if (g >= 0) H5Gclose(g);
    return rc;
}

int ppv_golden_record(const char *path, const ppv_schedule *s, const ppv_record_options *o,
                      ppv_run_report **repp, char *err, size_t errlen) {
    h5_quiet();
    *repp = NULL;
    if (ppv_run(s, &o->run, repp, err, errlen) < 0) return -1;
    ppv_run_report *rep = *repp;
    if (rep->world.status != PPV_RUN_DONE) return 0; /* nothing to record */

    ppv_model_config cfg = ppv_run_model_config(&o->run, s);
    ppv_model *owned = o->run.weights ? NULL : ppv_model_new(&cfg, err, errlen);
    const ppv_model *m = o->run.weights ? o->run.weights : owned;
    if (!m) return -1;

    h5_out out;
    int rc = -1;
    writer w = {-1, -1, -1, 0, o->fail_after, o->term_after};
    if (h5_out_create(&out, path, "the golden file", err, errlen) < 0) goto done;
    w.file = out.file;
    w.gcpl = out.gcpl;
    w.bf16 = h5_bf16_type();
    errno = 0;
    if (w.bf16 < 0 || write_root(&w, o, &cfg) < 0 || write_model(&w, m) < 0 ||
        write_training(&w, m, rep) < 0) {
        gerr(err, errlen, "%s: cannot write the golden file: %s", path, h5_write_failure(errno));
        h5_out_abort(&out);
        goto done;
    }
    rc = h5_out_commit(&out, "the golden file", err, errlen);
done:
    if (w.bf16 >= 0) H5Tclose(w.bf16);
    ppv_model_free(owned);
    return rc;
}
