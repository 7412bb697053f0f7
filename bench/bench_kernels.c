/* bench_kernels.c - GFLOP/s of ppv_matmul_f32 against OpenBLAS cblas_sgemm
 * on the same shapes and thread counts, and proof that ppv's result is
 * bitwise the same at every thread count and on every instruction set, and
 * equal to the naive loop. A benchmark reports figures; it never fails on
 * them. It exits 1 only if a bitwise check fails, 2 on bad usage or out of
 * memory.
 *
 * usage: ppv_bench_kernels [--quick] [--isa generic|avx2|avx512]
 * Shapes (M x N x K, out = a (M, K) . w (N, K)^T): 256^3, 512^3, 1024^3
 * and 64 x 4096 x 1024 (the MLP up-projection of 64 tokens at C = 1024);
 * 1 and 2 threads asked. "used" is how many threads ppv really ran: it
 * gives each at least 64 MFLOP, as OpenBLAS also keeps small products on
 * one thread. Each figure is the best of at least 5 runs (and 0.25 s)
 * after a warm-up. --isa
 * times one variant instead of the best this machine has (OpenBLAS picks
 * its own kernel, named in the header line). OpenBLAS is optional (found by
 * CMake through pkg-config); without it the line says "openblas: not found".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels_internal.h"
#include "ppv_kernels.h"

#ifdef PPV_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* Each figure keeps running until this much time has passed (and at
 * least reps runs), so short products are not timed on a cold machine. */
static const double MIN_SECONDS = 0.25;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best wall time of reps runs of ppv's matmul on isa (after one warm-up),
 * with the threads ppv_matmul_f32 would use. */
static double time_ppv(float *out, const float *a, const float *w, int M, int N, int K, int threads,
                       int isa, int reps) {
    double best = 1e30, start = now();
    int32_t used = ppvk_matmul_threads(M, N, K, threads);
    for (int r = 0; r <= reps || now() - start < MIN_SECONDS; r++) {
        double t0 = now();
        ppvk_matmul_f32_isa(out, a, w, M, N, K, used, isa);
        double t = now() - t0;
        if (r > 0 && t < best) best = t;
    }
    return best;
}

#ifdef PPV_HAVE_OPENBLAS
/* The same for cblas_sgemm: out = a . w^T, row-major. */
static double time_blas(float *out, const float *a, const float *w, int M, int N, int K,
                        int threads, int reps) {
    double best = 1e30, start = now();
    openblas_set_num_threads(threads);
    for (int r = 0; r <= reps || now() - start < MIN_SECONDS; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, w, K, 0.0f, out,
                    N);
        double t = now() - t0;
        if (r > 0 && t < best) best = t;
    }
    return best;
}
#endif

/* Number of sampled elements of out that differ from the naive loop. */
static long naive_mismatches(const float *out, const float *a, const float *w, int M, int N, int K,
                             long samples) {
    long bad = 0;
    for (long s = 0; s < samples; s++) {
        long e = (long)((uint64_t)s * 2654435761u % ((uint64_t)M * (uint64_t)N));
        int i = (int)(e / N), j = (int)(e % N);
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += a[(size_t)i * K + k] * w[(size_t)j * K + k];
        if (memcmp(&acc, &out[e], sizeof acc) != 0) bad++;
    }
    return bad;
}

/* 1 if every supported ISA at 1, 2 and 3 forced threads gives ref's bits
 * and ref matches the naive loop on 4096 sampled elements. */
static int bitwise_ok(const float *ref, float *tmp, const float *a, const float *w, int M, int N,
                      int K) {
    for (int isa = 0; isa < PPVK_ISA_COUNT; isa++) {
        if (!ppvk_isa_supported(isa)) continue;
        for (int threads = 1; threads <= 3; threads++) {
            ppvk_matmul_f32_isa(tmp, a, w, M, N, K, threads, isa);
            if (memcmp(tmp, ref, sizeof(float) * M * N) != 0) return 0;
        }
    }
    return naive_mismatches(ref, a, w, M, N, K, 4096) == 0;
}

int main(int argc, char **argv) {
    int quick = 0, isa = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            for (int k = 0; k < PPVK_ISA_COUNT; k++)
                if (strcmp(argv[i + 1], ppvk_isa_name(k)) == 0) isa = k;
            if (isa < 0 || !ppvk_isa_supported(isa)) {
                fprintf(stderr, "bench_kernels: isa '%s' is unknown or not on this machine\n",
                        argv[i + 1]);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "usage: %s [--quick] [--isa generic|avx2|avx512]\n", argv[0]);
            return 2;
        }
    }
    if (isa < 0) {
        isa = PPVK_ISA_COUNT - 1;
        while (!ppvk_isa_supported(isa))
            isa--;
    }
    static const int shapes[][3] = {
        {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {64, 4096, 1024}};
    int nshapes = quick ? 2 : 4, reps = quick ? 2 : 5, failed = 0;
    printf("ppv_matmul_f32 (isa %s, machine best %s) vs ", ppvk_isa_name(isa), ppv_matmul_isa());
#ifdef PPV_HAVE_OPENBLAS
    printf("OpenBLAS cblas_sgemm (core %s)\n", openblas_get_corename());
#else
    printf("openblas: not found\n");
#endif
    printf("%-16s %7s %5s %12s %12s %6s  %s\n", "shape MxNxK", "threads", "used", "ppv GFLOP/s",
           "blas GFLOP/s", "ratio", "bitwise");
    for (int s = 0; s < nshapes; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *a = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K);
        float *out = malloc(sizeof(float) * M * N), *tmp = malloc(sizeof(float) * M * N);
        if (!a || !w || !out || !tmp) {
            fprintf(stderr, "bench_kernels: out of memory for %dx%dx%d\n", M, N, K);
            return 2;
        }
        for (size_t i = 0; i < (size_t)M * K; i++)
            a[i] = ppv_rng_normal(7, 1, i);
        for (size_t i = 0; i < (size_t)N * K; i++)
            w[i] = ppv_rng_normal(7, 2, i);
        double flop = 2.0 * M * N * K;
        for (int threads = 1; threads <= 2; threads++) {
            double tp = time_ppv(out, a, w, M, N, K, threads, isa, reps);
            char shape[32], blas[16] = "-", ratio[16] = "-";
            snprintf(shape, sizeof shape, "%dx%dx%d", M, N, K);
#ifdef PPV_HAVE_OPENBLAS
            double tb = time_blas(tmp, a, w, M, N, K, threads, reps);
            snprintf(blas, sizeof blas, "%.1f", flop / tb * 1e-9);
            snprintf(ratio, sizeof ratio, "%.2f", tb / tp);
#endif
            const char *bits = "";
            if (threads == 2) {
                int ok = bitwise_ok(out, tmp, a, w, M, N, K);
                bits = ok ? "same bits: 1/2/3 threads, every isa, naive loop" : "MISMATCH";
                failed |= !ok;
            }
            printf("%-16s %7d %5d %12.1f %12s %6s  %s\n", shape, threads,
                   (int)ppvk_matmul_threads(M, N, K, threads), flop / tp * 1e-9, blas, ratio, bits);
        }
        free(a), free(w), free(out), free(tmp);
    }
    return failed ? 1 : 0;
}
