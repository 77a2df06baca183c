"""What a decode step of a batch reads and computes, from the model's own parameters: why batching is nearly free
until it is not (the Inference tab's Batching view; the experiment itself runs in serving/batching.py).

A decode step of B rows multiplies every weight matrix by B vectors. It reads each weight once, whatever B: the
matrices' bytes W (SmolLM2's served twin: one byte a weight, nets/int8.py). It does one multiply-add per weight per
row: 2 P FLOPs a row for P weights. Each row also reads its own keys and values (T positions × the cache's bytes per
token) and attends over them (4 × n_layer × n_head × head_dim × T FLOPs). So a step's arithmetic intensity, FLOPs
per byte read, is about 2 B for one-byte weights: at B = 1 the processor waits for memory (memory-bound), and every
row added does arithmetic on weights already read, nearly free, until the arithmetic takes longer than the reading
(compute-bound): from there a step's time grows with B and tokens a second stop growing.

The turn is read off the measurement: the decode steps' times t(B) are fitted as t = a + b B (least squares), a the
part that does not grow with the batch (reading the weights, and each step's fixed costs), b what each row adds
(its arithmetic, its cache, its sampling). At B* = a / b both parts are equal. W / a is the rate at which the step
reads the weights, 2 P / b the rate at which it computes a row: the two rates the machine's memory and cores give
this model (Williams et al. 2009, the roofline model; Pope et al. 2022 for decoding).
"""

from __future__ import annotations

import numpy as np
import torch

from playground.nets.int8 import Int8Linear


def weight_matrices(model) -> dict:
    """The matrices a decode step multiplies by, from the model's modules: their count, weights P and bytes W (an
    int8 twin's planes of one byte a weight and its scales; a float model's tensors; a tied output layer is the
    embedding, read whole by the output product)."""
    params = nbytes = count = 0
    for module in model.modules():
        if isinstance(module, Int8Linear):
            n = module.in_features * module.out_features
            params, nbytes = params + n, nbytes + n * module.planes + module.scale.nbytes
        elif isinstance(module, torch.nn.Linear):
            params, nbytes = params + module.weight.numel(), nbytes + module.weight.nbytes
        else:
            continue
        count += 1
    config = getattr(model, "config", None)
    if getattr(config, "tie_word_embeddings", False) and not hasattr(model, "lm_head"):
        embedding = model.model.embed_tokens.weight                  # Llama's tied output layer
        params, nbytes, count = params + embedding.numel(), nbytes + embedding.nbytes, count + 1
    return {"matrices": count, "params": params, "bytes": nbytes}


def attention_flops(config, positions: float) -> float:
    """One row's attention at a decode step over `positions` keys: q k^T and the weighted sum of v, 2 T head_dim
    FLOPs each, for every query head of every layer."""
    head_dim = config.n_embd // config.n_head
    return 4.0 * config.n_layer * config.n_head * head_dim * positions


def step_costs(weights: dict, config, kv_per_token: int, positions: float, rows: int) -> dict:
    """One decode step of `rows` rows at `positions` keys each: the bytes it reads (the weights once, each row's
    keys and values) and the FLOPs it does."""
    read = weights["bytes"] + rows * positions * kv_per_token
    flops = rows * (2.0 * weights["params"] + attention_flops(config, positions))
    return {"rows": rows, "bytes": int(read), "flops": flops, "intensity": round(flops / read, 3)}


def fit(rows: list[int], seconds: list[float]) -> tuple[float, float] | None:
    """t = a + b B by least squares over the measured decode steps; None with fewer than two batch sizes."""
    if len(set(rows)) < 2:
        return None
    A = np.stack([np.ones(len(rows)), np.asarray(rows, dtype=float)], axis=1)
    (a, b), *_ = np.linalg.lstsq(A, np.asarray(seconds, dtype=float), rcond=None)
    return float(a), float(b)


def roofline(model, kv_per_token: int, positions: float, measured: dict[int, float]) -> dict:
    """The model's weights and FLOPs per token (from its parameters), each batch size's bytes, FLOPs and intensity,
    and, from the measured decode step seconds per batch size (`measured`), the fit t = a + b B and what it says:
    the weights' read rate W / a, a row's compute rate, the turn B* = a / b, and the tokens a second it predicts."""
    config = model.config
    weights = weight_matrices(model)
    per_token = 2.0 * weights["params"] + attention_flops(config, positions)
    sizes = sorted(measured)
    out = {"weights": weights, "kv_bytes_per_token": kv_per_token, "positions": round(positions, 1),
           "flops_per_token": per_token, "weight_flops_per_byte": round(2.0 * weights["params"] / weights["bytes"], 3),
           "steps": [step_costs(weights, config, kv_per_token, positions, b) for b in sizes], "fit": None}
    line = fit(sizes, [measured[b] for b in sizes])
    if line is None:
        return out
    a, b = line
    out["fit"] = {"a_ms": round(a * 1000, 3), "b_ms": round(b * 1000, 3),
                  "turn": round(a / b, 2) if a > 0 and b > 0 else None,
                  "weight_read_gb_s": round(weights["bytes"] / a / 1e9, 2) if a > 0 else None,
                  "row_gflop_s": round(per_token / b / 1e9, 2) if b > 0 else None,
                  "predicted_tokens_per_s": {str(B): round(B / (a + b * B), 1) for B in sizes if a + b * B > 0},
                  "ceiling_tokens_per_s": round(1 / b, 1) if b > 0 else None}
    return out
