"""The encoders the contextual and sentence views run (all-MiniLM-L6-v2 in our BERT encoder, the one the
Attention tab loaded; our own BERT when its checkpoint is shipped; for the contextual view also our ELMo's biLM),
their padded batches and SBERT's pooling (Reimers & Gurevych 2019). The encoders are loaded once, shared and
only read."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from playground.analysis import attention, models

MAX_SENTENCE_TOKENS = 256   # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)
POOLINGS = ("mean", "max", "cls")
ENCODERS = {"minilm": "all-MiniLM-L6-v2 (pretrained, 6 layers × 384)",
            "bert": "our BERT (bert-english, pre-trained here from scratch; not trained for sentence similarity)"}
CONTEXTUAL = {**ENCODERS, "elmo": "our ELMo (elmo-english: a biLM over words, 2 biLSTM layers; eq. 1's mix)"}
ELMO_CHECKPOINT = "elmo-english"


@dataclass(frozen=True)
class Encoder:
    """A BERT encoder the contextual and sentence views can run: shared, read-only."""

    key: str
    model: torch.nn.Module      # bert.BertEncoder: forward(idx, token_type_ids, attention_mask, return_internals),
                                # whose internals["hidden"] are L+1 (B, T, C)
    tokenizer: object           # its WordPiece tokenizers.Tokenizer
    n_layer: int
    max_tokens: int             # positions the encoder has, [CLS] and [SEP] included (capped at 256)


def encoder(key: str = "minilm") -> Encoder | None:
    """MiniLM (the Attention tab's) or our BERT's encoder when its checkpoint is shipped; else None."""
    if key == "minilm":
        m = attention.load_minilm()
        return Encoder("minilm", m.model, m.tokenizer, m.n_layer, min(MAX_SENTENCE_TOKENS, m.model.config.n_positions))
    if key == "bert":
        return _bert_encoder()
    return None


@lru_cache(maxsize=None)
def _bert_encoder(name: str = "bert-english") -> Encoder | None:
    ckpt = models.find(name)
    if ckpt is None:  # not shipped, or damaged: the tab offers the other encoders and spaces
        return None
    model, c = ckpt.model.bert, ckpt.config
    return Encoder("bert", model, ckpt.tokenizer, c.n_layer, min(MAX_SENTENCE_TOKENS, c.n_positions))


@dataclass(frozen=True)
class ELMoEncoder:
    """Our ELMo's biLM for the contextual view: shared, read-only; the default mix (s, γ) comes from its card."""

    key: str
    model: torch.nn.Module      # nets.elmo.ELMo: forward(idx, return_internals=True)[2]["hidden"], L+1 (B, T, 2C)
    tokenizer: object           # its word vocabulary (lowercased letter runs; [UNK] is id 0)
    n_layer: int                # L: the biLSTM layers; the stream `hidden` has layers 0 .. L
    s: tuple[float, ...]        # the card's default weights (0: the plain average)
    gamma: float
    max_tokens: int             # words read per sentence (the LSTMs have no position limit; a budget)


@lru_cache(maxsize=None)
def elmo_encoder(name: str = ELMO_CHECKPOINT) -> ELMoEncoder | None:
    """Our ELMo when its checkpoint is shipped (and whole), else None."""
    ckpt = models.find(name)
    if ckpt is None:
        return None
    L = ckpt.config.n_layer
    mix = ckpt.card.get("mix") or {}
    s = tuple(float(w) for w in mix.get("s", [0.0] * (L + 1)))
    return ELMoEncoder("elmo", ckpt.model, ckpt.tokenizer, L, s, float(mix.get("gamma", 1.0)), MAX_SENTENCE_TOKENS)


def contextual_layers(key: str) -> int | None:
    """The highest layer the contextual view offers for `key` (None: not available)."""
    m = elmo_encoder() if key == "elmo" else encoder(key)
    return None if m is None else m.n_layer


def encode_batch(tokenizer, sentences: list[str],
                 max_tokens: int = MAX_SENTENCE_TOKENS) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """[CLS] sentence [SEP], cut to max_tokens, padded with [PAD] (id 0): ids and mask (B, T), and how
    many tokens each sentence lost to the cut."""
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    rows, cut = [], []
    for enc in tokenizer.encode_batch(sentences, add_special_tokens=False):
        ids = enc.ids[: max_tokens - 2]
        cut.append(len(enc.ids) - len(ids))
        rows.append([cls, *ids, sep])
    T = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask, cut


def pool(h: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """h (B, T, C) token states, mask (B, T) 1 for real tokens -> (B, C):
    mean: Σ_t m_t h_t / Σ_t m_t;  max: max over the real tokens of each dimension;  cls: h_0 ([CLS])."""
    assert pooling in POOLINGS, f"pooling must be one of {POOLINGS}, not {pooling!r}"
    m = mask.unsqueeze(-1).to(h.dtype)                                 # (B, T, 1)
    if pooling == "mean":
        return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    if pooling == "max":
        return h.masked_fill(m == 0, -1e9).max(1).values               # padding never wins (the library: -inf)
    return h[:, 0]
