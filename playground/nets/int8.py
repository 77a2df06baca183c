"""Integer matrix products whose every row is the same whatever else is in the batch: the serving format of a
causal LM (playground/serving/engine.py).

A float product sums K terms in an order the math library chooses by the shape of the whole call: on torch 2.13's
CPU kernels a row of `F.linear` has other last bits with 1-3 rows than with 4 or more, and those bits grow into
another sampled token a few steps on. A server that batches a class's generations would then give a student
another answer to the same seeded question depending on who else was asking ("Defeating Nondeterminism in LLM
Inference", He et al., Thinking Machines 2025: batch-invariant kernels). Integer sums have no order: int8 × int8
products summed in int32 are exact, so any kernel, any thread count and any batch give the same bits. Around that
exact core, everything is per row or per output channel, elementwise:

- W (N, K) is stored as int8 with one scale per output channel, s_w[n] = max_k |W[n, k]| / 127 (LLM.int8's
  vector-wise quantization, Dettmers et al. 2022, without its outlier split);
- each row x of the input gets its own scale, s_x = max_k |x_k| / 8,127, and is rounded to a 14-bit integer
  X = 128 X_hi + X_lo written as two 7-bit halves (each -64 .. 63). One scale per row is what keeps a row
  independent of its neighbours (one scale per tensor, as torch.ao's dynamic quantization uses, makes each row
  depend on the others' largest value); 14 bits because SmolLM2's activations lose too much at 8 (mean next-token
  KL against fp32 0.033 at 8 bits; tests/test_int8.py holds the bound at 14); 7-bit halves because a CPU without
  VNNI adds pairs of 8-bit products in 16 bits, which 8-bit halves could overflow;
- y = (128 (X_hi W^T) s_w + (X_lo W^T) s_w) s_x: one integer product of both halves stacked as 2M rows, so the
  weight is read once; the scales then apply element by element, the same for a row in any batch.

The weights shrink to a quarter of fp32 (SmolLM2's matrices: 134 MB) and a decode step reads a quarter of the bytes,
which on a CPU is most of its time. On x86 the weight is packed once for oneDNN's int8 kernel (VNNI or AMX where
the CPU has them; `torch._int_mm` packs it again on every call, which cost more than the product); elsewhere
`torch._int_mm` (CUDA) or int32 products.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn

HALF = 64            # a 7-bit half: -64 .. 63 (sent to the kernel as unsigned 0 .. 127, zero point HALF)
HI = 128             # q = HI * q_hi + q_lo
LEVELS = HI * (HALF - 1) + HALF - 1     # 8,127: a 14-bit integer, -LEVELS .. LEVELS, as two 7-bit halves
W_LEVELS = {1: 127, 2: LEVELS}          # a weight in one int8 plane, or in two (14 bits)


def onednn() -> bool:
    """Whether this torch has oneDNN's int8 matrix product with the weight packed once (x86 CPUs)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.onednn, "qlinear_pointwise")


def split(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A 14-bit integer tensor (-LEVELS .. LEVELS) as its two 7-bit halves, q = HI q_hi + q_lo."""
    shifted = q + HALF
    return torch.bitwise_right_shift(shifted, 7), torch.bitwise_and(shifted, HI - 1) - HALF


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (M, K) float -> its halves [X_hi; X_lo] stacked as one uint8 (2M, K), each value + HALF, and the rows'
    scales s_x (M, 1): x ≈ s_x (HI X_hi + X_lo)."""
    scale = x.abs().amax(dim=1, keepdim=True).clamp_min(1e-30) / LEVELS       # a max has no order: exact per row
    shifted = torch.round(x / scale).to(torch.int32) + HALF                     # q + HALF
    # q + HALF = HI (X_hi) + (X_lo + HALF): the high half + HALF, and the low bits as they are
    return torch.cat([torch.bitwise_right_shift(shifted, 7) + HALF, torch.bitwise_and(shifted, HI - 1)]).to(
        torch.uint8), scale


class Int8Linear(nn.Module):
    """y = x W^T with W in int8 planes per output channel and x in 14 bits per row, summed exactly (see the module's
    docstring). `planes`: the weight in one int8 plane (8 bits), or in two (14 bits: as exact as fp16 storage, for
    twice the bytes), packed side by side as one (planes N, K) matrix so one product reads both. `lanes`: the
    product cut by output channel into that many parts, computed at once on as many threads (`Lanes`), each part
    on one of torch's (the other core of a 2-core machine, without an OpenMP team's spinning). Integer sums make
    the parts' bits the whole's. Made from a float weight; no bias (the Llama family has none)."""

    def __init__(self, weight: torch.Tensor, planes: int = 2, lanes: int = 1):
        super().__init__()
        w = weight.detach().float()
        scale = w.abs().amax(dim=1).clamp_min(1e-30) / W_LEVELS[planes]       # s_w: (N,)
        q = torch.round(w / scale[:, None]).to(torch.int32)                    # (N, K)
        self.in_features, self.out_features, self.planes = w.shape[1], w.shape[0], planes
        stacked = torch.cat(split(q) if planes == 2 else (q,)).to(torch.int8)  # [W_hi; W_lo]: (planes N, K)
        self.register_buffer("scale", scale.repeat(planes))
        self.packed = q.device.type == "cpu" and onednn()
        cuts = torch.linspace(0, planes * self.out_features, lanes + 1).round().long().tolist()
        self.parts = [self._pack(stacked[a:b], self.scale[a:b]) for a, b in zip(cuts, cuts[1:])]

    def _pack(self, w: torch.Tensor, scale: torch.Tensor) -> tuple:
        """One part of the weight, ready for `_product`."""
        if self.packed:     # laid out for the CPU's kernel once, for a few rows (a generation step: measured 2x
            # faster for 2 rows and 1.5x for 64 than a layout packed for no row count in particular)
            return (torch.ops.onednn.qlinear_prepack(w, [2, self.in_features]), scale,
                    torch.zeros(w.size(0), dtype=torch.int64))
        return w.t().contiguous(), scale, None     # (K, part) for torch._int_mm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1]).float()                                   # (M, K)
        rows, s_x = quantize_rows(x)
        M, N = x.size(0), self.out_features
        p = LANES.map(self._product, rows, self.parts)                         # (2M, planes N): one read of W
        y = torch.add(p[M:], p[:M], alpha=HI)                                  # X W_plane^T s_w, each plane
        if self.planes == 2:
            y = torch.add(y[:, N:], y[:, :N], alpha=HI)                        # HI X W_hi^T + X W_lo^T
        return y.mul_(s_x).view(*shape[:-1], N)

    def _product(self, rows: torch.Tensor, part: tuple) -> torch.Tensor:
        """(rows - HALF) W_part^T s_w: the integer sums, then each output channel's scale, element by element."""
        w, scale, zero_points = part
        if self.packed:     # u8 x s8 with zero point HALF; the int32 sums times s_w, as float32
            return torch.ops.onednn.qlinear_pointwise(rows, 1.0, HALF, w, scale, zero_points,
                                                      None, 1.0, 0, torch.float32, "none", [], "")
        return int_mm((rows.to(torch.int16) - HALF).to(torch.int8), w).float() * scale

    def extra_repr(self) -> str:
        bits = 8 if self.planes == 1 else 14
        return (f"in_features={self.in_features}, out_features={self.out_features}, {bits}-bit weights, 14-bit rows, "
                f"{len(self.parts)} part(s)")


class Lanes:
    """Threads that compute the parts of a product at once: the caller's and, per process, one more per extra part
    (made on first use in each process: a forked compute process has no thread of its parent's)."""

    def __init__(self):
        self._pool, self._pid = None, None

    def map(self, product, rows: torch.Tensor, parts: list) -> torch.Tensor:
        if len(parts) == 1:
            return product(rows, parts[0])
        if self._pid != os.getpid():
            self._pool, self._pid = ThreadPoolExecutor(len(parts) - 1, thread_name_prefix="int8-lane"), os.getpid()
        others = [self._pool.submit(_inference, product, rows, part) for part in parts[1:]]
        first = product(rows, parts[0])
        return torch.cat([first, *(f.result() for f in others)], dim=1)


def _inference(product, rows: torch.Tensor, part: tuple) -> torch.Tensor:
    with torch.inference_mode():       # a thread's own mode: the caller's does not carry over
        return product(rows, part)


LANES = Lanes()
