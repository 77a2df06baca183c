"""The formats of the Quantization view (analysis/quantization.py), one layer at a time: what each stores of a weight
matrix, the blocks of nets/llama.py built from it, its bytes and its error against fp32.

A layer is read from the GGUF file as its fp32 weights (the Q4_1 blocks dequantised, q and k in transformers' row
order: nets/smollm2.unpermute) and its Q4_1 blocks in the same row order; every format is made from those.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn as nn

from playground.nets import gguf_blocks as gb
from playground.nets.int8 import Int8Linear
from playground.nets.llama import Block, Linear, LlamaConfig, RMSNorm
from playground.nets.smollm2 import unpermute

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


def read_layer(tensors: dict, config: LlamaConfig, i: int) -> Layer:
    """Layer i from the file: each matrix's blocks (Q4_1) and their exact fp32 values."""
    weights, blocks = {}, {}
    for ours, theirs in MATRICES.items():
        t = tensors[f"blk.{i}.{theirs}.weight"]
        assert t.tensor_type == gb.Q4_1, f"{t.name} is not Q4_1 (type {t.tensor_type}) in this file"
        rows = np.asarray(t.data)                                               # (N, K / 32 * 20) bytes
        heads = {"attn_q": config.n_head, "attn_k": config.n_kv_head}.get(theirs)
        rows = unpermute(rows, heads) if heads else rows                        # rows reordered, blocks intact
        blocks[ours] = rows
        weights[ours] = torch.from_numpy(gb.dequantize_q4_1(rows, (rows.shape[0], t.shape[0])))
    norms = {name: torch.from_numpy(np.array(tensors[f"blk.{i}.{key}.weight"].data, dtype=np.float32))
             for name, key in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"))}
    return Layer(i, weights, blocks, norms)


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


def weight_error(f: str, layer: Layer) -> tuple[float, float, float]:
    """The layer's seven matrices together: (Σ‖Ŵ − W‖²_F, Σ‖W‖²_F, max |Ŵ − W|). fp32's and Q4_1's are 0 by
    construction (fp32 keeps the weights as they are; they are Q4_1's blocks dequantised: read_layer), not computed."""
    if layer.squares is None:
        layer.squares = sum((w * w).sum().item() for w in layer.weights.values())
    if f in ("fp32", "q4_1"):
        return 0.0, layer.squares, 0.0
    error, _, largest = summed([squared_error(w, dequantized(f, w, layer.blocks[name]), squares=False)
                                for name, w in layer.weights.items()])
    return error, layer.squares, largest


# the embedding: Q8_0 in the file, the tied output layer too

def embedding_rows(tensor, idx: torch.Tensor) -> torch.Tensor:
    """The Q8_0 embedding's rows of the token ids idx (B, T), dequantised: (B, T, C) fp32."""
    rows = np.asarray(tensor.data)[idx.flatten().numpy()]                       # (B T, C / 32 * 34) bytes
    width = tensor.shape[0]
    return torch.from_numpy(gb.dequantize_q8_0(rows, (*idx.shape, width)))


def table_slices(tensor):
    """The Q8_0 embedding dequantised a slice of rows at a time (BlockLinear.SLICE rows, fp32): the whole table
    (113 MB for SmolLM2) never at once."""
    blocks, width = np.asarray(tensor.data), tensor.shape[0]
    for i in range(0, blocks.shape[0], gb.BlockLinear.SLICE):
        part = blocks[i:i + gb.BlockLinear.SLICE]
        yield torch.from_numpy(gb.dequantize_q8_0(part, (len(part), width)))


def embedded(f: str, rows: torch.Tensor) -> torch.Tensor:
    """The input embedding as format `f` stores the table (the tied output layer's, int8's per row), as fp32."""
    if f in ("fp32", "q4_1"):                  # Q4_1's row: the file as shipped, whose embedding is this Q8_0
        return rows.clone()
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


def head(f: str, tensor, errors: list | None = None) -> nn.Module:
    """The tied output layer in format `f`, from the file's Q8_0 embedding (Q4_1's row: those blocks, as shipped,
    dequantised at each product). `errors`: each slice's squared_error appended (the embedding's error in `f`)."""
    if f == "q4_1":
        for rows in table_slices(tensor) if errors is not None else ():
            errors.append((0.0, (rows * rows).sum().item(), 0.0))          # the file's Q8_0 kept: no error
        return gb.BlockLinear(np.asarray(tensor.data), gb.Q8_0, tensor.shape[1], tensor.shape[0])
    parts = []
    for rows in table_slices(tensor):
        parts.append(linear(f, rows))
        if errors is not None:
            errors.append(squared_error(rows, rows if f == "fp32" else dequantized(f, rows)))
    return SlicedHead(parts)


def head_bytes(f: str, tensor) -> int:
    if f == "q4_1":
        return tensor.data.nbytes
    return matrix_bytes(f, tensor.shape[1], tensor.shape[0])


def summed(parts: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """Slices' (or matrices') squared errors as one: the sums summed, the largest difference kept."""
    return sum(p[0] for p in parts), sum(p[1] for p in parts), max(p[2] for p in parts)


def final_norm(tensors: dict, config: LlamaConfig) -> RMSNorm:
    norm = RMSNorm(config.n_embd, config.rms_norm_eps)
    norm.weight = nn.Parameter(torch.from_numpy(np.array(tensors["output_norm.weight"].data, dtype=np.float32)),
                               requires_grad=False)
    return norm
