// The AVX-512 int4 decode driver (format: quant_weights.cpp), tiled: R weight rows x TT tokens a pass, so each
// activation load serves R rows and each widened weight TT tokens. At one token four rows a pass; from two tokens
// up two rows x four tokens, which keeps the widened weights in registers instead of the per-row fp32 buffer
// (widen, store, reload) of the untiled path.
//
// A nibble becomes its weight in one vpermps from a per-group table of the 16 decoded values (q * scale + offset,
// built with one FMA per group and row): no int -> float conversion and no offset term afterwards. The 16 bytes
// of a 32-k block hold k = i (low nibbles) and k = 16 + i (high nibbles), so the weights come out in k order.
#include <ATen/Parallel.h>

#include "quant_weights.h"

#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace triage_qw {
namespace {

struct Int4Job {
  const uint8_t* w;     // [N, K / 2]
  const float* scale;   // [N, G]
  const float* off;     // [N, G]; nullptr: symmetric, -8 * scale
  const float* x;       // [T, K]
  int64_t K, N, group;
  float* y;             // [T, N]

  template <int R, int TT>
  AVX512_FN void run(int64_t n, int64_t t0) const {
    constexpr int A = TT == 1 ? 2 : 1;  // two FMA chains per (row, token) when there is one token
    const int64_t G = K / group;
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 acc[R][TT][A];
    for (auto& r : acc)
      for (auto& t : r)
        for (auto& a : t) a = _mm512_setzero_ps();
    for (int64_t g = 0; g < G; ++g) {
      __m512 table[R];
      for (int r = 0; r < R; ++r) {
        const float s = scale[(n + r) * G + g], o = off ? off[(n + r) * G + g] : -8.0f * s;
        table[r] = _mm512_fmadd_ps(iota, _mm512_set1_ps(s), _mm512_set1_ps(o));
      }
      for (int64_t k = g * group; k < (g + 1) * group; k += 32) {
        __m512 lo[R], hi[R];
        for (int r = 0; r < R; ++r) {
          const uint8_t* p = w + (n + r) * (K / 2) + k / 2;
          if (k % 128 == 0) prefetch(p);
          const __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
          lo[r] = _mm512_permutexvar_ps(a, table[r]);  // vpermps reads the low 4 bits of each index
          hi[r] = _mm512_permutexvar_ps(_mm512_srli_epi32(a, 4), table[r]);
        }
        for (int t = 0; t < TT; ++t) {
          const float* xt = x + (t0 + t) * K + k;
          const __m512 x0 = _mm512_loadu_ps(xt), x1 = _mm512_loadu_ps(xt + 16);
          for (int r = 0; r < R; ++r) {
            acc[r][t][0] = _mm512_fmadd_ps(lo[r], x0, acc[r][t][0]);
            acc[r][t][A - 1] = _mm512_fmadd_ps(hi[r], x1, acc[r][t][A - 1]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TT; ++t) {
        __m512 s = acc[r][t][0];
        for (int a = 1; a < A; ++a) s = _mm512_add_ps(s, acc[r][t][a]);
        y[(t0 + t) * N + n + r] = _mm512_reduce_add_ps(s);
      }
  }
};


}  // namespace

void int4_linear_tiles(const float* x, int64_t T, int64_t K, int64_t group, const uint8_t* w, const float* scale,
                       const float* off, int64_t N, float* y) {
  const Int4Job job{w, scale, off, x, K, N, group, y};
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) { tile_rows(job, n0, n1, T); });
}

}  // namespace triage_qw
