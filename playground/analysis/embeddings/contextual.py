"""Contextual embeddings: one word's hidden state at a chosen layer of a BERT encoder, or its ELMo vector (Peters
et al. 2018: a chosen layer of the biLM, or eq. 1's mix of all of them), in several sentences. word2vec gives a
word one vector; here every occurrence has its own, mixed with its sentence by attention or by the LSTMs."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from playground.analysis.embeddings import EmbeddingError
from playground.analysis.embeddings.encoders import ELMoEncoder, Encoder
from playground.analysis.embeddings.projection import pca
from playground.analysis.embeddings.words import unit_rows, word2vec_space
from playground.nets import elmo

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
    return _view(word, kept, vectors, missing, {"model": m.key, "layer": layer}, notices)


def _view(word: str, kept: list[str], vectors: list[np.ndarray], missing: list[str], about: dict,
          notices: list[str]) -> ContextualView:
    """The cosines and the PCA of the word's vectors, and the endpoint's JSON (`about` names the model and layer)."""
    if missing:
        notices.append(f"{word!r} does not occur in {len(missing)} sentence(s), left out: "
                       + "; ".join(s[:50] for s in missing[:5]))
    if len(kept) < 2:
        raise EmbeddingError(f"Give at least two sentences that contain {word!r} (one per line).")
    X = np.stack(vectors)                                              # (n, C)
    sim = unit_rows(X) @ unit_rows(X).T                                # (n, n)
    Y = pca(X, 2)[0]
    w2v = word2vec_space()
    data = {"word": word, **about, "sentences": kept,
            "similarity": np.round(sim, 4).tolist(),
            "points": [{"sentence": s, "x": float(y[0]), "y": float(y[1])} for s, y in zip(kept, Y)],
            "missing": missing}
    return ContextualView(data, X, Y, sim, None if w2v is None else word.lower() in w2v.vocab)


def elmo_view(word: str, sentences: list[str], layer: int | str, m: ELMoEncoder, notices: list[str],
              s: list[float] | None = None, gamma: float | None = None) -> ContextualView:
    """The word's ELMo vector in each sentence: layer j of the biLM (0: the token layer [x_k; x_k]; 1 .. L: the
    biLSTM layers [→h_{k,j}; ←h_{k,j}]) or, with layer "mix", eq. 1: ELMo_k = γ Σ_j softmax(s)_j h_{k,j}
    (s and γ default to the card's: s = 0, γ = 1, the plain average). The words are the biLM's own (lowercased
    letter runs, mapped back to the sentence by their offsets); the vector is the mean over the word's pieces
    (e.g. "river-bank" is two) at its first occurrence; each sentence runs alone, so no padding reaches the
    backward LM. A word out of the vocabulary is read as [UNK] (said in a notice)."""
    mixing = layer == "mix"
    assert mixing or 0 <= layer <= m.n_layer, f"layer must be 'mix' or lie in 0..{m.n_layer}"
    s = list(m.s if s is None else s)
    gamma = m.gamma if gamma is None else gamma
    if len(s) != m.n_layer + 1:
        raise EmbeddingError(f"ELMo has {m.n_layer + 1} layers (0 .. {m.n_layer}): give one weight s_j each, "
                             f"not {len(s)}.")
    kept, vectors, missing, unknown = [], [], [], False
    for sentence in sentences:
        enc = m.tokenizer.encode(sentence, add_special_tokens=False)
        ids, offsets = enc.ids[: m.max_tokens], enc.offsets[: m.max_tokens]
        found = word_positions(offsets, sentence, word)
        if not found:
            missing.append(sentence)
            continue
        unknown = unknown or any(ids[p] == 0 for p in found[0])          # [UNK] is id 0
        with torch.inference_mode():
            reps = m.model.layer_representations(torch.tensor([ids]))[:, 0]   # (L+1, T, 2C)
            h = reps[:, found[0]].mean(1)                                   # (L+1, 2C): h_{k,j} of the word
            v = elmo.mix(h, torch.tensor(s), gamma) if mixing else h[layer]    # eq. 1, or one layer
        vectors.append(v.numpy())
        kept.append(sentence)
    if unknown:
        notices.append(f"{word!r} is not in ELMo's vocabulary of {m.tokenizer.get_vocab_size() - 1:,} words: it is "
                       "read as [UNK], so its token layer is [UNK]'s vector; only the context (the LSTM layers) "
                       "tells the occurrences apart.")
    weights = torch.softmax(torch.tensor(s, dtype=torch.float64), 0).tolist()
    about = {"model": m.key, "layer": layer,
             "mix": {"s": s, "softmax_s": [round(w, 4) for w in weights], "gamma": gamma} if mixing else None,
             "unknown": unknown}
    return _view(word, kept, vectors, missing, about, notices)
