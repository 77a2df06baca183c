"""Contextual embeddings: one word's hidden state at a chosen layer of a BERT encoder, or its ELMo vector (Peters
et al. 2018: a chosen layer of the biLM, or eq. 1's mix of all of them), in several sentences. word2vec gives a
word one vector; here every occurrence has its own, mixed with its sentence by attention or by the LSTMs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from playground.analysis.embeddings import EmbeddingError
from playground.analysis.embeddings.encoders import ELMoEncoder, Encoder
from playground.analysis.embeddings.projection import pca
from playground.analysis.embeddings.words import unit_rows, word2vec_space
from playground.nets import elmo

# *bank* in two senses, labelled: the contextual view measures on them how well each layer tells the senses apart
# (sense_sweep), whatever sentences are typed. Written for this project, of varied shapes in each sense.
SENSES = {"bank": {
    "money": ["I deposited my salary at the bank this morning.",
              "The bank raised its interest rates again.",
              "He robbed a bank and fled in a stolen car.",
              "She opened a savings account at the bank.",
              "The bank approved his loan for a new house.",
              "The bank closed two of its branches in town.",
              "My bank charges a fee for every transfer.",
              "They borrowed money from the bank to start a farm."],
    "river": ["She sat on the bank of the river and watched the water.",
              "Reeds grew thick along the muddy bank of the stream.",
              "The boat drifted slowly toward the grassy bank.",
              "We had a picnic on the river bank.",
              "The river overflowed its bank after the storm.",
              "Willows lean over the bank of the pond.",
              "The children slid down the steep bank into the creek.",
              "Otters dug a den in the bank below the waterline."]}}
# The view's default: the first three of each sense, grouped, so the similarity matrix shows two blocks
CONTEXT_SENTENCES = SENSES["bank"]["money"][:3] + SENSES["bank"]["river"][:3]
# MiniLM's layer that separates bank's senses best on SENSES (best_layer(sense_sweep("bank", minilm)): every
# sentence's nearest of the same sense from layer 3 on, and the largest gap there; tests/test_embeddings.py checks)
DEFAULT_LAYER = 3


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
    kept, vectors, missing, _ = _word_vectors(word, sentences, m)
    return _view(word, kept, [v[layer].numpy() for v in vectors], missing, {"model": m.key, "layer": layer},
                 notices)


def _word_vectors(word: str, sentences: list[str], m: Encoder | ELMoEncoder) -> tuple[list[str], list[torch.Tensor],
                                                                                       list[str], bool]:
    """The sentences that hold `word`, its vector at every layer of the encoder's stream `internals["hidden"]` in
    each ((n_layer + 1, C); ELMo's C is [→h; ←h], twice its LSTM width: the mean over its pieces at the first
    occurrence, one run per sentence, so no padding reaches ELMo's backward LM), the sentences without it, and
    whether one of its pieces was [UNK]. A BERT reads [CLS] sentence [SEP]; ELMo's biLM reads the words alone."""
    framed = isinstance(m, Encoder)                                    # [CLS] and [SEP] take two positions
    unk = m.tokenizer.token_to_id("[UNK]")
    kept, vectors, missing, unknown = [], [], [], False
    for sentence in sentences:
        enc = m.tokenizer.encode(sentence, add_special_tokens=False)
        n = m.max_tokens - 2 if framed else m.max_tokens
        ids, offsets = enc.ids[:n], enc.offsets[:n]
        found = word_positions(offsets, sentence, word)
        if not found:
            missing.append(sentence)
            continue
        unknown = unknown or any(ids[p] == unk for p in found[0])
        positions = found[0]
        if framed:
            ids = [m.tokenizer.token_to_id("[CLS]"), *ids, m.tokenizer.token_to_id("[SEP]")]
            positions = [p + 1 for p in positions]                     # +1: [CLS] comes first
        with torch.inference_mode():
            *_, internals = m.model(torch.tensor([ids]), return_internals=True)
            vectors.append(torch.stack([h[0, positions].mean(0) for h in internals["hidden"]]))   # (L+1, C)
        kept.append(sentence)
    return kept, vectors, missing, unknown


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
    kept, h, missing, unknown = _word_vectors(word, sentences, m)
    with torch.inference_mode():
        vectors = [(elmo.mix(x, torch.tensor(s), gamma) if mixing else x[layer]).numpy() for x in h]  # eq. 1, or one
    if unknown:
        notices.append(f"{word!r} is not in ELMo's vocabulary of {m.tokenizer.get_vocab_size() - 1:,} words: it is "
                       "read as [UNK], so its token layer is [UNK]'s vector; only the context (the LSTM layers) "
                       "tells the occurrences apart.")
    weights = torch.softmax(torch.tensor(s, dtype=torch.float64), 0).tolist()
    about = {"model": m.key, "layer": layer,
             "mix": {"s": s, "softmax_s": [round(w, 4) for w in weights], "gamma": gamma} if mixing else None,
             "unknown": unknown}
    return _view(word, kept, vectors, missing, about, notices)


# ---------------------------------------------------------------------------------------------
# Does a layer tell a word's senses apart? Measured on labelled sentences (SENSES)


def sense_split(similarity: np.ndarray, labels: list[str]) -> dict:
    """How well cosines follow the labels: the mean cosine between two occurrences of the same sense, the mean
    across senses, their gap, and how many occurrences have a nearest other occurrence (strictly closer than any
    of another sense) of their own sense."""
    labels = np.asarray(labels)
    same = labels[:, None] == labels[None, :]
    other = ~np.eye(len(labels), dtype=bool)
    within, across = float(similarity[same & other].mean()), float(similarity[~same].mean())
    best_same = np.where(same & other, similarity, -np.inf).max(axis=1)
    best_other = np.where(~same, similarity, -np.inf).max(axis=1)
    return {"within": round(within, 4), "across": round(across, 4), "gap": round(within - across, 4),
            "nearest_same": int((best_same > best_other).sum()), "sentences": len(labels)}


@lru_cache(maxsize=32)
def sense_sweep(word: str, m: Encoder | ELMoEncoder, s: tuple[float, ...] | None = None,
                gamma: float | None = None) -> dict | None:
    """sense_split at every layer of the encoder (for ELMo also eq. 1's mix with s and γ) on the labelled
    sentences of `word` (SENSES), or None when it has none. Cached: it does not depend on the typed sentences."""
    pool = SENSES.get(word.lower())
    if pool is None:
        return None
    sentences = [x for group in pool.values() for x in group]
    sense_of = {x: name for name, group in pool.items() for x in group}
    kept, h, _, _ = _word_vectors(word, sentences, m)
    stacked = torch.stack(h)                                               # (n, L+1, C)
    layers = {j: stacked[:, j].numpy() for j in range(m.n_layer + 1)}
    if isinstance(m, ELMoEncoder):                                         # and eq. 1's mix of them
        with torch.inference_mode():
            s_, g_ = torch.tensor(list(m.s if s is None else s)), m.gamma if gamma is None else gamma
            layers["mix"] = torch.stack([elmo.mix(x, s_, g_) for x in h]).numpy()
    labels = [sense_of[x] for x in kept]
    rows = [{"layer": j, **sense_split(unit_rows(X) @ unit_rows(X).T, labels)} for j, X in layers.items()]
    return {"word": word.lower(), "model": m.key, "senses": {name: len(group) for name, group in pool.items()},
            "layers": rows}


def best_layer(sweep: dict) -> int | str | None:
    """The layer that separates the senses: of those where every occurrence's nearest is of its own sense, the
    one with the largest gap; None when no layer does."""
    full = [r for r in sweep["layers"] if r["nearest_same"] == r["sentences"]]
    return max(full, key=lambda r: r["gap"])["layer"] if full else None
