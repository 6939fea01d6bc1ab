// y[t, n] = sum_k x[t, k] * w[n, k] with x in fp32 and w stored as bf16, accumulated in fp32 (AVX2 + FMA).
// A bf16 value is the top half of an fp32: widening it is a 16-bit left shift, exact. Reading bf16 weights
// halves the bytes a memory-bound decode step moves, while the arithmetic stays fp32.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cstring>

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}

torch::Tensor bf16_weight_linear(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "shapes: x [T, K], w [N, K]");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kBFloat16, "x fp32, w bf16");
  x = x.contiguous();
  w = w.contiguous();
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({T, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const uint16_t* wp = reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>());
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const uint16_t* row = wp + n * K;
      for (int64_t t = 0; t < T; ++t) {
        const float* xr = xp + t * K;
        // Eight independent accumulators: one FMA chain would wait on its own latency every step.
        __m256 acc[8];
        for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
        int64_t k = 0;
        for (; k + 64 <= K; k += 64) {
          for (int i = 0; i < 8; ++i) {
            __m256i wi = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k + 8 * i)));
            acc[i] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(wi, 16)), _mm256_loadu_ps(xr + k + 8 * i),
                                     acc[i]);
          }
        }
        for (; k + 8 <= K; k += 8) {
          __m256i wi = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k)));
          acc[0] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(wi, 16)), _mm256_loadu_ps(xr + k), acc[0]);
        }
        __m256 acc0 = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        __m256 acc1 = _mm256_add_ps(_mm256_add_ps(acc[4], acc[5]), _mm256_add_ps(acc[6], acc[7]));
        float total = hsum(_mm256_add_ps(acc0, acc1));
        for (; k < K; ++k) {
          uint32_t bits = static_cast<uint32_t>(row[k]) << 16;
          float wv;
          std::memcpy(&wv, &bits, sizeof wv);
          total += wv * xr[k];
        }
        yp[t * N + n] = total;
      }
    }
  });
  return y;
}

// The kernel as a torch operator, registered when this library loads (see bf16_weights.py).
TORCH_LIBRARY_FRAGMENT(triage, m) { m.def("bf16_weight_linear(Tensor x, Tensor w) -> Tensor"); }

TORCH_LIBRARY_IMPL(triage, CPU, m) { m.impl("bf16_weight_linear", &bf16_weight_linear); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("bf16_weight_linear", &bf16_weight_linear, "fp32 x @ bf16-stored w^T, fp32 accumulate");
}
