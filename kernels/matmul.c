/* matmul.c - ppv_matmul_f32: out (M, N) = a (M, K) . w (N, K)^T in fp32,
 * bitwise equal to the naive loop
 *     for i, j: s = 0; for k = 0..K-1: s += a[i][k] * w[j][k]; out[i][j] = s;
 * at every thread count and on every machine.
 *
 * Speed comes from vectorising across output columns (one accumulator per
 * output element, k the outer loop over a packed tile of w) and from
 * cache blocking; neither changes any element's sequence of fp32 operations.
 * On x86-64 an AVX2 or AVX-512 variant is picked at run time; they give the
 * same bits as the baseline because each lane does an IEEE multiply then an
 * IEEE add (this file is compiled with -ffp-contract=off and never enables
 * FMA). Threads split output rows; each packs its own copy of w, so they
 * share nothing but the read-only inputs; a small product uses fewer
 * threads than asked (the bits are the same either way).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"

enum {
    MM_NR = 16,  /* columns per register tile (one packed panel) */
    MM_KC = 384, /* k steps per packed block */
    MM_NC = 80,  /* columns per packed block: MM_KC x MM_NC floats = 120 KiB */
    MM_MC = 96   /* rows swept per packed panel while it sits in L1 */
};

/* Packs w[j0 .. j0+nc)[k0 .. k0+kc) into panels of MM_NR columns:
 * buf[p][k][jj] = w[j0 + p*MM_NR + jj][k0 + k], zero past column nc. */
static void mm_pack(float *restrict buf, const float *w, int32_t K, int32_t j0, int nc, int32_t k0,
                    int kc) {
    for (int p = 0; p * MM_NR < nc; p++) {
        float *dst = buf + (size_t)p * kc * MM_NR;
        const float *src = w + (size_t)(j0 + p * MM_NR) * K + k0;
        int nr = nc - p * MM_NR < MM_NR ? nc - p * MM_NR : MM_NR;
        for (int k = 0; k < kc; k++)
            for (int jj = 0; jj < MM_NR; jj++)
                dst[(size_t)k * MM_NR + jj] = jj < nr ? src[(size_t)jj * K + k] : 0.0f;
    }
}

#if defined(__GNUC__)
#define MM_SUFFIX generic
#define MM_TARGET
#define MM_VW 4
#define MM_MR 3
#include "matmul_tile.inc"
#undef MM_SUFFIX
#undef MM_TARGET
#undef MM_VW
#undef MM_MR
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#define PPVK_HAVE_X86 1
#define MM_SUFFIX avx2
#define MM_TARGET __attribute__((target("avx2")))
#define MM_VW 8
#define MM_MR 6
#include "matmul_tile.inc"
#undef MM_SUFFIX
#undef MM_TARGET
#undef MM_VW
#undef MM_MR

#define MM_SUFFIX avx512
#define MM_TARGET __attribute__((target("avx512f")))
#define MM_VW 16
#define MM_MR 12
#include "matmul_tile.inc"
#undef MM_SUFFIX
#undef MM_TARGET
#undef MM_VW
#undef MM_MR
#endif
#ifndef PPVK_HAVE_X86
#define PPVK_HAVE_X86 0
#endif

/* Rows [r0, r1) by the naive loop: the definition, and the fallback when
 * the pack buffer cannot be allocated. */
static void mm_rows_naive(float *out, const float *a, const float *w, int32_t N, int32_t K,
                          int32_t r0, int32_t r1) {
    for (int32_t i = r0; i < r1; i++)
        for (int32_t j = 0; j < N; j++) {
            out[(size_t)i * N + j] = ppvk_dot(a + (size_t)i * K, 1, w + (size_t)j * K, 1, (int)K);
        }
}

/* The name of variant isa ("?" if none). */
const char *ppvk_isa_name(int isa) {
    static const char *const names[PPVK_ISA_COUNT] = {"generic", "avx2", "avx512"};
    return isa >= 0 && isa < PPVK_ISA_COUNT ? names[isa] : "?";
}

/* 1 if this CPU runs variant isa (valgrind, for one, hides AVX-512). */
int ppvk_isa_supported(int isa) {
    switch (isa) {
    case PPVK_ISA_GENERIC:
        return 1;
#if PPVK_HAVE_X86
    case PPVK_ISA_AVX2:
        return __builtin_cpu_supports("avx2") != 0;
    case PPVK_ISA_AVX512:
        return __builtin_cpu_supports("avx512f") != 0;
#endif
    default:
        return 0;
    }
}

/* The widest variant this machine runs. */
static int mm_best_isa(void) {
    int isa = PPVK_ISA_AVX512;
    while (isa > PPVK_ISA_GENERIC && !ppvk_isa_supported(isa))
        isa--;
    return isa;
}

/* The variant ppv_matmul_f32 uses here. */
const char *ppv_matmul_isa(void) {
    return ppvk_isa_name(mm_best_isa());
}

/* One thread's share: rows [r0, r1) of the product, with its own pack
 * buffer (NULL: use the naive loop). */
typedef struct mm_part {
    float *out;
    const float *a, *w;
    int32_t N, K, r0, r1;
    int isa;
    float *buf;
} mm_part;

/* Computes one part. */
static void *mm_part_run(void *arg) {
    const mm_part *p = arg;
    if (!p->buf) {
        mm_rows_naive(p->out, p->a, p->w, p->N, p->K, p->r0, p->r1);
        return NULL;
    }
#if defined(__GNUC__)
    switch (p->isa) {
#if PPVK_HAVE_X86
    case PPVK_ISA_AVX512:
        mm_rows_avx512(p->out, p->a, p->w, p->N, p->K, p->r0, p->r1, p->buf);
        break;
    case PPVK_ISA_AVX2:
        mm_rows_avx2(p->out, p->a, p->w, p->N, p->K, p->r0, p->r1, p->buf);
        break;
#endif
    default:
        mm_rows_generic(p->out, p->a, p->w, p->N, p->K, p->r0, p->r1, p->buf);
    }
#endif
    return NULL;
}

/* A pack buffer for one block of w (up to MM_KC x MM_NC floats, fewer for
 * a small product), or NULL. It stays under glibc's 128 KiB mmap and trim
 * thresholds, so a freed buffer is reused by the next call instead of being
 * handed back to the kernel and page-faulted in again (that alone made
 * small products 4x slower). */
static float *mm_buf_alloc(int32_t N, int32_t K) {
#if defined(__GNUC__)
    size_t kc = K < MM_KC ? (size_t)K : MM_KC;
    size_t nc = N < MM_NC ? ((size_t)N + MM_NR - 1) / MM_NR * MM_NR : MM_NC;
    return aligned_alloc(64, sizeof(float) * kc * nc); /* a multiple of 64 bytes */
#else
    (void)N, (void)K;
    return NULL;
#endif
}

enum { MM_MAX_THREADS = 64 };

/* Splits rows among threads and runs the parts; 0, or -1 if isa is missing. */
int ppvk_matmul_f32_isa(float *out, const float *a, const float *w, int32_t M, int32_t N, int32_t K,
                        int32_t threads, int isa) {
    if (!ppvk_isa_supported(isa)) return -1;
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) {
        memset(out, 0, sizeof(float) * (size_t)M * (size_t)N);
        return 0;
    }
    /* Split rows in whole 12-row units (a multiple of every variant's
     * register tile) so no thread ends on a partial tile but the last. */
    int32_t units = (M + 11) / 12;
    if (threads > units) threads = units;
    if (threads > MM_MAX_THREADS) threads = MM_MAX_THREADS;
    if (threads < 1) threads = 1;
    mm_part parts[MM_MAX_THREADS];
    pthread_t tids[MM_MAX_THREADS];
    int started[MM_MAX_THREADS] = {0};
    for (int32_t t = 0; t < threads; t++) {
        int32_t u0 = (int32_t)((int64_t)units * t / threads);
        int32_t u1 = (int32_t)((int64_t)units * (t + 1) / threads);
        parts[t] =
            (mm_part){out, a, w, N, K, u0 * 12, u1 * 12 < M ? u1 * 12 : M, isa, mm_buf_alloc(N, K)};
    }
    for (int32_t t = 1; t < threads; t++)
        started[t] = pthread_create(&tids[t], NULL, mm_part_run, &parts[t]) == 0;
    mm_part_run(&parts[0]);
    for (int32_t t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        else
            mm_part_run(&parts[t]); /* no thread: do its rows here, same bits */
    }
    for (int32_t t = 0; t < threads; t++)
        free(parts[t].buf);
    return 0;
}

/* Starting a thread costs tens of microseconds (and on a busy or virtual
 * machine it may first queue behind its parent), so each thread gets at
 * least this much work; smaller products run on fewer threads. */
static const double MM_MIN_FLOP_PER_THREAD = 64e6;

/* Threads for an M x N x K product when `threads` are asked for. */
int32_t ppvk_matmul_threads(int32_t M, int32_t N, int32_t K, int32_t threads) {
    double flop = 2.0 * M * N * K;
    if (threads > 1 && flop < MM_MIN_FLOP_PER_THREAD * threads)
        threads = flop < 2 * MM_MIN_FLOP_PER_THREAD ? 1 : (int32_t)(flop / MM_MIN_FLOP_PER_THREAD);
    return threads < 1 ? 1 : threads;
}

/* out = a . w^T on the best variant, bitwise the naive loop. */
void ppv_matmul_f32(float *out, const float *a, const float *w, int32_t M, int32_t N, int32_t K,
                    int32_t threads) {
    ppvk_matmul_f32_isa(out, a, w, M, N, K, ppvk_matmul_threads(M, N, K, threads), mm_best_isa());
}
