"""Activation patching: which activations carry the answer from a clean prompt into a corrupted one.

Two prompts of the same length differ in a word ("The Eiffel Tower is in the city of" / "The Colosseum is in the
city of"); the metric is the logit difference between two answers (" Paris" − " Rome") at the predicting position.
*Exact* patching (Meng et al. 2022's causal tracing, Wang et al. 2023) runs the corrupted prompt again with one
activation, at one layer and one position, taken from the clean run, and measures how much of the clean metric
comes back, normalised so that 0 is the corrupted run and 1 the clean one:

    effect(l, t) = (m(corrupted with h_l,t from clean) − m(corrupted)) / (m(clean) − m(corrupted))

*Attribution* patching (Nanda 2023; Syed et al. 2023) approximates every cell at once, to first order, from one
forward and one backward pass of the corrupted prompt:

    effect(l, t) ≈ ∂m/∂h_l,t |corrupted · (h_l,t^clean − h_l,t^corrupted) / (m(clean) − m(corrupted))

Where the two disagree the model is far from linear between the two prompts: the agreement (their correlation) is
reported beside them. The sites: the residual stream entering each block ("resid"), or each block's attention or
MLP output ("attn", "mlp"). A sanity check comes with each grid: the same experiment on two clean prompts (every
cell must be 0) and on the model with re-initialised weights.
"""

from __future__ import annotations

from typing import Callable

import torch

from playground.analysis import batched
from playground.analysis.interventions import (REINIT_SEED, Edit, InterventionError, Subject, answer_token, blocks,
                                               cache, hooked, read, reinitialised)
from playground.nets.llama import fp32_products

SITES = {"resid": "resid_pre", "attn": "attn_out", "mlp": "mlp_out"}
# The lecture's pairs, one click away; each has a clear clean-vs-corrupted margin on the shipped models
# (tests/test_interventions.py checks it): (model, clean, corrupted, answer, other answer)
DEMOS = {
    "Eiffel Tower → Paris (SmolLM2)": ("smollm2-135m-instruct", "The Eiffel Tower is in the city of",
                                       "The Colosseum is in the city of", "Paris", "Rome"),
    "Indirect object: Mary or John? (SmolLM2)": (
        "smollm2-135m-instruct", "When Mary and John went to the store, John gave a drink to",
        "When Mary and John went to the store, Mary gave a drink to", "Mary", "John"),
    "quee·n or thin·g? (our GPT)": ("gpt-shakespeare", "KING HENRY:\nMy lord, the quee",
                                    "KING HENRY:\nMy lord, the thin", "n", "g"),
    "My lov·e or My lor·d? (our GPT)": ("gpt-shakespeare", "O, speak again, bright angel! My lov",
                                        "O, speak again, bright angel! My lor", "e", "d"),
    # a masked LM's grid: where does he / she reach the [MASK]? (every position is read both ways; the pronoun stays
    # at its own position through every block, and layer 5's attention carries it to the [MASK])
    "He lost his / She lost her (MiniLM, masked)": (
        "minilm-mlm", "He lost [MASK] keys yesterday.", "She lost [MASK] keys yesterday.", "his", "her"),
}
TINY = 1e-6         # |m(clean) − m(corrupted)| below this: the normalisation is 0/0


def aligned(clean: Subject, corrupted: Subject) -> None:
    """Patching pairs positions one to one: the prompts must have as many tokens (and, for a masked LM, the [MASK]
    at the same place). Otherwise a message that names the tokens where they part."""
    if len(clean.ids) == len(corrupted.ids) and clean.at == corrupted.at:
        return
    where = next((t for t, (a, b) in enumerate(zip(clean.ids, corrupted.ids)) if a != b),
                 min(len(clean.ids), len(corrupted.ids)))
    shown = [" | ".join(s.tokens[where:where + 4]) or "(end)" for s in (clean, corrupted)]
    if len(clean.ids) != len(corrupted.ids):
        raise InterventionError(
            f"the clean prompt has {len(clean.ids)} tokens and the corrupted one {len(corrupted.ids)}: patching pairs "
            f"positions one to one, so they must have as many. They part at token {where}: clean '{shown[0]}', "
            f"corrupted '{shown[1]}'. Change words for words of as many tokens.")
    raise InterventionError(f"the [MASK] is at token {clean.at} of the clean prompt and {corrupted.at} of the "
                            "corrupted one: put it at the same place")


def _metric(logits: torch.Tensor, good: int, bad: int) -> torch.Tensor:
    return logits[..., good] - logits[..., bad]


def exact_grid(model, clean: Subject, corrupted: Subject, site: str, good: int, bad: int,
               progress: Callable[[float, str], None] | None = None) -> tuple[torch.Tensor, float, float]:
    """m(corrupted with (layer, position) patched from clean) − m(corrupted) for every layer and position,
    (L, T); and m(clean), m(corrupted).

    One plain run of each prompt; then every patched run as a row of a batched pass (analysis/batched.run), each
    row joining at its layer with the corrupted stream entering it. Computed less, never approximated:
    - a cell whose clean activation equals the corrupted one (bit for bit: the positions before the first token
      where the prompts differ, in a causal model) patches nothing, so its run is the corrupted run: 0, not run;
    - in a causal model a patch at position p leaves the positions before it as they were, so a row computes only
      the positions from p on (from its band's first position: `bands`), the earlier keys and values those of the
      corrupted run."""
    L, T = len(blocks(model)), len(clean.ids)
    keys = [(layer, site) for layer in range(L)]
    pair = torch.tensor([good, bad])                  # the metric's two logits are all the output layer computes
    with fp32_products():
        c, k = batched.trace(model, clean, keys, pair), batched.trace(model, corrupted, keys, pair)
        m_clean, m_corrupted = (float(run.logits[0, 0] - run.logits[0, 1]) for run in (c, k))
        cells = [(layer, t) for layer in range(L) for t in range(T)
                 if not torch.equal(c.kept[(layer, site)][0, t], k.kept[(layer, site)][0, t])]
        groups, order = [], []
        for pos0, band in bands(cells, L, T, causal=k.kvs is not None):
            for layer in range(L):
                pos = [t for at_layer, t in band if at_layer == layer]
                if pos:
                    groups.append(_patched_rows(k, c, layer, site, torch.tensor(pos), pos0))
                    order += [(layer, t) for t in pos]
        logits = batched.run(model, corrupted.at, groups, k, progress, pair)
    out = torch.zeros(L, T)
    if order:
        where = torch.tensor(order)
        out[where[:, 0], where[:, 1]] = (logits[:, 0] - logits[:, 1]) - m_corrupted
    return out, m_clean, m_corrupted


CALL_COST = 32      # a block call costs about as much as 32 more positions through it (SmolLM2 on a 2-core CPU)


def bands(cells: list[tuple[int, int]], L: int, T: int, causal: bool = True) -> list[tuple[int, list]]:
    """The cells (layer, position) cut into bands of positions, each (pos0, its cells), a batched pass or more
    each, whose rows compute the positions pos0 .. T − 1. One band from the first position wastes the positions
    before each row's own; one band per position makes L block calls each: the cut minimises positions × blocks
    run, plus CALL_COST per block call (dynamic programming over the positions, in order). A BERT: one band from 0."""
    if not causal or not cells:
        return [(0, cells)] if cells else []
    starts = sorted({t for _, t in cells})
    work = {p: sum(L - layer for layer, t in cells if t == p) for p in starts}       # blocks run, per position
    first = {p: min(layer for layer, t in cells if t == p) for p in starts}
    best, cut = [0.0] + [float("inf")] * len(starts), [0] * (len(starts) + 1)
    for j in range(1, len(starts) + 1):
        for i in range(j):                                 # a band of starts[i:j], its rows from starts[i]
            band = starts[i:j]
            cost = (T - band[0]) * sum(work[p] for p in band) + CALL_COST * (L - min(first[p] for p in band))
            if best[i] + cost < best[j]:
                best[j], cut[j] = best[i] + cost, i
    out, j = [], len(starts)
    while j:
        i = cut[j]
        out.append((starts[i], [cell for cell in cells if starts[i] <= cell[1] <= starts[j - 1]]))
        j = i
    return out[::-1]


def _patched_rows(corrupted: batched.Trace, clean: batched.Trace, layer: int, site: str, pos: torch.Tensor,
                  pos0: int) -> batched.Rows:
    """The rows of `layer`, one per position in `pos`: the corrupted stream entering the layer (positions pos0 on),
    row i patched at pos[i] with the clean activation: in the stream itself for the residual, else by an edit in
    the block."""
    n, value = len(pos), clean.kept[(layer, site)][0, pos]
    x = corrupted.streams[layer][:, pos0:].expand(n, -1, -1)
    if site != "resid_pre":
        return batched.Rows(layer, x, [Edit(layer, site, torch.arange(n), value, pos=pos)], pos0)
    x = x.clone()
    x[torch.arange(n), pos - pos0] = value
    return batched.Rows(layer, x, [], pos0)


def attribution_grid(model, clean: Subject, corrupted: Subject, site: str, good: int, bad: int) -> torch.Tensor:
    """∂m/∂h at the corrupted run · (h_clean − h_corrupted), summed over the width, for every layer and position,
    (L, T): one clean forward, one corrupted forward and one backward. The gradient is taken through a zero
    added at every site (d m / d δ = d m / d h there), so that no weight needs a gradient."""
    L = len(blocks(model))
    keys = [(layer, site) for layer in range(L)]
    with torch.inference_mode():
        _, clean_acts = cache(model, lambda: clean.predict(model), keys)
    deltas, corrupt_acts = {}, {}

    def nudge(key):
        def fn(out):
            corrupt_acts[key] = out.detach()
            deltas[key] = torch.zeros_like(out, requires_grad=True)
            return out + deltas[key]
        return fn

    with torch.inference_mode(False), torch.enable_grad():
        with hooked(model, {key: nudge(key) for key in keys}):
            metric = _metric(corrupted.predict(model)[0], good, bad)
        grads = torch.autograd.grad(metric, [deltas[key] for key in keys])
    rows = [(g[0] * (clean_acts[key][0] - corrupt_acts[key][0])).sum(-1) for g, key in zip(grads, keys)]
    return torch.stack(rows).detach()                               # (L, T)


def correlation(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """Pearson's r of two grids, None when either is constant (r is 0/0)."""
    a, b = a.flatten().double(), b.flatten().double()
    a, b = a - a.mean(), b - b.mean()
    scale = float(a.norm() * b.norm())
    return None if scale < 1e-12 else float((a @ b) / scale)


def _normalised(grid: torch.Tensor, m_clean: float, m_corrupted: float) -> list | None:
    gap = m_clean - m_corrupted
    return None if abs(gap) < TINY else (grid / gap).tolist()


def _sanity(model, clean: Subject, corrupted: Subject, site: str, good: int, bad: int) -> dict:
    """The same grid for two clean prompts (every cell is 0: there is nothing to restore) and on the model with
    re-initialised weights (its clean-vs-corrupted margin and normalised grid: noise, whatever it looks like)."""
    same, *_ = exact_grid(model, clean, clean, site, good, bad)
    twin = reinitialised(model)
    grid, m_clean, m_corrupted = exact_grid(twin, clean, corrupted, site, good, bad)
    return {"clean_clean_max_abs": float(same.abs().max()),
            "reinit": {"model": f"re-initialised weights (seed {REINIT_SEED})", "metric_clean": m_clean,
                       "metric_corrupted": m_corrupted, "normalised": _normalised(grid, m_clean, m_corrupted),
                       "raw": grid.tolist()}}


def patch(m, clean: str, corrupted: str, answer: str, other: str, site: str = "resid", attribution: bool = True,
          sanity: bool = True, progress: Callable[[float, str], None] | None = None) -> dict:
    """The patching grid of `site` ("resid", "attn" or "mlp") for the metric logit(answer) − logit(other), exact and
    (with `attribution`) by attribution patching, with their agreement; the sanity checks (`_sanity`)."""
    notices: list[str] = []
    if site not in SITES:
        raise InterventionError(f"the site is one of {', '.join(SITES)}, not {site!r}")
    c = read(m, clean, notices, "the clean prompt")
    k = read(m, corrupted, notices, "the corrupted prompt")
    aligned(c, k)
    good, bad = answer_token(m, answer, notices, clean), answer_token(m, other, notices, clean)
    if good == bad:
        raise InterventionError("the two answers are the same token: the metric logit(a) − logit(b) would be 0")
    point = SITES[site]
    with torch.inference_mode():
        grid, m_clean, m_corrupted = exact_grid(m.model, c, k, point, good, bad, progress)
    if abs(m_clean - m_corrupted) < TINY:
        notices.append(f"the clean and corrupted prompts give the same metric ({m_clean:.4g}): the normalised effect "
                       "is 0/0 and is not shown; the raw changes are")
    data = {"model": m.name, "site": site, "clean_tokens": c.tokens, "corrupted_tokens": k.tokens, "position": c.at,
            "answer": {"text": answer, "id": good}, "other": {"text": other, "id": bad},
            "layers": grid.shape[0], "metric_clean": m_clean, "metric_corrupted": m_corrupted,
            "exact": {"normalised": _normalised(grid, m_clean, m_corrupted), "raw": grid.tolist()}}
    if attribution:
        approx = attribution_grid(m.model, c, k, point, good, bad)
        data["attribution"] = {"normalised": _normalised(approx, m_clean, m_corrupted), "raw": approx.tolist()}
        data["agreement"] = correlation(grid, approx)
    if sanity:
        with torch.inference_mode():
            data["sanity"] = _sanity(m.model, c, k, point, good, bad)
    data["notices"] = notices
    return data
