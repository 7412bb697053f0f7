/* bench_diff.c - `ppv diff` against `h5diff -d` on two large float32
 * files at the same tolerance. A benchmark reports figures; it never fails
 * on them (exit 2 only when files cannot be written or a tool disagrees
 * with the other about the differences).
 *
 * usage: ppv_bench_diff PPV_BINARY [DIR [MIB [RUNS]]]
 *   DIR   where the files go (default /tmp), MIB the size of each file's
 *         dataset (default 256), RUNS timed runs per figure (default 5).
 * It writes, for two layouts (contiguous, as h5py and h5diff's own tests
 * write, and ppv's chunked Fletcher-32 layout), a file A of MIB MiB of
 * float32 values in a (rows, 4096) dataset, and two files to compare it
 * with:
 *  - "same":   B holds the same values (every byte equal);
 *  - "within": every element of B differs from A by at most 2^-11, and
 *              1000 elements by 0.01, so at abs 1e-3 exactly 1000 differ.
 * Each figure is the median wall time of RUNS runs of the real command
 * (`ppv diff A B --tolerance abs:0.001` and `h5diff -d 0.001 A B`) with
 * the files in the page cache (one untimed run first). Both tools must
 * find exactly the differences the case holds (0 or 1000), with the same
 * exit code. Without h5diff it reports ppv's figures alone. */
#define _GNU_SOURCE
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

enum { COLS = 4096, OUTLIERS = 1000 };

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* Value k of file A: uniform in [-1, 1). */
static float value_a(uint64_t k) {
    return (float)((double)(mix(k) >> 40) / (double)(1 << 23) - 1.0);
}

/* Writes a (rows, COLS) float32 dataset /x whose element k is
 * value_a(k) + delta(k); chunked with Fletcher-32 when chunked. */
static int write_file(const char *path, hsize_t rows, int chunked, int variant) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {rows, COLS}, crow[2] = {64, COLS};
    hid_t sp = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) {
        H5Pset_chunk(dcpl, 2, crow);
        H5Pset_fletcher32(dcpl);
    }
    hid_t d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    float *row = malloc(64 * COLS * sizeof *row);
    int rc = f >= 0 && d >= 0 && row ? 0 : -1;
    uint64_t total = rows * COLS, stride = total / OUTLIERS;
    for (hsize_t r0 = 0; rc == 0 && r0 < rows; r0 += 64) {
        hsize_t nr = rows - r0 < 64 ? rows - r0 : 64;
        for (uint64_t i = 0; i < nr * COLS; i++) {
            uint64_t k = r0 * COLS + i;
            float v = value_a(k);
            if (variant == 1) { /* "within": +-2^-11 everywhere, 0.01 at the outliers */
                v += (mix(k ^ 0x5bd1e995) & 1) ? 0x1p-11f : -0x1p-11f;
                if (k % stride == stride / 2) v += 0.01f;
            }
            row[i] = v;
        }
        hsize_t start[2] = {r0, 0}, count[2] = {nr, COLS};
        hid_t fs = H5Dget_space(d), ms = H5Screate_simple(2, count, NULL);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        if (H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, row) < 0) rc = -1;
        H5Sclose(ms);
        H5Sclose(fs);
    }
    free(row);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    if (H5Fclose(f) < 0) rc = -1;
    return rc;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median wall time of runs runs after one untimed run; the last run's
 * exit code and output. */
static double median(char *const *argv, int runs, int *code, char *out, size_t len) {
    double t[64], s;
    *code = bench_run(argv, out, len, &s, NULL);
    for (int k = 0; k < runs; k++) {
        int c = bench_run(argv, out, len, &t[k], NULL);
        if (c != *code) *code = -1;
    }
    qsort(t, (size_t)runs, sizeof *t, by_value);
    return t[runs / 2];
}

/* Differing elements as each tool reports them; -1 if not found. */
static long long ppv_count(const char *out) {
    const char *p = strstr(out, "/x: ");
    return p ? strtoll(p + 4, NULL, 10) : strstr(out, ": same") ? 0 : -1;
}
static long long h5diff_count(const char *out) {
    const char *p = strstr(out, " difference");
    if (!p) return 0; /* h5diff prints nothing for equal files */
    while (p > out && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtoll(p, NULL, 10);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PPV_BINARY [DIR [MIB [RUNS]]]\n", argv[0]);
        return 2;
    }
    const char *ppv = argv[1], *dir = argc > 2 ? argv[2] : "/tmp";
    long mib = argc > 3 ? atol(argv[3]) : 256, runs = argc > 4 ? atol(argv[4]) : 5;
    if (mib < 1 || runs < 1 || runs > 64) {
        fprintf(stderr, "bad MIB or RUNS\n");
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    static char out[1 << 16];
    double ignored;
    char *probe[] = {"h5diff", "--version", NULL};
    int have_h5diff = bench_run(probe, out, sizeof out, &ignored, NULL) == 0;
    if (!have_h5diff)
        printf("h5diff not found (Debian: apt-get install hdf5-tools): ppv figures only\n");
    hsize_t rows = (hsize_t)mib * (1 << 20) / (COLS * sizeof(float));
    double mb = 2.0 * (double)rows * COLS * sizeof(float) / 1e6;
    printf("ppv diff vs h5diff -d: two files of %ld MiB float32 each (%llu x %d), "
           "median of %ld warm runs\n",
           mib, (unsigned long long)rows, COLS, runs);
    printf("%-11s %-7s %9s %9s %10s %8s %9s %8s\n", "layout", "case", "ppv s", "ppv GB/s",
           "h5diff s", "h5d GB/s", "speedup", "differ");
    static const char *layouts[] = {"contiguous", "chunked"}, *cases[] = {"same", "within"};
    int bad = 0;
    for (int l = 0; l < 2; l++) {
        char pa[512], pb[2][512];
        snprintf(pa, sizeof pa, "%s/ppv_bench_%s_a.h5", dir, layouts[l]);
        for (int c = 0; c < 2; c++)
            snprintf(pb[c], sizeof pb[c], "%s/ppv_bench_%s_%s.h5", dir, layouts[l], cases[c]);
        if (write_file(pa, rows, l, 0) < 0 || write_file(pb[0], rows, l, 0) < 0 ||
            write_file(pb[1], rows, l, 1) < 0) {
            fprintf(stderr, "cannot write the files in %s\n", dir);
            return 2;
        }
        for (int c = 0; c < 2; c++) {
            char *pargv[] = {(char *)ppv, "diff", pa, pb[c], "--tolerance", "abs:0.001", NULL};
            char *hargv[] = {"h5diff", "-d", "0.001", pa, pb[c], NULL};
            int pc, hc = -1;
            double tp = median(pargv, (int)runs, &pc, out, sizeof out), th = 0;
            long long np = ppv_count(out), nh = -1;
            if (have_h5diff) {
                th = median(hargv, (int)runs, &hc, out, sizeof out);
                nh = hc < 0 ? -1 : h5diff_count(out);
            }
            int agree = pc >= 0 && pc <= 1 && np == (c == 0 ? 0 : OUTLIERS) &&
                        (!have_h5diff || (pc == hc && np == nh));
            bad |= !agree;
            printf("%-11s %-7s %9.3f %9.2f %10.3f %8.2f %8.1fx %8lld%s\n", layouts[l], cases[c], tp,
                   mb / tp / 1e3, th, mb / th / 1e3, th / tp, np,
                   agree ? "" : "  DISAGREE (see exit codes/counts)");
            if (!agree)
                printf("  ppv exit %d count %lld; h5diff exit %d count %lld\n", pc, np, hc, nh);
        }
        unlink(pa);
        unlink(pb[0]);
        unlink(pb[1]);
    }
    return bad ? 2 : 0;
}
