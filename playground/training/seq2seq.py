"""A synthetic translation task for the encoder-decoders of playground/nets/seq2seq.py: numbers in English words into
digits.

    source  "three hundred forty two , seven , ninety"     (words: a word-level vocabulary, 31 symbols)
    target  "342,7,90"                                     (characters: digits and the comma)

Each source is a list of numbers from 0 to 999 separated by commas; its length in words runs from 1 to 32 in
training, and the held-out test sets go further (to 44) to show what happens beyond. The alignment is clear to
the eye: each digit comes from one or two words ("forty" gives the 4, "two" the 2, "hundred" decides whether a
zero is written), and the comma from the comma. The decoder must also infer digits that no word spells (the 0
of "three hundred seven"), which makes attention's job more than copying.

Held out: a source whose CRC-32 is divisible by 10 is a test source and never a training one, so the test sets
are sentences the models never saw, at every length (even the 28 one-word sources are split this way).

The vocabularies are defined here, in code; card.json records them, and `check_vocab` refuses a checkpoint made
with other ones. `python -m playground.train seq2seq --variant=...` trains a model (`train_kind` below) and writes
models/seq2seq-<variant>/ with the exact-match accuracy by source length in card.json: the bottleneck
experiment (Cho et al. 2014 saw translation quality fall with sentence length; Bahdanau et al. 2015 fixed it).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import random
import re
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache

import torch

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen").split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
SRC_VOCAB = ["<pad>", *ONES, *TENS, "hundred", ","]              # 31 words
TGT_VOCAB = ["<pad>", "<s>", "</s>", *"0123456789", ","]          # 14 symbols; <s> = 1, </s> = 2 (Seq2SeqConfig)
SRC_ID = {w: i for i, w in enumerate(SRC_VOCAB)}
TGT_ID = {c: i for i, c in enumerate(TGT_VOCAB)}
BOS, EOS = TGT_ID["<s>"], TGT_ID["</s>"]
ALLOWED_CHARS = set("abcdefghijklmnopqrstuvwxyz ,-\t\n")        # what a source may contain before splitting

MAX_TRAIN_LEN = 32                                               # source words seen in training
BUCKETS = [(lo, lo + 3) for lo in range(1, 45, 4)]               # 1-4, 5-8, ..., 41-44: test sets per length bucket
MAX_SOURCE_LEN = 60                                              # the app's limit: outputs of up to 2L + 8 tokens fit
                                                                 # in the Transformer's 160 positions


# ---------------------------------------------------------------------------------------------
# Numbers and words


def number_words(n: int) -> list[str]:
    """0..999 in words, without "and": 342 -> three hundred forty two, 7 -> seven, 900 -> nine hundred."""
    assert 0 <= n <= 999, f"{n} is outside 0..999"
    words = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words += [ONES[hundreds], "hundred"]
    if rest or not hundreds:
        if rest < 20:
            words.append(ONES[rest])
        else:
            tens, ones = divmod(rest, 10)
            words.append(TENS[tens - 2])
            if ones:
                words.append(ONES[ones])
    return words


# numbers grouped by how many words they take (1: 28 numbers, 2: 81, 3: 243, 4: 648)
BY_WORDS: dict[int, list[int]] = {}
for _n in range(1000):
    BY_WORDS.setdefault(len(number_words(_n)), []).append(_n)


def translate(numbers: list[int]) -> tuple[list[str], str]:
    """The source words and the target string of a list of numbers."""
    words: list[str] = []
    for i, n in enumerate(numbers):
        words += ([","] if i else []) + number_words(n)
    return words, ",".join(str(n) for n in numbers)


def is_test(words: list[str]) -> bool:
    """The held-out split: a fixed 10% of all sources, decided by the text alone."""
    return zlib.crc32(" ".join(words).encode()) % 10 == 0


def _compositions(total: int, parts: int) -> int:
    """Ways to write `total` as `parts` ordered parts of 1..4 words (memoised in _COUNTS)."""
    key = (total, parts)
    if key not in _COUNTS:
        if parts == 0:
            _COUNTS[key] = int(total == 0)
        else:
            _COUNTS[key] = sum(_compositions(total - w, parts - 1) for w in range(1, 5) if w <= total)
    return _COUNTS[key]


_COUNTS: dict[tuple[int, int], int] = {}


@lru_cache(maxsize=None)
def _part_options(left: int, parts: int) -> tuple[list[int], list[int]]:
    """The word counts the next of `parts` numbers may take with `left` words to fill, and how many
    compositions each leaves (the sampling weights)."""
    options = [w for w in range(1, 5) if w <= left]
    return options, [_compositions(left - w, parts - 1) for w in options]


def sample(length: int, rng: random.Random, test: bool) -> tuple[list[str], str]:
    """A source of exactly `length` words (commas included) from the test or the training split. The number
    of numbers k is uniform among those that fit (k numbers take 2k - 1 to 5k - 1 words), their word counts
    a uniform composition, each number uniform among those of its word count."""
    assert length >= 1, "a source has at least one word"
    ks = [k for k in range(1, (length + 1) // 2 + 1) if 2 * k - 1 <= length <= 5 * k - 1]
    while True:
        k = rng.choice(ks)
        left, counts = length - (k - 1), []                       # words for the numbers themselves
        for part in range(k, 0, -1):                              # draw each part in proportion to its completions
            w = rng.choices(*_part_options(left, part))[0]
            counts.append(w)
            left -= w
        words, target = translate([rng.choice(BY_WORDS[w]) for w in counts])
        if is_test(words) == test:
            return words, target


def max_output(length: int) -> int:
    """A bound on the target tokens of a source of `length` words: one-word numbers give the most
    (k numbers in 2k - 1 words, up to 3k - 1 characters), so 2 * length covers it; + 8 for </s> and slack."""
    return 2 * length + 8


def encode_target(target: str) -> list[int]:
    return [TGT_ID[c] for c in target] + [EOS]


def decode_target(ids: list[int]) -> str:
    out = []
    for i in ids:
        if i == EOS:
            break
        if i > EOS:                                               # skips <pad> and <s>
            out.append(TGT_VOCAB[i])
    return "".join(out)


def batch(examples: list[tuple[list[str], str]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Examples of one source length -> src (B, T), tgt_in (B, n) = <s> y_1..y_{n-1}, tgt_out (B, n) = y_1..y_n
    with -100 after </s> (left out of the loss)."""
    T = len(examples[0][0])
    assert all(len(w) == T for w, _ in examples), "the sources of a batch share one length (no source padding)"
    src = torch.tensor([[SRC_ID[w] for w in words] for words, _ in examples])
    targets = [encode_target(t) for _, t in examples]
    n = max(len(t) for t in targets)
    tgt_out = torch.full((len(examples), n), -100, dtype=torch.long)
    tgt_in = torch.full((len(examples), n), TGT_ID["<pad>"], dtype=torch.long)
    for b, t in enumerate(targets):
        tgt_out[b, :len(t)] = torch.tensor(t)
        tgt_in[b, :len(t)] = torch.tensor([BOS] + t[:-1])
    return src, tgt_in, tgt_out


def test_set(length: int, n: int, seed: int = 0) -> list[tuple[list[str], str]]:
    """n held-out examples of exactly `length` source words, the same for every model (a fixed seed)."""
    rng = random.Random(f"test-{seed}-{length}")
    return [sample(length, rng, test=True) for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# Reading a user's source


@dataclass
class Source:
    words: list[str]            # the normalised source, in the vocabulary
    ids: list[int]
    bad_chars: list[str]        # characters outside the task's alphabet
    unknown: list[str]          # words outside the vocabulary
    suggestions: dict           # unknown word -> the closest vocabulary word


def read_source(text: str) -> Source:
    """Lowercase, hyphens as spaces ("forty-two"), commas as their own word; report what is not in the task."""
    text = (text or "").lower()
    bad = sorted({ch for ch in text if ch not in ALLOWED_CHARS})
    words = re.findall(r"[a-z]+|,", text.replace("-", " "))
    unknown = list(dict.fromkeys(w for w in words if w not in SRC_ID or w == "<pad>"))
    suggestions = {}
    for w in unknown:
        close = difflib.get_close_matches(w, SRC_VOCAB[1:], n=1, cutoff=0.6)
        if close:
            suggestions[w] = close[0]
    ids = [SRC_ID[w] for w in words if w in SRC_ID]
    return Source(words=words, ids=ids, bad_chars=bad, unknown=unknown, suggestions=suggestions)


def reference(words: list[str]) -> str | None:
    """The correct translation of a well-formed source (numbers of 0..999 in our spelling), else None."""
    numbers, group = [], []
    for w in [*words, ","]:
        if w != ",":
            group.append(w)
            continue
        match = [n for n in range(1000) if number_words(n) == group]
        if not match:
            return None
        numbers.append(match[0])
        group = []
    return ",".join(map(str, numbers))


def check_vocab(card: dict) -> None:
    """A checkpoint is only usable with the vocabularies it was trained with."""
    assert card.get("source_vocab") == SRC_VOCAB and card.get("target_vocab") == TGT_VOCAB, (
        "this checkpoint was trained with other vocabularies than playground/training/seq2seq.py defines; retrain it")


# ---------------------------------------------------------------------------------------------
# Evaluation


@torch.no_grad()
def exact_match(model, examples: list[tuple[list[str], str]], max_len: int | None = None,
                uniform: bool = False) -> float:
    """Fraction of examples whose greedy translation equals the reference exactly. Batched by source length;
    the model is only read (the caller puts it in eval mode: the app's models are shared). `uniform`: attention
    knocked out (every weight 1/T; nets/seq2seq.uniform_attention)."""
    from playground.nets.seq2seq_decoding import greedy

    by_len: dict[int, list] = {}
    for ex in examples:
        by_len.setdefault(len(ex[0]), []).append(ex)
    correct = 0
    for length, group in by_len.items():
        src = batch(group)[0].to(next(model.parameters()).device)
        ids, _ = greedy(model, src, max_len or max_output(length), uniform)
        correct += sum(decode_target(row) == target for row, (_, target) in zip(ids.tolist(), group))
    return correct / max(1, len(examples))


def accuracy_by_length(model, lengths: list[int], per_length: int, seed: int = 0, uniform: bool = False) -> list[float]:
    return [exact_match(model, test_set(L, per_length, seed), uniform=uniform) for L in lengths]


def accuracy_by_bucket(model, per_bucket: int, seed: int = 0) -> dict:
    """Exact match on the held-out test set of each length bucket (per_bucket examples, lengths spread evenly)."""
    accuracy = []
    for lo, hi in BUCKETS:
        examples = []
        for i, L in enumerate(range(lo, hi + 1)):
            examples += test_set(L, per_bucket // (hi - lo + 1) + (i < per_bucket % (hi - lo + 1)), seed)
        accuracy.append(round(exact_match(model, examples), 4))
    return {"buckets": [list(b) for b in BUCKETS], "accuracy": accuracy, "per_bucket": per_bucket,
            "trained_up_to": MAX_TRAIN_LEN, "measure": "exact match of the greedy translation, held-out sources"}


HELD_OUT_PROTOCOL = ("the held-out split is a fixed 10% of all sources (is_test, decided by the text), too many to "
                     "enumerate beyond a few words: a fixed sample (test_set, seed 0) of per_length sources of every "
                     "length from 1 to 32 words (the trained lengths) and from 33 to 44; exact match of the greedy "
                     "translation")


def held_out(model, per_length: int = 100, seed: int = 0) -> dict:
    """Exact match over a fixed sample of held-out sources of every length (HELD_OUT_PROTOCOL)."""
    within = [ex for L in range(1, MAX_TRAIN_LEN + 1) for ex in test_set(L, per_length, seed)]
    beyond = [ex for L in range(MAX_TRAIN_LEN + 1, BUCKETS[-1][1] + 1) for ex in test_set(L, per_length, seed)]
    return {"protocol": HELD_OUT_PROTOCOL, "seed": seed, "per_length": per_length,
            "trained_lengths": {"sources": len(within), "exact_match": round(exact_match(model, within), 4)},
            "longer": {"sources": len(beyond), "exact_match": round(exact_match(model, beyond), 4)}}


# ---------------------------------------------------------------------------------------------
# Training: `python -m playground.train seq2seq --variant=...`
# (train.KINDS; the trainer protocol: configs, train_kind, RESUMES)


@dataclass
class Seq2SeqTrainConfig:
    """Optimisation of a seq2seq model; the architecture is Seq2SeqConfig (both take --key=value)."""

    max_iters: int = 1200         # Adam steps
    batch_size: int = 64          # sources per step, all of one length (drawn uniformly from 1..max_train_len)
    max_train_len: int = MAX_TRAIN_LEN  # longest training source in words; the test buckets go further
    learning_rate: float = 3e-3   # peak, after warmup
    min_lr: float = 3e-4          # floor of the cosine decay
    warmup_iters: int = 100       # linear warmup (the Transformer needs one; it costs the RNNs nothing)
    lr_decay_iters: int = 0       # cosine decay length; 0 means max_iters
    grad_clip: float = 1.0        # global gradient norm; RNN decoders need it
    eval_interval: int = 100      # steps between validation losses (and checkpoint writes)
    eval_batches: int = 10        # held-out batches per validation loss
    per_bucket: int = 100         # test sources per length bucket in the final card
    max_seconds: float = 0.0      # stop after this much training time; 0: no limit
    threads: int = 0              # torch.set_num_threads; 0 leaves PyTorch's default

    def __post_init__(self):
        assert self.max_iters >= 1 and self.batch_size >= 1, "max_iters and batch_size must be positive"
        assert 1 <= self.max_train_len <= MAX_SOURCE_LEN, f"max_train_len must be in 1..{MAX_SOURCE_LEN}"
        assert 0 <= self.min_lr <= self.learning_rate, "min_lr must lie in [0, learning_rate]"
        assert self.eval_interval >= 1 and self.eval_batches >= 1 and self.per_bucket >= 1, "counts must be positive"


def _val_batches(cfg: Seq2SeqTrainConfig, seed: int) -> list:
    rng = random.Random(f"val-{seed}")
    out = []
    for _ in range(cfg.eval_batches):
        L = rng.randint(1, cfg.max_train_len)
        out.append(batch([sample(L, rng, test=True) for _ in range(cfg.batch_size)]))
    return out


RESUMES = False   # a run takes a few minutes and keeps no resume state; --resume is refused


def configs(kind: str) -> tuple:
    from playground.nets.seq2seq import Seq2SeqConfig

    return Seq2SeqConfig, Seq2SeqTrainConfig   # the architecture's keys and the trainer's


def train_kind(configs, run) -> dict:
    """Train one variant on fresh samples of the training split; write run.out/<name> at every evaluation
    and, at the end, card.json with the accuracy per length bucket on the held-out test sets."""
    from playground import checkpoints
    from playground.nets.seq2seq import Seq2SeqConfig, build_model
    from playground.training import loop

    model_config, cfg = configs
    if run.corpus:
        raise SystemExit("seq2seq: the task is generated in code (playground/training/seq2seq.py); drop --corpus")
    model_config = dataclasses.replace(model_config, src_vocab_size=len(SRC_VOCAB), tgt_vocab_size=len(TGT_VOCAB),
                                       bos_id=BOS, eos_id=EOS)
    assert isinstance(model_config, Seq2SeqConfig)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(run.seed)
    model = build_model(model_config).to(run.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, betas=(0.9, 0.98), weight_decay=0.0)
    rng = random.Random(run.seed)
    val = [tuple(t.to(run.device) for t in b) for b in _val_batches(cfg, run.seed)]
    name = run.name or f"seq2seq-{model_config.variant}"
    n_params = sum(p.numel() for p in model.parameters())
    state, running = loop.TrainState(), [float("nan")]  # running: the training loss, an exponential mean

    def step(it: int):
        L = rng.randint(1, cfg.max_train_len)
        src, tgt_in, tgt_out = (t.to(run.device) for t in batch([sample(L, rng, test=False)
                                                                  for _ in range(cfg.batch_size)]))
        return model(src, tgt_in, tgt_out)[1]

    def evaluate(it: int, losses: list, last: bool) -> dict:
        for value in losses:
            running[0] = value if math.isnan(running[0]) else 0.95 * running[0] + 0.05 * value
        model.eval()
        with torch.no_grad():
            loss = sum(model(*b)[1].item() for b in val) / len(val)
        model.train()
        return {"train": round(running[0], 4), "val": round(loss, 4)}

    def save(it: int, final: bool, accuracy: dict | None = None) -> None:
        if final and accuracy is None:
            return  # the final checkpoint waits for the accuracy by length, below
        card = {"kind": "seq2seq", "variant": model_config.variant, "task": "numbers in English words -> digits",
                "source_vocab": SRC_VOCAB, "target_vocab": TGT_VOCAB, "steps": it,
                "examples_seen": it * cfg.batch_size, "wall_time_s": round(state.elapsed, 1), "device": run.device,
                "n_params": n_params, "train_loss": round(running[0], 4), "val_loss": state.history[-1]["val"],
                "train_config": dataclasses.asdict(cfg), "history": state.history, "seed": run.seed,
                "command": run.command}
        if accuracy is not None:
            card["accuracy_by_length"] = accuracy
        checkpoints.save(run.out / name, kind="seq2seq", config=model_config, card=card, model=model)

    model.train()
    loop.fit(model, optimizer, step, loop.Loop(cfg.max_iters, cfg.eval_interval, cfg.grad_clip, cfg.max_seconds,
                                               desc=name),
             evaluate=evaluate, save=save, lr=lambda it, _: loop.learning_rate(it, cfg), state=state,
             device=run.device)
    model.eval()
    t0 = time.perf_counter()
    accuracy = accuracy_by_bucket(model, cfg.per_bucket, seed=0)
    accuracy["eval_seconds"] = round(time.perf_counter() - t0, 1)
    save(state.history[-1]["iter"], True, accuracy)
    return {"name": name, "iters": state.history[-1]["iter"], "val_loss": state.history[-1]["val"],
            "seconds": round(state.elapsed, 1), "n_params": n_params, "accuracy": accuracy["accuracy"]}
