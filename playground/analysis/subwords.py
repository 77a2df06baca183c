"""Subword algorithms made visible: classic BPE step by step, and why WordPiece and Unigram split a word so.

- `bpe_trace`: the BPE of Sennrich et al. (2016, Algorithm 1), every merge recorded, with `</w>`;
  `bpe_segment` applies the learned merges to a new word.
- `wordpiece_explain`: the greedy longest-match-first search that WordPiece runs on each word
  (Wu et al. 2016; BERT's tokenizer).
- `unigram_explain`: the search over every segmentation of a word under the unigram language model,
  with each piece's log-probability (Kudo 2018).

`trace`, `segment` and `explain` return the data of the Tokenization tab's `bpe_trace`, `bpe_segment`
and `explain_split` endpoints; they raise ValueError with a message for the user on bad input.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter, OrderedDict
from typing import Iterable

from tokenizers import Tokenizer, models

from playground.text import words


# ---------------------------------------------------------------------------------------------
# Classic BPE, Sennrich et al. 2016, Algorithm 1

END_OF_WORD = "</w>"
MAX_TABLE_LINES = 2_000
MAX_WORD_CHARS = 60
MAX_MERGES = 1_000
MAX_SEGMENTED_WORDS = 50


def parse_word_counts(table: str | None) -> list[tuple[str, int]]:
    """'word count' per line -> [(word, count)] in table order. Blank lines and '#' comments are
    skipped; a repeated word adds up. Raises ValueError with the line number for anything else."""
    counts: dict[str, int] = {}
    lines = (table or "").splitlines()
    if len(lines) > MAX_TABLE_LINES:
        raise ValueError(f"the table has {len(lines):,} lines; at most {MAX_TABLE_LINES:,} are allowed")
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"line {number}: {line[:40]!r} should be one word and its count, like 'lower 2'")
        word, count = fields
        if not count.isdigit() or int(count) < 1 or int(count) > 10**9:
            raise ValueError(f"line {number}: the count {count[:20]!r} should be a whole number "
                             "from 1 to 1,000,000,000")
        if len(word) > MAX_WORD_CHARS:
            raise ValueError(f"line {number}: words are at most {MAX_WORD_CHARS} characters long")
        if END_OF_WORD in word:
            raise ValueError(f"line {number}: {END_OF_WORD} is added by the algorithm; write the bare word")
        counts[word] = counts.get(word, 0) + int(count)
    if not counts:
        raise ValueError("the frequency table is empty: write one 'word count' per line, like 'lower 2'")
    return list(counts.items())


Symbols = tuple[str, ...]


def pair_counts(corpus: dict[Symbols, int]) -> Counter:
    """Count adjacent symbol pairs, weighted by word frequency. The Counter keeps the order in which
    pairs were first counted, which is the tie-break rule below."""
    pairs: Counter = Counter()
    for symbols, freq in corpus.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += freq
    return pairs


def merge_symbols(symbols: Symbols, pair: tuple[str, str]) -> Symbols:
    """Replace every occurrence of `pair`, scanning left to right without overlaps (as the paper's
    regular expression does: 'a a a' merged on ('a', 'a') gives 'aa a')."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def symbol_counts(corpus: dict[Symbols, int]) -> dict[str, int]:
    counts: Counter = Counter()
    for symbols, freq in corpus.items():
        for s in symbols:
            counts[s] += freq
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def bpe_trace(word_counts: list[tuple[str, int]], num_merges: int, top_pairs: int = 12) -> dict:
    """Learn `num_merges` merges, recording every step.

    Each step counts all adjacent pairs, merges the most frequent one everywhere, and adds the new
    symbol to the vocabulary. Ties go to the pair counted first, scanning the table top to bottom and
    each word left to right: that is what `max()` over the insertion-ordered dict of the paper's
    reference code does. Stops early when every word is a single symbol.
    """
    if not 0 <= num_merges <= MAX_MERGES:
        raise ValueError(f"the number of merges should be between 0 and {MAX_MERGES}, not {num_merges}")
    corpus = {tuple(word) + (END_OF_WORD,): count for word, count in word_counts}
    alphabet = sorted({s for symbols in corpus for s in symbols})

    def snapshot() -> dict:
        return {
            "corpus": [{"word": w, "symbols": list(s), "count": c}
                       for (w, _), (s, c) in zip(word_counts, corpus.items())],
            "symbol_counts": symbol_counts(corpus),
        }

    initial = snapshot()
    merges, steps, stopped = [], [], None
    for step in range(1, num_merges + 1):
        pairs = pair_counts(corpus)
        if not pairs:
            stopped = f"stopped after {step - 1} merges: every word is a single symbol"
            break
        best = max(pairs, key=pairs.get)  # first counted wins a tie
        corpus = {merge_symbols(symbols, best): freq for symbols, freq in corpus.items()}
        merge = {"step": step, "pair": list(best), "new_symbol": best[0] + best[1], "count": pairs[best]}
        merges.append(merge)
        ranked = sorted(pairs.items(), key=lambda kv: -kv[1])[:top_pairs]  # stable: ties keep counting order
        steps.append({**merge, "pair_counts": [[a, b, n] for (a, b), n in ranked], "n_pairs": len(pairs), **snapshot()})
    return {
        "end_of_word": END_OF_WORD,
        "alphabet": alphabet,
        "vocabulary": alphabet + [m["new_symbol"] for m in merges],
        "merges": merges,
        "initial": initial,
        "steps": steps,
        "segmentation": {w: list(s) for (w, _), s in zip(word_counts, corpus)},
        "stopped": stopped,
    }


def bpe_segment(word: str, merges: list[dict], alphabet: Iterable[str]) -> dict:
    """Segment a (new) word with learned merges, applied in the order they were learned; characters
    outside the training alphabet stay single and are reported as unknown."""
    symbols: Symbols = tuple(word) + (END_OF_WORD,)
    applied = []
    for merge in merges:
        merged = merge_symbols(symbols, tuple(merge["pair"]))
        if merged != symbols:
            applied.append({"step": merge["step"], "new_symbol": merge["new_symbol"], "symbols": list(merged)})
            symbols = merged
    known = set(alphabet)
    return {
        "word": word,
        "symbols": list(symbols),
        "applied": applied,
        "unknown_chars": sorted({ch for ch in word if ch not in known}),
    }


def trace(table: str | None, num_merges: int) -> dict:
    """`bpe_trace` on a frequency table written as 'word count' per line (see parse_word_counts)."""
    try:
        word_counts = parse_word_counts(table)
    except ValueError as err:
        raise ValueError(f"Frequency table: {err}.") from None
    return bpe_trace(word_counts, num_merges)


def segment(table: str | None, num_merges: int, text: str) -> dict:
    """The words of `text` (the first 50) segmented with the merges learned from `table`: an unseen
    word is still covered. The merges come along, so the answer reads on its own."""
    learned = trace(table, num_merges)
    new_words = [word for _, _, word in words(text)][:MAX_SEGMENTED_WORDS]
    if not new_words:
        raise ValueError("Type one or more words to segment, e.g. 'lowest newer'.")
    segmented = [bpe_segment(word, learned["merges"], learned["alphabet"]) for word in new_words]
    return {"merges": learned["merges"], "words": segmented}


# ---------------------------------------------------------------------------------------------
# Why WordPiece splits a word so: greedy longest match first (Wu et al. 2016, BERT's tokenizer)


def _pre_tokenize(tok: Tokenizer, text: str) -> list[str]:
    normalized = tok.normalizer.normalize_str(text) if tok.normalizer is not None else text
    if tok.pre_tokenizer is None:
        return [normalized]
    return [word for word, _ in tok.pre_tokenizer.pre_tokenize_str(normalized)]


def wordpiece_explain(tok: Tokenizer, text: str, max_words: int = 40, shown_rejects: int = 6) -> list[dict]:
    """For each word: at each position the longest vocabulary entry that matches (with `##` when it
    continues the word), and the longer candidates that were tried and rejected. If some position has
    no match at all, the whole word becomes [UNK], as in BERT."""
    model = tok.model
    assert isinstance(model, models.WordPiece), "wordpiece_explain needs a WordPiece tokenizer"
    vocab, prefix, limit = tok.get_vocab(), model.continuing_subword_prefix, model.max_input_chars_per_word
    explained = []
    for word in _pre_tokenize(tok, text)[:max_words]:
        if len(word) > limit:
            explained.append({"word": word, "pieces": [model.unk_token], "steps": [], "unknown": True,
                              "reason": f"longer than {limit} characters"})
            continue
        steps, pieces, start, unknown = [], [], 0, False
        while start < len(word):
            end, rejected, match = len(word), [], None
            while start < end:
                candidate = (prefix if start > 0 else "") + word[start:end]
                if candidate in vocab:
                    match = candidate
                    break
                rejected.append(candidate)
                end -= 1
            steps.append({"start": start, "match": match, "n_rejected": len(rejected),
                          "rejected": rejected[:shown_rejects]})
            if match is None:
                unknown = True
                break
            pieces.append(match)
            start = end
        entry = {"word": word, "pieces": [model.unk_token] if unknown else pieces, "steps": steps, "unknown": unknown}
        if unknown:
            entry["reason"] = f"nothing in the vocabulary matches at position {start}"
        explained.append(entry)
    return explained


# ---------------------------------------------------------------------------------------------
# Why Unigram splits a word so: the most probable segmentation (Kudo 2018)

UNK_PENALTY = 10.0  # tokenizers (like SentencePiece) scores an unknown character min(log p) - 10


_UNIGRAM_TABLES: OrderedDict[int, tuple[Tokenizer, tuple]] = OrderedDict()


def _unigram_table(tok: Tokenizer) -> tuple[dict[str, float], str, float, int]:
    """The pieces' log-probabilities, the unknown piece and its score, the longest piece length.
    Cached per tokenizer object (holding it, so its id cannot be reused while cached)."""
    if id(tok) not in _UNIGRAM_TABLES:
        model = json.loads(tok.to_str())["model"]
        scores = {piece: score for piece, score in model["vocab"]}
        unk_piece = model["vocab"][model["unk_id"]][0]
        _UNIGRAM_TABLES[id(tok)] = (tok, (scores, unk_piece, min(scores.values()) - UNK_PENALTY, max(map(len, scores))))
        while len(_UNIGRAM_TABLES) > 8:
            _UNIGRAM_TABLES.popitem(last=False)
    return _UNIGRAM_TABLES[id(tok)][1]


def unigram_explain(tok: Tokenizer, text: str, n_best: int = 5, max_words: int = 40) -> list[dict]:
    """For each pre-token (a word with its ▁): the n most probable segmentations under the unigram
    model, log P(x) = Σ log p(piece), found by dynamic programming over the lattice of pieces. The
    best one is what the tokenizer outputs. Pieces are the model's own log-probabilities."""
    assert isinstance(tok.model, models.Unigram), "unigram_explain needs a Unigram tokenizer"
    scores, unk_piece, unk_score, longest = _unigram_table(tok)
    explained = []
    for word in _pre_tokenize(tok, text)[:max_words]:
        n = len(word)
        # best[i]: up to n_best (log P, pieces) for word[:i]
        best: list[list[tuple[float, tuple[str, ...]]]] = [[(0.0, ())]] + [[] for _ in range(n)]
        for end in range(1, n + 1):
            candidates = []
            for start in range(max(0, end - longest), end):
                piece = word[start:end]
                score = scores.get(piece)
                if score is None and end - start == 1:
                    score = unk_score  # a character with no piece: unknown, heavily penalised
                if score is None:
                    continue
                for total, pieces in best[start]:
                    candidates.append((total + score, pieces + (piece,)))
            best[end] = heapq.nlargest(n_best, candidates, key=lambda c: c[0])
        segmentations = [
            {"pieces": list(p), "log_probs": [round(scores.get(x, unk_score), 4) for x in p], "total": round(t, 4),
             "unknown": [x not in scores for x in p]}
            for t, p in best[n]
        ]
        explained.append({"word": word, "segmentations": segmentations, "unk_piece": unk_piece})
    return explained


def explain(wordpiece: Tokenizer, unigram: Tokenizer, text: str) -> dict:
    """Why a WordPiece and a Unigram tokenizer split each word of `text` as they do."""
    return {"wordpiece": wordpiece_explain(wordpiece, text), "unigram": unigram_explain(unigram, text)}
