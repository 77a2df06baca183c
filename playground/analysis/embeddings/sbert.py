"""The sentence-transformers library (Reimers & Gurevych 2019), imported on first use only (with transformers:
~3-5 s), never at app import; HF_HUB_OFFLINE=1 first, so nothing comes from the hub.

- Our BERT as a real `sentence_transformers.SentenceTransformer`, built in code: our encoder as the first
  module (`BertTokenEmbeddings`), then the library's Pooling and Normalize (`wrap_bert`); models/bert-english
  wrapped so is what the app embeds with (`sentence_transformer`).
- all-MiniLM-L6-v2 through the library itself (`sentence_transformers_embed`; the registry's
  `minilm-sentence-transformers`): the reference our own pooling of MiniLM is checked against
  (tests/test_embeddings.py).
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache

import numpy as np
import torch

from playground.analysis import models
from playground.analysis.embeddings.encoders import MAX_SENTENCE_TOKENS, POOLINGS, encode_batch


def _st_classes():
    """sentence-transformers' SentenceTransformer, Normalize, Pooling and Transformer, imported on first use
    (with transformers: ~3-5 s), never at app import; HF_HUB_OFFLINE=1 first: nothing comes from the hub."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:
        from sentence_transformers.models import Normalize, Pooling, Transformer
    return SentenceTransformer, Normalize, Pooling, Transformer


class BertTokenEmbeddings(torch.nn.Module):
    """Our `bert.BertEncoder` as the first module of a sentence-transformers pipeline (the place its
    `Transformer` module takes for a transformers model).

    preprocess (alias tokenize): texts -> {"input_ids": [CLS] text [SEP] padded with [PAD] (B, T),
    "attention_mask": m (B, T), 1 on real tokens}, each text cut to max_seq_length tokens.
    forward: adds "token_embeddings" = h_L (B, T, C), the encoder's last layer, to the features dict,
    which keeps "attention_mask" for the Pooling module that follows.

    A plain torch module (sentence-transformers calls a first module's `preprocess`, or `tokenize`, and
    `forward`), so defining it imports nothing; the encoder is shared with the other views, read-only."""

    def __init__(self, encoder: torch.nn.Module, tokenizer, max_seq_length: int = MAX_SENTENCE_TOKENS):
        super().__init__()
        self.encoder = encoder                                  # bert.BertEncoder
        self.tokenizer = tokenizer                              # its WordPiece tokenizers.Tokenizer
        self.max_seq_length = min(max_seq_length, encoder.config.n_positions)  # [CLS] and [SEP] included

    def preprocess(self, inputs: list[str], prompt: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        assert all(isinstance(t, str) for t in inputs), "this module embeds single texts, not pairs or images"
        ids, mask, _ = encode_batch(self.tokenizer, [(prompt or "") + t for t in inputs], self.max_seq_length)
        return {"input_ids": ids, "attention_mask": mask}

    tokenize = preprocess  # the name sentence-transformers < 6 calls

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        h, _ = self.encoder(features["input_ids"], features.get("token_type_ids"), features["attention_mask"])
        features["token_embeddings"] = h                        # (B, T, C)
        return features

    def get_word_embedding_dimension(self) -> int:
        return self.encoder.config.n_embd

    def save(self, output_path: str, *args, **kwargs) -> None:
        raise NotImplementedError("built in code from a checkpoint: use sbert.sentence_transformer(name, "
                                  "pooling); the checkpoint itself is the saved model")


def wrap_bert(bert_encoder: torch.nn.Module, tokenizer, pooling: str = "mean", normalize: bool = True,
              max_seq_length: int = MAX_SENTENCE_TOKENS):
    """Any `bert.BertEncoder` and its WordPiece tokenizer as a `sentence_transformers.SentenceTransformer`:
    BertTokenEmbeddings -> Pooling(pooling) -> Normalize (SBERT's pipeline, all-MiniLM-L6-v2's layout), on
    the CPU. Pooling: mean Σ_t m_t h_t / Σ_t m_t, max over the real tokens, or cls h_0."""
    assert pooling in POOLINGS, f"pooling must be one of {POOLINGS}, not {pooling!r}"
    SentenceTransformer, Normalize, Pooling, _ = _st_classes()
    modules = [BertTokenEmbeddings(bert_encoder, tokenizer, max_seq_length),
               Pooling(bert_encoder.config.n_embd, pooling_mode=pooling)]
    return SentenceTransformer(modules=modules + ([Normalize()] if normalize else []), device="cpu",
                               local_files_only=True)


_ST_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def _our_sentence_transformer(name: str, pooling: str):
    ckpt = models.get(name)
    assert hasattr(ckpt.model, "bert"), f"{name} is a {ckpt.kind} checkpoint, not a BERT"
    return wrap_bert(ckpt.model.bert, ckpt.tokenizer, pooling)


def sentence_transformer(name: str = "bert-english", pooling: str = "mean"):
    """Our BERT checkpoint models/<name> as a real `sentence_transformers.SentenceTransformer` (see
    `wrap_bert`), built in code around the shared, read-only encoder (no files from the hub); one per
    (name, pooling), built on first use. `.encode(sentences)` gives unit vectors (n, C)."""
    assert pooling in POOLINGS, f"pooling must be one of {POOLINGS}, not {pooling!r}"
    with _ST_LOCK:
        return _our_sentence_transformer(name, pooling)


def st_encode(model, sentences: list[str], batch_size: int = 32) -> np.ndarray:
    """model.encode as float32 (n, C), also for no sentences (sentence-transformers returns shape (0,))."""
    if not sentences:
        width = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension  # < 6
        return np.zeros((0, width()), np.float32)
    with torch.inference_mode():
        X = model.encode(sentences, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=False)
    return np.asarray(X, np.float32)


@lru_cache(maxsize=None)
def _sentence_transformer(pooling: str):
    """all-MiniLM-L6-v2 through sentence-transformers with the chosen pooling: the registry's copy
    (models.MINILM_ST: Transformer -> Pooling(mean) -> Normalize, loaded from the package's folder on first use,
    with transformers: ~3-5 s) for mean; for max and cls, the same Transformer module (its weights, its tokenizer,
    its 256 tokens) followed by Pooling(pooling) -> Normalize. One copy of the weights for every pooling."""
    library = models.get(models.MINILM_ST).model
    if pooling == "mean":
        return library
    SentenceTransformer, Normalize, Pooling, _ = _st_classes()
    word = library[0]
    assert word.max_seq_length == MAX_SENTENCE_TOKENS, (word.max_seq_length, MAX_SENTENCE_TOKENS)
    width = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    return SentenceTransformer(modules=[word, Pooling(width(), pooling_mode=pooling), Normalize()], device="cpu")


def sentence_transformers_embed(sentences: list[str], pooling: str = "mean") -> np.ndarray:
    """all-MiniLM-L6-v2's embeddings asked of the sentence-transformers library directly (the reference)."""
    assert pooling in POOLINGS, f"pooling must be one of {POOLINGS}, not {pooling!r}"
    with _ST_LOCK:
        model = _sentence_transformer(pooling)
    return st_encode(model, sentences)
