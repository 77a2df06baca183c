"""Encoder-decoders for sequence-to-sequence translation: the bridge from recurrent networks to the Transformer.

Three recurrent decoders over one bidirectional GRU encoder, and a small Transformer encoder-decoder:

    none        Cho et al. 2014 / Sutskever et al. 2014: the source squeezed into one fixed context vector c,
                the same at every decoder step (the bottleneck).
    bahdanau    Bahdanau, Cho & Bengio 2015: a new context c_i at every step, from additive attention
                e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j) with the *previous* decoder state s_{i-1}.
    dot         Luong, Pham & Manning 2015 (global attention): score(s_i, h_j) = s_i^T h_j with the *current*
    general     state s_i, after the recurrent step; "general" is s_i^T W_a h_j. Attentional state
                h~_i = tanh(W_c [c_i; s_i]) predicts y_i and is fed to the next step (input feeding).
    transformer Vaswani et al. 2017: self-attention in the encoder, causal self-attention and cross-attention
                in the decoder, no recurrence at all.

Every model has one contract (STYLE §2):
    forward(src, tgt_in, tgt_out=None, return_internals=False) -> (logits, loss[, internals])
    encode(src) -> memory;   start(memory) -> state;   step(y_prev, state, memory) -> (logits, state, alpha)
so greedy and beam decoding (`greedy`, `beam_search` in seq2seq_decoding.py) serve all five; alpha (B, T_src) is the
step's attention over the source (the Transformer's last layer, mean over heads), None without attention.

Internals are returned, never kept on a module, in the contract every net of playground/nets follows, once for each
of the three parts of an encoder-decoder:

    internals = {"encoder": {"layers": [...]}, "decoder": {"layers": [...]}, "cross": {"layers": [...]}}

    encoder  recurrent: the bidirectional GRU's two directions (forward, backward), each {"h", "c", "gates"} as
             RecurrentEncoder returns them; Transformer: one {"q", "k", "v", "scores", "attn"} per self-attention layer
    decoder  recurrent: one {"h", "c", "gates"}: "h" the list of the T_out states s_i (B, 2H), "c" None (a GRU),
             "gates" {"r", "z", "n"} each (B, T_out, 2H); Transformer: one causal self-attention block per layer
    cross    the decoder's attention over the source, one block per layer: the Transformer's L cross-attention
             blocks; a recurrent decoder's one score function (none for the fixed-context model: an empty list)

Every attention block has the same shapes: q (B, nh, T_q, d_q), k (B, nh, T_k, d_k), v (B, nh, T_k, d_v), the
scores (B, nh, T_q, T_k) before the softmax (and before the decoder's causal mask) and attn (B, nh, T_q, T_k) whose
rows sum to 1; (T_q, T_k) is (T_src, T_src) in the encoder, (T_out, T_out) in the decoder, (T_out, T_src) in cross.
A recurrent score function is one head (nh = 1): q is the decoder state it scores with (s_{i-1} for Bahdanau, s_i
for Luong), k its precomputed keys (U_a h_j, W_a h_j, or h_j for dot), v the annotations h_j, scores e_ij and attn
alpha_ij. So the alignment of every model with attention is `cross["layers"][-1]["attn"].mean(1)`.

Sources in a batch share one length (the task's sampler makes them so), so no padding mask is needed in the
encoder or in attention; padded *target* positions carry the label -100 and are left out of the loss.

References
    Cho et al. 2014, "Learning phrase representations using RNN encoder-decoder" (the GRU, a fixed context).
    Sutskever, Vinyals & Le 2014, "Sequence to sequence learning with neural networks".
    Bahdanau, Cho & Bengio 2015, "Neural machine translation by jointly learning to align and translate".
    Luong, Pham & Manning 2015, "Effective approaches to attention-based neural machine translation".
    Vaswani et al. 2017, "Attention is all you need".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.nets.recurrent import GRUCell, RecurrentEncoder

VARIANTS = ("none", "bahdanau", "dot", "general", "transformer")
RNN_VARIANTS = VARIANTS[:4]


# ---------------------------------------------------------------------------------------------
# Score functions of the recurrent decoders: (query (B, n), annotations h (B, T, 2H), keys) -> scores e and
# weights alpha, both (B, T)


class AdditiveAttention(nn.Module):
    """Bahdanau et al. 2015, eq. 6 and appendix A.1.2:

        e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j),   alpha_ij = exp(e_ij) / sum_k exp(e_ik),   c_i = sum_j alpha_ij h_j

    U_a h_j does not depend on i, so it is computed once per source (`keys`), as the paper suggests.
    """

    def __init__(self, query_size: int, key_size: int, attn_size: int):
        super().__init__()
        self.W_a = nn.Linear(query_size, attn_size, bias=False)   # W_a (n', n)
        self.U_a = nn.Linear(key_size, attn_size, bias=False)     # U_a (n', 2H)
        self.v_a = nn.Linear(attn_size, 1, bias=False)            # v_a (n',)

    def keys(self, h: torch.Tensor) -> torch.Tensor:
        return self.U_a(h)                                         # (B, T, n')

    def forward(self, s: torch.Tensor, h: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e = self.v_a(torch.tanh(self.W_a(s)[:, None, :] + keys)).squeeze(-1)   # (B, T): e_ij
        return e, F.softmax(e, dim=-1)                                          # alpha_ij over j


class MultiplicativeAttention(nn.Module):
    """Luong et al. 2015, eq. 8: score(s_i, h_j) = s_i^T h_j (dot) or s_i^T W_a h_j (general);
    alpha_ij = softmax_j(score(s_i, h_j)), c_i = sum_j alpha_ij h_j. Dot needs dim(s) = dim(h).
    The paper's h_t (decoder) and h-bar_s (encoder) are our s_i and h_j."""

    def __init__(self, query_size: int, key_size: int, general: bool):
        super().__init__()
        assert general or query_size == key_size, f"dot scores need equal sizes, not {query_size} and {key_size}"
        self.W_a = nn.Linear(key_size, query_size, bias=False) if general else None   # W_a (n, 2H)

    def keys(self, h: torch.Tensor) -> torch.Tensor:
        return self.W_a(h) if self.W_a is not None else h         # (B, T, n): W_a h_j, once per source

    def forward(self, s: torch.Tensor, h: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e = (keys @ s[:, :, None]).squeeze(-1)                    # (B, T): s_i^T (W_a) h_j
        return e, F.softmax(e, dim=-1)


# ---------------------------------------------------------------------------------------------
# Config


@dataclass
class Seq2SeqConfig:
    variant: str = "bahdanau"     # none | bahdanau | dot | general | transformer
    src_vocab_size: int = 0       # set from the task's vocabulary by the trainer, never typed in
    tgt_vocab_size: int = 0       # likewise
    n_embd: int = 32              # source and target embedding size (RNN variants)
    hidden_size: int = 32         # H per encoder direction; the decoder state s_i has 2H units (dot needs that)
    attn_size: int = 32           # n', the width of Bahdanau's tanh layer (v_a has this many weights)
    d_model: int = 64             # Transformer width; must divide by n_head
    n_layer: int = 2              # Transformer layers, in the encoder and in the decoder
    n_head: int = 4               # Transformer heads (d_k = 16)
    d_ff: int = 128               # Transformer feed-forward inner width
    max_len: int = 160            # Transformer positions (source and target); RNNs have no limit
    bos_id: int = 1               # target start token <s> (the task's vocabulary puts it here)
    eos_id: int = 2               # target end token </s>

    def __post_init__(self):
        assert self.variant in VARIANTS, f"variant={self.variant!r} must be one of {', '.join(VARIANTS)}"
        assert self.d_model % self.n_head == 0, f"d_model ({self.d_model}) must divide by n_head ({self.n_head})"
        assert min(self.n_embd, self.hidden_size, self.attn_size, self.n_layer, self.d_ff, self.max_len) > 0, \
            "sizes must be positive"


# ---------------------------------------------------------------------------------------------
# The recurrent encoder-decoder


class RNNSeq2Seq(nn.Module):
    """Encoder (Bahdanau et al. 2015, §3.2): a bidirectional GRU, annotations h_j = [->h_j ; <-h_j] (B, T, 2H).
    Decoder state s_0 = tanh(W_s [->h_T ; <-h_1]) (both directions' final states; Bahdanau uses <-h_1 alone).

    none       c_i = c = [->h_T ; <-h_1] for every i (Cho et al. 2014: the one fixed summary)
               s_i = GRU([E y_{i-1} ; c], s_{i-1}),        logits_i = W_o tanh(W_t [s_i ; c ; E y_{i-1}])
    bahdanau   alpha_i = softmax_j(v_a^T tanh(W_a s_{i-1} + U_a h_j)),   c_i = sum_j alpha_ij h_j
               s_i = GRU([E y_{i-1} ; c_i], s_{i-1}),      logits_i = W_o tanh(W_t [s_i ; c_i ; E y_{i-1}])
    dot/general s_i = GRU([E y_{i-1} ; h~_{i-1}], s_{i-1})   (input feeding, h~_0 = 0)
               alpha_i = softmax_j(s_i^T h_j) or softmax_j(s_i^T W_a h_j),  c_i = sum_j alpha_ij h_j
               h~_i = tanh(W_c [c_i ; s_i]),               logits_i = W_o h~_i

    W_s, W_t and W_o have biases (not written above); the score functions' W_a, U_a, v_a and Luong's W_c have none,
    as in the papers. Departure from Bahdanau et al.: their output layer is a maxout over [s_{i-1}; c_i; E y_{i-1}];
    ours is a tanh layer over [s_i; c_i; E y_{i-1}] (one fewer trick to explain, the same information).
    """

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        assert config.variant in RNN_VARIANTS, f"{config.variant!r} is not a recurrent variant"
        self.config = c = config
        H, n = c.hidden_size, 2 * c.hidden_size                   # n: decoder state size = annotation size
        self.src_emb = nn.Embedding(c.src_vocab_size, c.n_embd)
        self.tgt_emb = nn.Embedding(c.tgt_vocab_size, c.n_embd)
        self.encoder = RecurrentEncoder("gru", c.n_embd, H, bidirectional=True)
        self.W_s = nn.Linear(n, n)                                 # s_0 = tanh(W_s [->h_T ; <-h_1])
        self.cell = GRUCell(c.n_embd + n, n)                       # input [E y_{i-1} ; c_i] or [E y_{i-1} ; h~_{i-1}]
        if c.variant == "bahdanau":
            self.attention = AdditiveAttention(n, n, c.attn_size)
        elif c.variant in ("dot", "general"):
            self.attention = MultiplicativeAttention(n, n, general=c.variant == "general")
        else:
            self.attention = None
        if c.variant in ("none", "bahdanau"):
            self.W_t = nn.Linear(n + n + c.n_embd, n)              # tanh(W_t [s_i ; c_i ; E y_{i-1}])
        else:
            self.W_c = nn.Linear(n + n, n, bias=False)             # h~_i = tanh(W_c [c_i ; s_i]) (Luong eq. 5)
        self.W_o = nn.Linear(n, c.tgt_vocab_size)

    def encode(self, src: torch.Tensor, return_internals: bool = False):
        """src (B, T) -> memory: annotations h (B, T, 2H), the fixed summary c (B, 2H), precomputed keys
        [, the encoder's internals {"layers": [forward, backward]}]."""
        x = self.src_emb(src)                                      # (B, T, m)
        h, h_n = self.encoder(x)                                   # (B, T, 2H); h_n (2, B, H): [forward, backward]
        c = torch.cat([h_n[0], h_n[1]], dim=-1)                    # [->h_T ; <-h_1] (B, 2H)
        keys = self.attention.keys(h) if self.attention is not None else None
        memory = {"h": h, "c": c, "keys": keys}
        return (memory, self._encoder_internals(x, h)) if return_internals else memory

    def _encoder_internals(self, x: torch.Tensor, h: torch.Tensor) -> dict:
        """The encoder's {"layers": [forward, backward]} for the annotations h that torch's fused kernel computed,
        so that asking for internals changes no output (RecurrentEncoder's cell-by-cell path differs in the last
        float bits): h_t as the kernel gave them (slices of its output: values to look at, not the nodes a gradient
        flows through), the gates recomputed by the same cell from x_t and the previous state, all steps in one call
        per direction."""
        H, layers = self.config.hidden_size, []
        for d, cell in enumerate(self.encoder.cells):
            h_d = h[..., d * H:(d + 1) * H]                        # (B, T, H)
            zero = torch.zeros_like(h_d[:, :1])                    # the initial state, as the encoder starts
            prev = torch.cat([zero, h_d[:, :-1]], dim=1) if d == 0 else torch.cat([h_d[:, 1:], zero], dim=1)
            _, _, gates = cell(x.flatten(0, 1), prev.flatten(0, 1), return_internals=True)   # backward: from t+1
            layers.append({"h": list(h_d.unbind(1)), "c": None,
                           "gates": {g: value.view_as(h_d) for g, value in gates.items()}})   # each (B, T, H)
        return {"layers": layers}

    def start(self, memory: dict):
        s0 = torch.tanh(self.W_s(memory["c"]))                     # (B, n)
        return (s0, torch.zeros_like(s0))                          # (s_0, h~_0): h~ is used by input feeding only

    def step(self, y_prev: torch.Tensor, state, memory: dict, return_internals: bool = False):
        """One decoder step: y_prev (B,) -> logits (B, V), new state, alpha (B, T) (None without attention)
        [, this step's internals: s_i, the GRU's gates, the query q that was scored, the scores e and alpha]."""
        s, h_tilde = state
        e = self.tgt_emb(y_prev)                                   # E y_{i-1} (B, m)
        v = self.config.variant
        scores = alpha = None
        if v in ("none", "bahdanau"):
            q = s                                                  # Bahdanau scores with s_{i-1}
            if v == "none":
                c_i = memory["c"]                                  # the same c at every step
            else:
                scores, alpha, c_i = self._attend(s, memory)
            s, _, gates = self.cell(torch.cat([e, c_i], dim=-1), s, return_internals=True)   # s_i
            out = torch.tanh(self.W_t(torch.cat([s, c_i, e], dim=-1)))
        else:
            s, _, gates = self.cell(torch.cat([e, h_tilde], dim=-1), s, return_internals=True)  # input feeding
            q = s                                                  # Luong scores with s_i
            scores, alpha, c_i = self._attend(s, memory)
            h_tilde = torch.tanh(self.W_c(torch.cat([c_i, s], dim=-1)))
            out = h_tilde
        logits = self.W_o(out)                                     # (B, V)
        if return_internals:   # the cell computes its gates anyway: asking for them above costs nothing
            return logits, (s, h_tilde), alpha, {"s": s, "gates": gates, "q": q, "scores": scores, "attn": alpha}
        return logits, (s, h_tilde), alpha

    def _attend(self, q: torch.Tensor, memory: dict):
        """The scores e, the weights alpha (B, T) and the context c_i = sum_j alpha_ij h_j (B, 2H). With
        memory["uniform"] (see `uniform_attention`) alpha is 1/T everywhere whatever the scores: c_i is the mean of
        the annotations, the same at every step (a knockout of attention; the scores are still computed and shown)."""
        scores, alpha = self.attention(q, memory["h"], memory["keys"])
        if memory.get("uniform"):
            alpha = torch.full_like(alpha, 1.0 / alpha.size(-1))
        return scores, alpha, (alpha[:, :, None] * memory["h"]).sum(1)    # (B, 2H)

    def forward(self, src, tgt_in, tgt_out=None, return_internals: bool = False):
        """Teacher forcing: tgt_in (B, T_out) = <s> y_1 .. y_{n-1}; tgt_out = y_1 .. y_n (-100 = padding).
        Returns logits (B, T_out, V), the mean cross-entropy over labelled positions (or None)[, internals:
        the encoder's, the decoder's and the score function's, as the module docstring describes]."""
        memory, encoder = self.encode(src, return_internals=True) if return_internals else (self.encode(src), None)
        state = self.start(memory)
        logits, steps = [], []
        for i in range(tgt_in.size(1)):
            out = self.step(tgt_in[:, i], state, memory, return_internals)
            logits.append(out[0])
            state = out[1]
            if return_internals:
                steps.append(out[3])
        logits = torch.stack(logits, dim=1)                        # (B, T_out, V)
        loss = None
        if tgt_out is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=-100)
        if return_internals:
            return logits, loss, self._internals(memory, encoder, steps)
        return logits, loss

    def _internals(self, memory: dict, encoder: dict, steps: list[dict]) -> dict:
        """The per-step records of forward() stacked over the T_out steps, in the contract's three parts."""
        decoder = {"h": [t["s"] for t in steps], "c": None,
                   "gates": {g: torch.stack([t["gates"][g] for t in steps], dim=1) for g in steps[0]["gates"]}}
        cross = []
        if self.attention is not None:                             # one head: (B, T, .) -> (B, 1, T, .)
            over_steps = {key: torch.stack([t[key] for t in steps], dim=1)[:, None] for key in ("q", "scores", "attn")}
            cross.append({"q": over_steps["q"], "k": memory["keys"][:, None], "v": memory["h"][:, None],
                          "scores": over_steps["scores"], "attn": over_steps["attn"]})
        return {"encoder": encoder, "decoder": {"layers": [decoder]}, "cross": {"layers": cross}}


# ---------------------------------------------------------------------------------------------
# The Transformer encoder-decoder


def sinusoidal_positions(n: int, d: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (Vaswani et al. 2017, §3.5)."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe                                                      # (n, d)


class MultiHeadAttention(nn.Module):
    """head_i = softmax(Q_i K_i^T / sqrt(d_k) + M) V_i,  MultiHead(Q, K, V) = Concat(head_1..head_h) W^O,
    with Q = x W^Q, K = m W^K, V = m W^V: self-attention when m = x, cross-attention when m is the encoder
    output. M = -inf above the diagonal when causal (a decoder position sees only itself and earlier ones).
    Each projection also adds a bias (as torch.nn.MultiheadAttention does; the paper writes none)."""

    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, m, causal: bool = False):
        """x (B, T, C) queries, m (B, S, C) keys and values -> y (B, T, C) and this block's internals: q (B, nh, T, hs),
        k and v (B, nh, S, hs), the scaled scores q k^T / sqrt(d_k) before the mask and attn (B, nh, T, S). They are
        computed in any case (the weights are written out), so they are always returned."""
        B, T, C = x.shape
        S, nh, hs = m.size(1), self.n_head, C // self.n_head
        q = self.W_q(x).view(B, T, nh, hs).transpose(1, 2)        # (B, nh, T, hs)
        k = self.W_k(m).view(B, S, nh, hs).transpose(1, 2)        # (B, nh, S, hs)
        v = self.W_v(m).view(B, S, nh, hs).transpose(1, 2)        # (B, nh, S, hs)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)         # (B, nh, T, S)
        masked = scores
        if causal:
            allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril()
            masked = scores.masked_fill(~allowed, float("-inf"))  # masked weights are exactly 0
        att = F.softmax(masked, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)  # Concat(head_1..head_h) (B, T, C)
        return self.W_o(y), dict(q=q, k=k, v=v, scores=scores, attn=att)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (Vaswani et al. 2017, eq. 2)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class EncoderLayer(nn.Module):
    """x = x + SelfAttn(LN(x)); x = x + FFN(LN(x))."""

    def __init__(self, c: Seq2SeqConfig):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(c.d_model), MultiHeadAttention(c.d_model, c.n_head)
        self.ln_2, self.ffn = nn.LayerNorm(c.d_model), FeedForward(c.d_model, c.d_ff)

    def forward(self, x):
        """x (B, S, d) -> x (B, S, d), the self-attention block's internals."""
        a, block = self.attn(self.ln_1(x), self.ln_1(x))
        x = x + a                      # pre-norm (as GPT-2), not the post-norm of Vaswani et al. 2017
        return x + self.ffn(self.ln_2(x)), block


class DecoderLayer(nn.Module):
    """y = y + CausalSelfAttn(LN(y)); y = y + CrossAttn(LN(y), memory); y = y + FFN(LN(y))."""

    def __init__(self, c: Seq2SeqConfig):
        super().__init__()
        self.ln_1, self.self_attn = nn.LayerNorm(c.d_model), MultiHeadAttention(c.d_model, c.n_head)
        self.ln_2, self.cross_attn = nn.LayerNorm(c.d_model), MultiHeadAttention(c.d_model, c.n_head)
        self.ln_3, self.ffn = nn.LayerNorm(c.d_model), FeedForward(c.d_model, c.d_ff)

    def forward(self, y, memory):
        """y (B, T, d), memory (B, S, d) -> y (B, T, d), the internals of the self- and of the cross-attention."""
        a, self_block = self.self_attn(self.ln_1(y), self.ln_1(y), causal=True)
        y = y + a                                                  # pre-norm, as in the encoder
        a, cross_block = self.cross_attn(self.ln_2(y), memory)     # queries from the target, keys from the source
        y = y + a
        return y + self.ffn(self.ln_3(y)), self_block, cross_block


class TransformerSeq2Seq(nn.Module):
    """Vaswani et al. 2017 with pre-norm layers and a final LayerNorm on each side:

        z_0 = E_src[x] sqrt(d) + PE,  z_l = EncoderLayer(z_{l-1}),  memory = LN(z_L)
        u_0 = E_tgt[y_<i] sqrt(d) + PE,  u_l = DecoderLayer(u_{l-1}, memory),  logits = LN(u_L) E_tgt^T

    The output layer shares the target embedding (§3.4). step() re-reads the whole target prefix (no KV cache:
    targets here are a few dozen tokens).
    """

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        assert config.variant == "transformer", f"{config.variant!r} is not the transformer variant"
        self.config = c = config
        self.src_emb = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_emb = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.register_buffer("pe", sinusoidal_positions(c.max_len, c.d_model), persistent=False)
        self.enc = nn.ModuleList(EncoderLayer(c) for _ in range(c.n_layer))
        self.dec = nn.ModuleList(DecoderLayer(c) for _ in range(c.n_layer))
        self.ln_enc, self.ln_dec = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        for emb in (self.src_emb, self.tgt_emb):   # N(0, 1/d): times sqrt(d) gives unit-variance inputs, and the
            nn.init.normal_(emb.weight, std=c.d_model ** -0.5)  # tied output layer starts with logits of std ~1

    def _embed(self, emb: nn.Embedding, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        assert T <= self.config.max_len, f"{T} tokens: the model has {self.config.max_len} positions"
        return emb(idx) * math.sqrt(self.config.d_model) + self.pe[:T]   # (B, T, d)

    def encode(self, src: torch.Tensor, return_internals: bool = False):
        """src (B, S) -> memory (B, S, d) [, the encoder's internals {"layers": one self-attention block per layer}]."""
        x = self._embed(self.src_emb, src)
        blocks = []
        for layer in self.enc:
            x, block = layer(x)
            blocks.append(block)
        memory = self.ln_enc(x)                                    # (B, S, d)
        return (memory, {"layers": blocks}) if return_internals else memory

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor):
        """tgt_in (B, T) -> logits (B, T, V) and, per layer, the internals of the causal self-attention and of
        the cross-attention (attn (B, nh, T, T) and (B, nh, T, S))."""
        y = self._embed(self.tgt_emb, tgt_in)
        selfs, crosses = [], []
        for layer in self.dec:
            y, self_block, cross_block = layer(y, memory)
            selfs.append(self_block)
            crosses.append(cross_block)
        logits = self.ln_dec(y) @ self.tgt_emb.weight.T            # tied output layer (B, T, V)
        return logits, selfs, crosses

    def forward(self, src, tgt_in, tgt_out=None, return_internals: bool = False):
        """Teacher forcing, as RNNSeq2Seq.forward; the internals as the module docstring describes."""
        memory, encoder = self.encode(src, return_internals=True)
        logits, selfs, crosses = self.decode(tgt_in, memory)
        loss = None
        if tgt_out is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=-100)
        if return_internals:
            return logits, loss, {"encoder": encoder, "decoder": {"layers": selfs}, "cross": {"layers": crosses}}
        return logits, loss

    def start(self, memory):
        return memory.new_zeros(memory.size(0), 0, dtype=torch.long)   # the target prefix read so far (B, 0)

    def step(self, y_prev, state, memory):
        prefix = torch.cat([state, y_prev[:, None]], dim=1)       # (B, i)
        logits, _, crosses = self.decode(prefix, memory)
        alpha = crosses[-1]["attn"][:, :, -1].mean(1)              # last layer, mean over heads, newest row (B, S)
        return logits[:, -1], prefix, alpha


def uniform_attention(memory: dict) -> dict:
    """The encoder's memory with attention knocked out: every decoder step of an attention model (Bahdanau, Luong)
    then weighs the annotations 1/T each, whatever the scores say (RNNSeq2Seq._attend). A new dict: the model and
    the memory it was given are untouched."""
    return {**memory, "uniform": True}


def build_model(config: Seq2SeqConfig) -> nn.Module:
    """The model class for a config's variant (the checkpoint loader's constructor for kind "seq2seq")."""
    return TransformerSeq2Seq(config) if config.variant == "transformer" else RNNSeq2Seq(config)


def load_model(config: Seq2SeqConfig, state: dict) -> nn.Module:
    """The checkpoint loader's constructor for kind "seq2seq": the variant's class, with the saved weights."""
    model = build_model(config)
    model.load_state_dict(state)
    return model
