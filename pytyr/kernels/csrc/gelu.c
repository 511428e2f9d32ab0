/* Exact (erf) GELU and its derivative in one pass, for x86-64 with AVX2 and FMA.
 *
 *   y  = x Phi(x)                     Phi(x) = (1 + erf(x / sqrt 2)) / 2
 *   dy = Phi(x) + x phi(x)            phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
 *
 * erf is Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), the formula of torch's own vectorised
 * erf; its exp(-a^2) with a = |x| / sqrt 2 is exp(-x^2 / 2), so one exp serves erf and phi.
 * The exp is Cephes' expf (range reduction by ln 2, a degree-5 polynomial). A tail of fewer
 * than 8 elements goes through the same vector code via a padded copy, so every element's
 * value is independent of its position. NaN in gives NaN out; +-inf give what torch gives
 * (y(+inf) = inf, y(-inf) = NaN, dy(+-inf) = NaN).
 *
 * Called through cffi (pytyr/kernels/native.py); `dy` may be NULL when no gradient is needed.
 */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

static inline __m256 exp_neg(__m256 x) {
    /* exp(x) for x <= 0; 0 below -87 (where expf underflows to a denormal anyway) */
    const __m256 lo = _mm256_set1_ps(-87.0f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, z, x), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

static inline void gelu8(const float *xs, float *ys, float *ds) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f),
                 half = _mm256_set1_ps(0.5f);
    __m256 x = _mm256_loadu_ps(xs);
    __m256 a = _mm256_mul_ps(_mm256_andnot_ps(sign, x), _mm256_set1_ps(0.70710678118654752f));
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(a, _mm256_set1_ps(0.3275911f), one));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    __m256 e = exp_neg(_mm256_mul_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(-0.5f)));
    __m256 erf_abs = _mm256_fnmadd_ps(p, e, one);
    __m256 erf = _mm256_or_ps(erf_abs, _mm256_and_ps(x, sign));
    __m256 cdf = _mm256_fmadd_ps(erf, half, half);
    _mm256_storeu_ps(ys, _mm256_mul_ps(x, cdf));
    if (ds) {
        __m256 pdf = _mm256_mul_ps(e, _mm256_set1_ps(0.3989422804014327f));
        _mm256_storeu_ps(ds, _mm256_fmadd_ps(x, pdf, cdf));
    }
}

void tyr_gelu_erf_f32(const float *x, float *y, float *dy, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        gelu8(x + i, y + i, dy ? dy + i : NULL);
    if (i < n) {
        float xs[8] = {0}, ys[8], ds[8];
        size_t rest = n - i;
        memcpy(xs, x + i, rest * sizeof(float));
        gelu8(xs, ys, dy ? ds : NULL);
        memcpy(y + i, ys, rest * sizeof(float));
        if (dy)
            memcpy(dy + i, ds, rest * sizeof(float));
    }
}
