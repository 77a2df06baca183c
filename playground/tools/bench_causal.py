"""The bench's Causal lab rows (`python -m playground.bench --causal-only` prints only these): the patching grids,
attribution patching, one head ablated and the all-heads sweep, on the app's own models from the registry (SmolLM2
as the app keeps it, half-stored), without the sanity checks (they are asked for separately and cost as much again).
Each row has a second one: the CPU seconds of the process (every thread) per call, the figure that still means
something on a shared machine, where the wall time mostly measures the other processes.

The SmolLM2 grid is measured twice: on the lecture's indirect-object pair (its last 12 tokens, which part at the
eighth: the cells before it patch nothing and are not run), and on the same pair with the first token changed too,
where every one of the 360 cells is a run (the worst case a 12-token grid can be).
"""

from __future__ import annotations

import statistics
import time

import torch

from playground.analysis import interventions as iv
from playground.analysis import models, patching
from playground.tools.bench import time_calls

# 32 characters each for our character-level GPT, differing in one word
GPT_PAIR = ("KING HENRY:\nMy lord, the queen i", "KING HENRY:\nMy lord, the thing i", "s", "n")
SMOL_PAIR = patching.DEMOS["Indirect object: Mary or John? (SmolLM2)"][1:]


def _row(name: str, fn, runs: int, budget: float) -> list[tuple]:
    fn()  # warm: the first call of a shape pays for allocations
    cpu = []

    def call():
        started = time.process_time()
        fn()
        cpu.append(time.process_time() - started)

    median, p95 = time_calls(call, runs, warmup=0)
    return [(name, f"{median:.3f} s", f"{p95:.3f} s", f"≤ {budget:g} s", median <= budget),
            ("  the same: CPU time of the process (every thread) per call", f"{statistics.median(cpu):.3f} s", "", "",
             None)]


def _last(s: iv.Subject, n: int) -> iv.Subject:
    """The subject's last n tokens (a 12-position grid)."""
    return iv.Subject(s.m, s.ids[-n:], s.tokens[-n:], n - 1, False)


def causal_rows(runs: int = 5) -> list[tuple]:
    gpt = models.get("gpt-shakespeare")
    clean, corrupted, a, b = GPT_PAIR
    layers = gpt.shape.layers
    rows = _row(f"causal lab: GPT residual patching grid ({layers} layers × 32 positions, exact)",
                lambda: patching.patch(gpt, clean, corrupted, a, b, attribution=False, sanity=False), runs, 1.0)
    if models.resolve(models.SMOLLM2) is None:
        return rows
    smol, notices = models.get(models.SMOLLM2), []
    c, k = (_last(iv.read(smol, text, notices), 12) for text in SMOL_PAIR[:2])
    good, bad = (iv.answer_token(smol, w, notices) for w in SMOL_PAIR[2:])
    few = max(1, runs // 2)

    def exact(corrupted: iv.Subject):
        def grid():
            with torch.inference_mode():
                patching.exact_grid(smol.model, c, corrupted, "resid_pre", good, bad)
        return grid
    rows += _row("causal lab: SmolLM2 residual patching grid (30 layers × 12 positions, exact)", exact(k), few, 10.0)
    k0 = iv.Subject(smol, [c.ids[0] + 1, *k.ids[1:]], k.tokens, k.at, False)      # the first token changed too
    rows += _row("causal lab: SmolLM2 the same grid, the prompts parting at the first token (360 runs)", exact(k0),
                 few, 10.0)
    rows += _row("causal lab: SmolLM2 the same grid by attribution patching",
                 lambda: patching.attribution_grid(smol.model, c, k, "resid_pre", good, bad), runs, 2.0)
    text = SMOL_PAIR[0]
    rows += _row("causal lab: SmolLM2 one head ablated (layer 14, head 3, zero)",
                 lambda: iv.ablate(smol, text, "head", 14, 3, "zero", sanity=False), runs, 0.5)
    rows += _row("causal lab: SmolLM2 all-heads sweep (270 heads)",
                 lambda: iv.sweep(smol, text, "zero", sanity=False), few, 15.0)
    return rows
