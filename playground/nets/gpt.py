"""A small GPT: a decoder-only Transformer trained on next-token prediction.

The layout is GPT-2's (Radford et al. 2019): token and learned position embeddings, pre-norm
blocks of causal multi-head self-attention and a GELU MLP, a final LayerNorm, and an output layer
tied to the token embedding. Parameter names and shapes match `transformers.GPT2LMHeadModel`
(its Conv1D weights are our Linear weights transposed), so `playground.nets.hf` moves weights both ways.

Attention is written out, softmax(q k^T / sqrt(d_k) + mask) v (Vaswani et al. 2017, eq. 1), because
the app shows the weights; `F.scaled_dot_product_attention` computes the same thing faster and is
used when nobody asks for the internals (training, generation) and as the tests' oracle.

References: Vaswani et al. 2017 (attention); Radford et al. 2018 (GPT), 2019 (GPT-2: pre-norm, the
1/sqrt(2 n_layer) residual init); Karpathy's nanoGPT for the code layout.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.nets.hooks import HookPoint, add_block_hooks


class LayerNorm(nn.Module):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta over the last dimension (Ba et al. 2016)."""

    def __init__(self, n_embd: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n_embd))                   # gamma
        self.bias = nn.Parameter(torch.zeros(n_embd)) if bias else None  # beta (nanoGPT's bias=False: none)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor | None,
           dropout_p: float = 0.0) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_k) + M) v, causal when `allowed` (T, T_all) is None.

    F.scaled_dot_product_attention computes it, except for one query position per row (a generation step):
    there PyTorch's CPU kernel splits the keys among its threads, so the step's numbers changed with the
    number of threads (torch 2.13, 9 heads, 60 keys: 1 thread vs 2 differ in the last bits, enough to turn a
    greedy continuation later on), and the app sets the threads by how busy it is. Written out, each row is
    summed by one thread, in one order: the same answer on a quiet server and a busy one, in a compute
    process and in the server's own (tests/test_gpt.py).

    Under bf16 autocast on a CPU it runs in fp32: the projections gain 3x in bf16 (AMX), but PyTorch's CPU
    flash-attention backward is ~30x slower in bf16 than in fp32 (measured with torch 2.13)."""
    if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        with torch.autocast("cpu", enabled=False):
            return attend(q.float(), k.float(), v.float(), allowed, dropout_p)
    if q.size(-2) == 1 and dropout_p == 0.0:
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))          # (B, nh, 1, T_all)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        return F.softmax(scores, dim=-1) @ v
    if allowed is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)


class CausalSelfAttention(nn.Module):
    """head_i = softmax(Q_i K_i^T / sqrt(d_k) + M) V_i, M = -inf above the diagonal;
    MultiHead = Concat(head_1..head_h) W^O."""

    def __init__(self, config: "GPTConfig"):
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # W^Q, W^K, W^V, all heads
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)      # W^O
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)
        self.hook_z = HookPoint()                                                    # each head's output, before W^O

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None,
                return_internals: bool = False):
        """x (B, T, C) are the new positions; `past` the keys and values of the earlier ones.
        Returns y (B, T, C), the keys and values of all positions (for a KV cache), and, with
        `return_internals`, this layer's q, k, v (B, nh, T, hs), the scaled scores q k^T / sqrt(d_k)
        before the mask and the probabilities (B, nh, T, T_all) from the written-out path (else None)."""
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)    # (B, nh, T_past + T, hs)
            v = torch.cat([past[1], v], dim=2)
        T_all = k.size(2)
        T_past = T_all - T
        # query i sits at position T_past + i and may look at keys 0 .. T_past + i
        dropout_p = self.dropout if self.training else 0.0
        layer = None
        if not return_internals:
            allowed = None if T_past == 0 else torch.ones(T, T_all, dtype=torch.bool, device=x.device).tril(T_past)
            y = attend(q, k, v, allowed, dropout_p)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)      # (B, nh, T, T_all): q k^T / sqrt(d_k)
            allowed = torch.ones(T, T_all, dtype=torch.bool, device=x.device).tril(diagonal=T_past)
            att = F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)  # masked entries are exactly 0
            y = F.dropout(att, dropout_p, self.training) @ v         # (B, nh, T, hs)
            layer = dict(q=q, k=k, v=v, scores=scores, attn=att)
        z = self.hook_z(y.transpose(1, 2))                          # (B, T, nh, hs): the heads, one by one
        y = z.reshape(B, T, C)                                      # Concat(head_1..head_h): (B, T, C)
        return self.resid_dropout(self.c_proj(y)), (k, v), layer


class MLP(nn.Module):
    """FFN(x) = GELU(x W_1 + b_1) W_2 + b_2, inner width 4 C."""

    def __init__(self, config: "GPTConfig"):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)
        self.approximate = config.gelu_approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # GPT-2's GELU is the tanh approximation ("gelu_new" in transformers); "none" is the exact erf form
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate)))


class Block(nn.Module):
    """x = x + Attn(LN(x)); x = x + MLP(LN(x))."""

    def __init__(self, config: "GPTConfig"):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, config.layer_norm_eps, config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, config.layer_norm_eps, config.bias)
        self.mlp = MLP(config)
        add_block_hooks(self)         # hook_resid_pre, hook_attn_out, ... (nets/hooks.py): no parameters

    def forward(self, x, past=None, return_internals: bool = False):
        x = self.hook_resid_pre(x)
        a, kv, layer = self.attn(self.ln_1(x), past, return_internals)
        x = self.hook_resid_mid(x + self.hook_attn_out(a))  # pre-norm (GPT-2), not the post-norm of Vaswani 2017
        x = x + self.hook_mlp_out(self.mlp(self.ln_2(x)))
        return self.hook_resid_post(x), kv, layer


@dataclass
class GPTConfig:
    vocab_size: int = 65          # set from the tokenizer (65 characters in Tiny Shakespeare)
    n_positions: int = 128        # longest context (GPT-2's name); train with block_size equal to it
    n_layer: int = 4              # number of blocks
    n_head: int = 6               # heads per block; n_embd must divide by it
    n_embd: int = 192             # model width C (d_model)
    dropout: float = 0.0          # none for short runs; the shipped model has 0.1 (without, it over-fits Tiny
                                  # Shakespeare after ~4,000 steps of 24 x 128 characters)
    layer_norm_eps: float = 1e-5  # GPT-2's epsilon
    gelu_approximate: str = "tanh"  # GPT-2's tanh GELU; "none" (exact erf) is twice as fast on a CPU
    bias: bool = True             # biases in Linears and LayerNorms, as GPT-2 (False: nanoGPT's; no GPT-2 export)


    def __post_init__(self):
        assert self.n_embd % self.n_head == 0, f"n_embd ({self.n_embd}) must divide by n_head ({self.n_head})"
        assert self.vocab_size > 0 and self.n_positions > 0, "vocab_size and n_positions must be positive"
        assert 0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), not {self.dropout}"
        assert self.gelu_approximate in ("tanh", "none"), \
            f"gelu_approximate is 'tanh' or 'none', not {self.gelu_approximate!r}"


class GPT(nn.Module):
    """p(x_t | x_<t) = softmax(LN(h_L)_t W_e^T), h_0 = W_e[x] + W_p[positions], h_l = Block(h_{l-1})."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),   # W_e: token embedding, also the output layer
            wpe=nn.Embedding(config.n_positions, config.n_embd),   # W_p: learned position embedding
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, config.layer_norm_eps, config.bias),
        ))
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                # GPT-2: residual projections scaled by 1/sqrt(2 n_layer), so the residual stream's
                # variance does not grow with depth
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _run(self, idx: torch.Tensor, pos0: int, past: list | None, return_internals: bool = False):
        """The blocks over new tokens idx (B, T) at positions pos0.. : logits (B, T, V), each layer's
        k, v, each layer's internals (None without `return_internals`), and the residual stream after the
        embedding and after each block, `hidden` (only with `return_internals`)."""
        B, T = idx.shape
        assert pos0 + T <= self.config.n_positions, (
            f"positions up to {pos0 + T} do not fit the context of {self.config.n_positions} tokens")
        pos = torch.arange(pos0, pos0 + T, dtype=torch.long, device=idx.device)       # (T,)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))  # (B, T, C)
        kvs, layers, hidden = [], [], [x] if return_internals else []
        for i, block in enumerate(self.transformer.h):
            x, kv, layer = block(x, None if past is None else past[i], return_internals)
            kvs.append(kv)
            layers.append(layer)
            if return_internals:
                hidden.append(x)
        return self.unembed(x), kvs, layers, hidden

    def unembed(self, h: torch.Tensor) -> torch.Tensor:
        """Logits from a residual stream (B, T, C): the final LayerNorm, then the tied output embedding (B, T, V).
        Applied to an earlier layer's residual, this is the logit lens (nostalgebraist 2020)."""
        return F.linear(self.transformer.ln_f(h), self.transformer.wte.weight)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, return_internals: bool = False):
        """idx (B, T) token ids -> (logits (B, T, V), mean cross-entropy against targets (B, T) or None).

        With `return_internals`, a third element: {"layers": one dict per layer with q, k, v
        (B, nh, T, hs), the scaled scores q k^T / sqrt(d_k) before the mask, and the attention
        probabilities attn (B, nh, T, T), computed by the written-out path; "hidden": the residual stream
        after the embedding and after each block, n_layer + 1 tensors (B, T, C)}.
        """
        logits, _, layers, hidden = self._run(idx, 0, None, return_internals)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return (logits, loss, {"layers": layers, "hidden": hidden}) if return_internals else (logits, loss)

    def step(self, idx: torch.Tensor, cache: dict | None = None):
        """Incremental decoding: idx (B, T_new) are the new tokens only. Returns logits (B, T_new, V)
        and the cache: every layer's keys and values, and the tokens seen so far.

        Past the context of n_positions tokens, the window slides: the last n_positions tokens are
        run again from position 0 (the positions shift, so cached keys cannot be reused), which is
        exactly what a forward pass over the cropped context computes.
        """
        return cached_step(self._run, self.config.n_positions, idx, cache)

    @staticmethod
    def reorder_cache(cache: dict, index: torch.Tensor) -> dict:
        """The cache rows of the sequences `index` selects (beam search keeps the best beams)."""
        return {"idx": cache["idx"][index], "kv": [(k[index], v[index]) for k, v in cache["kv"]]}

    @staticmethod
    def crop_cache(cache: dict, n: int) -> dict:
        """The cache of the first `n` tokens (a conversation that goes on from an earlier point of its text): a
        position's keys and values depend only on the tokens up to it, so the first n are theirs as they are."""
        return {"idx": cache["idx"][:, :n], "kv": [(k[:, :, :n], v[:, :, :n]) for k, v in cache["kv"]]}


def cached_step(run, n_positions: int, idx: torch.Tensor, cache: dict | None):
    """One decoding step of a decoder whose `run(idx, pos0, past)` returns (logits, kvs, ...): the new tokens idx
    (B, T_new) at the next positions, reusing the cache's keys and values; past n_positions tokens, the last
    n_positions run again from position 0. Returns logits (B, T_new, V) and the new cache. Shared by GPT and Llama."""
    seen = idx if cache is None else torch.cat([cache["idx"], idx], dim=1)  # (B, T_seen)
    if cache is not None and seen.size(1) <= n_positions:
        logits, kvs, *_ = run(idx, cache["idx"].size(1), cache["kv"])
    else:
        window = seen[:, -n_positions:]
        logits, kvs, *_ = run(window, 0, None)
        logits = logits[:, -idx.size(1):]
        seen = window
    return logits, {"idx": seen, "kv": kvs}


def build_lm(config: GPTConfig, data) -> GPT:
    """The training script's builder: the vocabulary comes from the data's tokenizer."""
    return GPT(dataclasses.replace(config, vocab_size=data.vocab_size))
