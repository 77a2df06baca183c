"""Training the tokenizers: five algorithms with the Hugging Face `tokenizers` library, from characters to
subwords (`python -m playground.train tokenizers --corpus ...`), and the corpus sample the app retrains on.

- char: every character is a token (char-rnn, nanoGPT's shakespeare_char);
- word: whitespace and punctuation split, a fixed vocabulary, [UNK] for the rest;
- bpe: byte-level BPE as GPT-2 (Radford et al. 2019; Sennrich et al. 2016);
- wordpiece: BERT's WordPiece (Schuster and Nakajima 2012; Devlin et al. 2019), uncased;
- unigram: SentencePiece's unigram language model (Kudo 2018).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from playground import checkpoints

ALGORITHMS = ("char", "word", "bpe", "wordpiece", "unigram")
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SAMPLE_PATH = checkpoints.ASSETS_DIR / "corpus_sample.txt"   # the sample the app retrains on


@dataclass
class TokenizerTrainConfig:
    """`python -m playground.train tokenizers`: every algorithm on one corpus."""

    algorithms: str = "char,word,bpe,wordpiece,unigram"  # comma-separated subset of ALGORITHMS
    vocab_size: int = 16_000        # BPE, WordPiece, Unigram (GPT-2: 50,257; BERT: 30,522; ours is a 25 MB corpus)
    word_vocab_size: int = 30_000   # word level: the most frequent words; every other word is [UNK]
    char_min_frequency: int = 5     # character level: rarer characters are [UNK] (typos, stray symbols)
    sample_bytes: int = 600_000     # the corpus sample the app retrains on (the three trainers take ~1 s on it)
    sample_path: str = ""           # where to write it; empty: assets/corpus_sample.txt, which the app reads

    def __post_init__(self):
        unknown = set(self.algorithms.split(",")) - set(ALGORITHMS)
        assert not unknown, f"unknown algorithm(s) {sorted(unknown)}; choose from {', '.join(ALGORITHMS)}"
        assert self.vocab_size >= 300, f"vocab_size={self.vocab_size}: byte-level BPE alone needs 256 symbols"


def new_tokenizer(algorithm: str, vocab_size: int, min_frequency: int = 0) -> tuple[Tokenizer, trainers.Trainer]:
    """An untrained tokenizer of the given algorithm and the trainer that fills its vocabulary."""
    if algorithm == "char":
        tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # one "word" per character
        tok.decoder = decoders.Fuse()  # join the characters back without spaces
        trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                            special_tokens=["[UNK]"])
    elif algorithm == "word":
        tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()  # \w+ | [^\w\s]+: words and runs of punctuation
        trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=["[UNK]"])
    elif algorithm == "bpe":
        # GPT-2: bytes mapped to printable characters (space -> Ġ), a regex pre-split, no unknown token
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        )
    elif algorithm == "wordpiece":
        # BERT uncased: clean, lowercase and strip accents, split on whitespace and punctuation
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=BERT_SPECIALS, limit_alphabet=1000)
    elif algorithm == "unigram":
        # SentencePiece: a space is the visible symbol ▁ and belongs to the piece after it; no lowercasing
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, unk_token="<unk>", special_tokens=["<unk>"])
    else:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose from {', '.join(ALGORITHMS)}")
    return tok, trainer


def train(algorithm: str, texts: Iterable[str], vocab_size: int, min_frequency: int = 0,
          progress: bool = False) -> Tokenizer:
    tok, trainer = new_tokenizer(algorithm, vocab_size, min_frequency)
    trainer.show_progress = progress
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def read_lines(paths: Iterable[str | Path], batch_chars: int = 1 << 20) -> Iterable[str]:
    """Yield the corpus in ~1 MB batches of whole lines (the trainers parallelise over batches)."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            while batch := f.read(batch_chars):
                yield batch + f.readline()


def corpus_sample(paths: Iterable[str | Path], n_bytes: int) -> str:
    """An equal share of whole lines from the start, middle and end of each file: small, but every
    corpus and every part of it is represented (the app retrains on this in well under a second)."""
    paths = list(paths)
    share = n_bytes // max(1, 3 * len(paths))
    parts = []
    for path in paths:
        text = Path(path).read_text(encoding="utf-8")
        for frac in (0.0, 0.5, 0.999):
            start = text.rfind("\n", 0, int(frac * len(text))) + 1  # from a line start
            chunk = text[start : start + share]
            parts.append(chunk[: chunk.rfind("\n") + 1] or chunk)
    return "".join(parts)



# ---------------------------------------------------------------------------------------------
# The kind `tokenizers`: every algorithm on the whole corpus


RESUMES = False   # a run takes seconds to minutes; --resume is refused


def configs(kind: str) -> tuple:
    return (TokenizerTrainConfig,)


def train_kind(cfg: TokenizerTrainConfig, run) -> dict:
    """Train each algorithm on the whole corpus and write `tok-<algorithm>/`; write the corpus sample
    that the app retrains on to assets/corpus_sample.txt."""
    from tqdm import tqdm

    corpus = checkpoints.corpus_record(run.corpus)
    algorithms = cfg.algorithms.split(",")
    history = {}
    bar = tqdm(algorithms, desc="tokenizers", unit="tokenizer")
    for algorithm in bar:
        bar.set_postfix_str(algorithm)
        vocab_size = {"word": cfg.word_vocab_size, "char": 100_000}.get(algorithm, cfg.vocab_size)
        min_frequency = cfg.char_min_frequency if algorithm == "char" else 0
        start = time.perf_counter()
        tok = train(algorithm, read_lines(run.corpus), vocab_size, min_frequency)
        seconds = time.perf_counter() - start
        card = {
            "kind": "tokenizer",
            "algorithm": algorithm,
            "vocab_size": tok.get_vocab_size(),
            "corpus": corpus,
            "wall_time_s": round(seconds, 2),
            "device": "cpu (the tokenizers library trains in Rust threads)",
            "seed": run.seed,
            "command": run.command,
        }
        checkpoints.save(run.out / f"tok-{algorithm}", kind="tokenizer",
                         config=checkpoints.TokenizerConfig(algorithm=algorithm, vocab_size=vocab_size), card=card,
                         tokenizer=tok)
        history[algorithm] = {"vocab_size": tok.get_vocab_size(), "wall_time_s": round(seconds, 2)}
    sample = corpus_sample(run.corpus, cfg.sample_bytes)
    sample_path = Path(cfg.sample_path or SAMPLE_PATH)
    sample_path.write_text(sample, encoding="utf-8")
    history["sample"] = {"path": str(sample_path), "chars": len(sample)}
    return history
