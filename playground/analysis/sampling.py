"""Decoding: turning a causal language model's next-token distributions into text.

Greedy, temperature, top-k (Fan et al. 2018), top-p or nucleus sampling (Holtzman et al. 2020) and
beam search, for every causal LM of the package through one contract (STYLE §2):
`model.step(idx, cache) -> (logits, cache)` with idx (B, T_new) the new tokens only. A GPT's cache
holds every layer's keys and values (the KV cache), a recurrent LM's its hidden state, so each
step costs one new position instead of the whole sequence again.

Sampling is seeded with its own `torch.Generator`: the same seed gives the same text, and no
global random state is touched (the app serves several users at once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn.functional as F

from playground.nets import kernels

TOP_SHOWN = 20  # candidates reported per step (the chart shows them)
TINY_TEMPERATURE = 1e-30  # below it, a temperature is divided in float64 (distribution)


def total(x: torch.Tensor) -> torch.Tensor:
    """The sum of a vector in one fixed order, a running sum. `x.sum()` splits a vocabulary-long vector among
    torch's threads, and its last bits then depend on how many there are (the app sets them by how busy it is): a
    kept token's probability, and so a seeded sample, would change with the load."""
    return torch.cumsum(x, dim=0)[-1]


def top_order(p: torch.Tensor, k: int) -> torch.Tensor:
    """The k most probable ids, most probable first, ties the lower id first: the first k of
    `torch.argsort(p, descending=True, stable=True)` without sorting the whole vocabulary (49,152 values took 3 ms
    a step; a class's batch of 32 rows, a tenth of a second)."""
    if k >= p.numel():
        return torch.argsort(p, descending=True, stable=True)
    ops = kernels.loaded()
    if ops is not None and p.dtype == torch.float32 and p.device.type == "cpu":
        return ops.top_order(p.contiguous(), k)                 # the same ids in one pass (nets/csrc/top.cpp)
    kth = torch.topk(p, k, sorted=False).values.min()       # the k-th largest value
    candidates = (p >= kth).nonzero().squeeze(1)            # every id at or above it, ascending: ties included
    return candidates[torch.argsort(p[candidates], descending=True, stable=True)][:k]


@dataclass
class Distribution:
    """One step's next-token distribution, before and after the decoding rule."""

    probs: torch.Tensor     # (V,) softmax(logits / temperature), what the model proposes
    kept: torch.Tensor      # (V,) the distribution actually sampled from: filtered and renormalised
    n_top_k: int            # tokens left by top-k (V when top-k is off)
    n_top_p: int            # tokens left by top-p after top-k (the nucleus)

    @property
    def entropy(self) -> float:
        """H(p) = -sum p log p in nats, of the proposed distribution."""
        return float(total(torch.special.entr(self.probs)))     # -p log p, 0 where p is 0


def distribution(logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> Distribution:
    """The distribution to sample from, for logits (V,) of one position.

    temperature: p_i = softmax(z_i / tau); tau -> 0 concentrates all mass on the argmax, so 0 means greedy.
    top-k: keep the k most probable tokens (0 or >= V: all).
    top-p: keep the smallest set of most probable tokens whose probabilities sum to at least p
    (after top-k, as transformers does), always at least one token. Then renormalise.
    """
    V = logits.size(-1)
    logits = logits.float()
    ops = kernels.loaded()
    if ops is not None and logits.device.type == "cpu":       # these operations in C++, without Python's lock
        return Distribution(*ops.distribution(logits, float(temperature), int(top_k), float(top_p), TINY_TEMPERATURE))
    if temperature <= 0:  # greedy: the proposal shown is the plain softmax, the choice is its argmax
        probs = F.softmax(logits, dim=-1)
        kept = torch.zeros_like(probs)
        kept[probs.argmax()] = 1.0
        return Distribution(probs, kept, 1, 1)
    # With z_max subtracted first (softmax does not change): the best token's z / tau is then 0 and the others' at
    # most -inf, never inf or nan. In float32 (a third of float64's time: a class's 32 rows draw every step) unless
    # tau is too small for float32 (1e-215 is 0 there), where float64 holds it
    shifted = logits - logits.max()
    probs = (F.softmax(shifted / temperature, dim=-1) if temperature >= TINY_TEMPERATURE
             else F.softmax(shifted.double() / temperature, dim=-1).float())
    k = V if top_k <= 0 or top_k >= V else top_k
    order = top_order(probs, k)                                # ties: the lower id first, reproducibly
    sorted_p = probs[order]                                    # the k kept by top-k (all V without it)
    n_p = k
    if top_p < 1.0:
        renormed = sorted_p / total(sorted_p)
        before = torch.cumsum(renormed, dim=0) - renormed  # mass of the tokens ranked above each one
        n_p = max(1, int((before < top_p).sum()))           # keep a token while the mass above it is < p
        sorted_p[n_p:] = 0.0
    kept = torch.zeros_like(probs)
    kept[order] = sorted_p / total(sorted_p)
    return Distribution(probs, kept, k, n_p)


def full_rule(rule: dict) -> tuple[float, int, float]:
    """A decoding rule's (temperature, top_k, top_p), with `distribution`'s defaults for what it leaves out."""
    return float(rule.get("temperature", 1.0)), int(rule.get("top_k", 0)), float(rule.get("top_p", 1.0))


def draw(kept: torch.Tensor, generator: torch.Generator) -> int:
    """One token drawn from `kept` (V,) by inverting its cumulative distribution: one uniform number u in [0, 1)
    from the generator, and the first id whose running total exceeds u times the total. Exact, and one random
    number a token: `torch.multinomial` draws an exponential number for every id of the vocabulary (1 ms a token for
    SmolLM2's 49,152, a tenth of a second for a class's batch of 32 rows). The running total is in float64, in id
    order, the same sums whatever the batch or the threads; over the ids kept only (adding a zero changes no sum),
    ten of them for top-k 10 rather than the vocabulary."""
    uniform = torch.rand((), generator=generator, dtype=torch.float64)
    ops = kernels.loaded()
    if ops is not None and kept.device.type == "cpu":
        return ops.draw(kept, float(uniform))              # the same operations in C++ (nets/csrc/sample.cpp)
    ids = kept.nonzero().squeeze(1)                       # ascending
    cdf = torch.cumsum(kept[ids], dim=0, dtype=torch.float64)
    u = uniform * cdf[-1]
    # u rounded up to the total: the last id with any probability
    return int(ids[min(int(torch.searchsorted(cdf, u, right=True)), ids.numel() - 1)])


def choose(d: "Distribution", temperature: float, generator: torch.Generator) -> int:
    """The step's token: drawn from the kept distribution, or its argmax when decoding is greedy (temperature 0)."""
    return draw(d.kept, generator) if temperature > 0 else int(d.kept.argmax())


def _generator(seed: int | None) -> torch.Generator:
    """A private random stream: seeded, or from fresh entropy when seed is None (global state untouched)."""
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


def _cache_step(model, idx: torch.Tensor, cache, use_cache: bool, seen: torch.Tensor) -> tuple[torch.Tensor, object]:
    """Logits (B, V) for the next position: from the cache, or by running the whole (cropped) context."""
    if use_cache:
        logits, cache = model.step(idx, cache)
        return logits[:, -1], cache
    context = getattr(getattr(model, "config", None), "n_positions", None)
    window = seen if context is None else seen[:, -context:]  # a GPT sees at most its context
    return model(window)[0][:, -1], None


def step_record(d: Distribution, token: int, cutoffs: bool = True) -> dict:
    """One decoding step as the app reports it: {token, prob, p_model, rank, top: [[token, prob], ...], entropy,
    n_top_k, n_top_p, top_k_cutoff, top_p_cutoff}. `prob` is the chosen token's probability in the
    distribution it was drawn from, `p_model` in the proposed one; `rank` its place in the proposed one (1: the
    most probable); `top` lists the proposed distribution's most probable tokens; the cut-offs are the smallest
    probability still kept by top-k and by top-p (0 with `cutoffs` False: nothing was cut, e.g. a beam).
    The TOP_SHOWN most probable ids in order answer the rank and the cut-offs when they lie among them (a step of a
    class's batch passes over the vocabulary a few times, not a dozen)."""
    probs, p = d.probs, d.probs[token]
    top = top_order(probs, TOP_SHOWN)
    shown = probs[top]

    def nth(n: int) -> float:   # the n-th largest probability
        return float(shown[n - 1]) if n <= top.numel() else float(torch.topk(probs, n, sorted=False).values.min())

    place = (top == token).nonzero()
    # ties: the lower id first, as `distribution` and top_order rank them
    rank = int(place[0, 0]) + 1 if place.numel() else int((probs > p).sum()) + int((probs[:token] == p).sum()) + 1
    return {
        "token": token, "prob": float(d.kept[token]), "p_model": float(p), "rank": rank,
        "top": [list(pair) for pair in zip(top.tolist(), shown.tolist())],
        "entropy": d.entropy, "n_top_k": d.n_top_k, "n_top_p": d.n_top_p,
        "top_k_cutoff": nth(d.n_top_k) if cutoffs else 0.0,
        "top_p_cutoff": nth(d.n_top_p) if cutoffs else 0.0,
    }


@torch.no_grad()
def stream(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int = 0,
           top_p: float = 1.0, seed: int | None = None, use_cache: bool = True,
           stop: frozenset[int] = frozenset(), past: dict | None = None, last: dict | None = None) -> Iterator[dict]:
    """Sample one sequence (idx is (1, T) or (T,)), yielding each step as it is made (`step_record`); a token in
    `stop` (an end-of-turn token) is the last step. `past`: the model's step cache of tokens that come before idx
    (reused as it is: only idx is run); `last`: a dict whose "cache" is the step cache after each step, for a caller
    that goes on from it (it holds every token but the last one sampled)."""
    idx = idx.view(1, -1)
    assert idx.size(1) > 0, "generation needs a prompt of at least one token"
    generator = _generator(seed)
    seen = idx if past is None else torch.cat([past["idx"], idx], dim=1)
    new, cache = idx, past
    for _ in range(max_new_tokens):
        logits, cache = _cache_step(model, new, cache, use_cache, seen)
        if last is not None:
            last["cache"] = cache
        d = distribution(logits[0], temperature, top_k, top_p)
        token = choose(d, temperature, generator)
        yield step_record(d, token)
        if token in stop:
            return
        new = torch.tensor([[token]], dtype=torch.long, device=idx.device)
        seen = torch.cat([seen, new], dim=1)


@torch.no_grad()
def generate(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int = 0,
             top_p: float = 1.0, seed: int | None = None, use_cache: bool = True) -> torch.Tensor:
    """idx (B, T) -> (B, T + max_new_tokens): each row continued by sampling (temperature 0: greedy)."""
    generator = _generator(seed)
    seen, new, cache = idx, idx, None
    for _ in range(max_new_tokens):
        logits, cache = _cache_step(model, new, cache, use_cache, seen)        # (B, V)
        if temperature <= 0:
            new = logits.argmax(dim=-1, keepdim=True)                          # (B, 1)
        else:
            new = torch.tensor([[draw(distribution(row, temperature, top_k, top_p).kept, generator)]
                                for row in logits])                            # (B, 1)
        seen = torch.cat([seen, new], dim=1)
    return seen


def _reorder(model, cache, index: torch.Tensor):
    """The cache of the beams that survive (index into the batch); None makes the next step recompute."""
    reorder = getattr(model, "reorder_cache", None)
    return None if reorder is None or cache is None else reorder(cache, index)


@torch.no_grad()
def beam_search(model, idx: torch.Tensor, max_new_tokens: int, beam_width: int = 4) -> tuple[torch.Tensor, float,
                                                                                              list[tuple]]:
    """Keep the `beam_width` most probable continuations, log p(y) = sum_t log p(y_t | y_<t, x), and
    return the best (1, T + max_new_tokens), its log-probability, and every final beam as (ids, log p).
    There is no end-of-sequence token in a character model, so all beams have the same length and
    need no length normalisation. A model without `reorder_cache` re-reads each beam's prefix."""
    seen = idx.view(1, -1)
    scores = torch.zeros(1)  # (n_beams,) log-probabilities so far
    cache, new = None, seen
    for _ in range(max_new_tokens):
        logits, cache = model.step(new, cache)
        logp = F.log_softmax(logits[:, -1].float(), dim=-1)          # (n_beams, V)
        V = logp.size(-1)
        candidates = (scores[:, None] + logp).view(-1)               # (n_beams * V,)
        scores, flat = candidates.topk(min(beam_width, candidates.numel()))
        beam, token = flat // V, flat % V
        seen = torch.cat([seen[beam], token[:, None]], dim=1)        # (n_beams, T + t)
        cache = _reorder(model, cache, beam)
        new = token[:, None] if cache is not None else seen
    beams = [(seen[i], float(scores[i])) for i in range(seen.size(0))]
    return seen[:1], float(scores[0]), beams


@torch.no_grad()
def beam_steps(model, idx: torch.Tensor, max_new_tokens: int, beam_width: int = 4) -> tuple[list[dict], float,
                                                                                             list[tuple]]:
    """`beam_search`, then the best beam replayed one token at a time: the model's distribution at each
    of its steps as `step_record`s (nothing sampled, so nothing cut). Returns the steps, the best beam's
    log-probability and every final beam as (ids, log p)."""
    idx = idx.view(1, -1)
    best, logp, beams = beam_search(model, idx, max_new_tokens, beam_width)
    steps = []
    logits, cache = model.step(idx)
    for token in best[0, idx.size(1):].tolist():
        p = torch.softmax(logits[0, -1].float(), dim=-1)
        steps.append(step_record(Distribution(p, p, p.numel(), p.numel()), token, cutoffs=False))
        logits, cache = model.step(torch.tensor([[token]]), cache)
    return steps, logp, beams


@torch.no_grad()
def sequence_log_prob(model, idx: torch.Tensor) -> torch.Tensor:
    """log p(x_2..x_T | x_1) of each row of idx (B, T), summed over positions: (B,). Past a GPT's
    context each token is scored as generation saw it, within the sliding window."""
    context = getattr(getattr(model, "config", None), "n_positions", None) or idx.size(1)
    logits, cache = model.step(idx[:, :context])
    pieces = [logits]
    for t in range(context, idx.size(1)):
        logits, cache = model.step(idx[:, t:t + 1], cache)
        pieces.append(logits)
    logits = torch.cat(pieces, dim=1)                        # (B, T, V)
    logp = F.log_softmax(logits[:, :-1].float(), dim=-1)
    return logp.gather(-1, idx[:, 1:, None]).squeeze(-1).sum(dim=1)


@torch.no_grad()
def perplexity(model, idx: torch.Tensor) -> float:
    """exp of the mean negative log-likelihood of each token after the first, for idx (1, T), T >= 2."""
    idx = idx.view(1, -1)
    assert idx.size(1) >= 2, "perplexity needs at least two tokens"
    return math.exp(-float(sequence_log_prob(model, idx)[0]) / (idx.size(1) - 1))
