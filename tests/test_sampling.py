"""Decoding rules: top-k and top-p keep exactly the right tokens and renormalise; temperature -> 0
is greedy; the KV cache changes nothing; seeds reproduce; beam search beats greedy where greedy is
myopic; and one `generate` serves any model with `step`."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn as nn

from playground.analysis import sampling
from playground.nets.gpt import GPT, GPTConfig

LOGITS = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, 3.0])  # probabilities in order: 5, 0, 1, 2, 3, 4


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=17, n_positions=24, n_layer=2, n_head=2, n_embd=16)).eval()
    with torch.no_grad():  # sharpen the random model so that sampling has structure to follow
        model.transformer.wte.weight.mul_(20)
    return model


def prompt():
    return torch.tensor([[1, 5, 2, 7]])


def test_top_k_keeps_exactly_k_and_renormalises():
    d = sampling.distribution(LOGITS, top_k=3)
    assert set(torch.nonzero(d.kept).flatten().tolist()) == {5, 0, 1}
    p = torch.softmax(LOGITS, -1)
    torch.testing.assert_close(d.kept[[5, 0, 1]], p[[5, 0, 1]] / p[[5, 0, 1]].sum())
    assert d.n_top_k == 3
    assert sampling.distribution(LOGITS, top_k=100).n_top_k == 6  # larger than the vocabulary: all


def test_top_p_keeps_the_smallest_set_reaching_p():
    p = torch.softmax(LOGITS, -1)
    ranked = [5, 0, 1, 2, 3, 4]
    cumulative = torch.cumsum(p[ranked], 0)
    for top_p in (0.01, 0.5, float(cumulative[1]) + 1e-4, 0.9, 0.999):
        d = sampling.distribution(LOGITS, top_p=top_p)
        n = int((cumulative < top_p).sum()) + 1  # first prefix whose mass reaches p
        assert set(torch.nonzero(d.kept).flatten().tolist()) == set(ranked[:n]), top_p
        torch.testing.assert_close(d.kept.sum(), torch.tensor(1.0))
        assert d.n_top_p == n


def test_top_k_then_top_p_and_temperature():
    d = sampling.distribution(LOGITS, temperature=0.5, top_k=4, top_p=0.9)
    q = torch.softmax(LOGITS / 0.5, -1)[[5, 0, 1, 2]]
    q = q / q.sum()
    n = int((torch.cumsum(q, 0) < 0.9).sum()) + 1
    torch.testing.assert_close(d.kept[[5, 0, 1, 2][:n]], q[:n] / q[:n].sum())
    torch.testing.assert_close(d.probs, torch.softmax(LOGITS / 0.5, -1))
    assert math.isclose(d.entropy, float(-(d.probs * d.probs.log()).sum()), rel_tol=1e-6)


def test_temperature_to_zero_is_greedy(gpt):
    greedy = sampling.generate(gpt, prompt(), 12, temperature=0)
    cold = sampling.generate(gpt, prompt(), 12, temperature=1e-4, seed=3)
    assert torch.equal(greedy, cold)
    steps = list(sampling.stream(gpt, prompt(), 12, temperature=0))
    assert [s["token"] for s in steps] == greedy[0, 4:].tolist()
    assert all(s["prob"] == 1.0 and s["token"] == s["top"][0][0] for s in steps)


def test_kv_cache_equals_no_cache_past_the_context(gpt):
    n = 30  # past the 24-position context, so the sliding window is exercised too
    for kwargs in ({"temperature": 0}, {"temperature": 0.9, "top_k": 8, "top_p": 0.95, "seed": 5}):
        with_cache = sampling.generate(gpt, prompt(), n, use_cache=True, **kwargs)
        without = sampling.generate(gpt, prompt(), n, use_cache=False, **kwargs)
        assert torch.equal(with_cache, without), kwargs
        streamed = [s["token"] for s in sampling.stream(gpt, prompt(), n, use_cache=False, **kwargs)]
        assert streamed == with_cache[0, 4:].tolist()


def test_a_stream_goes_on_from_a_cropped_cache_as_from_its_whole_prompt(gpt):
    """`past`: a step cache of the prompt's start (crop_cache of a longer one, as a conversation's next turn uses
    it) runs only the rest; `last` hands back the cache, every token but the last sampled one."""
    whole = [s["prob"] for s in sampling.stream(gpt, prompt(), 8, temperature=0.9, seed=4)]
    last: dict = {}
    longer = list(sampling.stream(gpt, prompt(), 3, temperature=0, last=last))
    assert last["cache"]["idx"].tolist() == [prompt()[0].tolist() + [s["token"] for s in longer[:-1]]]
    past = gpt.crop_cache(last["cache"], 2)
    assert past["idx"].tolist() == [[1, 5]] and all(k.size(2) == 2 for k, _ in past["kv"])
    resumed = [s["prob"] for s in sampling.stream(gpt, prompt()[:, 2:], 8, temperature=0.9, seed=4, past=past)]
    assert resumed == pytest.approx(whole, abs=1e-6)


def test_seeds_reproduce_and_differ(gpt):
    a = sampling.generate(gpt, prompt(), 20, temperature=1.5, seed=1)
    b = sampling.generate(gpt, prompt(), 20, temperature=1.5, seed=1)
    c = sampling.generate(gpt, prompt(), 20, temperature=1.5, seed=2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    state = torch.get_rng_state()
    sampling.generate(gpt, prompt(), 3, seed=None)
    assert torch.equal(state, torch.get_rng_state())  # the global random state is never touched


def test_stream_reports_each_step(gpt):
    steps = list(sampling.stream(gpt, prompt(), 5, temperature=0.8, top_k=5, top_p=0.9, seed=0))
    assert len(steps) == 5
    for s in steps:
        probs = [p for _, p in s["top"]]
        assert probs == sorted(probs, reverse=True) and len(s["top"]) == min(sampling.TOP_SHOWN, 17)
        assert s["n_top_k"] == 5 and 1 <= s["n_top_p"] <= 5
        assert s["top_p_cutoff"] >= s["top_k_cutoff"] > 0
        assert 0 < s["prob"] <= 1 and 0 <= s["entropy"] <= math.log(17)


class Bigram(nn.Module):
    """A toy causal LM with `step`: the next token depends on the last only. From token 0, going to 1
    looks best (0.6) but leads to a flat distribution; going to 2 (0.4) leads to a sure thing."""

    def __init__(self):
        super().__init__()
        p = torch.full((4, 4), 0.25)
        p[0] = torch.tensor([0.0, 0.6, 0.4, 0.0])
        p[2] = torch.tensor([0.0, 0.0, 0.0, 1.0])
        p[3] = torch.tensor([0.0, 0.0, 0.0, 1.0])
        self.register_buffer("logp", p.clamp_min(1e-9).log())

    def forward(self, idx, targets=None):
        return self.logp[idx], None

    def step(self, idx, cache=None):
        return self.logp[idx], None


def test_beam_search_beats_greedy_and_matches_exhaustive_search():
    toy = Bigram()
    start = torch.tensor([[0]])
    greedy = sampling.generate(toy, start, 3, temperature=0)
    best, logp, beams = sampling.beam_search(toy, start, 3, beam_width=2)
    greedy_logp = float(sampling.sequence_log_prob(toy, greedy)[0])
    assert greedy[0].tolist() == [0, 1, 0, 1]                       # myopic: 0.6 * 0.25 * 0.6
    assert best[0].tolist() == [0, 2, 3, 3] and logp > greedy_logp  # 0.4 * 1 * 1
    assert math.isclose(logp, float(sampling.sequence_log_prob(toy, best)[0]), abs_tol=1e-5)
    exhaustive = max(float(sampling.sequence_log_prob(toy, torch.tensor([[0, *rest]]))[0])
                     for rest in itertools.product(range(4), repeat=3))
    assert math.isclose(logp, exhaustive, abs_tol=1e-5)
    assert len(beams) == 2


def test_beam_search_with_the_kv_cache_equals_without(gpt):
    best, logp, _ = sampling.beam_search(gpt, prompt(), 8, beam_width=3)
    greedy = sampling.generate(gpt, prompt(), 8, temperature=0)
    assert logp >= float(sampling.sequence_log_prob(gpt, greedy)[0]) - 1e-5

    class NoReorder(nn.Module):  # the same GPT, but beam search must recompute every prefix
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def step(self, idx, cache=None):
            return self.inner.step(idx, cache)

    best2, logp2, _ = sampling.beam_search(NoReorder(gpt), prompt(), 8, beam_width=3)
    assert torch.equal(best, best2) and math.isclose(logp, logp2, abs_tol=1e-4)


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    class Uniform(nn.Module):
        def step(self, idx, cache=None):
            return torch.zeros(*idx.shape, 7), None

    assert math.isclose(sampling.perplexity(Uniform(), torch.tensor([[1, 2, 3, 4]])), 7.0, rel_tol=1e-6)


def test_figures_of_a_step_draw_the_cutoffs_and_escape_text(gpt):
    from playground.figures import generation as fgen

    steps = list(sampling.stream(gpt, prompt(), 3, temperature=1.0, top_k=4, top_p=0.5, seed=0))
    named = [{**s, "token": "<b>", "top": [[f"t{i}", p] for i, p in s["top"]]} for s in steps]
    fig = fgen.next_token_figure(named[0], 0, ("top-k", "top-p"))
    assert len(fig.data) == 1 and len(fig.data[0].y) == min(sampling.TOP_SHOWN, 17)
    assert sorted(shape.x0 for shape in fig.layout.shapes) == sorted([3.5, steps[0]["n_top_p"] - 0.5])
    assert not fgen.next_token_figure(named[0], 0, ()).layout.shapes  # greedy: no cut-offs drawn
    page = fgen.generated_html("a<i>", named, selected=1)
    assert "<b>" not in page and "&lt;b&gt;" in page and "a&lt;i&gt;" in page
    assert page.count('class="gen-tok') == 3 and 'class="gen-tok sel" data-step="1"' in page


def test_a_tiny_temperature_is_greedy_not_nan():
    """Found by the fuzz test: z / 2.8e-215 overflowed to inf, and the probabilities became NaN."""
    logits = torch.tensor([1.0, 3.0, 2.0, 3.0 - 1e-3])
    for tau in (2.8e-215, 1e-30, 1e-6):
        d = sampling.distribution(logits, temperature=tau)
        assert torch.isfinite(d.kept).all() and d.kept.argmax() == 1 and d.kept[1] == pytest.approx(1.0)


def test_a_distribution_is_the_same_whatever_the_thread_count():
    """A vocabulary-long step (49,152 tokens, SmolLM2's) kept and its entropy bit for bit with 1 thread and with 2:
    `sum()` would split it among the threads, and a seeded sample would then move with the server's load."""
    torch.manual_seed(0)
    logits = torch.randn(49_152) * 4
    before = torch.get_num_threads()
    try:
        seen = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            d = sampling.distribution(logits, temperature=0.9, top_k=0, top_p=0.95)
            seen.append((d.kept, d.entropy, d.n_top_p))
    finally:
        torch.set_num_threads(before)
    (kept1, h1, n1), (kept2, h2, n2) = seen
    assert torch.equal(kept1, kept2) and h1 == h2 and n1 == n2
    assert sampling.total(kept1).item() == pytest.approx(1.0, abs=1e-5)


def test_a_draw_follows_the_distribution_and_never_picks_a_dropped_token():
    """sampling.draw inverts the cumulative distribution: over many seeded draws each kept token comes as often as
    its probability says (chi-square, 5 degrees of freedom, far below its 0.1% critical value 20.5), a token of
    probability 0 never, and a draw is one random number (the generator moves by one uniform per token)."""
    kept = torch.zeros(1000)
    p = torch.tensor([0.4, 0.25, 0.15, 0.1, 0.07, 0.03])
    ids = torch.tensor([3, 17, 500, 501, 998, 999])
    kept[ids] = p
    g = torch.Generator().manual_seed(0)
    n = 20_000
    draws = torch.tensor([sampling.draw(kept, g) for _ in range(n)])
    assert set(draws.tolist()) <= set(ids.tolist())
    counts = torch.stack([(draws == i).sum() for i in ids]).double()
    chi2 = float(((counts - n * p.double()) ** 2 / (n * p.double())).sum())
    assert chi2 < 20.5, chi2
    a, b = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    sampling.draw(kept, a)
    torch.rand((), generator=b, dtype=torch.float64)
    assert torch.rand(1, generator=a) == torch.rand(1, generator=b)


def test_a_draw_at_the_very_top_of_the_cumulative_distribution_takes_the_last_kept_token():
    """A uniform number that rounds up to the total (u * total == total) still lands on a token with probability."""
    kept = torch.zeros(10)
    kept[[2, 6]] = torch.tensor([0.5, 0.5])

    cdf = torch.cumsum(kept, 0, dtype=torch.float64)
    assert int(torch.searchsorted(cdf, cdf[-1], right=True)) == 10   # what the guard is for
    original = torch.rand
    try:
        torch.rand = lambda *a, **k: torch.tensor(1.0, dtype=torch.float64)  # noqa: E731 - u times total is the total
        assert sampling.draw(kept, torch.Generator()) == 6
    finally:
        torch.rand = original
