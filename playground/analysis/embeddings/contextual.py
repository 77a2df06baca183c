"""Contextual embeddings: one word's hidden state at a chosen layer of a BERT encoder, in several sentences.
word2vec gives a word one vector; here every occurrence has its own, mixed with its sentence by attention."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from playground.analysis.embeddings import EmbeddingError
from playground.analysis.embeddings.encoders import Encoder
from playground.analysis.embeddings.projection import pca
from playground.analysis.embeddings.words import unit_rows, word2vec_space

CONTEXT_SENTENCES = [
    "I deposited my salary at the bank this morning.",
    "The bank raised its interest rates again.",
    "She sat on the bank of the river and watched the water.",
    "Reeds grew thick along the muddy bank of the stream.",
    "He robbed a bank and fled in a stolen car.",
]


def word_positions(offsets: list[tuple[int, int]], text: str, word: str) -> list[list[int]]:
    """For each occurrence of `word` (case-insensitive, whole word) in `text`: the token positions whose
    character spans fall inside it."""
    spans = [(m.start(), m.end()) for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", text, flags=re.IGNORECASE)]
    out = []
    for s, e in spans:
        pos = [i for i, (a, b) in enumerate(offsets) if b > a and a >= s and b <= e]
        if pos:
            out.append(pos)
    return out


@dataclass
class ContextualView:
    data: dict                  # the endpoint's JSON
    vectors: np.ndarray         # (n, C) the word's vector in each sentence that has it
    coords: np.ndarray          # (n, 2) their PCA
    similarity: np.ndarray      # (n, n) cosines
    in_word2vec: bool | None    # whether our word2vec has the word (None: no word2vec shipped)


def view(word: str, sentences: list[str], layer: int, m: Encoder, notices: list[str]) -> ContextualView:
    """The vector of `word` in each sentence at `layer` of the encoder (0: the input embeddings after
    position and LayerNorm; n_layer: the last layer), the mean of its WordPiece pieces' states at the first
    occurrence in each sentence; their cosines and a PCA. Sentences without the word are left out (named
    in a notice); fewer than two with it raise EmbeddingError."""
    assert 0 <= layer <= m.n_layer, f"layer must lie in 0..{m.n_layer}"
    kept, vectors, missing = [], [], []
    for sentence in sentences:
        enc = m.tokenizer.encode(sentence, add_special_tokens=False)
        ids, offsets = enc.ids[: m.max_tokens - 2], enc.offsets[: m.max_tokens - 2]
        found = word_positions(offsets, sentence, word)
        if not found:
            missing.append(sentence)
            continue
        idx = torch.tensor([[m.tokenizer.token_to_id("[CLS]"), *ids, m.tokenizer.token_to_id("[SEP]")]])
        with torch.inference_mode():
            _, _, internals = m.model(idx, return_internals=True)
        h = internals["hidden_states"][layer][0]                       # (T, C)
        positions = [p + 1 for p in found[0]]                          # +1: [CLS] comes first
        vectors.append(h[positions].mean(0).numpy())
        kept.append(sentence)
    if missing:
        notices.append(f"{word!r} does not occur in {len(missing)} sentence(s), left out: "
                       + "; ".join(s[:50] for s in missing[:5]))
    if len(kept) < 2:
        raise EmbeddingError(f"Give at least two sentences that contain {word!r} (one per line).")
    X = np.stack(vectors)                                              # (n, C)
    sim = unit_rows(X) @ unit_rows(X).T                                # (n, n)
    Y = pca(X, 2)[0]
    w2v = word2vec_space()
    data = {"word": word, "model": m.key, "layer": layer, "sentences": kept,
            "similarity": np.round(sim, 4).tolist(),
            "points": [{"sentence": s, "x": float(y[0]), "y": float(y[1])} for s, y in zip(kept, Y)],
            "missing": missing}
    return ContextualView(data, X, Y, sim, None if w2v is None else word.lower() in w2v.vocab)
