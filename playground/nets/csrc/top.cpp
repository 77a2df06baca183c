// The k most probable ids of a distribution, most probable first and ties the lower id first: the first k of a
// stable descending sort (analysis/sampling.top_order), in one pass that keeps the k best seen so far.
#include <torch/extension.h>
#include <algorithm>
#include <vector>

static torch::Tensor top_order_ids(const torch::Tensor& p, int64_t k) {
  // p (V,) float32 contiguous, 0 < k < V
  const float* P = p.data_ptr<float>();
  const int64_t V = p.numel();
  using Entry = std::pair<float, int64_t>;
  // "a before b": the larger value, or the same value and the lower id
  auto before = [](const Entry& a, const Entry& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::vector<Entry> best;                 // a heap whose top is the worst of the k kept
  best.reserve(k);
  for (int64_t i = 0; i < V; ++i) {
    if (static_cast<int64_t>(best.size()) < k) {
      best.emplace_back(P[i], i);
      std::push_heap(best.begin(), best.end(), before);
    } else if (P[i] > best.front().first) {  // ids come in ascending order: an equal value never displaces one kept
      std::pop_heap(best.begin(), best.end(), before);
      best.back() = {P[i], i};
      std::push_heap(best.begin(), best.end(), before);
    }
  }
  std::sort(best.begin(), best.end(), before);
  auto out = torch::empty({k}, p.options().dtype(torch::kLong));
  int64_t* O = out.data_ptr<int64_t>();
  for (int64_t j = 0; j < k; ++j) O[j] = best[j].second;
  return out;
}

torch::Tensor top_order(torch::Tensor p, int64_t k) {
  pybind11::gil_scoped_release free;     // the work touches no Python object: other threads run meanwhile
  return top_order_ids(p, k);
}
