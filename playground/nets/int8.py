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

The weights shrink to a quarter of fp32 (SmolLM2's matrices: 134 MB in one plane) and a decode step reads a quarter
of the bytes, which on a CPU is most of its time. The product runs in our kernel (nets/csrc/int8.cpp: AMX's tiles,
or AVX-512 VNNI's vectors, the weight laid out once for both) where the CPU has VNNI; else in oneDNN's int8 kernel,
the weight packed once (`torch._int_mm` packs it again on every call, which cost more than the product); elsewhere
as float32 products of the integers, exact (`int_mm`). Every way gives the same integers, so the same bits.
"""

from __future__ import annotations

import functools

import torch
import torch.nn as nn

from playground.nets import kernels

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


def combine(p: torch.Tensor, s_x: torch.Tensor, planes: int) -> torch.Tensor:
    """The integer product's rows p (2M, planes N), the halves' products with each plane times s_w, as y (M, N):
    HI (X_hi W^T) + X_lo W^T for each plane, then HI (X W_hi^T) + X W_lo^T, times each row's s_x."""
    M, N = p.size(0) // 2, p.size(1) // planes
    y = torch.add(p[M:], p[:M], alpha=HI)                                      # X W_plane^T s_w, each plane
    if planes == 2:
        y = torch.add(y[:, N:], y[:, :N], alpha=HI)                            # HI X W_hi^T + X W_lo^T
    return y.mul_(s_x)


class Int8Linear(nn.Module):
    """y = x W^T with W in int8 planes per output channel and x in 14 bits per row, summed exactly (see the module's
    docstring). `planes`: the weight in one int8 plane (8 bits), or in two (14 bits: as exact as fp16 storage, for
    twice the bytes), stacked as one (planes N, K) matrix so one product reads both. Made from a float weight; no
    bias (the Llama family has none).

    The product runs where the CPU does it best, every way giving the same exact integer sums: our kernel
    (nets/csrc/int8.cpp) on a CPU with AVX-512 VNNI, with AMX's tiles for a batch of rows where the CPU has them;
    elsewhere oneDNN's int8 product (x86) or `torch._int_mm`."""

    def __init__(self, weight: torch.Tensor, planes: int = 2):
        super().__init__()
        w = weight.detach().float()
        scale = w.abs().amax(dim=1).clamp_min(1e-30) / W_LEVELS[planes]       # s_w: (N,)
        q = torch.round(w / scale[:, None]).to(torch.int32)                    # (N, K)
        self.in_features, self.out_features, self.planes = w.shape[1], w.shape[0], planes
        stacked = torch.cat(split(q) if planes == 2 else (q,)).to(torch.int8)  # [W_hi; W_lo]: (planes N, K)
        self.register_buffer("scale", scale.repeat(planes))
        self.path = path(stacked)
        if self.path == "blocks":           # padded to whole blocks of 16 outputs, with sums of their weights
            extra = -stacked.size(0) % 16
            stacked = torch.cat([stacked, stacked.new_zeros(extra, stacked.size(1))])
            self.ops, self.tiles = kernels.kernel(), capabilities()["amx"] and self.in_features % 64 == 0
            self.weight = self.ops.block_weight(stacked)
            self.wsum = stacked.sum(1, dtype=torch.int32)
            self.block_scale = torch.cat([self.scale, self.scale.new_zeros(extra)])
        elif self.path == "onednn":         # laid out for the CPU's kernel once, for a few rows (a generation step:
            # measured 2x faster for 2 rows and 1.5x for 64 than a layout packed for no row count in particular)
            self.weight = torch.ops.onednn.qlinear_prepack(stacked, [2, self.in_features])
            self.zero_points = torch.zeros(stacked.size(0), dtype=torch.int64)
        else:
            self.weight = stacked.t().contiguous()                             # (K, planes N) for torch._int_mm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1]).float().contiguous()                      # (M, K)
        ops = kernels.cpu_float(x)          # the same bits in one pass each (nets/kernels.py), where it is built
        rows, s_x = ops.quantize_rows(x) if ops else quantize_rows(x)
        if self.path == "blocks" and self.planes == 1:     # product and combine in one pass, the same bits
            y = self.ops.product_rows(rows, s_x, self.weight, self.block_scale, self.wsum, self.tiles)
            return (y if y.size(1) == self.out_features else y[:, :self.out_features]).reshape(*shape[:-1], -1)
        p = self._product(rows)                                                # (2M, planes N): one read of W
        y = ops.combine(p, s_x, self.planes) if ops else combine(p, s_x, self.planes)
        return y.view(*shape[:-1], self.out_features)

    def _product(self, rows: torch.Tensor) -> torch.Tensor:
        """(rows - HALF) W^T s_w: the integer sums, then each output channel's scale, element by element."""
        if self.path == "blocks":
            tiles = self.tiles and rows.size(0) >= AMX_ROWS
            p = self.ops.product(rows, self.weight, self.block_scale, self.wsum, tiles)
            return p if p.size(1) == self.scale.numel() else p[:, :self.scale.numel()].contiguous()
        if self.path == "onednn":           # u8 x s8 with zero point HALF; the int32 sums times s_w, as float32
            return torch.ops.onednn.qlinear_pointwise(rows, 1.0, HALF, self.weight, self.scale, self.zero_points,
                                                      None, 1.0, 0, torch.float32, "none", [], "")
        return int_mm((rows.to(torch.int16) - HALF).to(torch.int8), self.weight).float() * self.scale

    def extra_repr(self) -> str:
        bits = 8 if self.planes == 1 else 14
        return (f"in_features={self.in_features}, out_features={self.out_features}, {bits}-bit weights, 14-bit rows, "
                f"product: {self.path}")


AMX_ROWS = 1        # AMX from the first row: its tiles were as fast as VNNI or faster at every row count measured


def path(stacked: torch.Tensor) -> str:
    """Which product serves a weight: "blocks" (nets/csrc/int8.cpp, AVX-512 VNNI), "onednn" or "int_mm"."""
    ops = kernels.kernel() if stacked.device.type == "cpu" else None
    if ops is not None and capabilities()["vnni"] and stacked.size(1) % 4 == 0:
        return "blocks"
    return "onednn" if stacked.device.type == "cpu" and onednn() else "int_mm"


@functools.cache
def capabilities() -> dict:
    """What this CPU offers our kernel: AVX-512 VNNI's vectors, AMX's tiles (the process allowed to use them)."""
    ops = kernels.kernel()
    vnni, amx = ops.capabilities() if ops is not None else (False, False)
    return {"vnni": vnni, "amx": amx}


def int_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M, K) int8 times b (K, N) int8, exactly, on any device: as float32, whose every partial sum of these
    products is an integer below 2^24 (|a| <= 64, |b| <= 127, K <= 2,064), so exact in any order."""
    assert a.size(1) * HALF * 127 < 2 ** 24, "K too large for exact float32 sums"
    return (a.float() @ b.float()).round().to(torch.int32)
