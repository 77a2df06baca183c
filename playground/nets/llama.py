"""A Llama-family decoder: the architecture of Llama (Touvron et al. 2023), SmolLM2 and Mistral.

Against GPT-2 (nets/gpt.py), four parts changed, each from its own paper:
- RMSNorm (Zhang & Sennrich 2019) instead of LayerNorm: no mean subtracted, no bias;
- rotary position embeddings, RoPE (Su et al. 2021), instead of a learned position table: the query and key of
  position m are rotated by angles m θ_i, so their dot product depends on the positions only through m − n;
- grouped-query attention, GQA (Ainslie et al. 2023): n_head query heads share n_kv_head key/value heads
  (SmolLM2-135M: 9 query heads in 3 groups of 3), which shrinks the KV cache by n_head / n_kv_head;
- a SwiGLU feed-forward (Shazeer 2020): W_2 (SiLU(x W_gate) ⊙ x W_up), three matrices and no biases.
Pre-norm blocks and the tied output embedding are as in GPT-2 (SmolLM2 ties them; Llama itself does not).

Parameter names are those of `transformers.LlamaForCausalLM` (model.embed_tokens, model.layers.i.self_attn.q_proj,
..., model.norm), so its state dict loads here unchanged, and the tests prove the same logits and attention.
The rotation is the "half" layout transformers uses: dimension i is paired with i + d/2 (GGUF files store q and k
permuted for the interleaved layout of llama.cpp; playground/smollm2.py undoes it when loading).

Attention is written out, softmax(q k^T / sqrt(d_k) + mask) v, when the internals are asked for (the app shows
them); nets/gpt.attend otherwise (`F.scaled_dot_product_attention`, the tests' oracle).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.nets import kernels
from playground.nets.gpt import GPT, attend, cached_step
from playground.nets.hooks import HookPoint, add_block_hooks
from playground.nets.int8 import Int8Linear
from playground.nets.meta import embedding


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x²) + eps) * g (Zhang & Sennrich 2019): LayerNorm without the mean and the bias."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))  # g
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()                              # the mean square in fp32, as Llama computes it
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class RowNorm(nn.Module):
    """The serving twin's RMSNorm (Llama.int8): the same equation and the same g, in one pass of C++ per row
    (nets/csrc/int8.cpp) where the kernels are built: eight library calls a norm were a tenth of a decode step."""

    def __init__(self, norm: RMSNorm):
        super().__init__()
        self.norm = norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ops = kernels.cpu_float(x)
        if ops is None:
            return self.norm(x)
        return ops.rms_norm(x.reshape(-1, x.size(-1)).contiguous(), self.norm.weight, self.norm.eps).view(x.shape)


def rope_angles(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of m θ_i for every position m and pair i (Su et al. 2021, eq. 15): θ_i = theta^(-2i/d),
    i = 0 .. d/2 − 1. Returned as (T, d), each angle written twice (dimension i and i + d/2 share it)."""
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)   # θ_i: (d/2,)
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]                     # m θ_i: (T, d/2)
    angles = torch.cat([angles, angles], dim=-1)                                           # (T, d)
    return angles.cos().float(), angles.sin().float()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Each pair (x_i, x_{i+d/2}) rotated by its angle: R(mθ_i) [x_i, x_{i+d/2}]. x (B, h, T, d), cos/sin (T, d)."""
    half = x.shape[-1] // 2
    rotated_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (−x_{i+d/2}, x_i)
    return x * cos + rotated_half * sin


class _FrozenHalfProduct(torch.autograd.Function):
    """x W^T for a frozen W stored in fp16, x in fp32. Autograd would keep the fp32 copy of W made for the
    product until the backward pass (540 MB for SmolLM2); this keeps the fp16 W it already has and converts it
    again for dL/dx = dL/dy W. Training adapters on the half-stored model then holds no copy of its matrices."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(w)
        return F.linear(x, w.to(x.dtype))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (w,) = ctx.saved_tensors
        return grad @ w.to(grad.dtype), None                    # W is frozen: no gradient for it


_exact = threading.local()      # this thread's `fp32_products` switch


@contextmanager
def fp32_products():
    """Within the `with`, in this thread only, every product of a half-stored weight is taken in fp32, however few
    positions it has. An experiment whose batch grows from one row (analysis/batched.py) would otherwise take its
    first blocks in fp16 and the rest in fp32, and a row's numbers would depend on how many rows came with it."""
    before = getattr(_exact, "on", False)
    _exact.on = True
    try:
        yield
    finally:
        _exact.on = before


def half_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x W^T with W in fp16 and x in fp32 (see Linear)."""
    if x.shape[:-1].numel() <= 4 and not getattr(_exact, "on", False):
        return F.linear(x.to(w.dtype), w).to(x.dtype)
    if x.requires_grad and not w.requires_grad:
        return _FrozenHalfProduct.apply(x, w)
    return F.linear(x, w.to(x.dtype))


class Linear(nn.Linear):
    """nn.Linear whose weight may be stored in half precision to halve the model's memory (SmolLM2 in the app:
    270 MB instead of 540). The arithmetic then follows the CPU's strengths: one or a few positions (generation)
    multiply in the weight's precision, a memory-bound product that half precision speeds up; many positions
    (a prompt, the attention views) multiply in the input's fp32, the weight converted for the call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if w.dtype == x.dtype:
            return F.linear(x, w, self.bias)
        return half_linear(x, w)


class Attention(nn.Module):
    """head_j = softmax(R_m q_j (R_n k_g(j))^T / sqrt(d_k) + M) v_g(j), g(j) = j // (n_head / n_kv_head):
    causal self-attention with rotary positions and grouped key/value heads; MultiHead = Concat(heads) W^O."""

    def __init__(self, config: "LlamaConfig"):
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = config.n_head, config.n_kv_head, config.head_dim
        self.q_proj = Linear(config.n_embd, config.n_head * config.head_dim, bias=False)     # W^Q, all heads
        self.k_proj = Linear(config.n_embd, config.n_kv_head * config.head_dim, bias=False)  # W^K, per group
        self.v_proj = Linear(config.n_embd, config.n_kv_head * config.head_dim, bias=False)  # W^V, per group
        self.o_proj = Linear(config.n_head * config.head_dim, config.n_embd, bias=False)     # W^O
        self.hook_z = HookPoint()                                                            # each head, before W^O
        self.qkv_proj = None    # the serving twin's W^Q, W^K, W^V as one product (Llama.int8)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x W^Q, x W^K, x W^V: three products, or one where they are fused (the serving twin)."""
        if self.qkv_proj is None:
            return self.q_proj(x), self.k_proj(x), self.v_proj(x)
        kv = self.n_kv_head * self.head_dim
        return self.qkv_proj(x).split([self.n_head * self.head_dim, kv, kv], dim=-1)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, past=None,
                return_internals: bool = False):
        """x (B, T, C): the new positions, with their rotation angles cos/sin (T, d); `past`: the earlier
        positions' rotated keys and values. Returns y (B, T, C), (k, v) of every position for the cache, and
        with `return_internals` this layer's q, k, v (rotated, per query head), scores and attn (B, nh, T, T_all)."""
        if isinstance(past, Rows):
            return self.ragged(x, cos, sin, past), None, None
        B, T, _ = x.shape
        nh, nkv, hs = self.n_head, self.n_kv_head, self.head_dim
        q, k, v = self.project(x)
        q = q.view(B, T, nh, hs).transpose(1, 2)                # (B, nh, T, hs)
        k = k.view(B, T, nkv, hs).transpose(1, 2)               # (B, nkv, T, hs)
        v = v.view(B, T, nkv, hs).transpose(1, 2)               # (B, nkv, T, hs)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)         # positions enter here, and only here
        if past is not None:
            k = torch.cat([past[0], k], dim=2)                  # (B, nkv, T_past + T, hs)
            v = torch.cat([past[1], v], dim=2)
        cache = (k, v)
        T_all = k.size(2)
        T_past = T_all - T
        group = nh // nkv
        # query head j reads kv head j // group: (B, nh, T_all, hs)
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        allowed = torch.ones(T, T_all, dtype=torch.bool, device=x.device).tril(diagonal=T_past)  # query i at T_past + i
        layer = None
        if return_internals:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)                    # (B, nh, T, T_all)
            att = F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)   # masked entries are exactly 0
            y = att @ v                                                            # (B, nh, T, hs)
            layer = dict(q=q, k=k, v=v, scores=scores, attn=att)
        else:
            y = attend(q, k, v, None if T_past == 0 else allowed)
        z = self.hook_z(y.transpose(1, 2))                      # (B, T, nh, hs): the heads, one by one
        y = z.reshape(B, T, nh * hs)                            # Concat(head_1..head_h): (B, T, nh hs)
        return self.o_proj(y), cache, layer

    def ragged(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rows: "Rows") -> torch.Tensor:
        """Several sequences at once, the way a serving engine batches them (playground/serving/engine.py): x
        (1, N, C) holds each row's new positions one row after the other, `rows` says how many each has and where
        its keys and values go. The projections take all N positions in one product; attention is each row's own,
        over its own cache, so a row's numbers never depend on the others (nets/int8.py makes the products so)."""
        N = x.size(1)
        nh, nkv, hs = self.n_head, self.n_kv_head, self.head_dim
        ops = kernels.cpu_float(x)
        if ops is not None and self.qkv_proj is not None:               # the same operations in one pass
            q, kv = ops.rope_qkv(self.qkv_proj(x[0]).contiguous(), cos.contiguous(), sin.contiguous(), nh, nkv,
                                 1 / math.sqrt(hs))
        else:
            cos, sin = cos[:, None], sin[:, None]                       # (N, 1, hs): one angle per position
            q, k, v = self.project(x[0])
            q = rotate(q.view(N, nh, hs), cos, sin) * (1 / math.sqrt(hs))   # (N, nh, hs), divided by sqrt(d_k) once
            k = rotate(k.view(N, nkv, hs), cos, sin)                         # (N, nkv, hs)
            kv = torch.stack([k, v.view(N, nkv, hs)]).transpose(1, 2)        # (2, nkv, N, hs): each row's to keep
        y = kernels.attention(q, kv, [c.kv[rows.layer] for c in rows.caches], rows.starts, rows.lengths)
        if y is not None:                                                # one call: nets/kernels.py
            return self.o_proj(y[None])
        out, start = [], 0          # each row over its own cache: a Python loop, so no row's sums depend on another's
        for cache, t0, n in zip(rows.caches, rows.starts, rows.lengths):
            mine = cache.kv[rows.layer]                                  # (2, nkv, capacity, hs)
            mine[:, :, t0:t0 + n] = kv[:, :, start:start + n]            # written in place
            out.append(grouped_attention(q[start:start + n], mine[0, :, :t0 + n].float(), mine[1, :, :t0 + n].float(),
                                         t0))
            start += n
        return self.o_proj(torch.cat(out)[None])                    # Concat(heads): (1, N, nh hs), then W^O


def grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, t0: int) -> torch.Tensor:
    """One sequence's attention, q (n, nh, hs) at positions t0 .. t0+n-1, already divided by sqrt(d_k), over k, v
    (nkv, t0+n, hs); returns the heads side by side, (n, nh hs). Written out as `attend` writes a generation step
    (one order of summation per row, whatever the threads). GQA without copying the keys: the n_head / n_kv_head
    query heads of a group read their kv head as one matrix of queries (nkv, group n, hs), the same arithmetic as
    repeating the keys for every query head (a generation step's one position needs no copy at all)."""
    n, nh, hs = q.shape
    nkv, T = k.size(0), k.size(1)
    group = nh // nkv
    queries = q.view(nkv, group, hs) if n == 1 else q.transpose(0, 1).reshape(nkv, group * n, hs)
    scores = queries @ k.transpose(-2, -1)                                   # (nkv, group n, T)
    if n > 1:                                                                # query i sees keys 0 .. t0 + i
        position = t0 + torch.arange(n, device=q.device).repeat(group)       # each query's position, (group n,)
        allowed = torch.arange(T, device=q.device)[None, :] <= position[:, None]
        scores = scores.masked_fill(~allowed, float("-inf"))
    heads = F.softmax(scores, dim=-1) @ v                                    # (nkv, group n, hs)
    return heads.view(1, nh * hs) if n == 1 else heads.view(nh, n, hs).transpose(0, 1).reshape(n, nh * hs)


@dataclass
class RowCache:
    """One sequence's keys and values in every layer, in buffers of a fixed capacity written in place (a
    generation step copies nothing already there): the serving engine's KV cache of one row."""

    kv: list[torch.Tensor]  # per layer (2, n_kv_head, capacity, head_dim): its keys [0] and values [1]
    length: int = 0         # positions filled

    @property
    def k(self) -> list[torch.Tensor]:
        return [t[0] for t in self.kv]

    @property
    def v(self) -> list[torch.Tensor]:
        return [t[1] for t in self.kv]

    @property
    def capacity(self) -> int:
        return self.kv[0].size(2)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.kv)


@dataclass
class Rows:
    """What one layer's attention needs to run several sequences side by side (Attention.ragged)."""

    layer: int
    caches: list[RowCache]  # a row's cache may come twice (two chunks of one prompt, in order)
    starts: list[int]       # the position of each piece's first new token
    lengths: list[int]      # new positions of each piece, in the order they sit in x


class SwiGLU(nn.Module):
    """FFN(x) = (SiLU(x W_gate) ⊙ x W_up) W_down (Shazeer 2020), no biases."""

    def __init__(self, config: "LlamaConfig"):
        super().__init__()
        self.gate_proj = Linear(config.n_embd, config.n_inner, bias=False)
        self.up_proj = Linear(config.n_embd, config.n_inner, bias=False)
        self.down_proj = Linear(config.n_inner, config.n_embd, bias=False)
        self.gate_up_proj = None    # the serving twin's W_gate and W_up as one product (Llama.int8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up_proj is None:
            gate, up = self.gate_proj(x), self.up_proj(x)
        else:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class Block(nn.Module):
    """x = x + Attn(RMSNorm(x)); x = x + SwiGLU(RMSNorm(x)): pre-norm, as GPT-2."""

    def __init__(self, config: "LlamaConfig"):
        super().__init__()
        self.input_layernorm = RMSNorm(config.n_embd, config.rms_norm_eps)  # transformers' names for the two norms
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.n_embd, config.rms_norm_eps)
        self.mlp = SwiGLU(config)
        add_block_hooks(self)         # hook_resid_pre, hook_attn_out, ... (nets/hooks.py): no parameters

    def forward(self, x, cos, sin, past=None, return_internals: bool = False):
        x = self.hook_resid_pre(x)
        a, kv, layer = self.self_attn(self.input_layernorm(x), cos, sin, past, return_internals)
        x = self.hook_resid_mid(x + self.hook_attn_out(a))
        x = x + self.hook_mlp_out(self.mlp(self.post_attention_layernorm(x)))
        return self.hook_resid_post(x), kv, layer


@dataclass
class LlamaConfig:
    vocab_size: int = 49_152      # SmolLM2's byte-level BPE
    n_positions: int = 8_192      # the longest context it was trained for (RoPE itself has no table)
    n_layer: int = 30
    n_head: int = 9               # query heads
    n_kv_head: int = 3            # key/value heads: n_head / n_kv_head query heads share one (GQA)
    n_embd: int = 576             # model width C
    n_inner: int = 1_536          # SwiGLU's inner width
    rope_theta: float = 100_000.0  # RoPE's base: θ_i = rope_theta^(-2i/d)
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True  # the output layer is the token embedding (SmolLM2; not Llama 2)

    def __post_init__(self):
        assert self.n_embd % self.n_head == 0, f"n_embd ({self.n_embd}) must divide by n_head ({self.n_head})"
        assert self.n_head % self.n_kv_head == 0, (
            f"n_head ({self.n_head}) must divide by n_kv_head ({self.n_kv_head}): each kv head serves a whole group")
        assert (self.n_embd // self.n_head) % 2 == 0, "RoPE rotates pairs: the head width must be even"

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def kv_group(self, head: int) -> int:
        """The key/value head that query head `head` reads (GQA)."""
        return head // (self.n_head // self.n_kv_head)


class Llama(nn.Module):
    """p(x_t | x_<t) = softmax(RMSNorm(h_L)_t W_out^T), h_0 = W_e[x], h_l = Block(h_{l-1}); positions by RoPE."""

    kv_dtype = torch.float32    # the keys and values a row's cache keeps (row_cache); the serving twin's: float16

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.model = nn.ModuleDict(dict(
            embed_tokens=embedding(config.vocab_size, config.n_embd),      # W_e (and, tied, the output layer)
            layers=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            norm=RMSNorm(config.n_embd, config.rms_norm_eps),
        ))
        if not config.tie_word_embeddings:
            self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def half_storage(self) -> "Llama":
        """Store the matrices and the embedding in fp16 (the norms stay fp32; every activation stays fp32)."""
        for module in self.modules():
            if isinstance(module, (Linear, nn.Embedding)):
                module.weight.data = module.weight.data.half()
        return self

    def int8(self, planes: int = 2) -> "Llama":
        """The serving twin (nets/int8.py): every matrix and the tied output layer as Int8Linear (weights in
        `planes` int8 planes: 2, 14 bits, as exact as fp16; 1, 8 bits, half the bytes), whose rows do not depend on
        each other; the norms and the embedding are this model's own tensors, shared."""
        with torch.device("meta"):
            twin = Llama(dataclasses.replace(self.config, tie_word_embeddings=False))
        twin.model.embed_tokens, twin.model.norm = self.model.embed_tokens, RowNorm(self.model.norm)
        for mine, theirs in zip(twin.model.layers, self.model.layers):
            mine.input_layernorm = RowNorm(theirs.input_layernorm)
            mine.post_attention_layernorm = RowNorm(theirs.post_attention_layernorm)
            attn, mlp = theirs.self_attn, theirs.mlp     # the products of one input as one: one read of x's rows
            qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
            mine.self_attn.qkv_proj = Int8Linear(qkv, planes)
            mine.self_attn.o_proj = Int8Linear(attn.o_proj.weight, planes)
            mine.mlp.gate_up_proj = Int8Linear(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), planes)
            mine.mlp.down_proj = Int8Linear(mlp.down_proj.weight, planes)
            for part, names in ((mine.self_attn, ("q_proj", "k_proj", "v_proj")), (mine.mlp, ("gate_proj", "up_proj"))):
                for name in names:
                    delattr(part, name)                  # their meta placeholders
        twin.kv_dtype = torch.float16   # half the bytes a row keeps and a step reads; its own rounding, a row's own
        twin.lm_head = Int8Linear(self.model.embed_tokens.weight if self.config.tie_word_embeddings
                                  else self.lm_head.weight, planes)
        return twin.eval().requires_grad_(False)

    def unembed(self, h: torch.Tensor) -> torch.Tensor:
        """Logits from a residual stream (B, T, C): the final RMSNorm, then the output layer. Applied to an
        earlier layer's residual, this is the logit lens (nostalgebraist 2020)."""
        h = self.model.norm(h)
        if not self.config.tie_word_embeddings:
            return self.lm_head(h)
        weight = self.model.embed_tokens.weight                                  # tied: W_e is the output layer
        if weight.dtype == h.dtype:
            return F.linear(h, weight)
        return half_linear(h, weight)                                            # see Linear

    def _run(self, idx: torch.Tensor, pos0: int, past: list | None, return_internals: bool = False):
        """The blocks over new tokens idx (B, T) at positions pos0.. : logits (B, T, V), each layer's rotated
        k and v, each layer's internals (None without `return_internals`), and the residual stream after
        the embedding and after each block, `hidden` (only with `return_internals`)."""
        T = idx.shape[1]
        cos, sin = rope_angles(torch.arange(pos0, pos0 + T, device=idx.device), self.config.head_dim,
                               self.config.rope_theta)
        cos, sin = cos.to(idx.device), sin.to(idx.device)
        x = self.model.embed_tokens(idx).float()                            # (B, T, C): no position added
        kvs, layers, hidden = [], [], [x] if return_internals else []
        for i, block in enumerate(self.model.layers):
            x, kv, layer = block(x, cos, sin, None if past is None else past[i], return_internals)
            kvs.append(kv)
            layers.append(layer)
            if return_internals:
                hidden.append(x)
        return self.unembed(x), kvs, layers, hidden

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, return_internals: bool = False):
        """idx (B, T) -> (logits (B, T, V), mean cross-entropy against targets or None), as nets/gpt.py.

        With `return_internals`, a third element: {"layers": per layer q, k, v (per query head: a kv head's
        keys and values repeated for its group), scores q k^T / sqrt(d_k) before the mask, attn (B, nh, T, T);
        "hidden": the residual stream after the embedding and after each block, (B, T, C) each (n_layer + 1);
        "kv_groups": the kv head each query head reads}."""
        logits, _, layers, hidden = self._run(idx, 0, None, return_internals)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        if not return_internals:
            return logits, loss
        groups = [self.config.kv_group(h) for h in range(self.config.n_head)]
        return logits, loss, {"layers": layers, "hidden": hidden, "kv_groups": groups}

    def step(self, idx: torch.Tensor, cache: dict | None = None):
        """Incremental decoding, the contract of nets/gpt.py: idx (B, T_new) are the new tokens only; returns
        logits (B, T_new, V) and the cache (every layer's rotated keys and values, the tokens seen). Rotated keys
        stay valid as the sequence grows (RoPE needs no shift); past n_positions the window slides, as the GPT's."""
        return cached_step(self._run, self.config.n_positions, idx, cache)

    def row_cache(self, capacity: int) -> RowCache:
        """An empty KV cache for one sequence of at most `capacity` positions (step_rows), in `kv_dtype`."""
        c = self.config
        shape = (2, c.n_kv_head, min(capacity, c.n_positions), c.head_dim)
        device = self.model.embed_tokens.weight.device
        return RowCache([torch.empty(shape, device=device, dtype=self.kv_dtype)    # read only where written
                         for _ in range(c.n_layer)])

    def step_rows(self, new: list[torch.Tensor], caches: list[RowCache]) -> torch.Tensor:
        """Continuous batching's step (Yu et al. 2022, Orca): each piece of new tokens (1-D id tensors of any
        lengths: one for a row that is generating, a chunk of its prompt for a row being prefilled; a row's chunks
        in order) goes through the blocks in one flat batch, attending to its own row's cache, which is filled in
        place. Returns the logits at each piece's last position, (pieces, V). Within a row's capacity (row_cache):
        no sliding window here."""
        lengths, starts, filled = [t.numel() for t in new], [], {}
        for cache, n in zip(caches, lengths):    # a row's second piece starts where its first ends
            starts.append(filled.get(id(cache), cache.length))
            filled[id(cache)] = starts[-1] + n
            assert filled[id(cache)] <= cache.capacity, "the row's cache is full: give it a larger capacity"
        positions = torch.cat([torch.arange(t0, t0 + n) for t0, n in zip(starts, lengths)])
        cos, sin = rope_angles(positions, self.config.head_dim, self.config.rope_theta)
        device = self.model.embed_tokens.weight.device
        x = self.model.embed_tokens(torch.cat(new).to(device))[None].float()       # (1, N, C)
        cos, sin = cos.to(device), sin.to(device)
        for i, block in enumerate(self.model.layers):
            x, _, _ = block(x, cos, sin, Rows(i, caches, starts, lengths))
        for cache, t0, n in zip(caches, starts, lengths):
            cache.length = t0 + n
        last = torch.tensor(lengths).cumsum(0) - 1                                 # each row's last position
        return self.unembed(x[:, last.to(device)])[0]                              # (rows, V)

    reorder_cache = staticmethod(GPT.reorder_cache)  # the cache rows of the beams beam search keeps
    crop_cache = staticmethod(GPT.crop_cache)        # the cache of the first n tokens


def from_transformers(state_dict: dict, config: LlamaConfig) -> dict:
    """A `transformers.LlamaForCausalLM` state dict as ours: the same names; with tied embeddings, its
    `lm_head.weight` is the token embedding itself and is dropped."""
    out = dict(state_dict)
    if config.tie_word_embeddings:
        out.pop("lm_head.weight", None)
    return out


def to_transformers(model: Llama) -> dict:
    """Our state dict as `transformers.LlamaForCausalLM` names it (the tied output layer written out)."""
    out = dict(model.state_dict())
    if model.config.tie_word_embeddings:
        out["lm_head.weight"] = out["model.embed_tokens.weight"]
    return out
