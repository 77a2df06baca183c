"""Each row's attention over its own cache, all rows in one call: the serving engine's attention as a small C++
kernel (compiled on first use with torch's cpp_extension, kept in its build folder), with the same arithmetic for a
row whatever else is in the batch.

`Attention.ragged` loops over the rows in Python otherwise: per row and layer two products of a few query heads
against the row's keys and values and a softmax, each a library call whose fixed cost is most of its time (SmolLM2
at 32 rows: about 25 µs a product for 58 thousand multiply-adds). Here one call per layer writes every row's new
keys and values into its cache and computes, for each (row, position, head) on its own, in one fixed order:

    s_t = q · k_t  (16 running sums over the head's width, added up in one order),
    w_t = exp(s_t - max s) / sum_t exp(s_t - max s)  (summed t = 0, 1, ...),
    y = sum_t w_t v_t  (t = 0, 1, ...),

so a row's bits depend on its own numbers only: no batch, no thread count (each task is one row's position and
head) and no library's blocking choose an order ("Defeating Nondeterminism in LLM Inference", He et al., 2025:
batch-invariant kernels). Without a C++ compiler (or with PLAYGROUND_RAGGED_KERNEL=0) the Python loop serves,
the same mathematics in the library's order: one path per process, so a seeded answer is still the same alone or
beside others.
"""

from __future__ import annotations

import logging
import os
import threading

import torch

SOURCE = r"""
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
"""

_lock = threading.Lock()
_kernel: dict = {}


def kernel():
    """The compiled `ragged_attention`, or None where it cannot be built (no compiler, or turned off): decided once
    per process."""
    with _lock:
        if "op" not in _kernel:
            _kernel["op"] = _build() if os.environ.get("PLAYGROUND_RAGGED_KERNEL", "1") != "0" else None
        return _kernel["op"]


def _build():
    try:
        from torch.utils.cpp_extension import load_inline

        module = load_inline("playground_ragged_attention", cpp_sources=SOURCE, functions=["ragged_attention"],
                             extra_cflags=["-O3", "-fno-fast-math", "-ffp-contract=off"], verbose=False)
        return module.ragged_attention
    except Exception as err:  # noqa: BLE001 - no compiler here: the Python loop serves, said once
        logging.getLogger(__name__).warning("the engine's attention kernel could not be built (%s): each row's "
                                            "attention runs as a Python loop", str(err).splitlines()[0][:200])
        return None


def attention(q: torch.Tensor, kv: torch.Tensor, caches: list[torch.Tensor], starts: list[int],
              lengths: list[int]) -> torch.Tensor | None:
    """Every piece's attention (see the module's docstring), or None where the kernel is not built."""
    op = kernel()
    if op is None or q.device.type != "cpu" or q.dtype != torch.float32:
        return None
    return op(q.contiguous(), kv.contiguous(), caches, starts, lengths)
