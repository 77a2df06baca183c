"""Training FastText (`python -m playground.train fasttext`): the data, the loop, the evaluations.

Bojanowski et al. 2017 train skip-gram with negative sampling exactly as word2vec does, only the centre word
is the bag of its n-grams (nets/fasttext.py). So the vocabulary, the tokenisation (lowercased letter runs),
the subsampling, the noise distribution U(w)^(3/4), the dynamic window and the analogy evaluation are
word2vec's own (training/word2vec.py), and its checkpoint can be set beside word2vec-english's figure for
figure. What is new: each vocabulary word's n-gram rows are computed once, as a padded tensor (V, L), so a
batch of centres is one index into it and one masked mean; and two checks of the subword vectors, on words
the model never saw (`oov_check`).

The last `held_out_tokens` words of the corpus are never trained on: the card's held-out loss is over every
(centre, context) pair of that tail.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from playground.nets.fasttext import FastText, FastTextConfig
from playground.training.word2vec import (Batches, context_pairs, encode_corpus, evaluate, fit_pairs,
                                          keep_probability, noise_distribution, read_lines, train_vocabulary)


@dataclass
class FastTextTrainConfig:
    """`python -m playground.train fasttext --corpus ...`: vocabulary, n-grams, model and optimisation."""

    dim: int = 64                   # vector width (word2vec-english has 100; the buckets take the bytes)
    buckets: int = 30_000           # K n-gram rows (the paper's code: 2M); (V + K) x dim x 2 bytes must fit 8 MB
    minn: int = 3                   # shortest character n-gram (the paper: 3)
    maxn: int = 6                   # longest (the paper: 6)
    max_vocab: int = 20_000         # most frequent words with a row of their own (word2vec-english's count)
    min_count: int = 5              # rarer words are dropped before the vocabulary is cut (as word2vec)
    window: int = 5                 # maximum context distance (the paper: drawn uniformly in 1..5)
    negatives: int = 5              # k noise words per pair (the paper: 5)
    subsample: float = 1e-4         # t of the subsampling formula (the paper: 1e-4); 0: off
    epochs: int = 5                 # passes over the (re-subsampled) corpus (the paper: 5)
    batch_size: int = 1024          # pairs per step, their updates summed (as word2vec's trainer)
    average_repeats: bool = True    # an input row used k times in a batch moves by the mean of its k updates,
                                    # not the sum (FastText.sgd_step: summed, frequent n-grams overshoot)
    learning_rate: float = 0.025    # the start of the linear decay (word2vec-english's 0.025; the paper's code 0.05)
    lr_floor: float = 0.0001        # the rate at the end of the linear decay, as a fraction of learning_rate
    chunk_tokens: int = 200_000     # the stream is cut into chunks whose pairs are shuffled together
    held_out_tokens: int = 100_000  # the corpus's last words, never trained on: the held-out loss (0: none)
    max_seconds: float = 0.0        # stop after this much training wall time, the rate decayed by then; 0: no limit
    threads: int = 0                # torch.set_num_threads; 0 leaves PyTorch's default

    def __post_init__(self):
        assert self.max_vocab >= 2 and self.dim >= 1 and self.buckets >= 1, \
            f"max_vocab={self.max_vocab}, dim={self.dim} and buckets={self.buckets} must be positive"
        assert 1 <= self.minn <= self.maxn, f"need 1 <= minn <= maxn, got minn={self.minn} maxn={self.maxn}"
        assert self.epochs >= 1 and self.batch_size >= 1 and self.negatives >= 1, "epochs, batch_size, negatives >= 1"
        assert 0 < self.lr_floor <= 1, f"lr_floor={self.lr_floor} must lie in (0, 1]"
        assert self.held_out_tokens >= 0, f"held_out_tokens={self.held_out_tokens} must be >= 0"


def build(vocab: dict[str, int], cfg: FastTextTrainConfig) -> FastText:
    config = FastTextConfig(vocab_size=max(vocab.values()) + 1, buckets=cfg.buckets, dim=cfg.dim, minn=cfg.minn,
                            maxn=cfg.maxn, window=cfg.window)
    return FastText(config, vocab)


def vocabulary_ngrams(model: FastText) -> tuple[torch.Tensor, torch.Tensor]:
    """Every vocabulary word's n-gram rows, padded: rows (V, L) and mask (V, L), row i for word id i
    ([UNK], id 0, gets its n-grams too but never occurs in the stream)."""
    words = [""] * model.config.vocab_size
    for w, i in model.vocab.items():
        words[i] = w
    return model.padded_ngrams(words)


def gather(table: tuple[torch.Tensor, torch.Tensor], centres: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The n-gram rows and mask (B, L_b) of a batch of centre ids, cut to the batch's longest bag."""
    rows, mask = table[0][centres], table[1][centres]
    L = max(1, int(mask.sum(1).max())) if len(centres) else 1
    return rows[:, :L], mask[:, :L]


# ---------------------------------------------------------------------------------------------
# Training


def train(model: FastText, ids: torch.Tensor, counts: torch.Tensor, cfg: FastTextTrainConfig, seed: int = 0,
          progress: bool = False, log_every: int = 200) -> dict:
    """Train on a stream of word ids (N,) with FastText.sgd_step; `counts` (V,) the corpus counts of each id.
    Returns the history: mean loss per logged interval and per epoch, pairs seen, steps, wall time."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    g = torch.Generator().manual_seed(seed)
    keep = keep_probability(counts, cfg.subsample)                   # (V,)
    noise = noise_distribution(counts).float()                       # (V,)
    table = vocabulary_ngrams(model)                                 # (V, L) rows and mask, built once
    data = Batches(ids, keep, cfg, SimpleNamespace(architecture="skipgram", window=model.config.window), g)
    batches = iter(data)

    def step(it: int) -> float:
        centres, contexts, _ = next(batches)                           # skip-gram: no mask
        lr = data.learning_rate(it)                                   # word2vec's schedule
        negatives = torch.multinomial(noise, len(contexts) * cfg.negatives, replacement=True, generator=g)
        rows, mask = gather(table, centres)
        value = model.sgd_step(rows, mask, contexts, negatives.view(-1, cfg.negatives), lr, cfg.average_repeats)
        if not math.isfinite(value):  # summed updates on a few frequent n-grams can blow up: say what to change
            raise FloatingPointError(f"fasttext: the loss is {value} at step {it} (lr {lr:.4g}); lower "
                                     "--learning_rate or --batch_size")
        data.report(value, len(contexts))
        return value

    return fit_pairs(model, None, step, data, "fasttext skipgram", progress, log_every)


@torch.no_grad()
def pairs_loss(model: FastText, ids: torch.Tensor, counts: torch.Tensor, negatives: int = 5, seed: int = 0,
               batch: int = 8192) -> dict:
    """The negative-sampling loss over EVERY (centre, context) pair of a stream (dynamic window, no
    subsampling), with noise drawn from a fixed generator: comparable before and after training."""
    g = torch.Generator().manual_seed(seed)
    noise = noise_distribution(counts).float()
    table = vocabulary_ngrams(model)
    centres, contexts = context_pairs(ids, model.config.window, g)
    total = 0.0
    for s in range(0, len(centres), batch):
        c, t = centres[s:s + batch], contexts[s:s + batch]
        neg = torch.multinomial(noise, len(t) * negatives, replacement=True, generator=g).view(-1, negatives)
        total += float(model(*gather(table, c), t, neg)) * len(t)
    return {"loss": round(total / max(1, len(centres)), 4), "pairs": int(len(centres))}


# ---------------------------------------------------------------------------------------------
# What subwords buy: vectors for words the model never saw


def misspell(word: str) -> str:
    """A deterministic typo: the two letters in the middle of the word swapped ("strawberry" -> "strabwerry")."""
    i = len(word) // 2 - 1
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


@torch.no_grad()
def oov_check(model: FastText, first: int = 1000, count: int = 500, min_length: int = 6) -> dict:
    """Two checks on words of 6 letters or more, `count` of them spread evenly over the vocabulary ids from
    `first` on (mid-frequency words, not the commonest):

    - misspellings: each word with its middle two letters swapped (skipped when that is itself a vocabulary
      word or changes nothing); the typo's vector comes from its n-grams alone (the model never saw it), and
      we ask whether the original word is its nearest (top1) or among its 5 nearest (top5) vocabulary words
      by cosine. word2vec has no vector at all for such a word.
    - ngrams_only: the same words' vectors with their own word row left out (what the word would get if it
      had been out of the vocabulary), against their trained vectors: the mean cosine, and whether the word
      is the nearest vocabulary word (top1)."""
    inverse = {i: w for w, i in model.vocab.items()}
    ids = sorted(i for i in inverse if i >= first and len(inverse[i]) >= min_length)
    step = max(1, len(ids) // count)
    chosen = [inverse[i] for i in ids[::step][:count]]
    vocab_words = [inverse.get(i, "") for i in range(model.config.vocab_size)]
    unit = F.normalize(model.vectors(vocab_words), dim=1)
    unit[0] = 0.0                                                      # [UNK] is never an answer
    typos = [(w, misspell(w)) for w in chosen if misspell(w) != w and misspell(w) not in model.vocab]
    typo_vecs = F.normalize(torch.stack([model.word_vector(t) for _, t in typos] or [torch.zeros(0)]), dim=1)
    ranks = _ranks(unit, typo_vecs, torch.tensor([model.vocab[w] for w, _ in typos], dtype=torch.long))
    bare = FastText(model.config)                                      # the same rows, no vocabulary: n-grams only
    bare.W_in = model.W_in
    bare_vecs = F.normalize(bare.vectors(chosen), dim=1)
    word_ids = torch.tensor([model.vocab[w] for w in chosen], dtype=torch.long)
    bare_ranks = _ranks(unit, bare_vecs, word_ids)
    return {
        "misspellings": {"words": len(typos), "top1": _share(ranks == 0), "top5": _share(ranks < 5),
                         "examples": [[t, w] for w, t in typos[:8]]},
        "ngrams_only": {"words": len(chosen), "top1": _share(bare_ranks == 0),
                        "mean_cosine": _share((bare_vecs * unit[word_ids]).sum(1))},
        "protocol": f"words of >= {min_length} letters, every {step}th vocabulary id from {first}; typo = the middle "
                    "two letters swapped, its vector from n-grams only; rank of the true word among all "
                    "vocabulary words by cosine (top1, top5); ngrams_only: the word's own row left out",
    }


def _share(x: torch.Tensor) -> float | None:
    """The mean of a vector (a share of True, or a mean cosine), rounded; None when it is empty."""
    return round(float(x.float().mean()), 4) if len(x) else None


def _ranks(unit: torch.Tensor, queries: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """For each query (Q, d), how many vocabulary words score higher than its answer (0: the answer is first)."""
    if len(answers) == 0:
        return torch.zeros(0, dtype=torch.long)
    scores = queries @ unit.T                                          # (Q, V)
    right = scores[torch.arange(len(answers)), answers]                # (Q,)
    return (scores > right.unsqueeze(1)).sum(1)


# ---------------------------------------------------------------------------------------------
# `python -m playground.train fasttext` (train.KINDS; the trainer protocol: configs, train_kind, RESUMES)


def fp16_copy(model: FastText) -> FastText:
    """The input rows in fp16 for the checkpoint (half the bytes; cosine neighbours do not change at that
    precision); only they are saved (nets.fasttext.trained_state)."""
    half = FastText(model.config, model.vocab)
    half.W_in.weight.data = model.W_in.weight.detach().half().clone()
    return half


RESUMES = False   # a run takes minutes and keeps no resume state; --resume is refused


def configs(kind: str) -> tuple:
    return (FastTextTrainConfig,)


def train_kind(cfg: FastTextTrainConfig, run) -> dict:
    """Vocabulary, subsampled stream, skip-gram over n-grams; writes `fasttext-<first corpus>/` (or --name) with
    the input rows in fp16, the word-level tokenizer, and a card with the held-out loss before and after,
    word2vec's intrinsic evaluation and the out-of-vocabulary check."""
    from playground import checkpoints

    started = time.perf_counter()
    tok = train_vocabulary(read_lines(run.corpus), cfg.max_vocab, cfg.min_count)
    ids = encode_corpus(tok, read_lines(run.corpus))
    counts = torch.bincount(ids, minlength=tok.get_vocab_size())
    n_held = min(cfg.held_out_tokens, len(ids) // 10)
    train_ids, held = ids[:len(ids) - n_held], ids[len(ids) - n_held:]
    model = build(tok.get_vocab(), cfg)
    before = pairs_loss(model, held, counts, cfg.negatives, seed=run.seed) if n_held else {}
    history = train(model, train_ids, counts, cfg, seed=run.seed, progress=True)
    after = pairs_loss(model, held, counts, cfg.negatives, seed=run.seed) if n_held else {}
    inverse = {i: w for w, i in tok.get_vocab().items()}
    evaluation = evaluate(model.vectors([inverse[i] for i in range(tok.get_vocab_size())]), tok.get_vocab())
    oov = oov_check(model)
    seconds = time.perf_counter() - started
    card = {
        "kind": "fasttext", "architecture": "skipgram over character n-grams (Bojanowski et al. 2017)",
        "corpus": checkpoints.corpus_record(run.corpus), "tokens": int(len(ids)), "train_tokens": int(len(train_ids)),
        "vocab_size": tok.get_vocab_size(), "buckets": cfg.buckets, "ngrams": [cfg.minn, cfg.maxn], "dim": cfg.dim,
        "steps": history["steps"], "pairs_seen": history["pairs"], "wall_time_s": round(seconds, 1),
        "train_seconds": history["seconds"], "device": "cpu", "threads": cfg.threads,
        "train_loss": history["final_loss"],
        "held_out": {"loss": after.get("loss"), "loss_before": before.get("loss"), "pairs": after.get("pairs"),
                     "tokens": int(n_held),
                     "protocol": f"the corpus's last {n_held:,} words, never trained on: the mean negative-sampling "
                                 f"loss over every (centre, context) pair (dynamic window {cfg.window}, no "
                                 f"subsampling, {cfg.negatives} noise words per pair from a fixed generator)"},
        "evaluation": evaluation, "oov": oov, "train_config": asdict(cfg), "history": history,
        "storage": "float16; only the input rows z (vocab_size word rows, then the bucket rows); the output "
                   "vectors serve only training and are not shipped",
        "seed": run.seed, "command": run.command,
    }
    name = run.name or f"fasttext-{run.corpus[0].stem}"
    checkpoints.save(run.out / name, kind="fasttext", config=model.config, card=card, model=fp16_copy(model),
                     tokenizer=tok)
    return {"name": name, "tokens": int(len(ids)), "held_out": card["held_out"],
            "analogy": evaluation["analogy"]["all"],
            "similarity": evaluation["similarity"], "oov": {k: v for k, v in oov.items() if k != "protocol"},
            "seconds": round(seconds, 1)}
