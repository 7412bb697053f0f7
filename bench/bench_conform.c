/* bench_conform.c - `ppv conform` on recordings of many calls at the
 * contract's frame size, against reading the same tensors with h5dump. A
 * benchmark reports figures; it never fails on them (exit 2 only when a
 * file cannot be written or a recording does not conform).
 *
 * usage: ppv_bench_conform PPV_BINARY [DIR [CALLS...]]
 *   DIR where the recordings go (default /tmp); CALLS the sizes (default
 *   100 1000). Each recording is a conforming stream of CALLS INFERs and a
 *   SHUTDOWN at 320x576 pixels (latents (1, 3, 16, 40, 72) bf16, 276 KiB;
 *   conditioning (1, 77, 512)), every result with its digest, and stage
 *   0's event log (format version 2). For each it reports the median wall
 *   time of 3 runs of `ppv conform FILE` and its peak RSS, and the median
 *   of 3 runs of `h5dump -b LE -o /dev/null FILE` (every dataset read and
 *   written out as binary), with the files in the page cache (one untimed
 *   run of each first). Without h5dump (Debian: hdf5-tools) it reports
 *   ppv's figures alone. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "ppv_golden.h"

enum { H = 320, W = 576, STEPS = 4, COND_LEN = 77, COND_DIM = 512, RUNS = 3 };

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* n bf16 values in (-2, 2), drawn from seed (finite: exponent below 128). */
static void fill(uint16_t *v, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++)
        v[i] = (uint16_t)(0x3F00 | (mix(seed * 0x9E3779B97F4A7C15ULL + i) & 0x80FF));
}

static int event(ppv_inference_writer *w, int64_t *t, ppv_pp_event_kind kind,
                 ppv_pp_verdict verdict, const ppv_envelope *e, int64_t inflight, int64_t ready) {
    char err[256];
    *t += 1000;
    ppv_pp_event ev = {*t,           *t,        kind,     verdict,  e->action,
                       e->call_id,   e->chunk_index, e->cache_epoch, inflight, ready};
    if (ppv_inference_event(w, &ev, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

/* Writes a conforming recording of n INFERs (one in flight at a time). */
static int write_recording(const char *path, int n) {
    char err[512];
    ppv_inference_writer *w = ppv_inference_create(path, NULL, err, sizeof err);
    ppv_inference_events how = {"virtual", 2, 2, 0};
    if (!w || ppv_inference_events_begin(w, &how, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        ppv_inference_abort(w);
        return -1;
    }
    size_t lat = (size_t)3 * 16 * (H / 8) * (W / 8), cond = (size_t)COND_LEN * COND_DIM;
    uint16_t *in = malloc(lat * 2), *out = malloc(lat * 2), *c = malloc(cond * 2);
    int64_t steps[STEPS] = {1000, 750, 500, 250}, t = 0;
    int rc = in && out && c ? 0 : -1;
    fill(c, cond, 7);
    for (int k = 0; k < n && rc == 0; k++) {
        ppv_envelope e;
        ppv_envelope_init(&e);
        e.call_id = e.chunk_index = k;
        e.height = H;
        e.width = W;
        e.current_start_frame = 3 * k;
        e.num_denoise_steps = STEPS;
        e.expected_generator_calls = STEPS;
        e.init_cache = k == 0;
        e.noise_scale = 1.0;
        fill(in, lat, (uint64_t)k);
        fill(out, lat, (uint64_t)k + 1000000);
        e.latents_in = (ppv_tensor){PPV_DTYPE_BF16, 5, {1, 3, 16, H / 8, W / 8}, in};
        e.conditioning_embeds = (ppv_tensor){PPV_DTYPE_BF16, 3, {1, COND_LEN, COND_DIM}, c};
        e.current_denoising_step_list = (ppv_tensor){PPV_DTYPE_I64, 1, {STEPS}, steps};
        ppv_result r;
        ppv_result_init(&r, &e);
        r.observed_generator_calls = STEPS;
        r.mesh_current_start_frame = e.current_start_frame;
        r.latents_out = (ppv_tensor){PPV_DTYPE_BF16, 5, {1, 3, 16, H / 8, W / 8}, out};
        r.output_digest_i64 = (int64_t)ppv_digest_words(out, lat * 2);
        if (event(w, &t, PPV_EVENT_SENT, PPV_VERDICT_NONE, &e, 1, 0) < 0 ||
            event(w, &t, PPV_EVENT_RECEIVED, PPV_VERDICT_ACCEPTED, &e, 0, 1) < 0 ||
            event(w, &t, PPV_EVENT_DECODED, PPV_VERDICT_NONE, &e, 0, 0) < 0 ||
            ppv_inference_append(w, &e, &r, err, sizeof err) < 0)
            rc = -1;
    }
    ppv_envelope bye;
    ppv_envelope_init(&bye);
    bye.action = PPV_PP_SHUTDOWN;
    bye.call_id = n;
    if (rc == 0 && (event(w, &t, PPV_EVENT_SENT, PPV_VERDICT_NONE, &bye, 0, 0) < 0 ||
                    ppv_inference_append(w, &bye, NULL, err, sizeof err) < 0))
        rc = -1;
    free(in);
    free(out);
    free(c);
    if (rc < 0) {
        fprintf(stderr, "%s: cannot write: %s\n", path, err);
        ppv_inference_abort(w);
        return -1;
    }
    if (ppv_inference_commit(w, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median wall seconds of RUNS runs of argv (after one untimed run), its
 * largest peak RSS, and the exit code of the last. */
static int timed(char *const *argv, double *median, double *rss) {
    double t[RUNS], s, r;
    int rc = bench_run(argv, NULL, 0, &s, &r);
    *rss = r;
    for (int k = 0; k < RUNS; k++) {
        rc = bench_run(argv, NULL, 0, &t[k], &r);
        if (r > *rss) *rss = r;
    }
    qsort(t, RUNS, sizeof t[0], cmp_double);
    *median = t[RUNS / 2];
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ppv_bench_conform PPV_BINARY [DIR [CALLS...]]\n");
        return 2;
    }
    const char *ppv = argv[1], *dir = argc > 2 ? argv[2] : "/tmp";
    int sizes[8] = {100, 1000}, nsizes = 2;
    if (argc > 3) {
        nsizes = 0;
        for (int k = 3; k < argc && nsizes < 8; k++)
            sizes[nsizes++] = atoi(argv[k]);
    }
    int have_h5dump = system("command -v h5dump >/dev/null 2>&1") == 0;
    printf("%8s %10s %14s %14s %14s %8s\n", "calls", "file MiB", "conform s", "conform RSS",
           "h5dump -b s", "ratio");
    for (int i = 0; i < nsizes; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ppv_bench_conform_%d_%d.h5", dir, sizes[i], (int)getpid());
        if (write_recording(path, sizes[i]) < 0) return 2;
        struct stat st;
        double mib = stat(path, &st) == 0 ? (double)st.st_size / (1 << 20) : 0;
        char *conform[] = {(char *)ppv, "conform", path, NULL};
        double tc, rss, th = 0, rss_h;
        int rc = timed(conform, &tc, &rss);
        if (rc != 0) {
            fprintf(stderr, "ppv conform %s exited %d: the benchmark's recording must conform\n",
                    path, rc);
            unlink(path);
            return 2;
        }
        if (have_h5dump) {
            char *dump[] = {"h5dump", "-b", "LE", "-o", "/dev/null", path, NULL};
            timed(dump, &th, &rss_h);
            printf("%8d %10.1f %14.3f %11.1f MiB %14.3f %8.2f\n", sizes[i], mib, tc, rss, th,
                   tc / th);
        } else
            printf("%8d %10.1f %14.3f %11.1f MiB %14s %8s\n", sizes[i], mib, tc, rss, "-", "-");
        unlink(path);
    }
    return 0;
}
