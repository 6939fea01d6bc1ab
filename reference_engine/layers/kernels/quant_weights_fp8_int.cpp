// The fp8 decode driver that widens e4m3 with integer instructions only (ISA names avx2_intwiden and
// avx512_intwiden), for CPUs where F16C's vcvtph2ps is what limits the F16C bodies of quant_weights.cpp (a core
// that is not waiting on memory: on a 2-core AVX2-only AMD EPYC, FP8 ran at 0.92x the bf16-stored path).
//
// e4m3 -> fp32 in three instructions for 8 (AVX2) or 16 (AVX-512) weights: vpmovsxbd sign-extends each byte
// into an int32 (the sign bit fills bits 7..31), a 20-bit left shift puts the 4 exponent and 3 mantissa bits at
// fp32's bits 20..26 and the sign at bit 31, and a mask clears the sign's copies at bits 27..30. The result is
// the e4m3 value / 2^120 (fp32 bias 127, e4m3 bias 7). The activations are scaled by 2^64 once per call (K
// floats a token; activations stay far below 2^64), so each product lands 2^56 below its true value, far above
// fp32's subnormal range, and each row's sum is scaled back by 2^56. (0x7F/0xFF, e4m3fn's NaN, decodes as 480,
// as in the F16C body: quantized weights are clamped to +-448 and never hold it.)
//
// An e4m3 subnormal lands on an fp32 subnormal, and a subnormal input costs an FMA a microcode assist: on the
// Xeon this was written on, a layer of e4m3 subnormals took 23 ms where normal weights took 0.33 ms. So the
// driver runs with the MXCSR's DAZ and FTZ bits set, and an e4m3 subnormal weight (magnitude below 2^-6,
// 1/28,672 of the format's range; about 1 weight in 10,000 of a Gaussian layer quantized per channel) counts
// as zero in this body. That is the one way its arithmetic differs from the F16C body's, and it is why the
// ISA is named apart.
//
// Rows: at one token, four weight rows a pass share each activation load; from two tokens up, two rows x four
// tokens share each widened weight.
#include <ATen/Parallel.h>

#include <vector>

#include "quant_weights.h"

namespace triage_qw {
namespace {

constexpr float kXUp = 0x1p64f, kSumFix = 0x1p56f;  // 2^-120 (the widening) * 2^64 (x) * 2^56 (the sum) = 1
constexpr int kKeep = static_cast<int>(0x87F00000u);   // fp32's sign and bits 20..26

#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

// The last K % 16 products of an AVX2 tile's row, subnormal weights read as zero as the vectors read them.
inline float tail(const uint8_t* w, const float* x, int64_t k0, int64_t K) {
  float total = 0.f;
  for (int64_t k = k0; k < K; ++k)
    if (w[k] & 0x78) total += fp8_scalar_div256(w[k]) * kFp8Fix * (x[k] / kXUp);
  return total;
}

inline __m256 widen8(const uint8_t* p, __m256i keep) {
  const __m256i b = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(b, 20), keep));
}

AVX512_FN inline __m512 widen16(__m128i bytes, __m512i keep) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(_mm512_cvtepi8_epi32(bytes), 20), keep));
}

// out[r * TT + t] = sum_k w[r][k] x[t][k] in true e4m3 units, for R rows of w (K bytes apart) and TT rows of x.
template <int R, int TT>
void tile_avx2(const uint8_t* w, int64_t K, const float* x, float* out) {
  const __m256i keep = _mm256_set1_epi32(kKeep);
  constexpr int A = TT == 1 ? 2 : 1;  // accumulators per (row, token): two chains when there is one token
  __m256 acc[R][TT][A];
  for (auto& r : acc)
    for (auto& t : r)
      for (auto& a : t) a = _mm256_setzero_ps();
  const int64_t K16 = K / 16 * 16;
  for (int64_t k = 0; k < K16; k += 16) {
    for (int r = 0; r < R; ++r) prefetch(w + r * K + k);  // each of the tile's R rows is a stream
    for (int h = 0; h < 2; ++h) {
      __m256 f[R];
      for (int r = 0; r < R; ++r) f[r] = widen8(w + r * K + k + 8 * h, keep);
      for (int t = 0; t < TT; ++t) {
        const __m256 xv = _mm256_loadu_ps(x + t * K + k + 8 * h);
        for (int r = 0; r < R; ++r) acc[r][t][h % A] = _mm256_fmadd_ps(f[r], xv, acc[r][t][h % A]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) {
      __m256 s = acc[r][t][0];
      for (int a = 1; a < A; ++a) s = _mm256_add_ps(s, acc[r][t][a]);
      out[r * TT + t] = hsum8(s) * kSumFix + tail(w + r * K, x + t * K, K16, K);
    }
}

// The same with 16 weights a vector; the last K % 32 through masked loads (a masked-off byte widens to +0).
template <int R, int TT>
AVX512_FN void tile_avx512(const uint8_t* w, int64_t K, const float* x, float* out) {
  const __m512i keep = _mm512_set1_epi32(kKeep);
  constexpr int A = TT == 1 ? 2 : 1;
  __m512 acc[R][TT][A];
  for (auto& r : acc)
    for (auto& t : r)
      for (auto& a : t) a = _mm512_setzero_ps();
  const int64_t K32 = K / 32 * 32;
  for (int64_t k = 0; k < K32; k += 32) {
    for (int r = 0; r < R; ++r) prefetch(w + r * K + k);
    for (int h = 0; h < 2; ++h) {
      __m512 f[R];
      for (int r = 0; r < R; ++r)
        f[r] = widen16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + r * K + k + 16 * h)), keep);
      for (int t = 0; t < TT; ++t) {
        const __m512 xv = _mm512_loadu_ps(x + t * K + k + 16 * h);
        for (int r = 0; r < R; ++r) acc[r][t][h % A] = _mm512_fmadd_ps(f[r], xv, acc[r][t][h % A]);
      }
    }
  }
  for (int64_t k = K32; k < K; k += 16) {
    const int64_t n = K - k < 16 ? K - k : 16;
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    __m512 f[R];
    for (int r = 0; r < R; ++r) f[r] = widen16(_mm_maskz_loadu_epi8(m, w + r * K + k), keep);
    for (int t = 0; t < TT; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * K + k);
      for (int r = 0; r < R; ++r) acc[r][t][0] = _mm512_fmadd_ps(f[r], xv, acc[r][t][0]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) {
      __m512 s = acc[r][t][0];
      for (int a = 1; a < A; ++a) s = _mm512_add_ps(s, acc[r][t][a]);
      out[r * TT + t] = _mm512_reduce_add_ps(s) * kSumFix;
    }
}

template <bool Wide>
struct Fp8Job {
  const uint8_t* w;
  const float* scale;  // per row, the e4m3 value's scale
  const float* x;      // scaled by kXUp
  int64_t K, N;
  float* y;
  template <int R, int TT>
  void run(int64_t n, int64_t t0) const {
    float out[R * TT];
    if constexpr (Wide)
      tile_avx512<R, TT>(w + n * K, K, x + t0 * K, out);
    else
      tile_avx2<R, TT>(w + n * K, K, x + t0 * K, out);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TT; ++t) y[(t0 + t) * N + n + r] = scale[n + r] * out[r * TT + t];
  }
};

// DAZ (bit 6) and FTZ (bit 15) on this thread while it lives; the MXCSR is per thread, so each worker sets its own.
class FlushSubnormals {
 public:
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushSubnormals() { _mm_setcsr(saved_); }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  unsigned saved_;
};

template <bool Wide>
void run_all(const float* x, int64_t T, int64_t K, const uint8_t* w, const float* scale, int64_t N, float* y) {
  std::vector<float> x_up(x, x + T * K);
  for (float& v : x_up) v *= kXUp;
  const Fp8Job<Wide> job{w, scale, x_up.data(), K, N, y};
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    const FlushSubnormals daz;
    tile_rows<4, 2, 4>(job, n0, n1, T);
  });
}

}  // namespace

void fp8_linear_intwiden(bool avx512, const float* x, int64_t T, int64_t K, const uint8_t* w, const float* scale,
                         int64_t N, float* y) {
  if (avx512)
    run_all<true>(x, T, K, w, scale, N, y);
  else
    run_all<false>(x, T, K, w, scale, N, y);
}

}  // namespace triage_qw
