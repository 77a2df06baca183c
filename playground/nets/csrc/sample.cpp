// analysis/sampling.distribution and draw in ATen's own operations, the very kernels the Python calls, so the same
// bits; for the rows of an engine's step at once without Python's lock (each row's dozen operations waited for
// the lock behind a class's reader threads: half a millisecond a row in a batch of 32, a quarter alone).
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

struct Kept {
  torch::Tensor probs, kept;
  int64_t n_top_k, n_top_p;
};

static torch::Tensor total(const torch::Tensor& x) { return at::cumsum(x, 0).index({-1}); }  // sampling.total

static Kept distribution_row(const torch::Tensor& logits, double temperature, int64_t top_k, double top_p,
                             double tiny) {
  const int64_t V = logits.size(0);
  if (temperature <= 0) {                // greedy
    auto probs = at::softmax(logits, -1);
    auto kept = at::zeros_like(probs);
    kept.index_put_({probs.argmax()}, 1.0);
    return {probs, kept, 1, 1};
  }
  auto shifted = logits - logits.max();
  auto probs = temperature >= tiny ? at::softmax(shifted / temperature, -1)
                                   : at::softmax(shifted.to(at::kDouble) / temperature, -1).to(at::kFloat);
  const int64_t k = top_k <= 0 || top_k >= V ? V : top_k;
  auto order = k >= V ? at::argsort(probs, /*stable=*/true, /*dim=*/-1, /*descending=*/true)
                      : top_order_ids(probs.contiguous(), k);
  auto sorted_p = probs.index({order});
  int64_t n_p = k;
  if (top_p < 1.0) {
    auto renormed = sorted_p / total(sorted_p);
    auto before = at::cumsum(renormed, 0) - renormed;
    n_p = std::max<int64_t>(1, (before < top_p).sum().item<int64_t>());
    sorted_p.slice(0, n_p).fill_(0.0);
  }
  auto kept = at::zeros_like(probs);
  kept.index_put_({order}, sorted_p / total(sorted_p));
  return {probs, kept, k, n_p};
}

static int64_t draw_row(const torch::Tensor& kept, double uniform) {
  auto ids = kept.nonzero().squeeze(1);
  auto cdf = at::cumsum(kept.index({ids}), 0, at::kDouble);
  auto u = at::scalar_tensor(uniform, cdf.options()) * cdf.index({-1});
  const int64_t at = at::searchsorted(cdf, u, /*out_int32=*/false, /*right=*/true).item<int64_t>();
  return ids.index({std::min<int64_t>(at, ids.numel() - 1)}).item<int64_t>();
}

std::tuple<torch::Tensor, torch::Tensor, int64_t, int64_t> distribution(torch::Tensor logits, double temperature,
                                                                          int64_t top_k, double top_p, double tiny) {
  pybind11::gil_scoped_release free;     // the work touches no Python object: other threads run meanwhile
  auto d = distribution_row(logits, temperature, top_k, top_p, tiny);
  return {d.probs, d.kept, d.n_top_k, d.n_top_p};
}

int64_t draw(torch::Tensor kept, double uniform) {
  pybind11::gil_scoped_release free;
  return draw_row(kept, uniform);
}

std::tuple<std::vector<torch::Tensor>, std::vector<torch::Tensor>, std::vector<int64_t>, std::vector<int64_t>,
           std::vector<int64_t>>
sample_rows(torch::Tensor logits, std::vector<double> temperatures, std::vector<int64_t> top_ks,
            std::vector<double> top_ps, std::vector<double> uniforms, double tiny) {
  // logits (R, V) float32; a row's uniform number is drawn from its own generator (NaN for a greedy row)
  pybind11::gil_scoped_release free;
  const int64_t R = logits.size(0);
  std::vector<torch::Tensor> probs(R), kept(R);
  std::vector<int64_t> n_top_k(R), n_top_p(R), tokens(R);
  for (int64_t r = 0; r < R; ++r) {
    auto d = distribution_row(logits[r], temperatures[r], top_ks[r], top_ps[r], tiny);
    probs[r] = d.probs, kept[r] = d.kept, n_top_k[r] = d.n_top_k, n_top_p[r] = d.n_top_p;
    tokens[r] = temperatures[r] > 0 ? draw_row(d.kept, uniforms[r]) : d.kept.argmax().item<int64_t>();
  }
  return {probs, kept, n_top_k, n_top_p, tokens};
}
