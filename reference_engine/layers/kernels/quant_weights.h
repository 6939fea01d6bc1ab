// Shared by quant_weights.cpp (AVX2 bodies, drivers, bindings) and quant_weights_avx512.cpp (AVX-512 bodies).
#pragma once
#include <immintrin.h>
#include <cmath>
#include <cstdint>

namespace triage_qw {

constexpr float kFp8Fix = 256.0f;

// Software prefetch distance, in weight bytes ahead of the loads (0: none). A decode step's bytes per
// instruction are low for packed weights, so the out-of-order window alone keeps few cache lines in flight;
// on a VM with a long memory latency that, not the arithmetic, held FP8/INT4 well under bf16's bandwidth.
extern int64_t g_prefetch;
extern int g_prefetch_level;  // 1: into L1 (T0), 2: into L2 (T1), 3: T2

inline void prefetch_line(const uint8_t* p) {
  if (g_prefetch_level == 2)
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
  else if (g_prefetch_level == 3)
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T2);
  else
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

inline void prefetch(const uint8_t* p) {
  if (g_prefetch) prefetch_line(p + g_prefetch);
}

inline float hsum8(__m256 v) {  // the sum of 8 floats
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}

inline float fp8_scalar_div256(uint8_t b) {  // e4m3 value / 2^8, the vector paths' convention
  const int e = (b >> 3) & 0xF, m = b & 7;
  const float v = e ? std::ldexp(1.0f + m / 8.0f, e - 15) : std::ldexp(m / 8.0f, -14);
  return (b & 0x80) ? -v : v;
}

// One row tile's tokens: TT at a time (TT = 8 or 4), then 4, then one by one.
template <int R, int TT, class Job>
void tile_tokens(const Job& job, int64_t n, int64_t T) {
  int64_t t = 0;
  if constexpr (TT >= 8)
    for (; t + 8 <= T; t += 8) job.template run<R, 8>(n, t);
  for (; t + 4 <= T; t += 4) job.template run<R, 4>(n, t);
  for (; t < T; ++t) job.template run<R, 1>(n, t);
}

// The tiled drivers' walk over output rows n0..n1 and T tokens: R1 rows a pass at one token, else RT rows (then
// 1) by up to TT tokens. `Job::run<R, TT>(n, t0)` computes R rows for TT tokens from row n and token t0; each call
// covers a whole K, so this loop's own cost does not count. The defaults suit the fp32 drivers; the int8 ones
// (quant_weights_w4a8.cpp) hold more accumulators per tile and take fewer rows and tokens.
template <int R1 = 4, int RT = 2, int TT = 8, class Job>
void tile_rows(const Job& job, int64_t n0, int64_t n1, int64_t T) {
  int64_t n = n0;
  if (T == 1) {
    for (; n + R1 <= n1; n += R1) job.template run<R1, 1>(n, 0);
    for (; n < n1; ++n) job.template run<1, 1>(n, 0);
    return;
  }
  for (; n + RT <= n1; n += RT) tile_tokens<RT, TT>(job, n, T);
  for (; n < n1; ++n) tile_tokens<1, TT>(job, n, T);
}

// One ISA's bodies: the drivers call through this table (AVX-512's int4_dot is null: int4 decode there runs
// the tiled driver, quant_weights_int4_tiles.cpp).
struct Ops {
  float (*dotf)(const float*, const float*, int64_t);
  void (*dotf4)(const float*, const float*, int64_t, int64_t, float*);
  float (*fp8_dot)(const uint8_t*, const float*, int64_t);
  void (*fp8_widen)(const uint8_t*, float*, int64_t, float);
  float (*int4_dot)(const uint8_t*, const float*, int64_t, int64_t, const float*, const float*, const float*);
  void (*int4_widen)(const uint8_t*, float*, int64_t, int64_t, const float*, const float*);
};

extern const Ops kAvx512Ops;  // quant_weights_avx512.cpp

// quant_weights_vbmi.cpp: the fp8 decode driver on AVX512-VBMI (table widening); y is [T, N].
bool vbmi_supported();
void fp8_linear_vbmi(const float* x, int64_t T, int64_t K, const uint8_t* w, const float* scale, int64_t N, float* y);
// quant_weights_fp8_int.cpp: the fp8 decode driver that widens e4m3 with integer instructions (AVX2, or AVX-512
// where `avx512`); y is [T, N].
void fp8_linear_intwiden(bool avx512, const float* x, int64_t T, int64_t K, const uint8_t* w, const float* scale,
                         int64_t N, float* y);
// quant_weights_int4_tiles.cpp: the int4 decode driver on AVX-512, tiled; y is [T, N].
void int4_linear_tiles(const float* x, int64_t T, int64_t K, int64_t group, const uint8_t* w, const float* scale,
                       const float* off, int64_t N, float* y);

// quant_weights_w4a8.cpp: the int4 decode driver on int8 activations (isa 3: AVX2, 4: AVX-512 VNNI); y is [T, N].
bool vnni_supported();
void int4_linear_w4a8(bool vnni, const float* x, int64_t T, int64_t K, int64_t group, const uint8_t* w,
                      const float* scale, const float* off, int64_t N, float* y);

}  // namespace triage_qw
