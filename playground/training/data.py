"""Text as token ids for language modelling.

A character-level tokenizer trained on the corpus itself (as char-rnn and nanoGPT's shakespeare_char
do), the first 90% of the ids for training and the last 10% for validation, and random windows of
`block_size + 1` ids as (input, target) batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer

from playground import checkpoints
from playground.training import tokenizers


@dataclass
class TextData:
    tokenizer: Tokenizer      # char-level: one id per character, [UNK] (id 0) for characters never seen
    train: torch.Tensor       # (N_train,) int64 ids
    val: torch.Tensor         # (N_val,) int64 ids
    corpus: list[dict]        # [{name, sha256, bytes}] of the files read

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()


def char_tokenizer(text: str) -> Tokenizer:
    """Every character of `text` gets an id; nothing is dropped for being rare."""
    return tokenizers.train("char", [text], vocab_size=1_000_000, min_frequency=0)


def encode(tokenizer: Tokenizer, text: str, chunk_chars: int = 1 << 16) -> torch.Tensor:
    """Ids of a long text, encoded in chunks (batched in Rust; a char tokenizer has no context across
    chunk borders to lose)."""
    chunks = [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    ids = [e.ids for e in tokenizer.encode_batch(chunks, add_special_tokens=False)]
    return torch.tensor([i for chunk in ids for i in chunk], dtype=torch.long)


def load_text(paths: list[str | Path], val_fraction: float = 0.1, tokenizer: Tokenizer | None = None) -> TextData:
    assert 0 < val_fraction < 1, f"val_fraction={val_fraction} must be between 0 and 1"
    paths = [Path(p) for p in paths]
    text = "".join(p.read_text(encoding="utf-8") for p in paths)
    tokenizer = tokenizer or char_tokenizer(text)
    ids = encode(tokenizer, text)
    n_train = int(len(ids) * (1 - val_fraction))  # contiguous split: validation is unseen text, not shuffled lines
    corpus = checkpoints.corpus_record(paths)
    return TextData(tokenizer=tokenizer, train=ids[:n_train], val=ids[n_train:], corpus=corpus)


def get_batch(ids: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator | None = None,
              device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """`batch_size` random windows: x = ids[i : i+T], y = ids[i+1 : i+T+1], each (B, T)."""
    assert len(ids) > block_size + 1, f"{len(ids)} ids are too few for block_size={block_size}"
    ix = torch.randint(len(ids) - block_size - 1, (batch_size,), generator=generator)
    offsets = ix[:, None] + torch.arange(block_size + 1)   # (B, T+1)
    windows = ids[offsets]                                 # (B, T+1)
    x, y = windows[:, :-1], windows[:, 1:]
    if device != "cpu":
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    return x, y
