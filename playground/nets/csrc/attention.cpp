// Each row's attention over its own cache, all rows in one call (nets/kernels.py says why and how).
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cmath>
#include <cstring>
#include <vector>

// A cache holds float32 or float16 (the serving twin's, Llama.int8: half the bytes a step reads and keeps); its
// values are read as float32, exactly.
static inline float value(float x) { return x; }
static inline float value(at::Half x) { return static_cast<float>(x); }

__attribute__((target("avx512f"))) static inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
__attribute__((target("avx512f"))) static inline __m512 load16(const at::Half* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <typename C>
static inline float dot(const float* a, const C* b, int64_t n) {
  float acc[16] = {0};
  int64_t d = 0;
  for (; d + 16 <= n; d += 16)
    for (int l = 0; l < 16; ++l) acc[l] += a[d + l] * value(b[d + l]);
  for (int l = 0; d + l < n; ++l) acc[l] += a[d + l] * value(b[d + l]);
  float s = 0.f;
  for (int l = 0; l < 16; ++l) s += acc[l];
  return s;
}

// The heads of one kv group at one position, AVX-512: each key and value is read once for the group's query
// heads, 16 dimensions a vector. Per head, in one fixed order: s_t = q . k_t (a vector of 16 partial sums, fused
// multiply-adds over the head's width, then a fixed tree), the softmax summed t = 0, 1, ..., y = sum_t w_t v_t.
static constexpr int MAX_GROUP = 4, MAX_WIDTH = 8;    // query heads a kv head serves; 16-float vectors of a head

template <typename C>
__attribute__((target("avx512f")))
static void group_avx512(const float* q, int64_t group, const C* K, const C* V, int64_t T, int64_t hs,
                         float* y, std::vector<float>& w) {
  const int64_t width = hs / 16;
  __m512 qv[MAX_GROUP][MAX_WIDTH];
  for (int64_t j = 0; j < group; ++j)
    for (int64_t b = 0; b < width; ++b) qv[j][b] = _mm512_loadu_ps(q + j * hs + 16 * b);
  w.resize(group * T);
  float top[MAX_GROUP], total[MAX_GROUP];
  for (int64_t j = 0; j < group; ++j) top[j] = -INFINITY;
  for (int64_t t = 0; t < T; ++t) {
    const C* k = K + t * hs;
    __m512 acc[MAX_GROUP];
    for (int64_t j = 0; j < group; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < width; ++b) {
      const __m512 kb = load16(k + 16 * b);
      for (int64_t j = 0; j < group; ++j) acc[j] = _mm512_fmadd_ps(qv[j][b], kb, acc[j]);
    }
    for (int64_t j = 0; j < group; ++j) {
      const float score = _mm512_reduce_add_ps(acc[j]);
      w[j * T + t] = score;
      top[j] = std::max(top[j], score);
    }
  }
  for (int64_t j = 0; j < group; ++j) {
    total[j] = 0.f;
    for (int64_t t = 0; t < T; ++t) { w[j * T + t] = std::exp(w[j * T + t] - top[j]); total[j] += w[j * T + t]; }
  }
  __m512 out[MAX_GROUP][MAX_WIDTH];
  for (int64_t j = 0; j < group; ++j)
    for (int64_t b = 0; b < width; ++b) out[j][b] = _mm512_setzero_ps();
  for (int64_t t = 0; t < T; ++t) {
    const C* v = V + t * hs;
    for (int64_t b = 0; b < width; ++b) {
      const __m512 vb = load16(v + 16 * b);
      for (int64_t j = 0; j < group; ++j) out[j][b] = _mm512_fmadd_ps(_mm512_set1_ps(w[j * T + t]), vb, out[j][b]);
    }
  }
  for (int64_t j = 0; j < group; ++j)
    for (int64_t b = 0; b < width; ++b)
      _mm512_storeu_ps(y + j * hs + 16 * b, _mm512_div_ps(out[j][b], _mm512_set1_ps(total[j])));
}

// One head at one position, in plain C++ (a CPU without AVX-512, or an unusual head shape).
template <typename C>
static void head_plain(const float* qv, const C* K, const C* V, int64_t T, int64_t hs, float* y,
                       std::vector<float>& w) {
  w.resize(T);
  float top = -INFINITY;
  for (int64_t t = 0; t < T; ++t) { w[t] = dot(qv, K + t * hs, hs); top = std::max(top, w[t]); }
  float total = 0.f;
  for (int64_t t = 0; t < T; ++t) { w[t] = std::exp(w[t] - top); total += w[t]; }
  for (int64_t d = 0; d < hs; ++d) y[d] = 0.f;
  for (int64_t t = 0; t < T; ++t) {
    const float weight = w[t] / total;
    const C* v = V + t * hs;
    for (int64_t d = 0; d < hs; ++d) y[d] += weight * value(v[d]);
  }
}

template <typename C>
static torch::Tensor attend_rows(torch::Tensor q, torch::Tensor kv, std::vector<torch::Tensor> caches,
                                 std::vector<int64_t> starts, std::vector<int64_t> lengths) {
  // q (N, nh, hs), prescaled; kv (2, nkv, N, hs): the new positions' keys and values; caches: per piece
  // (2, nkv, capacity, hs); a piece's positions start[p] .. start[p] + length[p] - 1 of its row.
  const int64_t N = q.size(0), nh = q.size(1), hs = q.size(2), nkv = kv.size(1), group = nh / nkv;
  auto out = torch::empty({N, nh * hs}, q.options());
  std::vector<int64_t> first(caches.size()), owner(N);
  int64_t row = 0;
  for (size_t p = 0; p < caches.size(); ++p) {           // the writes first, in order (a row's two chunks)
    first[p] = row;
    auto c = caches[p];
    const int64_t capacity = c.size(2);
    C* cache = c.data_ptr<C>();
    const float* fresh = kv.data_ptr<float>();
    for (int64_t which = 0; which < 2; ++which)
      for (int64_t g = 0; g < nkv; ++g)
        for (int64_t i = 0; i < lengths[p]; ++i) {
          C* to = cache + ((which * nkv + g) * capacity + starts[p] + i) * hs;
          const float* from = fresh + ((which * nkv + g) * N + row + i) * hs;
          for (int64_t d = 0; d < hs; ++d) to[d] = static_cast<C>(from[d]);    // to float16: rounded to nearest
        }
    for (int64_t i = 0; i < lengths[p]; ++i) owner[row + i] = p;
    row += lengths[p];
  }
  const float* Q = q.data_ptr<float>();
  float* Y = out.data_ptr<float>();
  std::vector<const C*> base(caches.size());
  std::vector<int64_t> capacity(caches.size());
  for (size_t p = 0; p < caches.size(); ++p) { base[p] = caches[p].data_ptr<C>(); capacity[p] = caches[p].size(2); }
  const bool wide = __builtin_cpu_supports("avx512f") && hs % 16 == 0 && hs / 16 <= MAX_WIDTH && group <= MAX_GROUP;
  at::parallel_for(0, N * nkv, 1, [&](int64_t begin, int64_t end) {   // a task: one position's kv group
    std::vector<float> w;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / nkv, g = task % nkv, p = owner[n];
      const int64_t T = starts[p] + (n - first[p]) + 1;           // this position sees 0 .. itself
      const C* K = base[p] + g * capacity[p] * hs;
      const C* V = base[p] + (nkv + g) * capacity[p] * hs;
      const float* qg = Q + (n * nh + g * group) * hs;            // the group's query heads, side by side
      float* y = Y + (n * nh + g * group) * hs;
      if (wide) {
        group_avx512(qg, group, K, V, T, hs, y, w);
      } else {
        for (int64_t j = 0; j < group; ++j) head_plain(qg + j * hs, K, V, T, hs, y + j * hs, w);
      }
    }
  });
  return out;
}

torch::Tensor ragged_attention(torch::Tensor q, torch::Tensor kv, std::vector<torch::Tensor> caches,
                               std::vector<int64_t> starts, std::vector<int64_t> lengths) {
  pybind11::gil_scoped_release free;     // the work touches no Python object: other threads run meanwhile
  if (caches.front().scalar_type() == at::kHalf) return attend_rows<at::Half>(q, kv, caches, starts, lengths);
  return attend_rows<float>(q, kv, caches, starts, lengths);
}

std::vector<torch::Tensor> rope_qkv(torch::Tensor qkv, torch::Tensor cos, torch::Tensor sin, int64_t nh, int64_t nkv,
                                    double scale) {
  // qkv (N, (nh + 2 nkv) hs): each position's queries, keys and values side by side; cos, sin (N, hs). Returns the
  // rotated queries times `scale` (N, nh, hs) and the rotated keys with the values as a cache keeps them
  // (2, nkv, N, hs): nets/llama.rotate's operations in its order, x cos + (-x_{i+d/2}, x_i) sin, then q times scale.
  pybind11::gil_scoped_release free;     // the work touches no Python object: other threads run meanwhile
  const int64_t N = qkv.size(0), hs = cos.size(1), half = hs / 2, width = qkv.size(1);
  auto q = torch::empty({N, nh, hs}, qkv.options());
  auto kv = torch::empty({2, nkv, N, hs}, qkv.options());
  const float* X = qkv.data_ptr<float>();
  const float* C = cos.data_ptr<float>();
  const float* S = sin.data_ptr<float>();
  float* Q = q.data_ptr<float>();
  float* KV = kv.data_ptr<float>();
  const float s = static_cast<float>(scale);
  for (int64_t n = 0; n < N; ++n) {
    const float* c = C + n * hs;
    const float* sn = S + n * hs;
    auto rotate = [&](const float* x, float* y, bool scaled) {
      for (int64_t i = 0; i < hs; ++i) {
        const float other = i < half ? -x[i + half] : x[i - half];
        const float r = x[i] * c[i] + other * sn[i];
        y[i] = scaled ? r * s : r;
      }
    };
    const float* row = X + n * width;
    for (int64_t h = 0; h < nh; ++h) rotate(row + h * hs, Q + (n * nh + h) * hs, true);
    for (int64_t g = 0; g < nkv; ++g) {
      rotate(row + (nh + g) * hs, KV + (g * N + n) * hs, false);
      std::memcpy(KV + ((nkv + g) * N + n) * hs, row + (nh + nkv + g) * hs, hs * sizeof(float));
    }
  }
  return {q, kv};
}
