// INT4 weights times int8 activations (W4A8): the int4 decode driver with integer dot products.
//
// Why: with fp32 activations every weight costs a widening to fp32 and an FMA, and on the development Xeon the
// tiled fp32 driver decoded weights from L2 at only 0.7x the speed memory delivers them (compute-bound). Here
// each token's activations are quantized once per call to int8, one scale per group of the weights' own group
// (scale = max|x| / 127, round to nearest even), and a weight nibble meets its activation in an integer
// multiply-add:
// - AVX-512 VNNI: vpdpbusd, 64 unsigned nibbles x 64 signed bytes summed four by four into 16 int32 lanes;
// - AVX2: vpmaddubsw (pairs into int16; at most 2 * 15 * 127, no saturation) then vpmaddwd by 1 into int32.
// So 128 weights (64 packed bytes) cost, per row, one load, three bit operations and two vpdpbusd, where the fp32
// driver spends a conversion, two table lookups and two FMAs per 32 weights. A group's int32 sums become fp32
// once, times scale[g] * x_scale[g]. The offsets' term, sum_g offset[g] * sum_k x, is added once per row after
// the groups, and it sums the quantized x too: the result is the exact product of the dequantized weights and
// the dequantized activations. (With the exact sum of x there, q * scale and the offset would each carry x's
// rounding error where it cancels in the weight they make: measured, twice the error on asymmetric weights.)
//
// The packed layout is unchanged (quant_weights.cpp): byte 16b + j of a 128-k chunk holds k = 32b + j (low
// nibble) and k = 32b + 16 + j (high nibble). The quantized x is laid out to match, per chunk: 64 bytes for the
// low nibbles, then 64 for the high ones. The group must be a multiple of 128 (the Python side checks). The
// quantization is AVX2 (this file's build flags), so both bodies share it.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "quant_weights.h"

#define VNNI_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

namespace triage_qw {
namespace {

constexpr int64_t kChunk = 128;  // k-values per 64 packed bytes

struct QuantX {
  std::vector<int8_t> q;     // [T, K] in the chunk order above
  std::vector<float> scale;  // [T, G]
  std::vector<float> sum;    // [T, G]: the sum of the quantized x over the group (what the offsets multiply)
};

// 16 floats times inv, rounded to nearest even (the MXCSR default, as std::nearbyint) into 16 int8 at dst; adds
// them to qsum (int32 lanes). |x * inv| <= 127, so the saturating packs change nothing.
inline void quantize16(const float* x, __m256 inv, int8_t* dst, __m256i& qsum) {
  const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), inv));
  const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), inv));
  qsum = _mm256_add_epi32(qsum, _mm256_add_epi32(a, b));
  const __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);  // a0..7 b0..7 as int16
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1)));
}

// max |x| over n floats (a multiple of 8); false where one is a NaN or an infinity.
inline bool abs_max(const float* x, int64_t n, float& amax) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)), inf = _mm256_set1_ps(INFINITY);
  __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
    m = _mm256_max_ps(m, v);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, inf, _CMP_NLT_UQ));  // >= inf, or unordered (NaN)
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
  return _mm256_movemask_ps(bad) == 0;
}

QuantX quantize_x(const float* x, int64_t T, int64_t K, int64_t group) {
  const int64_t G = K / group;
  QuantX out{std::vector<int8_t>(T * K), std::vector<float>(T * G), std::vector<float>(T * G)};
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < G; ++g) {
      const float* xg = x + t * K + g * group;
      int8_t* q = out.q.data() + t * K + g * group;
      float amax;
      if (!abs_max(xg, group, amax)) {  // a NaN or an infinity: q stays 0 and the NaN scale reaches every output
        out.scale[t * G + g] = out.sum[t * G + g] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      // At least the smallest normal float, so that 1 / scale stays finite for a group of subnormals.
      const float scale = amax > 0.f ? std::max(amax / 127.f, std::numeric_limits<float>::min()) : 1.f;
      const __m256 inv = _mm256_set1_ps(1.f / scale);
      __m256i qsum = _mm256_setzero_si256();
      for (int64_t c = 0; c < group; c += kChunk)
        for (int b = 0; b < 4; ++b) {
          quantize16(xg + c + 32 * b, inv, q + c + 16 * b, qsum);            // low nibbles' partners
          quantize16(xg + c + 32 * b + 16, inv, q + c + 64 + 16 * b, qsum);  // high nibbles'
        }
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(qsum), _mm256_extracti128_si256(qsum, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      out.scale[t * G + g] = scale;
      out.sum[t * G + g] = scale * static_cast<float>(_mm_cvtsi128_si32(s4));
    }
  return out;
}

struct Args {
  const uint8_t* w;    // [N, K / 2]
  const float* scale;  // [N, G]
  const float* off;    // [N, G]; nullptr: symmetric, -8 * scale
  const QuantX* x;
  int64_t K, N, group;
  float* y;            // [T, N]
};

// The offsets' term of row n for token t: sum_g offset[g] * sum of the token's quantized x over group g (the
// symmetric layout's offset is -8 * scale).
inline float offset_term(const Args& a, int64_t n, int64_t t) {
  const int64_t G = a.K / a.group;
  const float* s = a.scale + n * G;
  const float* o = a.off ? a.off + n * G : nullptr;
  const float* xsum = a.x->sum.data() + t * G;
  float acc = 0.f;
  for (int64_t g = 0; g < G; ++g) acc += (o ? o[g] : -8.0f * s[g]) * xsum[g];
  return acc;
}

// What a tile of R rows x TT tokens reads: each row's group scales, each token's activation scales, the first
// token's quantized activations and the first row's packed weights.
template <int R, int TT>
struct Tile {
  int64_t G, KB;
  const float* srow[R];
  const float* xs[TT];
  const int8_t* xq0;
  const uint8_t* w0;
  Tile(const Args& a, int64_t n, int64_t t0)
      : G(a.K / a.group), KB(a.K / 2), xq0(a.x->q.data() + t0 * a.K), w0(a.w + n * KB) {
    for (int r = 0; r < R; ++r) srow[r] = a.scale + (n + r) * G;
    for (int t = 0; t < TT; ++t) xs[t] = a.x->scale.data() + (t0 + t) * G;
  }
};

// ------------------------------------------------------------- AVX-512 VNNI ---------------------------------
template <int R, int TT>
VNNI_FN void tile_vnni(const Args& a, int64_t n, int64_t t0) {
  const Tile<R, TT> p(a, n, t0);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 facc[R][TT];
  for (auto& r : facc)
    for (auto& v : r) v = _mm512_setzero_ps();
  for (int64_t g = 0; g < p.G; ++g) {
    __m512i iacc[R][TT];
    for (auto& r : iacc)
      for (auto& v : r) v = _mm512_setzero_si512();
    for (int64_t c = g * a.group; c < (g + 1) * a.group; c += kChunk) {
      __m512i lo[R], hi[R];
      for (int r = 0; r < R; ++r) {
        const uint8_t* w = p.w0 + r * p.KB + c / 2;
        prefetch(w);
        const __m512i v = _mm512_loadu_si512(w);
        lo[r] = _mm512_and_si512(v, m4);
        hi[r] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      }
      for (int t = 0; t < TT; ++t) {
        const int8_t* xq = p.xq0 + t * a.K + c;
        const __m512i xl = _mm512_loadu_si512(xq), xh = _mm512_loadu_si512(xq + 64);
        for (int r = 0; r < R; ++r) {
          iacc[r][t] = _mm512_dpbusd_epi32(iacc[r][t], lo[r], xl);
          iacc[r][t] = _mm512_dpbusd_epi32(iacc[r][t], hi[r], xh);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TT; ++t)
        facc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[r][t]), _mm512_set1_ps(p.srow[r][g] * p.xs[t][g]),
                                     facc[r][t]);
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      a.y[(t0 + t) * a.N + n + r] = _mm512_reduce_add_ps(facc[r][t]) + offset_term(a, n + r, t0 + t);
}

// ------------------------------------------------------------- AVX2 -----------------------------------------
template <int R, int TT>
void tile_avx2(const Args& a, int64_t n, int64_t t0) {
  const Tile<R, TT> p(a, n, t0);
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 facc[R][TT];
  for (auto& r : facc)
    for (auto& v : r) v = _mm256_setzero_ps();
  for (int64_t g = 0; g < p.G; ++g) {
    __m256i iacc[R][TT];
    for (auto& r : iacc)
      for (auto& v : r) v = _mm256_setzero_si256();
    for (int64_t c = g * a.group; c < (g + 1) * a.group; c += kChunk)
      for (int64_t h = 0; h < 2; ++h) {  // the chunk's two 32-byte halves: blocks 0-1, then 2-3
        __m256i lo[R], hi[R];
        for (int r = 0; r < R; ++r) {
          const uint8_t* w = p.w0 + r * p.KB + c / 2 + 32 * h;
          if (h == 0) prefetch(w);
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
          lo[r] = _mm256_and_si256(v, m4);
          hi[r] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        for (int t = 0; t < TT; ++t) {
          const int8_t* xq = p.xq0 + t * a.K + c + 32 * h;
          const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
          const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64));
          for (int r = 0; r < R; ++r) {
            const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo[r], xl), _mm256_maddubs_epi16(hi[r], xh));
            iacc[r][t] = _mm256_add_epi32(iacc[r][t], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TT; ++t)
        facc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r][t]), _mm256_set1_ps(p.srow[r][g] * p.xs[t][g]),
                                     facc[r][t]);
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) a.y[(t0 + t) * a.N + n + r] = hsum8(facc[r][t]) + offset_term(a, n + r, t0 + t);
}

// The tile bodies as tile_rows' jobs. At one token four rows a pass (two on AVX2); from two tokens up a few rows x
// four tokens share each unpacked weight (two rows on AVX-512, one on AVX2: its 16 registers hold no more).
struct VnniJob {
  const Args& a;
  template <int R, int TT>
  void run(int64_t n, int64_t t0) const { tile_vnni<R, TT>(a, n, t0); }
};

struct Avx2Job {
  const Args& a;
  template <int R, int TT>
  void run(int64_t n, int64_t t0) const { tile_avx2<R, TT>(a, n, t0); }
};

}  // namespace

bool vnni_supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

void int4_linear_w4a8(bool vnni, const float* x, int64_t T, int64_t K, int64_t group, const uint8_t* w,
                      const float* scale, const float* off, int64_t N, float* y) {
  const QuantX qx = quantize_x(x, T, K, group);
  const Args a{w, scale, off, &qx, K, N, group, y};
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    if (vnni)
      tile_rows<4, 2, 4>(VnniJob{a}, n0, n1, T);
    else
      tile_rows<2, 1, 4>(Avx2Job{a}, n0, n1, T);
  });
}

}  // namespace triage_qw
