/* ops.cu - the CUDA device: every op of ppvk_ops as a CUDA kernel that
 * computes the CPU reference's bits. Built into its own module
 * (libppv_cuda.so), which kernels/device.c loads when a model is set to
 * "cuda".
 *
 * How the bits stay equal: each output value is computed by one thread
 * with the arithmetic of arith.h, the same functions the CPU ops call, in
 * the same order (a reduction is one fp32 accumulator over a fixed order,
 * never a tree or an atomic); this file is compiled with --fmad=false and
 * IEEE division and square root, and arith.h's multiply-adds are explicit
 * __fmul_rn / __fadd_rn. The threads split output values, never a
 * reduction, so the launch shape cannot change a bit.
 *
 * Data stays on the host: each op copies its inputs to device buffers
 * (strided rows packed to compact rows), runs, and copies its outputs back
 * into the caller's strides, writing only the values the CPU op writes.
 * One mutex serialises the ops (the buffers are shared); the first CUDA
 * error is kept, later ops are skipped, and status() reports it.
 *
 * The second table, "cuda:cublas", is the same but for the matmuls, which
 * it hands to cuBLAS (SGEMM): faster on large shapes, deterministic run to
 * run (one stream, a fixed workspace, no atomics, pedantic math: no TF32),
 * but summed in cuBLAS's own order, so it matches the reference within a
 * bound, not bit for bit; callers must compare it so. libcublas is loaded
 * only when that table is asked for, so the reference table never needs it.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels_internal.h"

namespace {

pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
int failed;        /* a CUDA call has failed: every op since is skipped */
char failure[320]; /* the first failure */
void *buf[10];     /* device buffers, grown on demand */
size_t cap[10];

const int THREADS = 256;

/* Keeps the first failure; 0 if e is success. */
int check(cudaError_t e, const char *op, const char *what) {
    if (e == cudaSuccess) return 0;
    if (!failed)
        snprintf(failure, sizeof failure, "CUDA op %s: %s: %s", op, what, cudaGetErrorString(e));
    failed = 1;
    return -1;
}

/* Device buffer `slot` with room for n floats, or NULL. */
float *dbuf(int slot, size_t n, const char *op) {
    size_t bytes = (n ? n : 1) * sizeof(float);
    if (cap[slot] < bytes) {
        cudaFree(buf[slot]);
        buf[slot] = NULL;
        cap[slot] = 0;
        if (check(cudaMalloc(&buf[slot], bytes), op, "cudaMalloc")) return NULL;
        cap[slot] = bytes;
    }
    return (float *)buf[slot];
}

/* rows x cols floats at host (row stride ld) -> compact device buffer `slot`. */
float *put(int slot, const float *host, size_t ld, size_t rows, size_t cols, const char *op) {
    float *d = dbuf(slot, rows * cols, op);
    if (!d || rows * cols == 0) return d;
    cudaError_t e = ld == cols || rows == 1 /* compact: one plain copy */
                        ? cudaMemcpy(d, host, rows * cols * sizeof(float), cudaMemcpyHostToDevice)
                        : cudaMemcpy2D(d, cols * sizeof(float), host, ld * sizeof(float),
                                       cols * sizeof(float), rows, cudaMemcpyHostToDevice);
    return check(e, op, "copy to device") ? NULL : d;
}

/* The compact device rows back into host rows of stride ld. */
void get(float *host, size_t ld, const float *d, size_t rows, size_t cols, const char *op) {
    if (rows * cols == 0) return;
    check(ld == cols || rows == 1
              ? cudaMemcpy(host, d, rows * cols * sizeof(float), cudaMemcpyDeviceToHost)
              : cudaMemcpy2D(host, ld * sizeof(float), d, cols * sizeof(float),
                             cols * sizeof(float), rows, cudaMemcpyDeviceToHost),
          op, "copy to host");
}

/* Blocks for n threads. */
unsigned blocks(size_t n) {
    return (unsigned)((n + THREADS - 1) / THREADS);
}

/* Checks a launch; 0 if it went. */
int launched(const char *op) {
    return check(cudaGetLastError(), op, "kernel launch");
}

/* ---- kernels: one thread per output value (or row) ---------------------------------- */

__global__ void k_linear_forward(float *out, const float *inp, const float *w, const float *b,
                                 int M, int IC, int OC) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * OC) return;
    size_t t = i / OC, o = i % OC;
    float s = ppvk_dot(inp + t * IC, 1, w + o * IC, 1, IC);
    out[i] = b ? s + b[o] : s;
}

__global__ void k_linear_backward_input(float *dinp, const float *dout, const float *w, int M,
                                        int IC, int OC) {
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (size_t)M * IC) return;
    size_t t = j / IC, i = j % IC;
    dinp[j] = ppvk_dot(dout + t * OC, 1, w + i, (size_t)IC, OC); /* over o in order */
}

__global__ void k_linear_backward_weight(float *dw, float *db, const float *dout, const float *inp,
                                         int M, int IC, int OC) {
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (size_t)OC * IC) return;
    size_t o = j / IC, i = j % IC;
    dw[j] = ppvk_dot(dout + o, (size_t)OC, inp + i, (size_t)IC, M); /* over t in order */
    if (db && i == 0) {
        float s = 0.0f;
        for (int t = 0; t < M; t++)
            s += dout[(size_t)t * OC + o];
        db[o] = s;
    }
}

__global__ void k_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, int M,
                                    int C) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= M) return;
    ppvk_layernorm_row(out + (size_t)t * C, mean + t, rstd + t, inp + (size_t)t * C, C);
}

__global__ void k_layernorm_backward(float *dinp, const float *dout, const float *inp,
                                     const float *mean, const float *rstd, int M, int C) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= M) return;
    ppvk_layernorm_backward_row(dinp + (size_t)t * C, dout + (size_t)t * C, inp + (size_t)t * C,
                                mean[t], rstd[t], C);
}

__global__ void k_modulate_forward(float *out, const float *inp, const float *shift,
                                   const float *scale, int M, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * C) return;
    out[i] = ppvk_modulate(inp[i], shift[i % C], scale[i % C]);
}

/* dinp per value; dshift, dscale per channel, over rows in order. */
__global__ void k_modulate_backward(float *dinp, float *dshift, float *dscale, const float *dout,
                                    const float *inp, const float *scale, int M, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float ds = 0.0f, dc = 0.0f;
    for (int t = 0; t < M; t++) {
        size_t i = (size_t)t * C + c;
        float d = dout[i];
        dinp[i] = d * (1.0f + scale[c]);
        ds += d;
        dc = ppvk_madd(dc, d, inp[i]);
    }
    dshift[c] = ds;
    dscale[c] = dc;
}

__global__ void k_residual_forward(float *out, const float *x, const float *gate, const float *y,
                                   int M, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * C) return;
    out[i] = x[i] + (gate ? gate[i % C] * y[i] : y[i]);
}

__global__ void k_residual_backward(float *dy, float *dgate, const float *dout, const float *gate,
                                    const float *y, int M, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float g = 0.0f;
    for (int t = 0; t < M; t++) {
        size_t i = (size_t)t * C + c;
        dy[i] = gate ? dout[i] * gate[c] : dout[i];
        if (gate) g = ppvk_madd(g, dout[i], y[i]);
    }
    if (gate) dgate[c] = g;
}

__global__ void k_gelu_forward(float *out, const float *inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = ppvk_gelu(inp[i]);
}

__global__ void k_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dinp[i] = ppvk_gelu_grad(dout[i], inp[i]);
}

__global__ void k_silu_forward(float *out, const float *inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = ppvk_silu(inp[i]);
}

__global__ void k_timestep_embedding(float *out, float t, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, half = C / 2;
    if (i < half) ppvk_timestep_pair(t, i, half, &out[i], &out[half + i]);
    if (i == 0 && C % 2) out[C - 1] = 0.0f;
}

__global__ void k_round_bf16(float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = ppvk_bf16_value(ppvk_bf16_bits(x[i]));
}

/* Attention, compact rows (q, out: T x C; k, v: Tk x C). Rows of e, p and
 * ds are per (h, t): index (h T + t) Tk + u. */
__global__ void k_attention_rows(float *e, float *stats, const float *q, const float *k, int T,
                                 int Tk, int C, int H) {
    int r = blockIdx.x * blockDim.x + threadIdx.x; /* h T + t */
    if (r >= H * T) return;
    int h = r / T, t = r % T, hd = C / H;
    ppvk_attention_row(e + (size_t)r * Tk, &stats[2 * (size_t)r], &stats[2 * (size_t)r + 1],
                       q + (size_t)t * C + h * hd, k + h * hd, (size_t)C, Tk, hd,
                       ppvk_attention_scale(hd));
}

__global__ void k_attention_out(float *out, const float *e, const float *stats, const float *v,
                                int T, int Tk, int C, int H) {
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; /* t C + c */
    if (j >= (size_t)T * C) return;
    int t = (int)(j / C), c = (int)(j % C), hd = C / H, h = c / hd;
    size_t r = (size_t)h * T + t;
    float sum = stats[2 * r + 1], o = 0.0f;
    for (int u = 0; u < Tk; u++) /* in order of u */
        o = ppvk_madd(o, e[r * Tk + u] / sum, v[(size_t)u * C + c]);
    out[j] = o;
}

__global__ void k_attention_grad_rows(float *p, float *ds, const float *dout, const float *q,
                                      const float *k, const float *v, const float *stats, int T,
                                      int Tk, int C, int H) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= H * T) return;
    int h = r / T, t = r % T, hd = C / H;
    ppvk_attention_grad_row(p + (size_t)r * Tk, ds + (size_t)r * Tk, q + (size_t)t * C + h * hd,
                            dout + (size_t)t * C + h * hd, k + h * hd, v + h * hd, (size_t)C, Tk,
                            hd, ppvk_attention_scale(hd), stats[2 * (size_t)r],
                            stats[2 * (size_t)r + 1]);
}

__global__ void k_attention_dq(float *dq, const float *ds, const float *k, int T, int Tk, int C,
                               int H) {
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; /* t C + c */
    if (j >= (size_t)T * C) return;
    int t = (int)(j / C), c = (int)(j % C), h = c / (C / H);
    dq[j] = ppvk_dot(ds + ((size_t)h * T + t) * Tk, 1, k + c, (size_t)C, Tk); /* over u */
}

__global__ void k_attention_dkv(float *dk, float *dv, const float *ds, const float *p,
                                const float *q, const float *dout, int T, int Tk, int C, int H) {
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; /* u C + c */
    if (j >= (size_t)Tk * C) return;
    int u = (int)(j / C), c = (int)(j % C), h = c / (C / H);
    size_t r0 = (size_t)h * T * Tk + u;                         /* (h T + t) Tk + u at t = 0 */
    dk[j] = ppvk_dot(ds + r0, (size_t)Tk, q + c, (size_t)C, T); /* over t in order */
    dv[j] = ppvk_dot(p + r0, (size_t)Tk, dout + c, (size_t)C, T);
}

/* The generator's attention, rows of ld = nh hd: e rows per (h, t) over
 * n0 + n1 keys; k0/v0 may be NULL when n0 is 0. */
__global__ void k_kv_attention_rows(float *e, float *stats, const float *q, const float *k0, int n0,
                                    float bias0, const float *k1, int n1, int M, int nh, int hd) {
    int r = blockIdx.x * blockDim.x + threadIdx.x; /* h M + t */
    if (r >= nh * M) return;
    int h = r / M, t = r % M;
    size_t ld = (size_t)nh * hd, hc = (size_t)h * hd;
    ppvk_attention_row2(e + (size_t)r * (n0 + n1), &stats[2 * (size_t)r], &stats[2 * (size_t)r + 1],
                        q + (size_t)t * ld + hc, n0 ? k0 + hc : NULL, n0, bias0,
                        n1 ? k1 + hc : NULL, n1, ld, hd, ppvk_attention_scale(hd));
}

__global__ void k_kv_attention_out(float *out, const float *e, const float *stats, const float *v0,
                                   int n0, const float *v1, int n1, int M, int nh, int hd) {
    size_t ld = (size_t)nh * hd, j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; /* t ld + c */
    if (j >= (size_t)M * ld) return;
    int t = (int)(j / ld), c = (int)(j % ld), h = c / hd, n = n0 + n1;
    size_t r = (size_t)h * M + t;
    float sum = stats[2 * r + 1], o = 0.0f;
    for (int u = 0; u < n; u++) { /* in order of u */
        const float *vu = u < n0 ? v0 + (size_t)u * ld : v1 + (size_t)(u - n0) * ld;
        o = ppvk_madd(o, e[r * n + u] / sum, vu[c]);
    }
    out[j] = o;
}

__global__ void k_block_partial(float *out, const float *a, const float *w, int M, int N, int K) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    size_t t = i / N, o = i % N;
    out[i] = ppvk_dot(a + t * K, 1, w + o * K, 1, K);
}

/* The bias and column sums that go with the cuBLAS matmuls, in the
 * reference's order. */
__global__ void k_add_bias(float *out, const float *b, int M, int N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)M * N) out[i] = out[i] + b[i % N];
}

__global__ void k_column_sums(float *db, const float *dout, int M, int N) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= N) return;
    float s = 0.0f;
    for (int t = 0; t < M; t++)
        s += dout[(size_t)t * N + o];
    db[o] = s;
}

/* ---- cuBLAS, loaded on demand ------------------------------------------------------------ */

struct cublas_api {
    void *lib;
    cublasHandle_t h;
    void *workspace;
    decltype(&cublasCreate_v2) create;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSetAtomicsMode) set_atomics_mode;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSgemm_v2) sgemm;
} blas;

const size_t CUBLAS_WORKSPACE = 32u << 20; /* fixed: cuBLAS picks no kernel by free memory */

/* Loads libcublas and makes the one handle; 0, or -1 with the reason. */
int cublas_open(char *err, size_t errlen) {
    if (blas.h) return 0;
    const char *names[] = {"libcublas.so.13", "libcublas.so", PPV_CUBLAS_FALLBACK};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !blas.lib; i++)
        blas.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!blas.lib) {
        snprintf(err, errlen, "cannot load cuBLAS: %s", dlerror());
        return -1;
    }
#define SYM(field, name)                                                                           \
    if (!(blas.field = (decltype(blas.field))dlsym(blas.lib, name))) {                             \
        snprintf(err, errlen, "cuBLAS lacks %s", name);                                            \
        return -1;                                                                                 \
    }
    SYM(create, "cublasCreate_v2")
    SYM(set_math_mode, "cublasSetMathMode")
    SYM(set_atomics_mode, "cublasSetAtomicsMode")
    SYM(set_workspace, "cublasSetWorkspace_v2")
    SYM(set_stream, "cublasSetStream_v2")
    SYM(sgemm, "cublasSgemm_v2")
#undef SYM
    cublasHandle_t h;
    if (blas.create(&h) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cublasCreate failed");
        return -1;
    }
    if (cudaMalloc(&blas.workspace, CUBLAS_WORKSPACE) != cudaSuccess ||
        blas.set_workspace(h, blas.workspace, CUBLAS_WORKSPACE) != CUBLAS_STATUS_SUCCESS ||
        blas.set_stream(h, 0) != CUBLAS_STATUS_SUCCESS ||
        blas.set_math_mode(h, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS ||
        blas.set_atomics_mode(h, CUBLAS_ATOMICS_NOT_ALLOWED) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cannot set up cuBLAS (workspace, stream, pedantic math, atomics)");
        return -1;
    }
    blas.h = h;
    return 0;
}

/* Column-major SGEMM, C = op(A) op(B), beta 0; 0, or -1 (the failure kept). */
int sgemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *A, int lda,
          const float *B, int ldb, float *C, int ldc, const char *op) {
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = blas.sgemm(blas.h, ta, tb, m, n, k, &one, A, lda, B, ldb, &zero, C, ldc);
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    if (!failed)
        snprintf(failure, sizeof failure, "CUDA op %s: cublasSgemm: status %d", op, (int)st);
    failed = 1;
    return -1;
}

/* ---- the ops: copy in, launch, copy out ------------------------------------------------- */

/* Holds the lock for the length of one op and knows the op's outputs: if
 * the op does not complete (it, or an op before it, failed), they are
 * filled with quiet NaN on the way out, so that nothing reads memory the
 * op never wrote and nothing computed from them passes a comparison. */
struct op_guard {
    struct out_rows {
        float *p;
        size_t ld, rows, cols;
    } outs[3];
    int nouts = 0;
    op_guard() {
        pthread_mutex_lock(&lock);
    }
    void out(float *p, size_t ld, size_t rows, size_t cols) {
        if (p) outs[nouts++] = {p, ld, rows, cols};
    }
    ~op_guard() {
        if (failed)
            for (int i = 0; i < nouts; i++)
                for (size_t r = 0; r < outs[i].rows; r++)
                    for (size_t c = 0; c < outs[i].cols; c++)
                        outs[i].p[r * outs[i].ld + c] = NAN;
        pthread_mutex_unlock(&lock);
    }
};

#define OP_BEGIN(nm)                                                                               \
    op_guard guard_;                                                                               \
    const char *op = nm

/* After the outputs are named: an op after a failure does nothing. */
#define OP_SKIP_AFTER_FAILURE                                                                      \
    if (failed) return

void linear_forward(float *out, const float *inp, const float *w, const float *b, int M, int IC,
                    int OC) {
    OP_BEGIN("linear_forward");
    guard_.out(out, OC, M, OC);
    OP_SKIP_AFTER_FAILURE;
    float *di = put(0, inp, IC, M, IC, op), *dw = put(1, w, IC, OC, IC, op);
    float *db = b ? put(2, b, OC, 1, OC, op) : NULL, *dout = dbuf(3, (size_t)M * OC, op);
    if (!di || !dw || (b && !db) || !dout) return;
    k_linear_forward<<<blocks((size_t)M * OC), THREADS>>>(dout, di, dw, db, M, IC, OC);
    if (!launched(op)) get(out, OC, dout, M, OC, op);
}

void linear_backward_input(float *dinp, const float *dout, const float *w, int M, int IC, int OC) {
    OP_BEGIN("linear_backward_input");
    guard_.out(dinp, IC, M, IC);
    OP_SKIP_AFTER_FAILURE;
    float *dd = put(0, dout, OC, M, OC, op), *dw = put(1, w, IC, OC, IC, op);
    float *dx = dbuf(2, (size_t)M * IC, op);
    if (!dd || !dw || !dx) return;
    k_linear_backward_input<<<blocks((size_t)M * IC), THREADS>>>(dx, dd, dw, M, IC, OC);
    if (!launched(op)) get(dinp, IC, dx, M, IC, op);
}

void linear_backward_weight(float *dw, float *db, const float *dout, const float *inp, int M,
                            int IC, int OC) {
    OP_BEGIN("linear_backward_weight");
    guard_.out(dw, IC, OC, IC);
    guard_.out(db, OC, 1, OC);
    OP_SKIP_AFTER_FAILURE;
    float *dd = put(0, dout, OC, M, OC, op), *di = put(1, inp, IC, M, IC, op);
    float *gw = dbuf(2, (size_t)OC * IC, op), *gb = db ? dbuf(3, (size_t)OC, op) : NULL;
    if (!dd || !di || !gw || (db && !gb)) return;
    k_linear_backward_weight<<<blocks((size_t)OC * IC), THREADS>>>(gw, gb, dd, di, M, IC, OC);
    if (launched(op)) return;
    get(dw, IC, gw, OC, IC, op);
    if (db) get(db, OC, gb, 1, OC, op);
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, int M, int C) {
    OP_BEGIN("layernorm_forward");
    guard_.out(out, C, M, C);
    guard_.out(mean, M, 1, M);
    guard_.out(rstd, M, 1, M);
    OP_SKIP_AFTER_FAILURE;
    float *di = put(0, inp, C, M, C, op), *dout = dbuf(1, (size_t)M * C, op);
    float *dm = dbuf(2, (size_t)M, op), *dr = dbuf(3, (size_t)M, op);
    if (!di || !dout || !dm || !dr) return;
    k_layernorm_forward<<<blocks((size_t)M), THREADS>>>(dout, dm, dr, di, M, C);
    if (launched(op)) return;
    get(out, C, dout, M, C, op);
    get(mean, M, dm, 1, M, op);
    get(rstd, M, dr, 1, M, op);
}

void layernorm_backward(float *dinp, const float *dout, const float *inp, const float *mean,
                        const float *rstd, int M, int C) {
    OP_BEGIN("layernorm_backward");
    guard_.out(dinp, C, M, C);
    OP_SKIP_AFTER_FAILURE;
    float *dd = put(0, dout, C, M, C, op), *di = put(1, inp, C, M, C, op);
    float *dm = put(2, mean, M, 1, M, op), *dr = put(3, rstd, M, 1, M, op);
    float *dx = dbuf(4, (size_t)M * C, op);
    if (!dd || !di || !dm || !dr || !dx) return;
    k_layernorm_backward<<<blocks((size_t)M), THREADS>>>(dx, dd, di, dm, dr, M, C);
    if (!launched(op)) get(dinp, C, dx, M, C, op);
}

void modulate_forward(float *out, const float *inp, const float *shift, const float *scale, int M,
                      int C) {
    OP_BEGIN("modulate_forward");
    guard_.out(out, C, M, C);
    OP_SKIP_AFTER_FAILURE;
    float *di = put(0, inp, C, M, C, op), *dsh = put(1, shift, C, 1, C, op);
    float *dsc = put(2, scale, C, 1, C, op), *dout = dbuf(3, (size_t)M * C, op);
    if (!di || !dsh || !dsc || !dout) return;
    k_modulate_forward<<<blocks((size_t)M * C), THREADS>>>(dout, di, dsh, dsc, M, C);
    if (!launched(op)) get(out, C, dout, M, C, op);
}

void modulate_backward(float *dinp, float *dshift, float *dscale, const float *dout,
                       const float *inp, const float *scale, int M, int C) {
    OP_BEGIN("modulate_backward");
    guard_.out(dinp, C, M, C);
    guard_.out(dshift, C, 1, C);
    guard_.out(dscale, C, 1, C);
    OP_SKIP_AFTER_FAILURE;
    float *dd = put(0, dout, C, M, C, op), *di = put(1, inp, C, M, C, op);
    float *dsc = put(2, scale, C, 1, C, op), *dx = dbuf(3, (size_t)M * C, op);
    float *gsh = dbuf(4, (size_t)C, op), *gsc = dbuf(5, (size_t)C, op);
    if (!dd || !di || !dsc || !dx || !gsh || !gsc) return;
    k_modulate_backward<<<blocks((size_t)C), THREADS>>>(dx, gsh, gsc, dd, di, dsc, M, C);
    if (launched(op)) return;
    get(dinp, C, dx, M, C, op);
    get(dshift, C, gsh, 1, C, op);
    get(dscale, C, gsc, 1, C, op);
}

void residual_forward(float *out, const float *x, const float *gate, const float *y, int M, int C) {
    OP_BEGIN("residual_forward");
    guard_.out(out, C, M, C);
    OP_SKIP_AFTER_FAILURE;
    float *dx = put(0, x, C, M, C, op), *dy = put(1, y, C, M, C, op);
    float *dg = gate ? put(2, gate, C, 1, C, op) : NULL, *dout = dbuf(3, (size_t)M * C, op);
    if (!dx || !dy || (gate && !dg) || !dout) return;
    k_residual_forward<<<blocks((size_t)M * C), THREADS>>>(dout, dx, dg, dy, M, C);
    if (!launched(op)) get(out, C, dout, M, C, op);
}

void residual_backward(float *dy, float *dgate, const float *dout, const float *gate,
                       const float *y, int M, int C) {
    OP_BEGIN("residual_backward");
    guard_.out(dy, C, M, C);
    guard_.out(dgate, C, 1, C);
    OP_SKIP_AFTER_FAILURE;
    float *dd = put(0, dout, C, M, C, op), *dyy = put(1, y, C, M, C, op);
    float *dg = gate ? put(2, gate, C, 1, C, op) : NULL, *gy = dbuf(3, (size_t)M * C, op);
    float *gg = gate ? dbuf(4, (size_t)C, op) : NULL;
    if (!dd || !dyy || (gate && (!dg || !gg)) || !gy) return;
    k_residual_backward<<<blocks((size_t)C), THREADS>>>(gy, gg, dd, dg, dyy, M, C);
    if (launched(op)) return;
    get(dy, C, gy, M, C, op);
    if (gate) get(dgate, C, gg, 1, C, op);
}

/* The elementwise ops: n values in, n out. */
void gelu_forward(float *out, const float *inp, size_t n) {
    OP_BEGIN("gelu_forward");
    guard_.out(out, n, 1, n);
    OP_SKIP_AFTER_FAILURE;
    float *di = put(0, inp, n, 1, n, op), *dout = dbuf(1, n, op);
    if (!di || !dout) return;
    k_gelu_forward<<<blocks(n), THREADS>>>(dout, di, n);
    if (!launched(op)) get(out, n, dout, 1, n, op);
}

void gelu_backward(float *dinp, const float *dout, const float *inp, size_t n) {
    OP_BEGIN("gelu_backward");
    guard_.out(dinp, n, 1, n);
    OP_SKIP_AFTER_FAILURE;
    float *dd = put(0, dout, n, 1, n, op), *di = put(1, inp, n, 1, n, op), *dx = dbuf(2, n, op);
    if (!dd || !di || !dx) return;
    k_gelu_backward<<<blocks(n), THREADS>>>(dx, dd, di, n);
    if (!launched(op)) get(dinp, n, dx, 1, n, op);
}

void silu_forward(float *out, const float *inp, size_t n) {
    OP_BEGIN("silu_forward");
    guard_.out(out, n, 1, n);
    OP_SKIP_AFTER_FAILURE;
    float *di = put(0, inp, n, 1, n, op), *dout = dbuf(1, n, op);
    if (!di || !dout) return;
    k_silu_forward<<<blocks(n), THREADS>>>(dout, di, n);
    if (!launched(op)) get(out, n, dout, 1, n, op);
}

void timestep_embedding(float *out, float t, int C) {
    OP_BEGIN("timestep_embedding");
    guard_.out(out, C, 1, C);
    OP_SKIP_AFTER_FAILURE;
    float *dout = dbuf(0, (size_t)C, op);
    if (!dout) return;
    k_timestep_embedding<<<blocks((size_t)(C / 2 + 1)), THREADS>>>(dout, t, C);
    if (!launched(op)) get(out, C, dout, 1, C, op);
}

void round_bf16(float *x, size_t n) {
    OP_BEGIN("round_bf16");
    guard_.out(x, n, 1, n);
    OP_SKIP_AFTER_FAILURE;
    float *d = put(0, x, n, 1, n, op);
    if (!d) return;
    k_round_bf16<<<blocks(n), THREADS>>>(d, n);
    if (!launched(op)) get(x, n, d, 1, n, op);
}

void attention_forward(float *out, float *stats, const float *q, int ldq, const float *k,
                       const float *v, int ldkv, int T, int Tk, int C, int H, float *scratch) {
    (void)scratch; /* the device rows live in a device buffer */
    OP_BEGIN("attention_forward");
    guard_.out(out, C, T, C);
    guard_.out(stats, (size_t)H * T * 2, 1, (size_t)H * T * 2);
    OP_SKIP_AFTER_FAILURE;
    float *dq = put(0, q, ldq, T, C, op), *dk = put(1, k, ldkv, Tk, C, op);
    float *dv = put(2, v, ldkv, Tk, C, op), *e = dbuf(3, (size_t)H * T * Tk, op);
    float *st = dbuf(4, (size_t)H * T * 2, op), *dout = dbuf(5, (size_t)T * C, op);
    if (!dq || !dk || !dv || !e || !st || !dout) return;
    k_attention_rows<<<blocks((size_t)H * T), THREADS>>>(e, st, dq, dk, T, Tk, C, H);
    if (launched(op)) return;
    k_attention_out<<<blocks((size_t)T * C), THREADS>>>(dout, e, st, dv, T, Tk, C, H);
    if (launched(op)) return;
    get(out, C, dout, T, C, op);
    get(stats, (size_t)H * T * 2, st, 1, (size_t)H * T * 2, op);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, int ldq,
                        const float *k, const float *v, int ldkv, const float *stats, int T, int Tk,
                        int C, int H, float *scratch) {
    (void)scratch;
    OP_BEGIN("attention_backward");
    guard_.out(dq, ldq, T, C);
    guard_.out(dk, ldkv, Tk, C);
    guard_.out(dv, ldkv, Tk, C);
    OP_SKIP_AFTER_FAILURE;
    float *gd = put(0, dout, C, T, C, op), *gq = put(1, q, ldq, T, C, op);
    float *gk = put(2, k, ldkv, Tk, C, op), *gv = put(3, v, ldkv, Tk, C, op);
    float *st = put(4, stats, (size_t)H * T * 2, 1, (size_t)H * T * 2, op);
    float *p = dbuf(5, (size_t)H * T * Tk, op), *ds = dbuf(6, (size_t)H * T * Tk, op);
    float *oq = dbuf(7, (size_t)T * C, op), *ok = dbuf(8, (size_t)Tk * C, op);
    float *ov = dbuf(9, (size_t)Tk * C, op);
    if (!gd || !gq || !gk || !gv || !st || !p || !ds || !oq || !ok || !ov) return;
    k_attention_grad_rows<<<blocks((size_t)H * T), THREADS>>>(p, ds, gd, gq, gk, gv, st, T, Tk, C,
                                                              H);
    if (launched(op)) return;
    k_attention_dq<<<blocks((size_t)T * C), THREADS>>>(oq, ds, gk, T, Tk, C, H);
    if (launched(op)) return;
    k_attention_dkv<<<blocks((size_t)Tk * C), THREADS>>>(ok, ov, ds, p, gq, gd, T, Tk, C, H);
    if (launched(op)) return;
    get(dq, ldq, oq, T, C, op);
    get(dk, ldkv, ok, Tk, C, op);
    get(dv, ldkv, ov, Tk, C, op);
}

void kv_attention_forward(float *out, const float *q, const float *k0, const float *v0, int n0,
                          float bias0, const float *k1, const float *v1, int n1, int M, int nh,
                          int hd, float *scratch) {
    (void)scratch;
    OP_BEGIN("kv_attention_forward");
    size_t ld = (size_t)nh * hd, n = (size_t)(n0 + n1);
    guard_.out(out, ld, M, ld);
    OP_SKIP_AFTER_FAILURE;
    float *dq = put(0, q, ld, M, ld, op);
    float *dk0 = n0 ? put(1, k0, ld, n0, ld, op) : NULL,
          *dv0 = n0 ? put(2, v0, ld, n0, ld, op) : NULL;
    float *dk1 = n1 ? put(3, k1, ld, n1, ld, op) : NULL,
          *dv1 = n1 ? put(4, v1, ld, n1, ld, op) : NULL;
    float *e = dbuf(5, (size_t)nh * M * n, op), *st = dbuf(6, (size_t)nh * M * 2, op);
    float *dout = dbuf(7, (size_t)M * ld, op);
    if (!dq || (n0 && (!dk0 || !dv0)) || (n1 && (!dk1 || !dv1)) || !e || !st || !dout) return;
    k_kv_attention_rows<<<blocks((size_t)nh * M), THREADS>>>(e, st, dq, dk0, n0, bias0, dk1, n1, M,
                                                             nh, hd);
    if (launched(op)) return;
    k_kv_attention_out<<<blocks((size_t)M * ld), THREADS>>>(dout, e, st, dv0, n0, dv1, n1, M, nh,
                                                            hd);
    if (!launched(op)) get(out, ld, dout, M, ld, op);
}

void block_partial(float *out, const float *a, size_t lda, const float *w, size_t ldw, int M, int N,
                   int K) {
    OP_BEGIN("block_partial");
    guard_.out(out, N, M, N);
    OP_SKIP_AFTER_FAILURE;
    float *da = put(0, a, lda, M, K, op), *dw = put(1, w, ldw, N, K, op);
    float *dout = dbuf(2, (size_t)M * N, op);
    if (!da || !dw || !dout) return;
    k_block_partial<<<blocks((size_t)M * N), THREADS>>>(dout, da, dw, M, N, K);
    if (!launched(op)) get(out, N, dout, M, N, op);
}

/* The matmuls on cuBLAS. Row-major X (r, c) is column-major X^T, so
 * out = a . w^T is out^T = w . a^T: (N x M) = op_T(w as K x N) . (a as K x M). */
void blas_linear_forward(float *out, const float *inp, const float *w, const float *b, int M,
                         int IC, int OC) {
    OP_BEGIN("linear_forward (cuBLAS)");
    guard_.out(out, OC, M, OC);
    OP_SKIP_AFTER_FAILURE;
    float *di = put(0, inp, IC, M, IC, op), *dw = put(1, w, IC, OC, IC, op);
    float *db = b ? put(2, b, OC, 1, OC, op) : NULL, *dout = dbuf(3, (size_t)M * OC, op);
    if (!di || !dw || (b && !db) || !dout) return;
    if (sgemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, M, IC, dw, IC, di, IC, dout, OC, op)) return;
    if (b) {
        k_add_bias<<<blocks((size_t)M * OC), THREADS>>>(dout, db, M, OC);
        if (launched(op)) return;
    }
    get(out, OC, dout, M, OC, op);
}

/* dinp (M, IC) = dout (M, OC) . w (OC, IC): dinp^T = w^T . dout^T. */
void blas_linear_backward_input(float *dinp, const float *dout, const float *w, int M, int IC,
                                int OC) {
    OP_BEGIN("linear_backward_input (cuBLAS)");
    guard_.out(dinp, IC, M, IC);
    OP_SKIP_AFTER_FAILURE;
    float *dd = put(0, dout, OC, M, OC, op), *dw = put(1, w, IC, OC, IC, op);
    float *dx = dbuf(2, (size_t)M * IC, op);
    if (!dd || !dw || !dx) return;
    if (!sgemm(CUBLAS_OP_N, CUBLAS_OP_N, IC, M, OC, dw, IC, dd, OC, dx, IC, op))
        get(dinp, IC, dx, M, IC, op);
}

/* dw (OC, IC) = dout^T . inp: dw^T = inp^T . dout; db the reference's column sums. */
void blas_linear_backward_weight(float *dw, float *db, const float *dout, const float *inp, int M,
                                 int IC, int OC) {
    OP_BEGIN("linear_backward_weight (cuBLAS)");
    guard_.out(db, OC, 1, OC);
    guard_.out(dw, IC, OC, IC);
    OP_SKIP_AFTER_FAILURE;
    float *dd = put(0, dout, OC, M, OC, op), *di = put(1, inp, IC, M, IC, op);
    float *gw = dbuf(2, (size_t)OC * IC, op), *gb = db ? dbuf(3, (size_t)OC, op) : NULL;
    if (!dd || !di || !gw || (db && !gb)) return;
    if (sgemm(CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, M, di, IC, dd, OC, gw, IC, op)) return;
    if (db) {
        k_column_sums<<<blocks((size_t)OC), THREADS>>>(gb, dd, M, OC);
        if (launched(op)) return;
        get(db, OC, gb, 1, OC, op);
    }
    get(dw, IC, gw, OC, IC, op);
}

/* out (M, N) = a . w^T over K with strided rows: the device rows are compact. */
void blas_block_partial(float *out, const float *a, size_t lda, const float *w, size_t ldw, int M,
                        int N, int K) {
    OP_BEGIN("block_partial (cuBLAS)");
    guard_.out(out, N, M, N);
    OP_SKIP_AFTER_FAILURE;
    float *da = put(0, a, lda, M, K, op), *dw = put(1, w, ldw, N, K, op);
    float *dout = dbuf(2, (size_t)M * N, op);
    if (!da || !dw || !dout) return;
    if (!sgemm(CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, dw, K, da, K, dout, N, op))
        get(out, N, dout, M, N, op);
}

int status(char *err, size_t errlen) {
    op_guard guard_;
    if (!failed) return 0;
    snprintf(err, errlen, "%s", failure);
    return -1;
}

const ppvk_ops cuda_ops = {
    .name = "cuda",
    .linear_forward = linear_forward,
    .linear_backward_input = linear_backward_input,
    .linear_backward_weight = linear_backward_weight,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .modulate_forward = modulate_forward,
    .modulate_backward = modulate_backward,
    .residual_forward = residual_forward,
    .residual_backward = residual_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .silu_forward = silu_forward,
    .timestep_embedding = timestep_embedding,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .kv_attention_forward = kv_attention_forward,
    .block_partial = block_partial,
    .round_bf16 = round_bf16,
    .status = status,
};

/* The cuBLAS table: the reference table with the matmuls replaced (filled
 * in when cuBLAS opens). */
ppvk_ops cublas_ops;

} // namespace

/* The module's one export: the table of `variant` ("reference", or
 * "cublas" for the matmuls on cuBLAS) once a device answers; NULL with the
 * reason (no driver, no device, no cuBLAS) in err. */
extern "C" __attribute__((visibility("default"))) const ppvk_ops *
ppvk_cuda_ops_open(const char *variant, char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return NULL;
    }
    if (n == 0) {
        snprintf(err, errlen, "no CUDA device");
        return NULL;
    }
    e = cudaFree(0); /* makes the context now, so a broken device fails here */
    if (e != cudaSuccess) {
        snprintf(err, errlen, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return NULL;
    }
    if (strcmp(variant, "cublas") != 0) return &cuda_ops;
    op_guard guard_;
    if (cublas_open(err, errlen) != 0) return NULL;
    cublas_ops = cuda_ops;
    cublas_ops.name = "cuda:cublas";
    cublas_ops.linear_forward = blas_linear_forward;
    cublas_ops.linear_backward_input = blas_linear_backward_input;
    cublas_ops.linear_backward_weight = blas_linear_backward_weight;
    cublas_ops.block_partial = blas_block_partial;
    return &cublas_ops;
}
