"""Tokenizers, from characters to subwords, and the algorithms behind their splits made visible.

Five tokenizers trained with the Hugging Face `tokenizers` library, plus a pretrained one:

- character: every character is a token; characters unseen in training become [UNK].
- word: whitespace and punctuation split words; words outside the vocabulary become [UNK].
- byte-level BPE as in GPT-2 (Radford et al. 2019): text as UTF-8 bytes, so nothing is ever unknown.
- WordPiece as in BERT (Schuster & Nakajima 2012; Wu et al. 2016; Devlin et al. 2019): lowercased,
  greedy longest-match-first, `##` marks a piece that continues a word.
- Unigram language model as in SentencePiece (Kudo 2018; Kudo & Richardson 2018): `▁` stands for
  a space, and a word is split into its most probable segmentation.
- all-MiniLM-L6-v2's WordPiece vocabulary (that of bert-base-uncased), from the PyPI package.

And three explanations:

- `bpe_trace`: the classic BPE of Sennrich et al. (2016, Algorithm 1), step by step, with `</w>`.
- `wordpiece_explain`: the greedy longest-match search that WordPiece runs on each word.
- `unigram_explain`: the Viterbi search over all segmentations, with each piece's log-probability.
"""

from __future__ import annotations

import heapq
import json
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from tokenizers import Tokenizer, models, pre_tokenizers

from playground import checkpoints
from playground.text import words as text_words
from playground.training import tokenizers
from playground.training.tokenizers import SAMPLE_PATH

RETRAINABLE = ("bpe", "wordpiece", "unigram")     # the ones the vocabulary-size slider retrains
UNK_TOKENS = ("[UNK]", "<unk>")


@dataclass(frozen=True)
class TokenizerSpec:
    key: str          # short name used in the API
    label: str        # what the UI shows
    checkpoint: str   # folder in models/, or "minilm" for the pretrained vocabulary


SPECS = {
    "char": TokenizerSpec("char", "Character", "tok-char"),
    "word": TokenizerSpec("word", "Word-level", "tok-word"),
    "bpe": TokenizerSpec("bpe", "Byte-level BPE (GPT-2 style)", "tok-bpe"),
    "wordpiece": TokenizerSpec("wordpiece", "WordPiece (BERT style)", "tok-wordpiece"),
    "unigram": TokenizerSpec("unigram", "Unigram (SentencePiece style)", "tok-unigram"),
    "minilm": TokenizerSpec("minilm", "MiniLM WordPiece (pretrained, bert-base-uncased vocab)", "minilm"),
}


@lru_cache(maxsize=1)
def sample_text() -> str:
    if not SAMPLE_PATH.is_file():
        raise FileNotFoundError(f"{SAMPLE_PATH} is missing: run `python -m playground.train tokenizers --corpus ...`")
    return SAMPLE_PATH.read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def sample_batches(lines_per_batch: int = 200) -> tuple[str, ...]:
    """The sample in batches of whole lines: the trainers count words in parallel over the batches they
    are given, so one 430 kB string would keep one core busy (batched: ~25% faster on 2 cores; BPE's
    result is identical either way)."""
    lines = sample_text().splitlines(keepends=True)
    return tuple("".join(lines[i:i + lines_per_batch]) for i in range(0, len(lines), lines_per_batch))


_RETRAINED: OrderedDict[tuple[str, int], Tokenizer] = OrderedDict()
_RETRAINED_MAX = 48
_RETRAIN_LOCK = threading.Lock()


def retrained(algorithm: str, vocab_size: int) -> Tokenizer:
    """`algorithm` trained on the shipped corpus sample at `vocab_size`. Cached (the 48 most recent),
    so a slider that comes back to a size answers at once; the tokenizers are only read, never
    changed, so users can share them. One training at a time: they use every core anyway."""
    if algorithm not in RETRAINABLE:
        raise ValueError(f"only {', '.join(RETRAINABLE)} retrain at another vocabulary size, not {algorithm!r}")
    key = (algorithm, vocab_size)
    with _RETRAIN_LOCK:
        if key not in _RETRAINED:
            _RETRAINED[key] = tokenizers.train(algorithm, sample_batches(), vocab_size)
            while len(_RETRAINED) > _RETRAINED_MAX:
                _RETRAINED.popitem(last=False)
        _RETRAINED.move_to_end(key)
        return _RETRAINED[key]


def is_retrained(algorithm: str, vocab_size: int) -> bool:
    return (algorithm, vocab_size) in _RETRAINED


# ---------------------------------------------------------------------------------------------
# Loading


def load(key: str) -> Tokenizer:
    """A shipped tokenizer by its key in SPECS (`char`, `word`, `bpe`, `wordpiece`, `unigram`, `minilm`)."""
    if key not in SPECS:
        raise ValueError(f"unknown tokenizer {key!r}; choose from {', '.join(SPECS)}")
    if key == "minilm":
        return checkpoints.read_hf_tokenizer(checkpoints.minilm_dir())
    return checkpoints.load(SPECS[key].checkpoint).tokenizer


def load_all() -> dict[str, Tokenizer]:
    return {key: load(key) for key in SPECS}


# ---------------------------------------------------------------------------------------------
# Encoding, with everything the UI and the API show

@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in for each byte (Ġ for space, ...) mapped back to the byte."""
    return {ch: b for b, ch in enumerate(_bytes_to_unicode())}


def _bytes_to_unicode() -> list[str]:
    # Radford et al. 2019: printable bytes stand for themselves, the rest are shifted past 255
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    table, shift = [], 0
    for b in range(256):
        if b in printable:
            table.append(chr(b))
        else:
            table.append(chr(256 + shift))
            shift += 1
    return table


def is_byte_level(tok: Tokenizer) -> bool:
    return isinstance(tok.pre_tokenizer, pre_tokenizers.ByteLevel)


def token_bytes(token: str) -> bytes | None:
    """The raw bytes behind a byte-level BPE token, or None if it is not one."""
    table = _byte_decoder()
    if not all(ch in table for ch in token):
        return None
    return bytes(table[ch] for ch in token)


def unk_id(tok: Tokenizer) -> int | None:
    for candidate in UNK_TOKENS:
        if (i := tok.token_to_id(candidate)) is not None:
            return i
    return None


def encode(tok: Tokenizer, text: str) -> dict:
    """Tokens, ids, character offsets into `text`, counts; no special tokens added."""
    enc = tok.encode(text, add_special_tokens=False)
    unk = unk_id(tok)
    unknown = [i == unk for i in enc.ids] if unk is not None else [False] * len(enc.ids)
    n = len(enc.ids)
    result = {
        "tokens": enc.tokens,
        "ids": enc.ids,
        "offsets": [list(o) for o in enc.offsets],
        "n_tokens": n,
        "chars_per_token": round(len(text) / n, 3) if n else None,
        "n_unknown": sum(unknown),
        "unknown": unknown,
        "vocab_size": tok.get_vocab_size(),
    }
    if is_byte_level(tok):
        # a byte-level token may hold part of a character: show its bytes as hex where they are not text
        result["bytes"] = [token_bytes(t).hex(" ") for t in enc.tokens]
    return result


def decode(tok: Tokenizer, ids: list[int]) -> str:
    return tok.decode(ids, skip_special_tokens=False)


# ---------------------------------------------------------------------------------------------
# Classic BPE, Sennrich et al. 2016, Algorithm 1

END_OF_WORD = "</w>"
MAX_TABLE_LINES = 2_000
MAX_WORD_CHARS = 60
MAX_MERGES = 1_000


def parse_word_counts(table: str) -> list[tuple[str, int]]:
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
            raise ValueError(f"line {number}: the count {count[:20]!r} should be a whole number from 1 to 1,000,000,000")
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
            "corpus": [{"word": w, "symbols": list(s), "count": c} for (w, _), (s, c) in zip(word_counts, corpus.items())],
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
            steps.append({"start": start, "match": match, "n_rejected": len(rejected), "rejected": rejected[:shown_rejects]})
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


# ---------------------------------------------------------------------------------------------
def words_of(text: str) -> list[str]:
    """Words for the 'why this split' panel: letters and digits, as a reader would pick them."""
    return [word for _, _, word in text_words(text)]
