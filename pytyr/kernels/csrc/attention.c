/* Causal attention for short sequences on CPU (AVX2 + FMA), forward and backward, head by
 * head (the heads shared among torch's OpenMP threads, below).
 *
 * For each (batch, head): S = scale Q K^T, P = softmax(S) over keys j <= i, Y = P V. The
 * forward keeps each row's max and 1 / sum of exponentials (2 t floats per head); the backward
 * recomputes the scores and from them the same P into scratch (t x t, a thread's, reused
 * head after head), then:
 *   dV = P^T dY,  dP = dY V^T,  D_i = sum_j P_ij dP_ij,  dS = scale P (dP - D),
 *   dQ = dS K,  dK = dS^T Q.
 * Every product is a small GEMM through one 4 x 16 register tile (8 accumulators, one
 * broadcast of A and two loads of B per step of k), over the causal half only: a row block
 * of queries reads keys up to its last row, a block of keys reads queries from its first.
 * Operands whose rows are not contiguous along the tile's 16 columns (K for S, V for dP)
 * are transposed once per head into scratch.
 *
 * Contract (checked by pytyr/kernels/attention_cpu.py before any call): t and d multiples
 * of 16, t <= 256, d <= 256; each [b, h, t, d] tensor given by its base pointer and three
 * strides in elements (batch, head, row), its last dimension contiguous.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

/* C[4 x 16] = A[4 x k] B[k x 16]: A's rows at A + r lda, B's rows at B + k ldb. */
static inline void tile(int k, const float *A, long lda, const float *B, long ldb, float *C,
                        long ldc) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00;
    const float *a0 = A, *a1 = A + lda, *a2 = A + 2 * lda, *a3 = A + 3 * lda;
    for (int q = 0; q < k; q++) {
        __m256 b0 = _mm256_loadu_ps(B + q * ldb), b1 = _mm256_loadu_ps(B + q * ldb + 8);
        __m256 a = _mm256_broadcast_ss(a0 + q);
        c00 = _mm256_fmadd_ps(a, b0, c00), c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(a1 + q);
        c10 = _mm256_fmadd_ps(a, b0, c10), c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(a2 + q);
        c20 = _mm256_fmadd_ps(a, b0, c20), c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(a3 + q);
        c30 = _mm256_fmadd_ps(a, b0, c30), c31 = _mm256_fmadd_ps(a, b1, c31);
    }
    _mm256_storeu_ps(C, c00), _mm256_storeu_ps(C + 8, c01);
    _mm256_storeu_ps(C + ldc, c10), _mm256_storeu_ps(C + ldc + 8, c11);
    _mm256_storeu_ps(C + 2 * ldc, c20), _mm256_storeu_ps(C + 2 * ldc + 8, c21);
    _mm256_storeu_ps(C + 3 * ldc, c30), _mm256_storeu_ps(C + 3 * ldc + 8, c31);
}

/* An 8 x 8 block transposed in registers: dst row j = src column j. */
static inline void transpose8(const float *src, long lds, float *dst, long ldd) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds),
           r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds),
           r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
           r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
           t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
           t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)),
           u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
           u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)),
           u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)),
           u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)),
           u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2)),
           u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)),
           u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* dst[c][r] = src[r][c] for an r x c matrix (both multiples of 8) with row stride lds;
   dst rows of length r. */
static void transpose(int r, int c, const float *src, long lds, float *dst) {
    for (int i = 0; i < r; i += 8)
        for (int j = 0; j < c; j += 8)
            transpose8(src + i * lds + j, lds, dst + (long)j * r + i, r);
}

static inline float hsum(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

static inline float hmax(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

/* dS row from the dP row: D = sum_j<=i P_ij dP_ij, dS_ij = scale P_ij (dP_ij - D), zero
   past i (P is already zero there, so the 8-wide sums may run past i) */
static void ds_row(float *row, const float *prow, int i, int t, float scale) {
    int n = ((i + 1) + 7) & ~7;
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(prow + j), _mm256_loadu_ps(row + j), acc);
    __m256 di = _mm256_set1_ps(hsum(acc)), vs = _mm256_set1_ps(scale);
    for (int j = 0; j < n; j += 8) {
        __m256 pj = _mm256_mul_ps(_mm256_loadu_ps(prow + j), vs);
        _mm256_storeu_ps(row + j, _mm256_mul_ps(pj, _mm256_sub_ps(_mm256_loadu_ps(row + j), di)));
    }
    memset(row + n, 0, sizeof(float) * (size_t)(t - n));
}

/* Row i of S (scaled by `scale` here) becomes its softmax over j <= i, zero past i;
   stat[0] = the row's max score and stat[1] = 1 / its sum of exponentials, from which the
   backward recomputes the same probabilities, bit for bit (`probs_row`). */
static void softmax_row(float *s, int i, int t, float scale, float *stat) {
    int n8 = (i + 1) & ~7, j = 0;
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    for (; j < n8; j += 8)
        vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
    float m = hmax(vmax);
    for (; j <= i; j++)
        m = s[j] > m ? s[j] : m;
    j = 0;
    __m256 vm = _mm256_set1_ps(m), vs = _mm256_set1_ps(scale), acc = _mm256_setzero_ps();
    for (; j < n8; j += 8) {
        __m256 e = exp_neg(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm), vs));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    float tail[8] = {0}, e8[8];
    for (int q = j; q <= i; q++)
        tail[q - j] = s[q];
    __m256 et = exp_neg(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(tail), vm), vs));
    _mm256_storeu_ps(e8, et);
    float sum = hsum(acc);
    for (int q = j; q <= i; q++)
        s[q] = e8[q - j], sum += e8[q - j];
    float inv = 1.0f / sum;
    __m256 vinv = _mm256_set1_ps(inv);
    for (int q = 0; q < n8; q += 8)
        _mm256_storeu_ps(s + q, _mm256_mul_ps(_mm256_loadu_ps(s + q), vinv));
    for (int q = n8; q <= i; q++)
        s[q] *= inv;
    memset(s + i + 1, 0, sizeof(float) * (size_t)(t - i - 1));
    stat[0] = m, stat[1] = inv;
}

/* Row i of S (the same unscaled scores) becomes the forward's probabilities again from its
   `stat`, by the forward's arithmetic, zero past i. */
static void probs_row(float *s, int i, int t, float scale, const float *stat) {
    __m256 vm = _mm256_set1_ps(stat[0]), vs = _mm256_set1_ps(scale),
           vinv = _mm256_set1_ps(stat[1]);
    int n = ((i + 1) + 7) & ~7;
    for (int j = 0; j < n; j += 8) {
        __m256 e = exp_neg(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm), vs));
        _mm256_storeu_ps(s + j, _mm256_mul_ps(e, vinv));
    }
    memset(s + i + 1, 0, sizeof(float) * (size_t)(t - i - 1));
}

static int scratch(float **buf, size_t n) {
    *buf = aligned_alloc(32, ((n * sizeof(float) + 31) / 32) * 32);
    return *buf != NULL;
}

/* One head's forward: Y and its rows' stats; kt (d x t) and P (t x t) are scratch. */
static void fwd_head(int t, int d, float scale, const float *Q, long lq, const float *K, long lk,
                     const float *V, long lv, float *Y, long ly, float *St, float *kt, float *P) {
    transpose(t, d, K, lk, kt);  /* kt: d x t */
    for (int i0 = 0; i0 < t; i0 += 4) {
        for (int j0 = 0; j0 <= i0 + 3; j0 += 16)
            tile(d, Q + i0 * lq, lq, kt + j0, t, P + (long)i0 * t + j0, t);
        for (int i = i0; i < i0 + 4; i++)
            softmax_row(P + (long)i * t, i, t, scale, St + 2 * i);
        for (int c0 = 0; c0 < d; c0 += 16)
            tile(i0 + 4, P + (long)i0 * t, t, V + c0, lv, Y + i0 * ly + c0, ly);
    }
}

/* The scratch of one thread's heads. */
typedef struct {
    float *kt, *vt, *P, *ds, *tr;
} Scratch;

static int scratch_for(Scratch *w, int t, int d, int backward) {
    memset(w, 0, sizeof *w);
    int ok = scratch(&w->kt, (size_t)d * t) && scratch(&w->P, (size_t)t * t);
    if (ok && backward)
        ok = scratch(&w->vt, (size_t)d * t) && scratch(&w->ds, (size_t)t * t) &&
             scratch(&w->tr, (size_t)t * t);
    return ok;
}

static void scratch_free(Scratch *w) {
    free(w->kt), free(w->vt), free(w->P), free(w->ds), free(w->tr);
}

/* One head's backward: dQ, dK, dV from dY and the forward's stats. */
static void bwd_head(int t, int d, float scale, const float *Q, long lq, const float *K, long lk,
                     const float *V, long lv, const float *St, const float *dY, long ldy,
                     float *dQ, long ldq, float *dK, long ldk, float *dV, long ldv,
                     const Scratch *w) {
    float *kt = w->kt, *vt = w->vt, *P = w->P, *ds = w->ds, *tr = w->tr;
    /* P again, from the scores and the forward's stats */
    transpose(t, d, K, lk, kt);
    for (int i0 = 0; i0 < t; i0 += 4) {
        for (int j0 = 0; j0 <= i0 + 3; j0 += 16)
            tile(d, Q + i0 * lq, lq, kt + j0, t, P + (long)i0 * t + j0, t);
        for (int i = i0; i < i0 + 4; i++)
            probs_row(P + (long)i * t, i, t, scale, St + 2 * i);
    }
    /* dV = P^T dY: the rows of P^T from j0 on meet the queries i >= j0 */
    transpose(t, t, P, t, tr);
    for (int j0 = 0; j0 < t; j0 += 4)
        for (int c0 = 0; c0 < d; c0 += 16)
            tile(t - j0, tr + (long)j0 * t + j0, t, dY + (long)j0 * ldy + c0, ldy,
                 dV + j0 * ldv + c0, ldv);
    /* dP = dY V^T over the causal half, then dS = scale P (dP - D) row by row */
    transpose(t, d, V, lv, vt);
    for (int i0 = 0; i0 < t; i0 += 4) {
        for (int j0 = 0; j0 <= i0 + 3; j0 += 16)
            tile(d, dY + i0 * ldy, ldy, vt + j0, t, ds + (long)i0 * t + j0, t);
        for (int i = i0; i < i0 + 4; i++)
            ds_row(ds + (long)i * t, P + (long)i * t, i, t, scale);
    }
    /* dQ = dS K: a query block reads keys up to its last row */
    for (int i0 = 0; i0 < t; i0 += 4)
        for (int c0 = 0; c0 < d; c0 += 16)
            tile(i0 + 4, ds + (long)i0 * t, t, K + c0, lk, dQ + i0 * ldq + c0, ldq);
    /* dK = dS^T Q: a key block reads queries from its first row */
    transpose(t, t, ds, t, tr);
    for (int j0 = 0; j0 < t; j0 += 4)
        for (int c0 = 0; c0 < d; c0 += 16)
            tile(t - j0, tr + (long)j0 * t + j0, t, Q + (long)j0 * lq + c0, lq,
                 dK + j0 * ldk + c0, ldk);
}

/* One call's tensors: base pointers and [b, h, t] strides (the last dimension contiguous). */
typedef struct {
    int nh, t, d;
    float scale;
    const float *q, *k, *v, *stats_in, *dy;
    const long *sq, *sk, *sv, *sdy, *sy, *sdq, *sdk, *sdv;
    float *y, *stats, *dq, *dk, *dv;
} Problem;

#define AT(ptr, s, b, h) ((ptr) + (b) * (s)[0] + (h) * (s)[1])

static void fwd_at(const Problem *p, int b, int h, Scratch *w) {
    fwd_head(p->t, p->d, p->scale, AT(p->q, p->sq, b, h), p->sq[2], AT(p->k, p->sk, b, h),
             p->sk[2], AT(p->v, p->sv, b, h), p->sv[2], AT(p->y, p->sy, b, h), p->sy[2],
             p->stats + ((long)b * p->nh + h) * p->t * 2, w->kt, w->P);
}

static void bwd_at(const Problem *p, int b, int h, Scratch *w) {
    bwd_head(p->t, p->d, p->scale, AT(p->q, p->sq, b, h), p->sq[2], AT(p->k, p->sk, b, h),
             p->sk[2], AT(p->v, p->sv, b, h), p->sv[2],
             p->stats_in + ((long)b * p->nh + h) * p->t * 2, AT(p->dy, p->sdy, b, h),
             p->sdy[2], AT(p->dq, p->sdq, b, h), p->sdq[2], AT(p->dk, p->sdk, b, h), p->sdk[2],
             AT(p->dv, p->sdv, b, h), p->sdv[2], w);
}

/* The (batch, head) pairs are independent: `nt` threads of the OpenMP runtime the library
   was linked against (torch's own: pytyr/kernels/native.py) take them in static blocks, each
   with its own scratch, so every head's values are the same at any thread count. Without
   -fopenmp the pragmas are ignored and one thread does all. Returns 0, or -1 without scratch
   memory. */
static int over_heads(int nt, int nb, const Problem *p, int backward) {
    int failed = 0, nh = p->nh;
    (void)nt;
#pragma omp parallel num_threads(nt)
    {
        Scratch w;
        int ok = scratch_for(&w, p->t, p->d, backward);
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < nb; b++)
            for (int h = 0; h < nh; h++)
                if (ok)
                    (backward ? bwd_at : fwd_at)(p, b, h, &w);
        scratch_free(&w);
    }
    return failed ? -1 : 0;
}

/* y and stats ([b, h, t, 2], contiguous: max, 1 / sum per row) written; returns 0, or -1
   without scratch memory. */
int tyr_attention_causal_fwd_f32(int nt, int nb, int nh, int t, int d, float scale,
                                 const float *q, const long *sq, const float *k, const long *sk,
                                 const float *v, const long *sv, float *y, const long *sy,
                                 float *stats) {
    Problem p = {.nh = nh, .t = t, .d = d, .scale = scale, .q = q, .k = k, .v = v, .sq = sq,
                 .sk = sk, .sv = sv, .y = y, .sy = sy, .stats = stats};
    return over_heads(nt, nb, &p, 0);
}

/* dq, dk, dv written from dy and the forward's stats; returns 0, or -1 without scratch
   memory. */
int tyr_attention_causal_bwd_f32(int nt, int nb, int nh, int t, int d, float scale,
                                 const float *q, const long *sq, const float *k, const long *sk,
                                 const float *v, const long *sv, const float *stats,
                                 const float *dy, const long *sdy, float *dq, const long *sdq,
                                 float *dk, const long *sdk, float *dv, const long *sdv) {
    Problem p = {.nh = nh, .t = t, .d = d, .scale = scale, .q = q, .k = k, .v = v,
                 .stats_in = stats, .dy = dy, .sq = sq, .sk = sk, .sv = sv, .sdy = sdy,
                 .dq = dq, .sdq = sdq, .dk = dk, .sdk = sdk, .dv = dv, .sdv = sdv};
    return over_heads(nt, nb, &p, 1);
}
