/* Vector helpers shared by the CPU kernels (AVX2 + FMA). */
#ifndef TYR_VEC_H
#define TYR_VEC_H
#include <immintrin.h>

/* exp(x) for x <= 0 by Cephes' expf (range reduction by ln 2, a degree-5 polynomial);
   0 below -87, where expf would give a denormal anyway; NaN for NaN */
static inline __m256 exp_neg(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.0f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(lo, x);  /* (lo > x) ? lo : x: a NaN x stays NaN */
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

#endif
