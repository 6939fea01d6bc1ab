// Weight-only FP8 (e4m3) and INT4 (group-wise) matmuls for decode on a CPU: y[t, n] = sum_k x[t, k] * w[n, k]
// with x in fp32 and w kept packed in memory (1 byte or half a byte a weight), widened in registers and
// accumulated in fp32. A decode step streams every weight once, so its speed is set by the bytes it reads.
//
// FP8 e4m3 -> fp32 without a table: a byte's 7 exponent+mantissa bits, moved down one bit inside a 16-bit lane,
// form an fp16 whose value is the e4m3 value / 2^8 (normals and subnormals alike: e4m3 has bias 7, fp16 bias 15);
// F16C's vcvtph2ps widens it exactly. The 2^8 is folded into the per-channel scale. (0x7F/0xFF, e4m3fn's NaN,
// decodes as 480: quantized weights are clamped to +-448 and never hold it.)
//
// INT4 layout (ours): per output row K/2 bytes; in each block of 32 k-values (16 bytes), byte j holds k = j in
// its low nibble and k = j + 16 in its high nibble, so a masked byte and a shifted byte are each 8 (AVX2) or 16
// (AVX-512) consecutive k-values. q is in 0..15 and w = q * scale[g] + offset[g] (offset = zero - 8 * scale:
// asymmetric; -8 * scale: symmetric), per group g of `group` k-values. sum_k x*w = sum_g scale[g] * sum_k x*q
// + offset[g] * sum_k x, and sum_k x per group is computed once per call.
//
// Each function has an AVX2 (+FMA+F16C; the build's flags) body here and an AVX-512 body in
// quant_weights_avx512.cpp (target attribute), and an fp8 decode driver on AVX512-VBMI in quant_weights_vbmi.cpp;
// `isa` picks one (0: AVX2, 1: AVX-512, 2: AVX-512 + VBMI), and the Python side chooses by measurement. For int4,
// isa 3 (AVX2) and 4 (AVX-512 VNNI) quantize the activations to int8 and use integer dot products
// (quant_weights_w4a8.cpp): not fp32 arithmetic, so they are named apart wherever a path is reported. For fp8,
// isa 5 (AVX2) and 6 (AVX-512) are decode drivers that widen e4m3 with integer instructions, not F16C
// (quant_weights_fp8_int.cpp).
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <vector>

#include "quant_weights.h"

namespace triage_qw {

int64_t g_prefetch = 8192;  // measured: the tiled drivers read 4 rows at once and gain up to 1.3x over 2048
int g_prefetch_level = 1;

// ---------------------------------------------------------------- AVX2 ----------------------------------------
inline void fp8x16_avx2(const uint8_t* p, __m256& lo, __m256& hi) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i z = _mm_setzero_si128(), mask = _mm_set1_epi16(static_cast<short>(0xBFFF));
  lo = _mm256_cvtph_ps(_mm_and_si128(_mm_srai_epi16(_mm_unpacklo_epi8(z, v), 1), mask));
  hi = _mm256_cvtph_ps(_mm_and_si128(_mm_srai_epi16(_mm_unpackhi_epi8(z, v), 1), mask));
}

inline void int4x32_avx2(const uint8_t* p, __m256 q[4]) {
  const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
  const __m256i m = _mm256_set1_epi32(15);
  q[0] = _mm256_cvtepi32_ps(_mm256_and_si256(a, m));
  q[1] = _mm256_cvtepi32_ps(_mm256_and_si256(b, m));
  q[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4));
  q[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
}

float dotf_avx2(const float* a, const float* b, int64_t K) {
  __m256 acc[8];
  for (auto& v : acc) v = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 64 <= K; k += 64)
    for (int i = 0; i < 8; ++i)
      acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8 * i), _mm256_loadu_ps(b + k + 8 * i), acc[i]);
  for (; k + 8 <= K; k += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc[0]);
  for (int i = 1; i < 8; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float total = hsum8(acc[0]);
  for (; k < K; ++k) total += a[k] * b[k];
  return total;
}

// Four rows of x against one widened weight row: each weight load serves four FMAs (a lone dot product
// is load-bound: two loads per FMA). x rows are ldx apart; out[i] = a . x[i].
void dotf4_avx2(const float* a, const float* x, int64_t ldx, int64_t K, float* out) {
  __m256 acc[4][2];
  for (auto& r : acc) r[0] = r[1] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256 w0 = _mm256_loadu_ps(a + k), w1 = _mm256_loadu_ps(a + k + 8);
    for (int i = 0; i < 4; ++i) {
      acc[i][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * ldx + k), acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i * ldx + k + 8), acc[i][1]);
    }
  }
  for (int i = 0; i < 4; ++i) {
    float total = hsum8(_mm256_add_ps(acc[i][0], acc[i][1]));
    for (int64_t j = k; j < K; ++j) total += a[j] * x[i * ldx + j];
    out[i] = total;
  }
}

float fp8_dot_avx2(const uint8_t* w, const float* x, int64_t K) {
  __m256 acc[8];
  for (auto& v : acc) v = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    prefetch(w + k);
    for (int i = 0; i < 4; ++i) {  // eight independent FMA chains
      __m256 lo, hi;
      fp8x16_avx2(w + k + 16 * i, lo, hi);
      acc[2 * i] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(x + k + 16 * i), acc[2 * i]);
      acc[2 * i + 1] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(x + k + 16 * i + 8), acc[2 * i + 1]);
    }
  }
  for (; k + 16 <= K; k += 16) {
    __m256 lo, hi;
    fp8x16_avx2(w + k, lo, hi);
    acc[0] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(x + k), acc[0]);
    acc[1] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(x + k + 8), acc[1]);
  }
  for (int i = 1; i < 8; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float total = hsum8(acc[0]);
  for (; k < K; ++k) total += fp8_scalar_div256(w[k]) * x[k];
  return total;
}

void fp8_widen_avx2(const uint8_t* w, float* out, int64_t K, float s) {
  const __m256 sv = _mm256_set1_ps(s);
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    if (k % 64 == 0) prefetch(w + k);
    __m256 lo, hi;
    fp8x16_avx2(w + k, lo, hi);
    _mm256_storeu_ps(out + k, _mm256_mul_ps(lo, sv));
    _mm256_storeu_ps(out + k + 8, _mm256_mul_ps(hi, sv));
  }
  for (; k < K; ++k) out[k] = fp8_scalar_div256(w[k]) * s;
}

// sum_g scale[g] * sum_{k in g} x*q + sum_g off[g] * xsum[g] (xsum: x summed over each group).
float int4_dot_avx2(const uint8_t* w, const float* x, int64_t K, int64_t group, const float* scale, const float* off,
                    const float* xsum) {
  __m256 tot[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t g = 0, k0 = 0; k0 < K; ++g, k0 += group) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t k = k0; k < k0 + group; k += 32) {
      if (k % 128 == 0) prefetch(w + k / 2);
      __m256 q[4];
      int4x32_avx2(w + k / 2, q);
      for (int i = 0; i < 4; ++i) acc[i] = _mm256_fmadd_ps(q[i], _mm256_loadu_ps(x + k + 8 * i), acc[i]);
    }
    const __m256 gsum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    tot[g & 1] = _mm256_fmadd_ps(gsum, _mm256_set1_ps(scale[g]), tot[g & 1]);
  }
  float c = 0.f;
  for (int64_t g = 0; g < K / group; ++g) c += off[g] * xsum[g];
  return hsum8(_mm256_add_ps(tot[0], tot[1])) + c;
}

void int4_widen_avx2(const uint8_t* w, float* out, int64_t K, int64_t group, const float* scale, const float* off) {
  for (int64_t g = 0, k0 = 0; k0 < K; ++g, k0 += group) {
    const __m256 s = _mm256_set1_ps(scale[g]), c = _mm256_set1_ps(off[g]);
    for (int64_t k = k0; k < k0 + group; k += 32) {
      if (k % 128 == 0) prefetch(w + k / 2);
      __m256 q[4];
      int4x32_avx2(w + k / 2, q);
      for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + k + 8 * i, _mm256_fmadd_ps(q[i], s, c));
    }
  }
}

// ---------------------------------------------------------------- drivers -------------------------------------

bool avx512_supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

// isa 2 (AVX512-VBMI) runs its own fp8 decode driver; the rest (int4, dequantize) are the AVX-512 bodies.
// isa 3 and 4 are int4 decode on int8 activations (AVX2, AVX-512 VNNI); their prefill widens with the AVX2 and
// AVX-512 bodies. isa 5 and 6 are fp8 decode with integer widening (AVX2, AVX-512); their prefill widens with
// the AVX2 and AVX-512 bodies.
const Ops& ops_for(int64_t isa) {
  static const Ops avx2{dotf_avx2, dotf4_avx2, fp8_dot_avx2, fp8_widen_avx2, int4_dot_avx2, int4_widen_avx2};
  TORCH_CHECK(isa >= 0 && isa <= 6,
              "isa: 0 (AVX2), 1 (AVX-512), 2 (AVX-512 + VBMI), 3 (AVX2, int8 activations), 4 (AVX-512 VNNI, "
              "int8 activations), 5 (AVX2) or 6 (AVX-512), fp8 widened by integer instructions");
  TORCH_CHECK(isa == 0 || isa == 3 || isa == 5 || avx512_supported(), "this CPU has no AVX-512F/BW/VL");
  TORCH_CHECK(isa != 2 || vbmi_supported(), "this CPU has no AVX512-VBMI");
  TORCH_CHECK(isa != 4 || vnni_supported(), "this CPU has no AVX512-VNNI");
  return isa == 1 || isa == 2 || isa == 4 || isa == 6 ? kAvx512Ops : avx2;
}

void check_fp8(const torch::Tensor& w, const torch::Tensor& scale) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kUInt8 && w.is_contiguous(), "w: contiguous uint8 [N, K]");
  TORCH_CHECK(scale.scalar_type() == torch::kFloat32 && scale.numel() == w.size(0) && scale.is_contiguous(),
              "scale: fp32 [N]");
}

void check_int4(const torch::Tensor& w, const torch::Tensor& scale, const torch::Tensor& off, int64_t group) {
  TORCH_CHECK(group % 32 == 0 && group > 0, "group: a multiple of 32");
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kUInt8 && w.is_contiguous(), "w: contiguous uint8 [N, K/2]");
  const int64_t K = 2 * w.size(1);
  TORCH_CHECK(K % group == 0, "K is not a multiple of the group");
  for (const auto* t : {&scale, &off})
    TORCH_CHECK((t == &off && t->numel() == 0) ||
                    (t->scalar_type() == torch::kFloat32 && t->is_contiguous() && t->dim() == 2 &&
                     t->size(0) == w.size(0) && t->size(1) == K / group),
                "scale and offset: contiguous fp32 [N, K / group] (offset empty: symmetric, -8 * scale)");
}

// y[t, n] for every t from one widened weight row: four x rows at a time, then the rest one by one.
void rows_times(const Ops& ops, const float* row, const float* x, int64_t T, int64_t K, int64_t N, int64_t n,
                float* y) {
  float out[4];
  int64_t t = 0;
  for (; t + 4 <= T; t += 4) {
    ops.dotf4(row, x + t * K, K, K, out);
    for (int i = 0; i < 4; ++i) y[(t + i) * N + n] = out[i];
  }
  for (; t < T; ++t) y[t * N + n] = ops.dotf(row, x + t * K, K);
}

const float* symmetric_offsets(const float* scale, float* out, int64_t G) {  // w = (q - 8) * scale
  for (int64_t g = 0; g < G; ++g) out[g] = -8.0f * scale[g];
  return out;
}

torch::Tensor fp8_linear(torch::Tensor x, torch::Tensor w, torch::Tensor scale, int64_t isa) {
  check_fp8(w, scale);
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.size(1) == w.size(1), "x: fp32 [T, K]");
  TORCH_CHECK(isa != 3 && isa != 4, "isa 3 and 4 (int8 activations) are int4 paths");
  const Ops& ops = ops_for(isa);
  x = x.contiguous();
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({T, N}, x.options());
  if (T == 0 || N == 0) return y;
  const float* xp = x.data_ptr<float>();
  const uint8_t* wp = w.data_ptr<uint8_t>();
  const float* sp = scale.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  if (isa == 2) {
    fp8_linear_vbmi(xp, T, K, wp, sp, N, yp);
    return y;
  }
  if (isa == 5 || isa == 6) {
    fp8_linear_intwiden(isa == 6, xp, T, K, wp, sp, N, yp);
    return y;
  }
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    std::vector<float> row(T > 1 ? K : 0);  // several rows: widen the weight row once, then fp32 dots
    for (int64_t n = n0; n < n1; ++n) {
      const float s = sp[n] * kFp8Fix;
      if (T == 1) {
        yp[n] = s * ops.fp8_dot(wp + n * K, xp, K);
      } else {
        ops.fp8_widen(wp + n * K, row.data(), K, s);
        rows_times(ops, row.data(), xp, T, K, N, n, yp);
      }
    }
  });
  return y;
}

torch::Tensor int4_linear(torch::Tensor x, torch::Tensor w, torch::Tensor scale, torch::Tensor off, int64_t group,
                          int64_t isa) {
  check_int4(w, scale, off, group);
  TORCH_CHECK(isa != 5 && isa != 6, "isa 5 and 6 (integer-widened e4m3) are fp8 paths");
  const int64_t K = 2 * w.size(1), N = w.size(0), G = K / group;
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.size(1) == K, "x: fp32 [T, K]");
  const Ops& ops = ops_for(isa);
  x = x.contiguous();
  const int64_t T = x.size(0);
  auto y = torch::empty({T, N}, x.options());
  if (T == 0 || N == 0) return y;
  const float* xp = x.data_ptr<float>();
  const uint8_t* wp = w.data_ptr<uint8_t>();
  const float* sp = scale.data_ptr<float>();
  const float* op = off.numel() ? off.data_ptr<float>() : nullptr;  // null: symmetric
  float* yp = y.data_ptr<float>();
  if (isa >= 3) {  // int8 activations, integer dot products
    TORCH_CHECK(group % 128 == 0, "isa 3 and 4 (int8 activations) need a group that is a multiple of 128");
    int4_linear_w4a8(isa == 4, xp, T, K, group, wp, sp, op, N, yp);
    return y;
  }
  if (isa >= 1) {  // AVX-512: the tiled driver (the untiled AVX2 body below is for CPUs without AVX-512)
    int4_linear_tiles(xp, T, K, group, wp, sp, op, N, yp);
    return y;
  }
  std::vector<float> xsum(T * G);  // sum of x over each group: what the offsets multiply
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < G; ++g) {
      float s = 0.f;
      for (int64_t k = g * group; k < (g + 1) * group; ++k) s += xp[t * K + k];
      xsum[t * G + g] = s;
    }
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    std::vector<float> row(T > 1 ? K : 0), sym(G);
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* wr = wp + n * (K / 2);
      const float* o = op ? op + n * G : symmetric_offsets(sp + n * G, sym.data(), G);
      if (T == 1) {
        yp[n] = ops.int4_dot(wr, xp, K, group, sp + n * G, o, xsum.data());
      } else {
        ops.int4_widen(wr, row.data(), K, group, sp + n * G, o);
        rows_times(ops, row.data(), xp, T, K, N, n, yp);
      }
    }
  });
  return y;
}

torch::Tensor fp8_dequant(torch::Tensor w, torch::Tensor scale, int64_t isa) {  // prefill: dense fp32 [N, K]
  check_fp8(w, scale);
  const Ops& ops = ops_for(isa);
  const int64_t N = w.size(0), K = w.size(1);
  auto out = torch::empty({N, K}, torch::dtype(torch::kFloat32));
  const uint8_t* wp = w.data_ptr<uint8_t>();
  const float* sp = scale.data_ptr<float>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) ops.fp8_widen(wp + n * K, o + n * K, K, sp[n] * kFp8Fix);
  });
  return out;
}

torch::Tensor int4_dequant(torch::Tensor w, torch::Tensor scale, torch::Tensor off, int64_t group, int64_t isa) {
  check_int4(w, scale, off, group);
  const Ops& ops = ops_for(isa);
  const int64_t N = w.size(0), K = 2 * w.size(1), G = K / group;
  auto out = torch::empty({N, K}, torch::dtype(torch::kFloat32));
  const uint8_t* wp = w.data_ptr<uint8_t>();
  const float* sp = scale.data_ptr<float>();
  const float* op = off.numel() ? off.data_ptr<float>() : nullptr;
  float* out_p = out.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    std::vector<float> sym(G);
    for (int64_t n = n0; n < n1; ++n) {
      const float* o = op ? op + n * G : symmetric_offsets(sp + n * G, sym.data(), G);
      ops.int4_widen(wp + n * (K / 2), out_p + n * K, K, group, sp + n * G, o);
    }
  });
  return out;
}

}  // namespace triage_qw

using namespace triage_qw;

// The decode kernels as torch operators, registered when this library loads. torch.compile keeps each as one node
// of the compiled decode step and calls it through the dispatcher, with no Python in between; quant_weights.py
// gives their output shapes for tracing (register_fake).
TORCH_LIBRARY_FRAGMENT(triage, m) {
  m.def("fp8_linear(Tensor x, Tensor w, Tensor scale, int isa) -> Tensor");
  m.def("int4_linear(Tensor x, Tensor w, Tensor scale, Tensor offset, int group, int isa) -> Tensor");
}

TORCH_LIBRARY_IMPL(triage, CPU, m) {
  m.impl("fp8_linear", &fp8_linear);
  m.impl("int4_linear", &int4_linear);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("set_prefetch", [](int64_t b, int level) { g_prefetch = b; g_prefetch_level = level; },
        "software prefetch distance in weight bytes (0: off) and cache level (1: L1, 2: L2, 3: T2)", py::arg("bytes"),
        py::arg("level") = 1);
  m.def("avx512_supported", &avx512_supported, "the CPU has AVX-512F/BW/VL (the AVX-512 bodies can run)");
  m.def("vbmi_supported", &vbmi_supported, "the CPU has AVX-512F/BW/VL and VBMI (isa 2 can run)");
  m.def("vnni_supported", &vnni_supported, "the CPU has AVX-512F/BW/VL and VNNI (isa 4 can run)");
  m.def("fp8_linear", &fp8_linear, "fp32 x @ (e4m3 w * scale[n])^T, fp32 accumulate", py::arg("x"), py::arg("w"),
        py::arg("scale"), py::arg("isa"));
  m.def("int4_linear", &int4_linear,
        "fp32 x @ (q * scale + offset per group)^T, fp32 accumulate (isa 3, 4: x as int8 per group, int32 sums)",
        py::arg("x"),
        py::arg("w"), py::arg("scale"), py::arg("offset"), py::arg("group"), py::arg("isa"));
  m.def("fp8_dequant", &fp8_dequant, "e4m3 [N, K] * scale[n] -> fp32", py::arg("w"), py::arg("scale"), py::arg("isa"));
  m.def("int4_dequant", &int4_dequant, "packed int4 [N, K/2] -> fp32 [N, K]", py::arg("w"), py::arg("scale"),
        py::arg("offset"), py::arg("group"), py::arg("isa"));
}
