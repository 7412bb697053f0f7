/* inference_replay.c - a recorded inference run replayed on the engine:
 * the file is stage 0, the mesh is rebuilt from its setup, and every
 * result is compared with the recorded one. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "golden_internal.h"

typedef struct recorded {
    ppv_envelope *env;
    ppv_result *res;
    int *has;
    int64_t n;
} recorded;

typedef struct replay_ctx {
    const recorded *rec;
    const ppv_diff_options *o;
    ppv_diff_report *diff;
    int64_t next; /* the recorded call the next on_call answers */
    ppv_inference_replay_result *out;
    int perturb; /* flip a bit of the next latents_out compared */
} replay_ctx;

static void note_first(replay_ctx *c, int64_t k) {
    if (c->out->first_call >= 0) return;
    c->out->first_call = k;
    c->out->first_call_id = c->rec->env[k].call_id;
    c->out->first_chunk_index = c->rec->env[k].chunk_index;
}

/* Compares the re-run's answer to call k with the recording. */
static int compare_call(replay_ctx *c, int64_t k, const ppv_result *r) {
    const ppv_result *want = c->rec->has[k] ? &c->rec->res[k] : NULL;
    char path[96];
    snprintf(path, sizeof path, "/inference/calls/" PPV_GOLDEN_CALL_FMT "/result", (int)k);
    if (ppv_diff_path_excluded(c->o, path)) return 0;
    size_t before = (size_t)c->diff->n;
    int rc = 0;
    c->diff->objects++;
    if (!want != !r) {
        rc |= diff_mismatch(c->diff, path, "%s", r ? "a result the recording does not have"
                                                     : "no result, the recording has one");
    } else if (r) {
#define SAME_INT(field)                                                                            \
    if (r->field != want->field)                                                                   \
        rc |= diff_mismatch(c->diff, path, #field ": %" PRId64 " vs %" PRId64,                     \
                            (int64_t)r->field, (int64_t)want->field);
        SAME_INT(ok)
        SAME_INT(call_id)
        SAME_INT(chunk_index)
        SAME_INT(cache_epoch)
        SAME_INT(observed_generator_calls)
        SAME_INT(mesh_current_start_frame)
        SAME_INT(output_digest_i64)
#undef SAME_INT
        if (strcmp(r->error_message, want->error_message))
            rc |= diff_mismatch(c->diff, path, "error_message: '%s' vs '%s'", r->error_message,
                                want->error_message);
        const ppv_tensor *a = &r->latents_out, *b = &want->latents_out;
        if (!a->data != !b->data || (a->data && (a->rank != b->rank ||
                                                 memcmp(a->dims, b->dims, sizeof a->dims))))
            rc |= diff_mismatch(c->diff, path, "latents_out: another shape or presence");
        else if (a->data) {
            char dpath[128];
            snprintf(dpath, sizeof dpath, "%s/latents_out", path);
            ppv_diff_entry *e = diff_add(c->diff, dpath, "values");
            if (!e) return -1;
            snprintf(e->type, sizeof e->type, "bf16");
            hsize_t dims[PPV_TENSOR_MAX_RANK];
            for (int d = 0; d < a->rank; d++)
                dims[d] = (hsize_t)a->dims[d];
            size_t n = ppv_tensor_bytes(a) / 2;
            uint16_t *mine = a->data;
            if (c->perturb && n) {
                c->perturb = 0;
                mine[0] ^= 1;
            }
            compare_block(e, ELEM_BF16, 2, a->data, b->data, n, 0, dims, a->rank, c->o);
            c->diff->datasets++;
            c->diff->elements += n;
            diff_values_done(c->diff, c->o);
        }
    }
    if ((size_t)c->diff->n > before) note_first(c, k);
    return rc ? -1 : 0;
}

static int on_call(void *ctx, const ppv_envelope *e, const ppv_result *r, char *err,
                   size_t errlen) {
    replay_ctx *c = ctx;
    int64_t k = c->next++;
    if (k >= c->rec->n || e->call_id != c->rec->env[k].call_id)
        return gerr(err, errlen, "replay out of step at call %lld", (long long)k);
    return compare_call(c, k, r) < 0 ? gerr(err, errlen, "out of memory") : 0;
}

static void free_recorded(recorded *rec) {
    for (int64_t k = 0; k < rec->n; k++) {
        if (rec->env) ppv_envelope_free_tensors(&rec->env[k]);
        if (rec->res && rec->has[k]) ppv_result_free_tensors(&rec->res[k]);
    }
    free(rec->env);
    free(rec->res);
    free(rec->has);
}

int ppv_inference_replay(const char *path, const ppv_diff_options *o, int32_t mesh, int perturb,
                         ppv_inference_replay_result *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->first_call = out->first_call_id = out->first_chunk_index = -1;
    int has_setup = 0;
    int64_t n = 0;
    ppv_inference_reader *rd = ppv_inference_open(path, &n, &out->setup, &has_setup, err, errlen);
    if (!rd) return -1;
    recorded rec = {0};
    int rc = -1;
    if (!has_setup) {
        gerr(err, errlen,
             "%s: the recording has no setup (/inference's mesh and kv_window, "
             "/inference/generator): replay cannot rebuild the mesh that answered it",
             path);
        goto done;
    }
    if (n < 1) {
        gerr(err, errlen, "%s: the recording holds no calls", path);
        goto done;
    }
    rec.env = calloc((size_t)n, sizeof *rec.env);
    rec.res = calloc((size_t)n, sizeof *rec.res);
    rec.has = calloc((size_t)n, sizeof *rec.has);
    if (!rec.env || !rec.res || !rec.has) {
        gerr(err, errlen, "out of memory");
        goto done;
    }
    for (int64_t k = 0; k < n; k++) {
        if (ppv_inference_read(rd, k, &rec.env[k], &rec.res[k], &rec.has[k], err, errlen) < 0)
            goto done;
        rec.n = k + 1;
    }
    out->calls = n;
    ppv_pp_options po = ppv_pp_defaults();
    po.mesh = out->mesh = mesh > 0 ? mesh : out->setup.mesh;
    po.kv_window = out->setup.kv_window;
    po.model = out->setup.model;
    const ppv_generator *want = o->generator ? o->generator : ppv_generator_builtin();
    if (strcmp(want->name, out->setup.generator) ||
        strcmp(want->version, out->setup.generator_version)) {
        gerr(err, errlen,
             "%s was recorded with generator %s %s; this replay runs %s %s%s: replay it with "
             "the recording's generator (--generator)",
             path, out->setup.generator, out->setup.generator_version, want->name, want->version,
             o->generator ? "" : " (the built-in)");
        goto done;
    }
    if (o->generator) {
        po.generator = o->generator;
        po.generator_params = out->setup.generator_params;
    }
    for (int64_t k = 0; k < n; k++)
        if (rec.env[k].action == PPV_PP_INFER && rec.env[k].latents_in.data &&
            rec.env[k].conditioning_embeds.data) {
            po.height = (int32_t)rec.env[k].height;
            po.width = (int32_t)rec.env[k].width;
            po.cond_len = (int32_t)rec.env[k].conditioning_embeds.dims[1];
            po.steps = (int32_t)(rec.env[k].num_denoise_steps > 0 ? rec.env[k].num_denoise_steps
                                                                  : 1);
            break;
        }
    po.replay = rec.env;
    po.nreplay = n;
    /* the leader checks every digest the recording carries, and requires
     * them when every INFER has one (a recording of ppv pp's) */
    po.envelope_digest = 0;
    for (int64_t k = 0; k < n; k++)
        if (rec.env[k].action == PPV_PP_INFER) {
            if (!rec.env[k].envelope_digest_i64) {
                po.envelope_digest = 0;
                break;
            }
            po.envelope_digest = 1;
        }
    po.device = o->device;
    if (!(out->diff = calloc(1, sizeof *out->diff))) {
        gerr(err, errlen, "out of memory");
        goto done;
    }
    replay_ctx ctx = {&rec, o, out->diff, 0, out, perturb};
    po.on_call = on_call;
    po.on_call_ctx = &ctx;
    char why[1024];
    if (ppv_pp_run(&po, &out->run, why, sizeof why) < 0) {
        gerr(err, errlen, "%s: cannot re-run the recording: %s", path, why);
        goto done;
    }
    /* recorded calls the re-run never answered */
    for (int64_t k = ctx.next; k < n; k++) {
        char p[96];
        snprintf(p, sizeof p, "/inference/calls/" PPV_GOLDEN_CALL_FMT, (int)k);
        if (diff_mismatch(out->diff, p, "not reached: the re-run stopped first (%s)",
                          out->run->ok ? "it ended" : out->run->message) < 0) {
            gerr(err, errlen, "out of memory");
            goto done;
        }
        note_first(&ctx, k);
        break; /* one is enough to say where */
    }
    rc = 0;
done:
    free_recorded(&rec);
    ppv_inference_close(rd);
    if (rc < 0) ppv_inference_replay_free(out);
    return rc;
}

void ppv_inference_replay_free(ppv_inference_replay_result *r) {
    ppv_pp_report_free(r->run);
    ppv_diff_report_free(r->diff);
    r->run = NULL;
    r->diff = NULL;
}

int ppv_golden_is_inference(const char *path) {
    h5_quiet();
    char why[512];
    hid_t f = h5_open_checked(path, why, sizeof why); /* a corrupted file: replay's open says so */
    if (f < 0) return 0;
    char *kind = NULL, err[64];
    int is = h5_ppv_file(f, path, err, sizeof err) > 0 && h5_read_attr_str(f, "kind", &kind) == 0 &&
             strcmp(kind, "inference") == 0;
    free(kind);
    H5Fclose(f);
    return is;
}
