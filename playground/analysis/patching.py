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

    One plain run of each prompt; then every patched run as a row of one batched pass (analysis/batched.run), each
    row joining at its layer with the corrupted stream entering it. Computed less, never approximated:
    - a cell whose clean activation equals the corrupted one (bit for bit: the positions before the first token
      where the prompts differ, in a causal model) patches nothing, so its run is the corrupted run: 0, not run;
    - in a causal model a patch at position p leaves the positions before it as they were, so the rows compute
      only the positions from the first patched one on, the earlier keys and values those of the corrupted run."""
    L, T = len(blocks(model)), len(clean.ids)
    keys = [(layer, site) for layer in range(L)]
    with fp32_products():
        c, k = batched.trace(model, clean, keys), batched.trace(model, corrupted, keys)
        m_clean, m_corrupted = (float(_metric(run.logits[0], good, bad)) for run in (c, k))
        cells = [(layer, t) for layer in range(L) for t in range(T)
                 if not torch.equal(c.kept[(layer, site)][0, t], k.kept[(layer, site)][0, t])]
        pos0 = min((t for _, t in cells), default=0) if k.kvs is not None else 0   # a BERT reads every position
        groups = []
        for layer in range(L):
            pos = torch.tensor([t for at_layer, t in cells if at_layer == layer], dtype=torch.long)
            if len(pos):
                groups.append(_patched_rows(k, c, layer, site, pos, pos0))
        logits = batched.run(model, corrupted.at, groups, k, pos0, progress)
    out = torch.zeros(L, T)
    if cells:
        where = torch.tensor(cells)
        out[where[:, 0], where[:, 1]] = _metric(logits, good, bad) - m_corrupted
    return out, m_clean, m_corrupted


def _patched_rows(corrupted: batched.Trace, clean: batched.Trace, layer: int, site: str, pos: torch.Tensor,
                  pos0: int) -> batched.Rows:
    """The rows of `layer`, one per position in `pos`: the corrupted stream entering the layer (positions pos0 on),
    row i patched at pos[i] with the clean activation: in the stream itself for the residual, else by an edit in
    the block."""
    n, value = len(pos), clean.kept[(layer, site)][0, pos]
    x = corrupted.streams[layer][:, pos0:].expand(n, -1, -1)
    if site != "resid_pre":
        return batched.Rows(layer, x, [Edit(layer, site, torch.arange(n), value, pos=pos)])
    x = x.clone()
    x[torch.arange(n), pos - pos0] = value
    return batched.Rows(layer, x)


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
