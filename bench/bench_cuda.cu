/* bench_cuda.cu - the CUDA device's matmuls, timed on the GPU this runs on.
 *
 * For each shape, out (M, N) = a (M, K) . w (N, K)^T:
 *  - path: ppv's cuBLAS op ("cuda:cublas" linear_forward, no bias) as a run
 *    calls it: inputs copied to the device, SGEMM, the output copied back;
 *  - raw: the same copies and the same SGEMM called directly on cuBLAS with
 *    the same settings (pedantic math, no atomics, a 32 MiB workspace);
 *    raw / path is the figure the target (>= 0.9) is about;
 *  - the SGEMM alone on device-resident data (TFLOP/s), for scale;
 *  - ppv's reference CUDA kernel ("cuda" linear_forward, the CPU's bits),
 *    copies included.
 * Each figure is the median of 9 timed calls after 2 warm-ups. The path's
 * output is also checked to repeat bit for bit. Without a GPU it says so
 * and exits 0 (a benchmark reports; it does not fail on its environment).
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels_internal.h"

namespace {

double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of 9 runs of f after 2 warm-ups. */
template <class F> double median_time(F f) {
    double t[9];
    f(), f();
    for (int i = 0; i < 9; i++) {
        double t0 = now();
        f();
        t[i] = now() - t0;
    }
    qsort(t, 9, sizeof t[0], cmp);
    return t[4];
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        if ((x) != 0) {                                                                            \
            fprintf(stderr, "bench_cuda: %s failed at line %d\n", #x, __LINE__);                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

} // namespace

int main(void) {
    char why[512];
    const ppvk_ops *blas = ppvk_device_ops("cuda:cublas", why, sizeof why);
    const ppvk_ops *ref = ppvk_device_ops("cuda", why, sizeof why);
    if (!blas || !ref) {
        printf("bench_cuda: no CUDA device here (%s): nothing to time\n", why);
        return 0;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s\n", prop.name);
    cublasHandle_t h;
    CK(cublasCreate(&h));
    void *ws;
    CK(cudaMalloc(&ws, 32u << 20));
    CK(cublasSetWorkspace(h, ws, 32u << 20));
    CK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
    CK(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED));

    static const int shapes[][3] = {{64, 256, 256},    {512, 1024, 1024}, {2048, 2048, 2048},
                                    {4096, 4096, 4096}, {8192, 4096, 1024}};
    printf("%-18s %10s %10s %8s %12s %12s %10s\n", "M x K x N", "path ms", "raw ms", "raw/path",
           "sgemm ms", "sgemm TF/s", "ref ms");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        size_t na = (size_t)M * K, nw = (size_t)N * K, no = (size_t)M * N;
        float *a = (float *)malloc(na * 4), *w = (float *)malloc(nw * 4);
        float *o1 = (float *)malloc(no * 4), *o2 = (float *)malloc(no * 4);
        for (size_t i = 0; i < na; i++) a[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        for (size_t i = 0; i < nw; i++) w[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
        double path = median_time([&] { blas->linear_forward(o1, a, w, NULL, M, K, N); });
        blas->linear_forward(o2, a, w, NULL, M, K, N);
        int repeat = memcmp(o1, o2, no * 4) == 0;
        float *da, *dw, *dout;
        CK(cudaMalloc(&da, na * 4));
        CK(cudaMalloc(&dw, nw * 4));
        CK(cudaMalloc(&dout, no * 4));
        const float one = 1.0f, zero = 0.0f;
        double raw = median_time([&] {
            CK(cudaMemcpy(da, a, na * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dw, w, nw * 4, cudaMemcpyHostToDevice));
            CK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, dw, K, da, K, &zero, dout,
                           N));
            CK(cudaMemcpy(o2, dout, no * 4, cudaMemcpyDeviceToHost));
        });
        double gemm = median_time([&] {
            CK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, dw, K, da, K, &zero, dout,
                           N));
            CK(cudaDeviceSynchronize());
        });
        double refk = median_time([&] { ref->linear_forward(o2, a, w, NULL, M, K, N); });
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%dx%d", M, K, N);
        printf("%-18s %10.3f %10.3f %8.3f %12.3f %12.2f %10.3f%s\n", shape, path * 1e3, raw * 1e3,
               raw / path, gemm * 1e3, 2.0 * M * N * K / gemm * 1e-12, refk * 1e3,
               repeat ? "" : "  (path NOT repeatable)");
        CK(cudaFree(da));
        CK(cudaFree(dw));
        CK(cudaFree(dout));
        free(a), free(w), free(o1), free(o2);
    }
    char err[512];
    if (blas->status(err, sizeof err) || ref->status(err, sizeof err)) {
        printf("bench_cuda: %s\n", err);
        return 1;
    }
    return 0;
}
