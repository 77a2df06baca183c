"""LoRA adapters on a shipped causal language model, as a checkpoint (kind "lora-adapter").

The bases are our character GPT (`models/gpt-shakespeare`) and SmolLM2-135M-Instruct (nets/smollm2.py). An
adapter checkpoint names its base and holds only the adapters' A and B (nets/lora.py), a few hundred kB: the
base is read from where it already is. An adapted model is a copy of the base's module tree over the base's own
tensors (`lora.shared_copy`), so any number of users can train their adapters on one frozen copy of the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn as nn

from playground import checkpoints
from playground.nets import lora, smollm2

GPT, SMOLLM2 = "gpt-shakespeare", "smollm2-135m-instruct"
BASES = (GPT, SMOLLM2)
# each base's matrices by role: the attention's (the lecture's choice, after Hu et al. 2021 §7.1) and the MLP's
ATTENTION = {GPT: "c_attn,attn.c_proj", SMOLLM2: "q_proj,k_proj,v_proj,o_proj"}
MLP = {GPT: "mlp.c_fc,mlp.c_proj", SMOLLM2: "gate_proj,up_proj,down_proj"}
DEFAULT_TARGETS = {GPT: "c_attn", SMOLLM2: "q_proj,v_proj"}   # Hu et al.'s W_q, W_v (GPT: W_q W_k W_v in one)
TARGET_CHOICES = ("qv", "attention", "all")                     # the matrices to adapt, by role


def targets_for(base: str, choice: str) -> str:
    """qv: W_q and W_v (the GPT keeps W_q, W_k, W_v in one matrix, c_attn); attention: every attention matrix;
    all: the attention's and the MLP's."""
    assert choice in TARGET_CHOICES, f"targets must be one of {', '.join(TARGET_CHOICES)}, not {choice!r}"
    return {"qv": DEFAULT_TARGETS, "attention": ATTENTION}[choice][base] if choice != "all" else \
        f"{ATTENTION[base]},{MLP[base]}"


@dataclass
class AdapterConfig:
    base: str = GPT                 # the pretrained model the adapters sit on (one of BASES)
    targets: str = "c_attn"         # names (suffixes) of the adapted nn.Linear layers, comma-separated
    rank: int = 8                   # r: the update B A has rank at most r
    alpha: float = 16.0             # α: the update is scaled by α / r
    method: str = "lora"            # what trained them: "lora" (next-token loss on a text), "sft" or "dpo"

    def __post_init__(self):
        assert self.base in BASES, f"base must be one of {', '.join(BASES)}, not {self.base!r}"
        assert self.rank >= 1, f"rank must be at least 1, not {self.rank}"
        assert self.alpha > 0, f"alpha must be positive, not {self.alpha}"
        assert self.method in ("lora", "sft", "dpo"), f"method must be lora, sft or dpo, not {self.method!r}"


@dataclass(frozen=True, eq=False)
class Base:
    """A base with what training on it reads: the fields of its record in the app's registry (analysis/models.py),
    for the code below the registry (a checkpoint's loader, `python -m playground.train lora|sft|dpo`)."""

    id: str
    model: nn.Module
    tokenizer: Any                            # tokenizers.Tokenizer
    config: Any                               # the model's config (n_positions)
    chat: Callable[[list[dict]], str] | None  # messages -> the chat-formatted prompt; None without a template
    card: dict                                # with a chat template: `eos_id`, the token that ends a turn


def base(name: str) -> Base:
    """The shared, frozen base: read once per process (the copy the registry reads too: `smollm2.shared`,
    `checkpoints.shared`), never changed (callers adapt a `lora.shared_copy`)."""
    assert name in BASES, f"base must be one of {', '.join(BASES)}, not {name!r}"
    if name == SMOLLM2:
        lm = smollm2.shared()
        return Base(name, lm.model, lm.tokenizer, lm.model.config, lm.chat_prompt, {"eos_id": lm.eos_id})
    c = checkpoints.shared(GPT)
    return Base(name, c.model, c.tokenizer, c.config, None, c.card)


def adapt(base: nn.Module, config: AdapterConfig, generator: torch.Generator | None = None) -> nn.Module:
    """A copy of `base` sharing its tensors, in eval mode (no dropout: a run is deterministic), with LoRA on the
    target matrices: at this point it computes exactly what the base does (B = 0)."""
    model = lora.shared_copy(base).eval()
    lora.add_lora(model, config.targets, config.rank, config.alpha, generator=generator)
    return model


def trained_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """What a checkpoint of this kind ships: every A and B."""
    return {name: p for name, p in model.named_parameters() if name.endswith((".A", ".B"))}


def load_adapted(config: AdapterConfig, state: dict[str, torch.Tensor]) -> nn.Module:
    """The checkpoint loader: the base from its place, adapted, the saved A and B put in."""
    model = adapt(base(config.base).model, config)
    missing = set(trained_state(model)) ^ set(state)
    assert not missing, f"the adapters do not fit {config.base} with targets {config.targets!r}: {sorted(missing)[:4]}"
    with torch.no_grad():
        for name, p in trained_state(model).items():
            p.copy_(state[name])
    return model.requires_grad_(False)
