"""The bench's Causal lab rows (`python -m playground.bench --causal-only` prints only these): the patching grids,
attribution patching, one head ablated and the all-heads sweep, on the app's own models from the registry (SmolLM2
as the app keeps it, half-stored), without the sanity checks (they are asked for separately and cost as much again).
"""

from __future__ import annotations

import torch

from playground.analysis import interventions as iv
from playground.analysis import models, patching
from playground.tools.bench import time_calls

# 32 characters each for our character-level GPT, differing in one word
GPT_PAIR = ("KING HENRY:\nMy lord, the queen i", "KING HENRY:\nMy lord, the thing i", "s", "n")
SMOL_PAIR = patching.DEMOS["Indirect object: Mary or John? (SmolLM2)"][1:]


def _row(name: str, fn, runs: int, budget: float) -> tuple:
    fn()  # warm: the first call of a shape pays for allocations
    median, p95 = time_calls(fn, runs, warmup=0)
    return name, f"{median:.3f} s", f"{p95:.3f} s", f"≤ {budget:g} s", median <= budget


def _last(s: iv.Subject, n: int) -> iv.Subject:
    """The subject's last n tokens (a 12-position grid)."""
    return iv.Subject(s.m, s.ids[-n:], s.tokens[-n:], n - 1, False)


def causal_rows(runs: int = 5) -> list[tuple]:
    gpt = models.get("gpt-shakespeare")
    clean, corrupted, a, b = GPT_PAIR
    layers = gpt.shape.layers
    rows = [_row(f"causal lab: GPT residual patching grid ({layers} layers × 32 positions, exact)",
                 lambda: patching.patch(gpt, clean, corrupted, a, b, attribution=False, sanity=False), runs, 1.0)]
    if models.resolve(models.SMOLLM2) is None:
        return rows
    smol, notices = models.get(models.SMOLLM2), []
    c, k = (_last(iv.read(smol, text, notices), 12) for text in SMOL_PAIR[:2])
    good, bad = (iv.answer_token(smol, w, notices) for w in SMOL_PAIR[2:])
    few = max(1, runs // 2)

    def exact():
        with torch.inference_mode():
            patching.exact_grid(smol.model, c, k, "resid_pre", good, bad)
    rows.append(_row("causal lab: SmolLM2 residual patching grid (30 layers × 12 positions, exact)", exact, few, 10.0))
    rows.append(_row("causal lab: SmolLM2 the same grid by attribution patching",
                     lambda: patching.attribution_grid(smol.model, c, k, "resid_pre", good, bad), runs, 2.0))
    text = SMOL_PAIR[0]
    rows.append(_row("causal lab: SmolLM2 one head ablated (layer 14, head 3, zero)",
                     lambda: iv.ablate(smol, text, "head", 14, 3, "zero", sanity=False), runs, 0.5))
    rows.append(_row("causal lab: SmolLM2 all-heads sweep (270 heads)",
                     lambda: iv.sweep(smol, text, "zero", sanity=False), few, 15.0))
    return rows
