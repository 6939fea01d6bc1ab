// The AVX512-VBMI decode driver of the fp8 kernel (format: quant_weights.cpp), compiled with a target attribute
// and used only where the CPU has AVX512-VBMI (Ice Lake, Sapphire Rapids, Zen 4 and later).
//
// e4m3 -> fp32 by table, 64 weights at a time: vpermi2b looks each byte's 7 magnitude bits up in two 128-entry
// tables, the high and the low byte of the value's exact bf16 pattern (built from the scalar decode, so zero
// and subnormals are exact); the sign bit is OR-ed into the high byte (vpternlog); vpunpck{l,h}bw interleave
// the two into bf16 words; a bf16 word is the top half of an fp32, so the even words widen with a 16-bit left
// shift and the odd ones with a mask. That is 13 instructions for 64 weights where the F16C path
// (quant_weights_avx512.cpp) takes 20, and the arithmetic stays fp32 FMA on fp32 activations.
// The unpacks work within 128-bit lanes, so the k order of the widened vectors is permuted; x is laid out in
// that order once per call (x_perm), which costs K moves against N x K weights.
//
// Rows: at one token, four weight rows a pass share each activation load; from two tokens up, two rows x four
// tokens share each widened weight.
#include <ATen/Parallel.h>

#include <cstring>
#include <vector>

#include "quant_weights.h"

#define VBMI_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2,fma,f16c")))

namespace triage_qw {
namespace {

constexpr int64_t kBlock = 64;  // weights (bytes) per widening step

// Position of k = kb + o (o < 64) in x_perm's block: vector v (0..3) of 16 lanes, lane d.
inline int64_t perm_offset(int64_t o) {
  const int64_t lane128 = o / 16, i = o % 16;  // byte i of 128-bit lane `lane128`
  const int64_t half = i / 8, word = i % 8;    // unpacklo (bytes 0..7) or unpackhi (8..15); word in that lane
  const int64_t v = 2 * half + word % 2, d = 4 * lane128 + word / 2;  // even words: vector 2 half, odd: 2 half + 1
  return 16 * v + d;
}

std::vector<float> permute_x(const float* x, int64_t T, int64_t K, int64_t kp) {
  std::vector<float> out(T * kp, 0.f);  // zero past K: the masked weight bytes there decode to 0 too
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) out[t * kp + k / kBlock * kBlock + perm_offset(k % kBlock)] = x[t * K + k];
  return out;
}

struct Fp8Tables {  // bytes of the bf16 pattern of each e4m3 magnitude code 0..127 (all exact in bf16)
  alignas(64) uint8_t hi[128], lo[128];
  Fp8Tables() {
    for (int c = 0; c < 128; ++c) {
      const float v = c == 0x7F ? NAN : fp8_scalar_div256(static_cast<uint8_t>(c)) * kFp8Fix;
      uint32_t b;
      std::memcpy(&b, &v, 4);
      hi[c] = static_cast<uint8_t>(b >> 24);
      lo[c] = static_cast<uint8_t>(b >> 16);
    }
  }
};
const Fp8Tables kTables;

// Widens 64 e4m3 bytes (fewer at the end of a row: masked, the rest 0) into f[0..3], x_perm's order.
struct Widen {
  __m512i thi0, thi1, tlo0, tlo1, sign, top;
  VBMI_FN Widen()
      : thi0(_mm512_load_si512(kTables.hi)), thi1(_mm512_load_si512(kTables.hi + 64)),
        tlo0(_mm512_load_si512(kTables.lo)), tlo1(_mm512_load_si512(kTables.lo + 64)),
        sign(_mm512_set1_epi8(static_cast<char>(0x80))), top(_mm512_set1_epi32(static_cast<int>(0xFFFF0000u))) {}
  VBMI_FN inline void operator()(const uint8_t* p, int64_t n, __m512 f[4]) const {
    const __m512i b = n >= kBlock ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8((__mmask64(1) << n) - 1, p);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(thi0, b, thi1), b, sign, 0xF8);
    const __m512i lo = _mm512_permutex2var_epi8(tlo0, b, tlo1);
    const __m512i u0 = _mm512_unpacklo_epi8(lo, hi), u1 = _mm512_unpackhi_epi8(lo, hi);
    f[0] = _mm512_castsi512_ps(_mm512_slli_epi32(u0, 16));
    f[1] = _mm512_castsi512_ps(_mm512_and_si512(u0, top));
    f[2] = _mm512_castsi512_ps(_mm512_slli_epi32(u1, 16));
    f[3] = _mm512_castsi512_ps(_mm512_and_si512(u1, top));
  }
};


// out[r * TT + t] = sum_k w[r][k] x[t][k] (unscaled) for R rows of w (K bytes apart) and TT rows of x_perm.
template <int R, int TT>
VBMI_FN void fp8_tile(const uint8_t* w, int64_t K, const float* xp, int64_t kp, float* out) {
  const Widen widen;
  constexpr int A = TT == 1 ? 2 : 1;  // accumulators per (row, token): two chains when there is one token
  __m512 acc[R][TT][A];
  for (auto& r : acc)
    for (auto& t : r)
      for (auto& a : t) a = _mm512_setzero_ps();
  for (int64_t kb = 0; kb < K; kb += kBlock) {
    __m512 f[R][4];
    for (int r = 0; r < R; ++r) {
      prefetch(w + r * K + kb);  // each of the tile's R rows is a stream
      widen(w + r * K + kb, K - kb, f[r]);
    }
    for (int t = 0; t < TT; ++t)
      for (int v = 0; v < 4; ++v) {
        const __m512 xv = _mm512_loadu_ps(xp + t * kp + kb + 16 * v);
        for (int r = 0; r < R; ++r) acc[r][t][v % A] = _mm512_fmadd_ps(f[r][v], xv, acc[r][t][v % A]);
      }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) {
      __m512 s = acc[r][t][0];
      for (int a = 1; a < A; ++a) s = _mm512_add_ps(s, acc[r][t][a]);
      out[r * TT + t] = _mm512_reduce_add_ps(s);
    }
}

struct Fp8Job {
  const uint8_t* w;
  const float* scale;  // per row, the e4m3 value's scale (the tables hold true values: no 2^8 here)
  const float* xp;
  int64_t K, kp, N;
  float* y;
  template <int R, int TT>
  VBMI_FN void run(int64_t n, int64_t t0) const {
    float out[R * TT];
    fp8_tile<R, TT>(w + n * K, K, xp + t0 * kp, kp, out);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TT; ++t) y[(t0 + t) * N + n + r] = scale[n + r] * out[r * TT + t];
  }
};


}  // namespace

bool vbmi_supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi");
}

void fp8_linear_vbmi(const float* x, int64_t T, int64_t K, const uint8_t* w, const float* scale, int64_t N, float* y) {
  const int64_t kp = (K + kBlock - 1) / kBlock * kBlock;
  const std::vector<float> xp = permute_x(x, T, K, kp);
  const Fp8Job job{w, scale, xp.data(), K, kp, N, y};
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) { tile_rows(job, n0, n1, T); });
}

}  // namespace triage_qw
