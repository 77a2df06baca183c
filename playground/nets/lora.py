"""LoRA: low-rank adapters on the linear layers of a frozen pretrained model.

Hu et al. 2021 (LoRA: Low-Rank Adaptation of Large Language Models, §4.1): a pretrained weight
W ∈ R^{d×k} stays frozen and learns only a low-rank update ΔW = B A, B ∈ R^{d×r}, A ∈ R^{r×k},
r << min(d, k), scaled by α / r:

    h = W x + (α / r) B A x

A starts small and random (Gaussian), B starts at zero, so ΔW = 0 and training starts at exactly the
pretrained function. After training the update folds into the weight, W' = W + (α / r) B A, so the
adapted model costs nothing extra at inference. Trainable parameters per adapted d×k layer: r (d + k)
instead of d k (the lecture's ratio: `count_parameters`).

This file knows nothing about BERT: `add_lora` wraps the nn.Linear layers whose names end with one of
the given suffixes (for our BERT: attn.query, attn.key, attn.value, attn.proj, mlp.fc, mlp.proj).
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LoRALinear(nn.Module):
    """h = W x + b + (α / r) B A x with W, b frozen (the wrapped nn.Linear, shared, never changed),
    A (r, k) ~ N(0, 1/k), B (d, r) = 0. Dropout, when set, applies to the adapter's input only
    (Hu et al.'s reference code does the same)."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0,
                 generator: torch.Generator | None = None):
        super().__init__()
        assert isinstance(base, nn.Linear), f"LoRA wraps an nn.Linear, not {type(base).__name__}"
        assert r >= 1, f"rank r={r} must be at least 1"
        d, k = base.out_features, base.in_features
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)                  # W and b are frozen
        self.r, self.alpha = r, alpha
        self.scaling = alpha / r                     # α / r: the update's size does not change with r
        A = torch.randn(r, k, generator=generator) / math.sqrt(k)   # A x has unit scale; a private generator, if given
        self.A = nn.Parameter(A.to(base.weight.device))
        self.B = nn.Parameter(torch.zeros(d, r, device=base.weight.device))  # ΔW = B A = 0 at the start
        self.drop = nn.Dropout(dropout)

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def delta_weight(self) -> torch.Tensor:
        return self.scaling * (self.B @ self.A)      # (d, k): (α / r) B A

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x (..., k): two thin matmuls, (..., k) -> (..., r) -> (..., d), never the (d, k) product
        return self.base(x) + self.scaling * F.linear(F.linear(self.drop(x), self.A), self.B)

    def merged(self) -> nn.Linear:
        """A new nn.Linear with W' = W + (α / r) B A and the same bias: the base layer is not changed
        (another model may share its tensors)."""
        with torch.device("meta"):                   # no random init: both tensors are assigned next
            layer = nn.Linear(self.in_features, self.out_features, bias=self.base.bias is not None)
        with torch.no_grad():
            layer.weight = nn.Parameter(self.base.weight + self.delta_weight(), requires_grad=False)  # W' (d, k)
            if self.base.bias is not None:
                layer.bias = self.base.bias          # shared as it is: the bias is not adapted
        return layer.requires_grad_(False)


def _parent(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    parent_name, _, child = name.rpartition(".")
    return (model.get_submodule(parent_name) if parent_name else model), child


def add_lora(model: nn.Module, targets: tuple[str, ...] | str, r: int, alpha: float,
             dropout: float = 0.0, generator: torch.Generator | None = None) -> list[str]:
    """Freeze every parameter of `model`, then wrap in place each nn.Linear whose name ends with one
    of `targets` (a tuple, or a comma-separated string) in a LoRALinear. Returns the wrapped names;
    only the adapters' A and B are trainable afterwards (the caller unfreezes what else it trains).
    A's random start comes from `generator` when given (the app never touches the global one)."""
    if isinstance(targets, str):
        targets = tuple(t.strip() for t in targets.split(",") if t.strip())
    for p in model.parameters():
        p.requires_grad_(False)
    names = [name for name, m in model.named_modules()
             if isinstance(m, nn.Linear) and any(name == t or name.endswith("." + t) for t in targets)]
    assert names, f"no nn.Linear in the model is named like {targets}"
    for name in names:
        parent, child = _parent(model, name)
        setattr(parent, child, LoRALinear(getattr(parent, child), r, alpha, dropout, generator))
    return names


def shared_copy(model: nn.Module) -> nn.Module:
    """A new module tree over the same parameter and buffer tensors: adapters added to the copy are its own,
    while the (frozen) pretrained weights stay one copy in memory, shared with every other user of `model`."""
    same = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    return copy.deepcopy(model, memo=same)


def adapter_table(model: nn.Module) -> list[dict]:
    """Each adapted matrix: its name, W's shape d x k, the rank r and its trainable count r (d + k)."""
    return [{"name": name, "d": m.out_features, "k": m.in_features, "r": m.r,
             "params": m.r * (m.out_features + m.in_features)}
            for name, m in model.named_modules() if isinstance(m, LoRALinear)]


def merge_lora(model: nn.Module) -> nn.Module:
    """Replace each LoRALinear of `model` by its merged nn.Linear (W' = W + (α / r) B A), in place on
    the module tree (the frozen base tensors are read, never written). Returns the model."""
    names = [name for name, m in model.named_modules() if isinstance(m, LoRALinear)]
    for name in names:
        parent, child = _parent(model, name)
        setattr(parent, child, getattr(parent, child).merged())
    return model


def lora_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The parameters that training changed (requires_grad), by name: what an adapter checkpoint ships."""
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def count_parameters(model: nn.Module) -> dict[str, float]:
    """Trainable and total parameters (each tensor once, even when shared or tied), and their ratio."""
    seen, trainable, total = set(), 0, 0
    for p in model.parameters():  # parameters() already yields a shared tensor once per module tree
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return {"trainable": trainable, "total": total, "ratio": trainable / max(total, 1)}
