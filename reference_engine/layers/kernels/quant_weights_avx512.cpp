// The AVX-512 bodies of quant_weights.cpp's kernels (see there for the formats), compiled with a target
// attribute so that the rest of the extension needs only AVX2; used only where the CPU has AVX-512F/BW/VL.
#include "quant_weights.h"

#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace triage_qw {
namespace {
AVX512_FN inline __m512 fp8x16_avx512(const uint8_t* p) {
  const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i h = _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(b, 8), 1),
                                     _mm256_set1_epi16(static_cast<short>(0xBFFF)));
  return _mm512_cvtph_ps(h);
}

AVX512_FN inline void fp8x32_avx512(const uint8_t* p, __m512& lo, __m512& hi) {  // 32 bytes: one widening
  const __m512i b = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  const __m512i h = _mm512_and_si512(_mm512_srai_epi16(_mm512_slli_epi16(b, 8), 1),
                                     _mm512_set1_epi16(static_cast<short>(0xBFFF)));
  lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}

AVX512_FN inline void int4x32_avx512(const uint8_t* p, __m512& lo, __m512& hi) {
  const __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  lo = _mm512_cvtepi32_ps(_mm512_and_si512(a, _mm512_set1_epi32(15)));
  hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(a, 4));
}

AVX512_FN float dotf_avx512(const float* a, const float* b, int64_t K) {
  __m512 acc[8];
  for (auto& v : acc) v = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 128 <= K; k += 128)
    for (int i = 0; i < 8; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16 * i), _mm512_loadu_ps(b + k + 16 * i), acc[i]);
  for (; k + 16 <= K; k += 16) acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), acc[0]);
  for (int i = 1; i < 8; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  float total = _mm512_reduce_add_ps(acc[0]);
  for (; k < K; ++k) total += a[k] * b[k];
  return total;
}

AVX512_FN void dotf4_avx512(const float* a, const float* x, int64_t ldx, int64_t K, float* out) {
  __m512 acc[4][2];
  for (auto& r : acc) r[0] = r[1] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m512 w0 = _mm512_loadu_ps(a + k), w1 = _mm512_loadu_ps(a + k + 16);
    for (int i = 0; i < 4; ++i) {
      acc[i][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i * ldx + k), acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i * ldx + k + 16), acc[i][1]);
    }
  }
  for (int i = 0; i < 4; ++i) {
    float total = _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
    for (int64_t j = k; j < K; ++j) total += a[j] * x[i * ldx + j];
    out[i] = total;
  }
}

AVX512_FN float fp8_dot_avx512(const uint8_t* w, const float* x, int64_t K) {
  __m512 acc[8];
  for (auto& v : acc) v = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 128 <= K; k += 128) {
    prefetch(w + k);
    prefetch(w + k + 64);
    for (int i = 0; i < 4; ++i) {
      __m512 lo, hi;
      fp8x32_avx512(w + k + 32 * i, lo, hi);
      acc[2 * i] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x + k + 32 * i), acc[2 * i]);
      acc[2 * i + 1] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + k + 32 * i + 16), acc[2 * i + 1]);
    }
  }
  for (; k + 16 <= K; k += 16) acc[0] = _mm512_fmadd_ps(fp8x16_avx512(w + k), _mm512_loadu_ps(x + k), acc[0]);
  for (int i = 1; i < 8; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  float total = _mm512_reduce_add_ps(acc[0]);
  for (; k < K; ++k) total += fp8_scalar_div256(w[k]) * x[k];
  return total;
}

AVX512_FN void fp8_widen_avx512(const uint8_t* w, float* out, int64_t K, float s) {
  const __m512 sv = _mm512_set1_ps(s);
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    if (k % 64 == 0) prefetch(w + k);
    _mm512_storeu_ps(out + k, _mm512_mul_ps(fp8x16_avx512(w + k), sv));
  }
  for (; k < K; ++k) out[k] = fp8_scalar_div256(w[k]) * s;
}

AVX512_FN void int4_widen_avx512(const uint8_t* w, float* out, int64_t K, int64_t group, const float* scale,
                                 const float* off) {
  for (int64_t g = 0, k0 = 0; k0 < K; ++g, k0 += group) {
    const __m512 s = _mm512_set1_ps(scale[g]), c = _mm512_set1_ps(off[g]);
    for (int64_t k = k0; k < k0 + group; k += 32) {
      if (k % 128 == 0) prefetch(w + k / 2);
      __m512 lo, hi;
      int4x32_avx512(w + k / 2, lo, hi);
      _mm512_storeu_ps(out + k, _mm512_fmadd_ps(lo, s, c));
      _mm512_storeu_ps(out + k + 16, _mm512_fmadd_ps(hi, s, c));
    }
  }
}

}  // namespace

// int4 decode on AVX-512 runs quant_weights_int4_tiles.cpp (tiled, whole call), not a per-row body.
const Ops kAvx512Ops{dotf_avx512, dotf4_avx512, fp8_dot_avx512, fp8_widen_avx512, nullptr, int4_widen_avx512};

}  // namespace triage_qw
