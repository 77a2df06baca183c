"""The formats of the Quantization view (analysis/quantization.py), one layer at a time: what each stores of a weight
matrix, the blocks of nets/llama.py built from it, its bytes and its error against fp32.

A layer (analysis/quant_sources.py reads it) is its fp32 weights in transformers' row order and its Q4_1 blocks in the
same row order: the GGUF file's own, or made from the original's weights; every format is made from those.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn as nn

from playground.nets import gguf_blocks as gb
from playground.nets.int8 import Int8Linear
from playground.nets.llama import Block, Linear, LlamaConfig

FORMATS = ("fp32", "fp16", "bf16", "int8", "q4_1")
LABELS = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "int8": "int8", "q4_1": "Q4_1"}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# what each format stores of one weight (the scales' and minimums' bytes are counted on top)
BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8, "q4_1": 5}
# our matrices (transformers' names) and the file's, in a block's order
MATRICES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
            "mlp.down_proj": "ffn_down"}
INT8_LEVELS = 127      # int8's largest level: s = max |W_row| / 127 (nets/int8.Int8Linear with one plane)


@lru_cache(maxsize=1)
def available() -> tuple[list[str], dict[str, str]]:
    """The formats measured on this machine, and those skipped with the reason (bf16 where the CPU lacks it)."""
    from playground.training.loop import native_bf16

    skipped = {}
    if not native_bf16("cpu"):
        skipped["bf16"] = ("this CPU has no native bfloat16 arithmetic (no AVX512_BF16 or AMX: "
                           f"torch.backends.cpu says {torch.backends.cpu.get_cpu_capability()}), so PyTorch would "
                           "emulate it, many times slower: its step time would measure the emulation, not bf16")
    return [f for f in FORMATS if f not in skipped], skipped


@dataclass
class Layer:
    index: int
    weights: dict[str, torch.Tensor]    # our name -> fp32 (N, K), transformers' row order
    blocks: dict[str, np.ndarray]       # our name -> the file's Q4_1 blocks (N, K / 32 * 20), the same row order
    norms: dict[str, torch.Tensor]      # input_layernorm, post_attention_layernorm: fp32 (C,)
    squares: float | None = None        # Σ‖W‖²_F over the seven matrices, once (weight_error)


def int8_weights(w: torch.Tensor) -> torch.Tensor:
    """What int8 keeps of W, as fp32: round(W / s) s with s = max |W_row| / 127 per output channel (row)."""
    scale = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-30) / INT8_LEVELS
    return torch.round(w / scale) * scale


def dequantized(f: str, w: torch.Tensor, blocks: np.ndarray | None = None) -> torch.Tensor:
    """The fp32 values format `f` holds for the fp32 weights `w` (Q4_1: its blocks, dequantised)."""
    if f in DTYPES:
        return w.to(DTYPES[f]).float()
    if f == "int8":
        return int8_weights(w)
    return torch.from_numpy(gb.dequantize_q4_1(blocks, tuple(w.shape)))


def _linear(weight: torch.Tensor) -> Linear:
    with torch.device("meta"):
        layer = Linear(weight.shape[1], weight.shape[0], bias=False)
    layer.weight = nn.Parameter(weight, requires_grad=False)
    return layer


def linear(f: str, w: torch.Tensor, blocks: np.ndarray | None = None) -> nn.Module:
    """A product x W^T in format `f`: our Linear with the weight in fp32, fp16 or bf16 (activations fp32: a product
    of many positions in fp32, of a step's few in the weight's precision), Int8Linear, or the Q4_1 blocks."""
    if f in DTYPES:
        return _linear(w if f == "fp32" else w.to(DTYPES[f]))
    if f == "int8":
        return Int8Linear(w, planes=1)
    return gb.BlockLinear(blocks, gb.Q4_1, *w.shape)


def block(f: str, layer: Layer, config: LlamaConfig) -> Block:
    """nets/llama.Block of `layer` in format `f`: its norms (fp32 in every format) and its seven products."""
    with torch.device("meta"):
        b = Block(config)
    b.input_layernorm.weight = nn.Parameter(layer.norms["input_layernorm"], requires_grad=False)
    b.post_attention_layernorm.weight = nn.Parameter(layer.norms["post_attention_layernorm"], requires_grad=False)
    for name, w in layer.weights.items():
        part, product = name.split(".")
        setattr(getattr(b, part), product, linear(f, w, layer.blocks[name]))
    return b.eval()


def matrix_bytes(f: str, rows: int, columns: int) -> int:
    """The bytes format `f` stores for an (rows, columns) matrix: its weights, and int8's fp32 scale per row."""
    if f == "int8":
        return rows * columns + 4 * rows
    if f == "q4_1":
        return rows * columns // gb.BLOCK * gb.BYTES[gb.Q4_1]
    return rows * columns * BITS[f] // 8


def stored_bytes(f: str, layer: Layer) -> int:
    """A layer's bytes in format `f` (its norms are counted with the model's, norm_bytes)."""
    return sum(matrix_bytes(f, *w.shape) for w in layer.weights.values())


def norm_bytes(config: LlamaConfig) -> int:
    """Every RMSNorm's gain, fp32 in every format: two per layer and the final one."""
    return 4 * config.n_embd * (2 * config.n_layer + 1)


def squared_error(exact: torch.Tensor, approx: torch.Tensor, squares: bool = True) -> tuple[float, float, float]:
    """(‖Ŵ − W‖²_F, ‖W‖²_F (0 without `squares`), max |Ŵ − W|), in fp32: the difference of two such close numbers is
    exact, and torch sums the squares pairwise (float64 took 10x longer for the same four significant digits)."""
    delta = approx - exact
    return (delta * delta).sum().item(), (exact * exact).sum().item() if squares else 0.0, delta.abs().max().item()


def weight_error(f: str, layer: Layer, exact_q4_1: bool) -> tuple[float, float, float]:
    """The layer's seven matrices together: (Σ‖Ŵ − W‖²_F, Σ‖W‖²_F, max |Ŵ − W|). fp32's is 0 by construction (it
    keeps the weights as they are), and Q4_1's where the weights are its blocks dequantised (`exact_q4_1`: the GGUF
    file): neither is computed."""
    if layer.squares is None:
        layer.squares = sum((w * w).sum().item() for w in layer.weights.values())
    if f == "fp32" or f == "q4_1" and exact_q4_1:
        return 0.0, layer.squares, 0.0
    error, _, largest = summed([squared_error(w, dequantized(f, w, layer.blocks[name]), squares=False)
                                for name, w in layer.weights.items()])
    return error, layer.squares, largest


# the embedding, which is the tied output layer too: Q8_0 in the file (and in llama.cpp's Q4_1 files)

def embedded(f: str, rows: torch.Tensor, q4_1_rows: torch.Tensor) -> torch.Tensor:
    """The input embedding's rows (fp32, (1, T, C)) as format `f` stores the table (the tied output layer's: int8's
    per row; Q4_1's row: its Q8_0 embedding, `q4_1_rows`), as fp32."""
    if f in ("fp32", "q4_1"):
        return (rows if f == "fp32" else q4_1_rows).clone()
    flat = rows.reshape(-1, rows.size(-1))
    return dequantized(f, flat).view_as(rows)


class SlicedHead(nn.Module):
    """The output layer as products of slices of its rows, each in the format, the logits side by side: the same
    slices as BlockLinear's (so fp32's logits and Q4_1's, from the same numbers, are the same bits), and a format's
    copy is built a slice at a time (int8's quantisation of the whole table would hold 450 MB of temporaries)."""

    def __init__(self, parts: list[nn.Module]):
        super().__init__()
        self.parts = nn.ModuleList(parts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([part(x) for part in self.parts], dim=-1)


def head(f: str, source, errors: list | None = None) -> nn.Module:
    """The tied output layer in format `f`, a slice of the source's embedding at a time (Q4_1's row: the Q8_0
    blocks, dequantised at each product). `errors`: each slice's squared_error appended (the embedding's error)."""
    parts, q8 = [], []
    for rows, blocks in source.table_slices():
        if f == "q4_1":
            q8.append(blocks)
            approx = torch.from_numpy(gb.dequantize_q8_0(blocks, tuple(rows.shape))) if errors is not None else None
        else:
            parts.append(linear(f, rows))
            approx = rows if f == "fp32" or errors is None else dequantized(f, rows)
        if errors is not None:
            errors.append(squared_error(rows, approx))
    if f == "q4_1":
        c = source.config
        return gb.BlockLinear(np.concatenate([b.reshape(len(b), -1) for b in q8]), gb.Q8_0, c.vocab_size, c.n_embd)
    return SlicedHead(parts)


def head_bytes(f: str, config: LlamaConfig) -> int:
    """The output layer's bytes (the tied embedding's): Q4_1's row keeps it in Q8_0, 34 bytes per 32 weights."""
    if f == "q4_1":
        return config.vocab_size * config.n_embd // gb.BLOCK * gb.BYTES[gb.Q8_0]
    return matrix_bytes(f, config.vocab_size, config.n_embd)


def summed(parts: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """Slices' (or matrices') squared errors as one: the sums summed, the largest difference kept."""
    return sum(p[0] for p in parts), sum(p[1] for p in parts), max(p[2] for p in parts)
