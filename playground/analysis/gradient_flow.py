"""Looking inside the models: gradient flow through time in recurrent networks. Numpy out, no gradio.

The story (Bengio et al. 1994; Pascanu et al. 2013). For the loss L_T at the last step of an Elman RNN,

    dL_T/dh_{t-1} = W_hh^T diag(phi'(a_t)) dL_T/dh_t,

so the signal that reaches step t is a product of T - t Jacobians. Each shrinks or stretches it by at most
max phi' * sigma_max(W_hh): it vanishes when that is below 1 and explodes above it. The LSTM's cell state is
additive, dc_t/dc_{t-1} = diag(f_t) (the constant error carousel), and the GRU's state has the direct term
dh_t/dh_{t-1} ~ diag(z_t), so a gate near 1 lets the signal pass unshrunk.

`gradient_flow` measures all of this on a copy of a model, in float64 (so a norm can grow to 1e308 before it
overflows, and overflow is reported rather than shown as NaN), with optional gradient clipping of the signal
sent back at each step.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from playground.nets import recurrent
from playground.nets.recurrent import RecurrentLM, parameter_counts

MAX_STEPS = 400          # longest sequence the gradient-flow view unrolls
SIGMA_RANGE = (0.01, 10.0)   # allowed sigma_max(W_hh) when rescaling
GATES_SHOWN = {"rnn": (), "lstm": ("f", "i", "o", "c"), "gru": ("z", "r")}
EXPLODE, VANISH = 1e3, 1e-3   # |dL/dh_1| / |dL/dh_T| beyond these is called exploding / vanishing


def activation_derivative(name: str, a: torch.Tensor) -> torch.Tensor:
    """phi'(a) for the Elman cell's activations."""
    if name == "tanh":
        return 1 - torch.tanh(a) ** 2
    if name == "sigmoid":
        s = torch.sigmoid(a)
        return s * (1 - s)
    return (a > 0).to(a.dtype)   # ReLU; 0 at a = 0, as autograd has it


@dataclass
class Steps:
    """The characters a network reads, one per time step, and where each one is in the user's text."""

    ids: list[int]                   # T + 1 ids: the last one is the target of L_T
    chars: list[str]                 # T + 1 characters
    spans: list[tuple[int, int]]     # steps 1..T: (start, end) in the text; (-1, -1) for the space between copies
    notices: list[str]               # for the user: repeated, cut, unknown characters


def prepare_ids(tokenizer, text: str, length: int) -> Steps:
    """`length` + 1 character ids: the text repeated (a space between copies, unless it ends with one) or
    cut to fit."""
    notices = []
    if not text:
        raise ValueError("the text is empty: type a sentence (or a few characters) to run through the networks")
    need = length + 1
    period = need                    # characters before the text starts again
    if len(text) < need:
        reps = math.ceil(need / len(text))
        notices.append(f"The text has {len(text)} characters; repeated {reps}× to fill {length} steps.")
        period = len(text) if text.endswith(" ") else len(text) + 1
        text_repeated = (text + " ") * reps if not text.endswith(" ") else text * reps
    else:
        text_repeated = text
        if len(text) > need:
            notices.append(f"The text has {len(text):,} characters; "
                           f"using the first {need} ({length} steps + the target).")
    chars = list(text_repeated[:need])
    spans = [(t % period, t % period + 1) if t % period < len(text) else (-1, -1) for t in range(length)]
    vocab = tokenizer.get_vocab()
    unknown = sorted({ch for ch in chars if ch not in vocab})
    if unknown:
        notices.append(f"Characters the model never saw read as [UNK]: {' '.join(unknown[:20])}")
    unk = vocab.get("[UNK]", 0)
    return Steps([vocab.get(ch, unk) for ch in chars], chars, spans, notices)


def rescale_recurrent(model: RecurrentLM, sigma: float) -> None:
    """Set the largest singular value of every recurrent block W_h* to `sigma` (in place)."""
    with torch.no_grad():
        for cell in model.encoder.cells:
            for W in cell.weight_hh.chunk(cell.n_gates, dim=0):              # (H, H) per gate
                W.mul_(sigma / torch.linalg.matrix_norm(W, ord=2).clamp_min(1e-12))


def fit_rate(norms: np.ndarray) -> float | None:
    """Measured factor per step back in time: |dL/dh_t| ~ C r^(T-t), r = exp(-slope of log|g_t| against t),
    fitted over the finite, nonzero norms (least squares)."""
    t = np.arange(len(norms))
    ok = np.isfinite(norms) & (norms > 0)
    if ok.sum() < 3:
        return None
    slope = np.polyfit(t[ok], np.log(norms[ok]), 1)[0]
    return float(np.exp(-slope))


def _status(norms: np.ndarray, loss: float) -> tuple[str, str]:
    if not math.isfinite(loss):
        return "overflow", "The forward pass overflowed: the loss is not a finite number (NaN or inf)."
    bad = ~np.isfinite(norms)
    if bad.any():
        t = int(np.nonzero(bad)[0].max())
        return "overflow", (f"The gradient overflowed to inf/NaN at step {t + 1} and every step before it: "
                            "an exploding gradient. Clipping keeps it finite.")
    first, last = norms[0], norms[-1]
    if last == 0:
        return "vanishing", "No gradient reaches even the last step (a dead unit layer)."
    ratio = first / last
    if ratio > EXPLODE:
        return "exploding", f"Exploding: the gradient at step 1 is {ratio:.1e}× the one at the last step."
    if ratio < VANISH:
        return "vanishing", f"Vanishing: the gradient at step 1 is {ratio:.1e}× the one at the last step."
    return "stable", f"Stable: the gradient at step 1 is {ratio:.2g}× the one at the last step."


def gradient_flow(model: RecurrentLM, ids: list[int], *, sigma: float | None = None, activation: str | None = None,
                  clip: float = 0.0, fresh: bool = False, seed: int = 0, units: int = 32,
                  clamp: dict[str, float] | None = None) -> dict:
    """Back-propagate the loss at the last step, L_T = -log p(x_{T+1} | x_1..x_T), and measure how much of it
    reaches each step.

    ids: T + 1 token ids. Options: fresh (untrained weights, torch's init, seeded), sigma (rescale every
    W_h* block to this largest singular value), activation (Elman cell only), clip (> 0: the gradient sent
    back into h_t, and c_t, is rescaled to norm <= clip at every step, as in Mikolov's clipping of the
    back-propagated error; Pascanu et al. 2013 clip the total parameter gradient once instead), clamp (gates
    held at a value, a knockout: {"f": 1.0} makes the LSTM's cell a constant error carousel, {"f": 0.0} cuts it).

    Returns numpy arrays and floats: grad_norms |dL_T/dh_t| (T,), for the LSTM cell_grad_norms |dL_T/dc_t|,
    x_grad_norms |dL_T/dx_t| (T,), gates {name: (T, units)}, the measured and predicted rates per step,
    a status (stable | vanishing | exploding | overflow) with a message, and the loss.
    """
    config = model.config
    assert config.num_layers == 1, "gradient flow is shown for one-layer models"
    if fresh:  # its own generator: the same answer whatever else the server is doing
        m = RecurrentLM.seeded(config, torch.Generator().manual_seed(seed))
    else:
        m = copy.deepcopy(model)
    m = m.double().eval().requires_grad_(False)   # no weight gradients: only dL/dh_t and dL/dx_t are wanted
    cell = m.encoder.cells[0]
    if activation is not None and config.cell == "rnn":
        cell.nonlinearity = activation
    if sigma is not None:
        rescale_recurrent(m, sigma)

    x, layer, loss, raw = _backward_from_last_step(m, ids, clip, clamp)
    T = x.shape[1]
    finite = math.isfinite(loss)
    nan = np.full(T, np.nan)   # overflow: nothing to show, said so by the status

    def norms(tensors) -> np.ndarray:
        return np.array([np.nan if h.grad is None else h.grad.norm().item() for h in tensors]) if finite else nan

    grad_norms = norms(layer["h"])
    out = {
        "cell": config.cell, "T": T, "loss": loss, "clip": clip, "fresh": fresh,
        "activation": cell.nonlinearity if config.cell == "rnn" else None,
        "grad_norms": grad_norms,
        "grad_norms_raw": np.array(raw["h"]) if finite else nan,
        "x_grad_norms": x.grad[0].norm(dim=-1).numpy() if finite and x.grad is not None else nan,
    }
    if config.cell == "lstm":
        out["cell_grad_norms"] = norms(layer["c"])
    out["status"], out["message"] = _status(grad_norms, loss)
    with torch.no_grad():
        out["rates"] = _rates(cell, config.cell, layer, grad_norms, out.get("cell_grad_norms"))
        shown = {**layer["gates"], "c": None if layer["c"] is None else torch.stack(layer["c"], dim=1)}  # c: (1, T, H)
        out["gates"] = {name: shown[name][0, :, :units].numpy() for name in GATES_SHOWN[config.cell]}
    return out


def _backward_from_last_step(m: RecurrentLM, ids: list[int], clip: float, clamp: dict[str, float] | None = None):
    """Run the model on ids[:-1] with its internals, back-propagate L_T and record |dL_T/dh_t| (and
    |dL_T/dc_t|) as the gradient arrives, before clipping. Returns the input x (1, T, m) (its gradient
    filled in), the layer's internals, the loss and the raw norms."""
    idx = torch.tensor(ids[:-1]).unsqueeze(0)                               # (1, T)
    target = torch.tensor(ids[-1:])                                          # (1,)
    T = idx.shape[1]
    raw = {"h": [0.0] * T, "c": [0.0] * T}

    def hook(kind: str, t: int):
        def fn(grad):
            norm = grad.norm()
            raw[kind][t] = norm.item()                                       # before clipping
            if clip > 0 and norm > clip:
                return grad * (clip / norm)                                  # what is sent further back
            return None
        return fn

    with torch.enable_grad():
        x = m.wte(idx).requires_grad_()                                      # (1, T, m): the leaf we differentiate
        out, _, internals = m.encoder(x, return_internals=True, clamp=clamp)  # clamp: gates knocked out
        logits = m.lm_head(out[:, -1])                                       # (1, V): only step T's prediction
        layer = internals["layers"][0]
        for kind in ("h", "c"):
            for t, state in enumerate(layer[kind] or []):                    # c is None but for the LSTM
                state.retain_grad()
                state.register_hook(hook(kind, t))
        loss = F.cross_entropy(logits, target)                               # L_T: the last step only
        if math.isfinite(loss.item()):
            loss.backward()
    return x, layer, loss.item(), raw


def lyapunov_factor(W: torch.Tensor, d: torch.Tensor, burn_in: int = 10) -> float | None:
    """The growth per step of a vector sent back through the Jacobians J_t^T = W^T diag(d_t), t = T..1 (d: (T, H)),
    from a fixed random start: the product's top Lyapunov exponent, as a factor. After a few steps the vector is
    turned, as in power iteration, towards the directions that shrink least, whatever it started as; so this is
    the rate at which any back-propagated gradient decays, computed without the loss. The first `burn_in` steps
    (the turning) are left out; None for sequences too short to say."""
    T = d.shape[0]
    burn_in = min(burn_in, T // 4)
    if T - burn_in < 3:
        return None
    v = torch.randn(W.shape[0], generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    logs = []
    for t in range(T - 1, -1, -1):
        v = W.double().T @ (d[t].double() * v)
        norm = v.norm().item()
        if not (norm > 0 and math.isfinite(norm)):
            return 0.0 if norm == 0 else None
        logs.append(math.log(norm))
        v = v / norm
    return math.exp(float(np.mean(logs[burn_in:])))


def diagonal_path(gate: torch.Tensor) -> float | None:
    """A diagonal path's factor per step, from the gate values alone (gate: (T, H)): going back from step T, unit u
    keeps prod_{s>t} g_{s,u} of its gradient. From an even start over the units, the norm at step t is the rms
    of those products over the units, fitted like the measured curve. The units that keep most soon carry it all,
    so the factor is well above the mean gate (the naive estimate)."""
    g = gate.double().clamp_min(1e-300)
    kept = torch.flip(torch.cumprod(torch.flip(g[1:], [0]), 0), [0])       # (T-1, H): prod_{s=t+1}^{T-1} g_s
    norms = torch.cat([kept.square().mean(dim=1).sqrt(), torch.ones(1, dtype=torch.float64)])
    return fit_rate(norms.numpy())


def _rates(cell, kind: str, layer: dict, grad_norms: np.ndarray, cell_grad_norms: np.ndarray | None) -> dict:
    """Theory: the per-step factor of the path back in time, beside the measured one, and the naive estimate that
    treats the gradient as a random direction at every step (it is not: it turns towards what shrinks least)."""
    rates = {"measured": fit_rate(grad_norms)}
    gates = layer["gates"]
    if kind == "rnn":
        s = torch.linalg.svdvals(cell.weight_hh.float()).double()         # singular values, largest first
        d = activation_derivative(cell.nonlinearity, gates["a"][0])         # phi'(a_t) (T, H)
        gamma, rms = d.mean().item(), s.square().mean().sqrt().item()      # rms singular value = |W|_F / sqrt(n)
        rates.update(sigma_max=s[0].item(), sigma_rms=rms, mean_activation_derivative=gamma,
                     max_activation_derivative=d.max().item(),
                     predicted=lyapunov_factor(cell.weight_hh.detach(), d),
                     naive=gamma * rms,                       # a random direction: E|W^T D g| ~ gamma |W|_F/sqrt(n)
                     bound=d.max().item() * s[0].item(),     # the worst direction (Pascanu et al. 2013)
                     theory="top Lyapunov exponent of the Jacobians W_hhᵀ diag(φ′(a_t)) along this input, from a "
                            "random start (naive: mean φ′ × rms σ; bound: max φ′ × σ_max)")
    elif kind == "lstm":
        rates.update(predicted=diagonal_path(gates["f"][0]), naive=gates["f"].mean().item(),
                     theory="the products of f_t unit by unit, since ∂c_t/∂c_{t-1} = diag(f_t), fitted like the curve "
                            "(naive: mean f_t)",
                     measured_cell=fit_rate(cell_grad_norms))
    else:
        rates.update(predicted=diagonal_path(gates["z"][0]), naive=gates["z"].mean().item(),
                     theory="the products of z_t unit by unit, the direct term diag(z_t) of ∂h_t/∂h_{t-1}, fitted like "
                            "the curve (the other term is ignored; naive: mean z_t)")
    return rates


def compare(models: dict[str, RecurrentLM], tokenizer, text: str, length: int, *, fresh: bool = False,
            sigma: float | None = None, activation: str = "tanh", clip: float = 0.0, units: int = 32,
            notices: list[str] = (), knockout: str = "none") -> tuple[dict, Steps]:
    """The gradient-flow endpoint's data: the text as `length` steps, then `gradient_flow` through each
    model (keyed by cell), as JSON. `notices` are the caller's, listed before the text's. Returns the data
    and the steps (their characters and where they are in the text)."""
    steps = prepare_ids(tokenizer, text, length)
    cells = {key: to_json(gradient_flow(model, steps.ids, sigma=sigma, activation=activation, clip=clip,
                                        fresh=fresh, units=units, clamp=recurrent.knockout(knockout, key)))
             for key, model in models.items()}
    data = {"text": "".join(steps.chars), "chars": steps.chars, "T": length, "weights": "fresh" if fresh else "trained",
            "sigma_max": sigma, "activation": activation, "clip": clip, "knockout": knockout,
            "notices": [*notices, *steps.notices],
            "cells": cells}
    return data, steps


def _rounded(a: np.ndarray, digits: int) -> list:
    """A float array to nested lists, rounded to `digits` significant digits, non-finite -> None:
    vectorised, since a gates array alone holds thousands of numbers per request."""
    a = np.asarray(a, dtype=float)
    finite = np.isfinite(a)
    magnitude = np.floor(np.log10(np.abs(np.where(finite & (a != 0), a, 1.0))))
    scale = 10.0 ** (digits - 1 - magnitude)
    out = np.where(finite, np.round(a * scale) / scale, 0.0).astype(object)
    out[~finite] = None
    return out.tolist()


def to_json(result: dict, digits: int = 4) -> dict:
    """The numpy result as plain JSON: NaN and inf become null (JSON has neither), floats rounded."""

    def clean(v):
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            return _rounded(v, digits)
        if isinstance(v, np.ndarray):
            return clean(v.tolist())
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if isinstance(v, float):
            return float(f"{v:.{digits}g}") if math.isfinite(v) else None
        return v

    return clean(result)


def model_table(models: dict) -> dict[str, dict]:
    """Per trained model (key -> its record in the registry, analysis/models.py: model, config, card): the
    parameter counts of nets/recurrent.py (ours, torch.nn's and the lecture's formula) and its card's figures,
    each by its one name (checkpoints.CARD): the loss over the whole held-out split and the steps."""
    table = {}
    for key, ckpt in models.items():
        card = ckpt.card
        loss = card.get("held_out", {}).get("loss", float("nan"))
        table[key] = {**parameter_counts(ckpt.config), "n_params": ckpt.model.num_params(), "held_out_loss": loss,
                      "held_out_bits": loss / math.log(2), "steps": card.get("steps", 0)}
    return table

