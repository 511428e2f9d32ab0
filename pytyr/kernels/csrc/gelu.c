/* Exact (erf) GELU and its derivative in one pass, for x86-64 with AVX2 and FMA.
 *
 *   y  = x Phi(x)                     Phi(x) = (1 + erf(x / sqrt 2)) / 2
 *   dy = Phi(x) + x phi(x)            phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
 *
 * erf is Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), the formula of torch's own vectorised
 * erf; its exp(-a^2) with a = |x| / sqrt 2 is exp(-x^2 / 2), so one exp serves erf and phi.
 * The exp is `exp_neg` of vec.h. A tail of fewer than 8 elements goes through the same vector
 * code via a padded copy, so every element's value is independent of its position. NaN in gives NaN out; +-inf give what torch gives
 * (y(+inf) = inf, y(-inf) = NaN, dy(+-inf) = NaN).
 *
 * Called through cffi (pytyr/kernels/native.py); `dy` may be NULL when no gradient is needed.
 */
#include <stddef.h>
#include <string.h>

#include "vec.h"

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
