"""A small BERT: a bidirectional Transformer encoder pre-trained on masked-LM and next-sentence prediction.

The layout is BERT's (Devlin et al. 2019, §3): the input representation is the sum of token, segment
and position embeddings, normalised; then post-norm blocks as in Vaswani et al. 2017,
x = LN(x + Sublayer(x)), of bidirectional multi-head self-attention and a GELU feed-forward network;
an MLM head (a transform, then a decoder tied to the token embedding) on every position and an NSP
head on the pooled [CLS] state. Parameters map one to one onto `transformers.BertForMaskedLM` /
`BertModel` / `BertForPreTraining` (`playground.nets.hf` has the key map), so all-MiniLM-L6-v2 loads into
`BertEncoder` and parity can be tested.

Attention is written out, softmax(q k^T / sqrt(d_k) + M) v with M = -inf on padding keys, because the
app shows the weights; `F.scaled_dot_product_attention` computes the same thing faster and serves when
nobody looks, and as the tests' oracle. Introspection is returned, never kept on the modules.

References: Vaswani et al. 2017 (attention, post-norm blocks); Devlin et al. 2019 (BERT: embeddings,
MLM with 15% selected and 80/10/10 replacement, NSP, GELU); Hendrycks & Gimpel 2016 (GELU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.text import Encoded  # every family's input; nets/bert.py's encode() makes it
from playground.nets.hooks import HookPoint, add_block_hooks

IGNORE_INDEX = -100  # label of a position that is not masked (the loss skips it), as in transformers


class Embeddings(nn.Module):
    """h_0 = LN(E_tok[x_t] + E_seg[s_t] + E_pos[t]): BERT's input representation (Devlin et al. 2019, Fig. 2)."""

    def __init__(self, config: "BertConfig"):
        super().__init__()
        self.tok = nn.Embedding(config.vocab_size, config.n_embd)       # E_tok: WordPiece token embedding
        self.seg = nn.Embedding(config.type_vocab_size, config.n_embd)  # E_seg: sentence A (0) or B (1)
        self.pos = nn.Embedding(config.n_positions, config.n_embd)      # E_pos: learned, not sinusoidal
        self.ln = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, idx: torch.Tensor, token_type_ids: torch.Tensor,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        B, T = idx.shape
        pos = torch.arange(T, dtype=torch.long, device=idx.device)       # (T,)
        # inputs_embeds (B, T, C) stands for E_tok[x_t] (transformers' argument of that name): attributions
        # (integrated gradients) move along a path of token embeddings that no token has
        tok = self.tok(idx) if inputs_embeds is None else inputs_embeds
        x = tok + self.seg(token_type_ids) + self.pos(pos)                # (B, T, C)
        return self.drop(self.ln(x))


class SelfAttention(nn.Module):
    """head_i = softmax(Q_i K_i^T / sqrt(d_k) + M) V_i with Q = x W^Q, K = x W^K, V = x W^V;
    MultiHead(x) = Concat(head_1..head_h) W^O. M is 0 for real keys and -inf for padding keys;
    there is no causal mask: every token sees the whole sequence, both directions."""

    def __init__(self, config: "BertConfig"):
        super().__init__()
        self.n_head = config.n_head
        self.query = nn.Linear(config.n_embd, config.n_embd)  # W^Q of all heads side by side
        self.key = nn.Linear(config.n_embd, config.n_embd)    # W^K
        self.value = nn.Linear(config.n_embd, config.n_embd)  # W^V
        self.proj = nn.Linear(config.n_embd, config.n_embd)   # W^O
        self.dropout = config.dropout
        self.hook_z = HookPoint()                             # each head's output, before W^O

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None, return_internals: bool = False):
        """x (B, T, C); key_mask (B, T) bool, True for real tokens. Returns MultiHead(x) (B, T, C) and,
        with `return_internals`, this layer's q, k, v (B, nh, T, hs), the scaled scores
        q k^T / sqrt(d_k) before the mask and the probabilities attn (B, nh, T, T) (else None)."""
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        q = self.query(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.key(x).view(B, T, nh, hs).transpose(1, 2)    # (B, nh, T, hs)
        v = self.value(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        # (B, 1, 1, T): broadcast over heads, queries
        allowed = None if key_mask is None else key_mask[:, None, None, :]
        dropout_p = self.dropout if self.training else 0.0
        layer = None
        if not return_internals:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)  # fast path
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, nh, T, T): q k^T / sqrt(d_k)
            masked = scores if allowed is None else scores.masked_fill(~allowed, float("-inf"))
            att = F.softmax(masked, dim=-1)                     # padding keys get exactly 0
            y = F.dropout(att, dropout_p, self.training) @ v    # (B, nh, T, hs)
            layer = dict(q=q, k=k, v=v, scores=scores, attn=att)
        z = self.hook_z(y.transpose(1, 2))                      # (B, T, nh, hs): the heads, one by one
        y = z.reshape(B, T, C)                                  # Concat(head_1..head_h): (B, T, C)
        return self.proj(y), layer


class FeedForward(nn.Module):
    """FFN(x) = GELU(x W_1 + b_1) W_2 + b_2, inner width n_inner (4 C in BERT)."""

    def __init__(self, config: "BertConfig"):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, config.n_inner)
        self.proj = nn.Linear(config.n_inner, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))  # BERT's GELU is the exact erf form (GPT-2 uses the tanh approximation)


class Block(nn.Module):
    """x = LN(x + MultiHead(x)); x = LN(x + FFN(x)): post-norm, as in Vaswani et al. 2017 and BERT."""

    def __init__(self, config: "BertConfig"):
        super().__init__()
        self.attn = SelfAttention(config)
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)
        self.mlp = FeedForward(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)
        self.drop = nn.Dropout(config.dropout)
        add_block_hooks(self)         # hook_resid_pre, hook_attn_out, ... (nets/hooks.py): no parameters

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None, return_internals: bool = False):
        x = self.hook_resid_pre(x)
        a, layer = self.attn(x, key_mask, return_internals)
        # post-norm: the sum is normalised (GPT-2 normalises the input); resid_mid is after this first LayerNorm
        x = self.hook_resid_mid(self.ln_1(x + self.drop(self.hook_attn_out(a))))
        x = self.ln_2(x + self.drop(self.hook_mlp_out(self.mlp(x))))
        return self.hook_resid_post(x), layer


@dataclass
class BertConfig:
    vocab_size: int = 8_000       # set from the WordPiece tokenizer (bert-base-uncased: 30,522)
    n_positions: int = 128        # longest input in tokens, [CLS] and [SEP]s included (BERT: 512)
    type_vocab_size: int = 2      # segments: sentence A and sentence B
    n_layer: int = 4              # blocks (BERT-base: 12; MiniLM-L6: 6)
    n_head: int = 4               # heads per block; n_embd must divide by it
    n_embd: int = 256             # model width H (d_model)
    n_inner: int = 1_024          # feed-forward width, 4 H as in BERT
    dropout: float = 0.1          # BERT's 0.1 on embeddings, attention probabilities and sublayer outputs
    layer_norm_eps: float = 1e-12  # BERT's epsilon (transformers' default for BERT)
    pad_token_id: int = 0         # [PAD] in BERT's vocabulary

    def __post_init__(self):
        assert self.n_embd % self.n_head == 0, f"n_embd ({self.n_embd}) must divide by n_head ({self.n_head})"
        assert self.vocab_size > 0 and self.n_positions > 0, "vocab_size and n_positions must be positive"
        assert self.type_vocab_size >= 1, f"type_vocab_size must be at least 1, not {self.type_vocab_size}"
        assert 0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), not {self.dropout}"


def _init_weights(module: nn.Module) -> None:
    """BERT's initialisation: N(0, 0.02) for weights and embeddings, zero biases, LayerNorm at identity."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear):
        nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class BertEncoder(nn.Module):
    """h_0 = Embeddings(x, s); h_l = Block(h_{l-1}) for l = 1..L; pooled = tanh(h_L[CLS] W_p + b_p).
    The body of every BERT, `transformers.BertModel`'s parameters under our names."""

    def __init__(self, config: BertConfig, init_weights: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.pooler = nn.Linear(config.n_embd, config.n_embd)  # the [CLS] summary that NSP reads
        if init_weights:  # False when weights are loaded next: drawing 23M numbers twice costs ~0.5 s of startup
            self.apply(_init_weights)

    def forward(self, idx: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, return_internals: bool = False,
                inputs_embeds: torch.Tensor | None = None):
        """idx (B, T) token ids; token_type_ids (B, T) segments (default all A); attention_mask (B, T),
        1 for real tokens and 0 for padding (default all real); inputs_embeds (B, T, C), when given, in place of
        the token embeddings E_tok[idx] (positions and segments are still added).

        Returns h_L (B, T, C) and pooled (B, C); with `return_internals`, a third element:
        {"layers": one dict per layer (q, k, v, scores, attn: see `SelfAttention.forward`),
        "hidden": L + 1 tensors (B, T, C), h_0 .. h_L}.
        """
        B, T = idx.shape
        assert T <= self.config.n_positions, f"{T} tokens do not fit the {self.config.n_positions} positions"
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(idx)
        key_mask = None if attention_mask is None else attention_mask.bool()  # (B, T)
        x = self.embeddings(idx, token_type_ids, inputs_embeds)  # (B, T, C)
        hidden, layers = [x], []
        for block in self.blocks:
            x, layer = block(x, key_mask, return_internals)
            hidden.append(x)
            layers.append(layer)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, C): the [CLS] position
        return (x, pooled, dict(layers=layers, hidden=hidden)) if return_internals else (x, pooled)


class MLMHead(nn.Module):
    """p(x_t | x_masked) = softmax(LN(GELU(h_t W_t + b_t)) E_tok^T + b): a transform, then the decoder
    tied to the token embedding E_tok (so the head adds only W_t, LN and one bias per token)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = nn.Linear(config.n_embd, config.n_embd)
        self.ln = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))  # b: the decoder's own bias

    def forward(self, h: torch.Tensor, tok_embedding: torch.Tensor) -> torch.Tensor:
        x = self.ln(F.gelu(self.transform(h)))           # (B, T, C)
        return F.linear(x, tok_embedding, self.bias)     # (B, T, V): tied decoder


class BertForPreTraining(nn.Module):
    """BERT with both pre-training heads: masked-LM on every position, next-sentence prediction on [CLS].
    With nsp=False there is no NSP head (`self.nsp is None`, `nsp_logits` None): a model whose
    pre-training had none, e.g. all-MiniLM-L6-v2 with an MLM head (playground/minilm_mlm.py)."""

    def __init__(self, config: BertConfig, init_weights: bool = True, nsp: bool = True):
        super().__init__()
        self.config = config
        self.bert = BertEncoder(config, init_weights)
        self.mlm = MLMHead(config)
        self.nsp = nn.Linear(config.n_embd, 2) if nsp else None  # IsNext (0) / NotNext (1), on the pooled [CLS] state
        if init_weights:
            self.mlm.apply(_init_weights)
            if self.nsp is not None:
                self.nsp.apply(_init_weights)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                next_sentence_label: torch.Tensor | None = None, return_internals: bool = False):
        """idx (B, T) with some tokens replaced (by [MASK], a random token, or kept) -> (logits (B, T, V), loss).

        labels (B, T): the original token where a position was selected, -100 elsewhere; the loss is
        the mean cross-entropy over the selected positions, plus the NSP cross-entropy when
        next_sentence_label (B,) is given. With `return_internals`, a third element: the encoder's
        internals (see `BertEncoder.forward`) and `nsp_logits` (B, 2), None without an NSP head.
        """
        # internals: [] or [dict]
        h, pooled, *internals = self.bert(idx, token_type_ids, attention_mask, return_internals)
        logits = self.mlm(h, self.bert.embeddings.tok.weight)  # (B, T, V)
        nsp_logits = None if self.nsp is None else self.nsp(pooled)  # (B, 2)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=IGNORE_INDEX)
        if next_sentence_label is not None:
            assert self.nsp is not None, "this model has no next-sentence-prediction head (model.nsp is None)"
            nsp_loss = F.cross_entropy(nsp_logits, next_sentence_label.view(-1))
            loss = nsp_loss if loss is None else loss + nsp_loss  # BERT's objective: the sum of the two
        if return_internals:
            return logits, loss, {**internals[0], "nsp_logits": nsp_logits}
        return logits, loss


def pair_encoding(cls_id: int, sep_id: int, ids_a: list[int], ids_b: list[int] | None = None,
                  max_len: int | None = None) -> tuple[list[int], list[int], int]:
    """[CLS] A [SEP] (B [SEP]) with segment ids 0 for [CLS], A and its [SEP], 1 for B and its [SEP].
    With `max_len`, the longer sentence loses tokens from its end until the whole fits (BERT's
    truncation); returns ids, segment ids and how many tokens were cut."""
    ids_a, ids_b = list(ids_a), (None if ids_b is None else list(ids_b))
    cut = 0
    if max_len is not None:
        room = max_len - 2 - (0 if ids_b is None else 1)
        assert room >= 0, f"max_len {max_len} leaves no room for the special tokens"
        while len(ids_a) + len(ids_b or []) > room:
            if ids_b and len(ids_b) >= len(ids_a):
                ids_b.pop()
            else:
                ids_a.pop()
            cut += 1
    ids = [cls_id] + ids_a + [sep_id]
    segments = [0] * len(ids)
    if ids_b is not None:
        ids += ids_b + [sep_id]
        segments += [1] * (len(ids_b) + 1)
    return ids, segments, cut


def encode(tokenizer, text_a: str, text_b: str | None = None, max_len: int | None = None, start: int = 0) -> Encoded:
    """`tokenizer` (a WordPiece `tokenizers.Tokenizer` with [CLS] and [SEP]) reads A and B without special
    tokens; A's first `start` tokens are left out (a window into a long text, fill-in's), then
    `pair_encoding` adds [CLS] and [SEP]s and cuts to max_len."""
    encoding_a = tokenizer.encode(text_a, add_special_tokens=False)
    ids_a, offsets_a = encoding_a.ids[start:], encoding_a.offsets[start:]
    ids_b = None if text_b is None else tokenizer.encode(text_b, add_special_tokens=False).ids
    ids, segments, cut = pair_encoding(tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]"),
                                       ids_a, ids_b, max_len=max_len)
    kept_a = segments.count(0) - 2                         # [CLS] A [SEP]: the A tokens that fit
    none = (-1, -1)
    spans = [none] + [tuple(o) for o in offsets_a[:kept_a]] + [none] * (len(ids) - kept_a - 1)
    return Encoded([tokenizer.id_to_token(i) for i in ids], ids, segments, start + cut, spans)
