// Decode attention over the paged KV cache on a CPU: one query token per sequence, in one call per layer.
// out[b, h] = sum_p softmax_p(scale * q[b, h] . K[b, p, h / g]) V[b, p, h / g], over the sequence's context
// positions p < kv_lens[b], position p in block block_tables[b][p / block_size] at offset p % block_size;
// g = Hq / Hkv query heads share one K/V head (GQA). K and V are fp32 or bf16 (a bf16 value is the top half of
// an fp32: widening it is a 16-bit shift, exact); arithmetic is fp32. The scores of one query head are kept
// whole (kv_len floats) and normalised with their maximum, as an exact softmax (e^x by a polynomial, exp8).
//
// A call may first write the batch's new K/V rows into their cache slots (k_new, v_new: [B, Hkv, d], converted to
// the cache's dtype by torch's own conversion; slots: [B] int64), so that a decode layer's cache write and its
// attention are one call from Python, not three.
//
// The same math in torch ops costs about a dozen dispatches a layer (gather, two batched matmuls, softmax,
// layout changes), which at bs=1 take longer than the arithmetic; see layers/attention/sdpa.py.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const at::BFloat16* p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline float widen(float v) { return v; }
inline float widen(at::BFloat16 v) { return static_cast<float>(v); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}

template <typename T>
inline float dot(const float* q, const T* k, int64_t d) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) acc = _mm256_fmadd_ps(load8(q + i), load8(k + i), acc);
  float s = hsum(acc);
  for (; i < d; ++i) s += q[i] * widen(k[i]);
  return s;
}

// q . k0..k3 at once: four accumulators reduced together by a tree of horizontal adds (one hsum, not four).
template <typename T>
inline __m128 dot4(const float* q, const T* k0, const T* k1, const T* k2, const T* k3, int64_t d) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) {
    const __m256 qv = load8(q + i);
    a0 = _mm256_fmadd_ps(qv, load8(k0 + i), a0);
    a1 = _mm256_fmadd_ps(qv, load8(k1 + i), a1);
    a2 = _mm256_fmadd_ps(qv, load8(k2 + i), a2);
    a3 = _mm256_fmadd_ps(qv, load8(k3 + i), a3);
  }
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  if (i < d) {
    float t[4];
    _mm_storeu_ps(t, s);
    for (; i < d; ++i) {
      t[0] += q[i] * widen(k0[i]);
      t[1] += q[i] * widen(k1[i]);
      t[2] += q[i] * widen(k2[i]);
      t[3] += q[i] * widen(k3[i]);
    }
    s = _mm_loadu_ps(t);
  }
  return s;
}

// e^x for x <= 0 (scores minus their maximum), eight at a time: x = n ln2 + r with |r| <= ln2 / 2, e^r by its
// Taylor series to r^7 (relative error below 2e-8 there), 2^n added to the exponent bits. Below -87, e^x is
// under fp32's smallest normal and is returned as 0.
inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693147180559945309f), x);
  __m256 p = _mm256_set1_ps(1.f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
  const __m256 y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
  return _mm256_andnot_ps(under, y);
}

// s[0..n) <- softmax(s[0..n)) in place.
inline void softmax(float* s, int64_t n) {
  __m256 mv = _mm256_set1_ps(-INFINITY);
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + p));
  float tmp[8];
  _mm256_storeu_ps(tmp, mv);
  float m = tmp[0];
  for (int i = 1; i < 8; ++i) m = std::max(m, tmp[i]);
  for (int64_t t = p; t < n; ++t) m = std::max(m, s[t]);
  const __m256 mb = _mm256_set1_ps(m);
  __m256 sv = _mm256_setzero_ps();
  for (p = 0; p + 8 <= n; p += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + p), mb));
    _mm256_storeu_ps(s + p, e);
    sv = _mm256_add_ps(sv, e);
  }
  float sum = hsum(sv);
  for (; p < n; ++p) sum += (s[p] = std::exp(s[p] - m));
  const __m256 inv = _mm256_set1_ps(1.f / sum);
  for (p = 0; p + 8 <= n; p += 8) _mm256_storeu_ps(s + p, _mm256_mul_ps(_mm256_loadu_ps(s + p), inv));
  for (; p < n; ++p) s[p] *= 1.f / sum;
}

// o[j] = sum_t s[j * n + t] v[t] for the G heads j of a tile, 16 values of d at a time: each chunk of a V row is
// loaded once and added into the G heads' sums (2G independent FMA chains).
template <int G, typename T>
void weighted_sum(const float* s, int64_t n, const T* const* vs, int64_t d, float* o) {
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    __m256 a[G][2];
    for (auto& row : a) row[0] = row[1] = _mm256_setzero_ps();
    for (int64_t t = 0; t < n; ++t) {
      const __m256 v0 = load8(vs[t] + i), v1 = load8(vs[t] + i + 8);
      for (int j = 0; j < G; ++j) {
        const __m256 sv = _mm256_set1_ps(s[j * n + t]);
        a[j][0] = _mm256_fmadd_ps(sv, v0, a[j][0]);
        a[j][1] = _mm256_fmadd_ps(sv, v1, a[j][1]);
      }
    }
    for (int j = 0; j < G; ++j) {
      _mm256_storeu_ps(o + j * d + i, a[j][0]);
      _mm256_storeu_ps(o + j * d + i + 8, a[j][1]);
    }
  }
  for (; i + 8 <= d; i += 8) {
    __m256 a[G];
    for (auto& x : a) x = _mm256_setzero_ps();
    for (int64_t t = 0; t < n; ++t) {
      const __m256 v0 = load8(vs[t] + i);
      for (int j = 0; j < G; ++j) a[j] = _mm256_fmadd_ps(_mm256_set1_ps(s[j * n + t]), v0, a[j]);
    }
    for (int j = 0; j < G; ++j) _mm256_storeu_ps(o + j * d + i, a[j]);
  }
  for (; i < d; ++i) {
    for (int j = 0; j < G; ++j) {
      float a = 0.f;
      for (int64_t t = 0; t < n; ++t) a += s[j * n + t] * widen(vs[t][i]);
      o[j * d + i] = a;
    }
  }
}

template <typename T>
void attend(const float* q, const T* kc, const T* vc, const int64_t* tables, int64_t table_width,
            const std::vector<int64_t>& kv_lens, int64_t block_size, int64_t hq, int64_t hkv, int64_t d, float scale,
            float* out) {
  const int64_t g = hq / hkv, B = static_cast<int64_t>(kv_lens.size());
  const int64_t slot_stride = hkv * d;  // one position of one block: Hkv heads of d values
  at::parallel_for(0, B * hkv, 1, [&](int64_t w0, int64_t w1) {
    std::vector<float> scores;
    std::vector<const T*> ks, vs;
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / hkv, h = w % hkv, n = kv_lens[b];
      const int64_t* table = tables + b * table_width;
      const float* qb = q + (b * hq + h * g) * d;  // the g query heads of this K/V head
      float* ob = out + (b * hq + h * g) * d;
      ks.resize(n);
      vs.resize(n);
      for (int64_t p = 0; p < n; ++p) {
        const int64_t slot = (table[p / block_size] * block_size + p % block_size) * slot_stride + h * d;
        ks[p] = kc + slot;
        vs[p] = vc + slot;
      }
      scores.resize(g * n);
      // The g query heads share this K/V head: each K row, and each chunk of a V row, is read from memory once for
      // all of them (read once per head, the cache traffic was g times this, and a long context's K and V do not
      // stay in L2 between heads).
      int64_t p = 0;
      for (; p + 4 <= n; p += 4)
        for (int64_t j = 0; j < g; ++j)
          _mm_storeu_ps(scores.data() + j * n + p,
                        _mm_mul_ps(_mm_set1_ps(scale), dot4(qb + j * d, ks[p], ks[p + 1], ks[p + 2], ks[p + 3], d)));
      for (; p < n; ++p)
        for (int64_t j = 0; j < g; ++j) scores[j * n + p] = scale * dot(qb + j * d, ks[p], d);
      for (int64_t j = 0; j < g; ++j) softmax(scores.data() + j * n, n);
      for (int64_t j0 = 0; j0 < g; j0 += 4) {  // heads in tiles of up to four: their sums fit in registers
        const float* s = scores.data() + j0 * n;
        float* o = ob + j0 * d;
        switch (std::min<int64_t>(4, g - j0)) {
          case 1: weighted_sum<1>(s, n, vs.data(), d, o); break;
          case 2: weighted_sum<2>(s, n, vs.data(), d, o); break;
          case 3: weighted_sum<3>(s, n, vs.data(), d, o); break;
          default: weighted_sum<4>(s, n, vs.data(), d, o);
        }
      }
    }
  });
}

}  // namespace

namespace {

// cache[slots[b]] <- rows[b] for every b, over a cache viewed as [slots, Hkv * d] (the slots checked already).
void write_rows(torch::Tensor cache, const torch::Tensor& rows, const int64_t* slots) {
  const torch::Tensor src = rows.to(cache.scalar_type()).contiguous();
  const int64_t row_bytes = src.numel() / std::max<int64_t>(src.size(0), 1) * src.element_size();  // not stride(0): a
  // tensor of one row counts as contiguous whatever that stride is
  auto* dst = static_cast<char*>(cache.data_ptr());
  const auto* from = static_cast<const char*>(src.data_ptr());
  for (int64_t b = 0; b < src.size(0); ++b) std::memcpy(dst + slots[b] * row_bytes, from + b * row_bytes, row_bytes);
}

}  // namespace

torch::Tensor decode_attention(torch::Tensor q_in, torch::Tensor k_cache, torch::Tensor v_cache,
                               torch::Tensor block_tables, std::vector<int64_t> kv_lens, double scale,
                               c10::optional<torch::Tensor> k_new, c10::optional<torch::Tensor> v_new,
                               c10::optional<torch::Tensor> slots) {
  TORCH_CHECK(q_in.dim() == 3 && (q_in.scalar_type() == torch::kFloat32 || q_in.scalar_type() == torch::kBFloat16),
              "q: fp32 or bf16 [B, Hq, d]");
  const torch::Tensor q = q_in.to(torch::kFloat32).contiguous();
  TORCH_CHECK(k_cache.dim() == 4 && k_cache.sizes() == v_cache.sizes() && k_cache.is_contiguous() &&
                  v_cache.is_contiguous() && k_cache.scalar_type() == v_cache.scalar_type(),
              "caches: contiguous [blocks, block_size, Hkv, d], K and V alike");
  TORCH_CHECK(block_tables.dim() == 2 && block_tables.scalar_type() == torch::kInt64 && block_tables.is_contiguous(),
              "block_tables: contiguous int64 [B, width]");
  const int64_t B = q.size(0), hq = q.size(1), d = q.size(2);
  const int64_t block_size = k_cache.size(1), hkv = k_cache.size(2);
  TORCH_CHECK(k_cache.size(3) == d && hq % hkv == 0, "head_dim must match and Hq be a multiple of Hkv");
  TORCH_CHECK(static_cast<int64_t>(kv_lens.size()) == B && block_tables.size(0) == B, "one table and length a row");
  for (int64_t n : kv_lens)
    TORCH_CHECK(n >= 1 && n <= block_tables.size(1) * block_size, "kv_len outside the sequence's blocks");
  TORCH_CHECK(k_new.has_value() == v_new.has_value() && k_new.has_value() == slots.has_value(),
              "k_new, v_new and slots come together");
  if (k_new.has_value()) {
    const std::vector<int64_t> row_shape{B, hkv, d};
    TORCH_CHECK(k_new->sizes() == row_shape && v_new->sizes() == row_shape, "k_new, v_new: [B, Hkv, d]");
    TORCH_CHECK(slots->dim() == 1 && slots->size(0) == B && slots->scalar_type() == torch::kInt64 &&
                    slots->is_contiguous(), "slots: contiguous int64 [B]");
    const int64_t* slot = slots->data_ptr<int64_t>();
    const int64_t num_slots = k_cache.size(0) * block_size;
    for (int64_t b = 0; b < B; ++b)
      TORCH_CHECK(slot[b] >= 0 && slot[b] < num_slots, "slot ", slot[b], " outside the cache's ", num_slots, " slots");
    write_rows(k_cache, *k_new, slot);
    write_rows(v_cache, *v_new, slot);
  }
  auto out = torch::empty_like(q);
  const int64_t* tables = block_tables.data_ptr<int64_t>();
  if (k_cache.scalar_type() == torch::kFloat32) {
    attend(q.data_ptr<float>(), k_cache.data_ptr<float>(), v_cache.data_ptr<float>(), tables, block_tables.size(1),
           kv_lens, block_size, hq, hkv, d, static_cast<float>(scale), out.data_ptr<float>());
  } else {
    TORCH_CHECK(k_cache.scalar_type() == torch::kBFloat16, "caches: fp32 or bf16");
    attend(q.data_ptr<float>(), k_cache.data_ptr<at::BFloat16>(), v_cache.data_ptr<at::BFloat16>(), tables,
           block_tables.size(1), kv_lens, block_size, hq, hkv, d, static_cast<float>(scale), out.data_ptr<float>());
  }
  return out.to(q_in.scalar_type());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("decode_attention", &decode_attention,
        "one query token per sequence against its paged K/V (fp32 or bf16 cache), fp32 softmax and sums; the "
        "output in q's dtype. With k_new, v_new and slots, the new rows are written into the cache first",
        py::arg("q"), py::arg("k_cache"), py::arg("v_cache"), py::arg("block_tables"), py::arg("kv_lens"),
        py::arg("scale"), py::arg("k_new") = py::none(), py::arg("v_new") = py::none(),
        py::arg("slots") = py::none());
}
