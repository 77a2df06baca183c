// Each row's attention over its own cache, all rows in one call (nets/kernels.py says why and how).
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <cstring>
#include <vector>

static inline float dot(const float* a, const float* b, int64_t n) {
  float acc[16] = {0};
  int64_t d = 0;
  for (; d + 16 <= n; d += 16)
    for (int l = 0; l < 16; ++l) acc[l] += a[d + l] * b[d + l];
  for (int l = 0; d + l < n; ++l) acc[l] += a[d + l] * b[d + l];
  float s = 0.f;
  for (int l = 0; l < 16; ++l) s += acc[l];
  return s;
}

torch::Tensor ragged_attention(torch::Tensor q, torch::Tensor kv, std::vector<torch::Tensor> caches,
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
    float* cache = c.data_ptr<float>();
    const float* fresh = kv.data_ptr<float>();
    for (int64_t which = 0; which < 2; ++which)
      for (int64_t g = 0; g < nkv; ++g)
        for (int64_t i = 0; i < lengths[p]; ++i)
          std::memcpy(cache + ((which * nkv + g) * capacity + starts[p] + i) * hs,
                      fresh + ((which * nkv + g) * N + row + i) * hs, hs * sizeof(float));
    for (int64_t i = 0; i < lengths[p]; ++i) owner[row + i] = p;
    row += lengths[p];
  }
  const float* Q = q.data_ptr<float>();
  float* Y = out.data_ptr<float>();
  at::parallel_for(0, N * nh, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> w;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / nh, h = task % nh, p = owner[n], g = h / group;
      const int64_t T = starts[p] + (n - first[p]) + 1;           // this position sees 0 .. itself
      auto c = caches[p];
      const int64_t capacity = c.size(2);
      const float* K = c.data_ptr<float>() + g * capacity * hs;
      const float* V = c.data_ptr<float>() + (nkv + g) * capacity * hs;
      const float* qv = Q + (n * nh + h) * hs;
      w.resize(T);
      float top = -INFINITY;
      for (int64_t t = 0; t < T; ++t) { w[t] = dot(qv, K + t * hs, hs); top = std::max(top, w[t]); }
      float total = 0.f;
      for (int64_t t = 0; t < T; ++t) { w[t] = std::exp(w[t] - top); total += w[t]; }
      float* y = Y + n * nh * hs + h * hs;
      for (int64_t d = 0; d < hs; ++d) y[d] = 0.f;
      for (int64_t t = 0; t < T; ++t) {
        const float weight = w[t] / total;
        const float* v = V + t * hs;
        for (int64_t d = 0; d < hs; ++d) y[d] += weight * v[d];
      }
    }
  });
  return out;
}
