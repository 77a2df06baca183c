"""Training GloVe (`python -m playground.train glove`): co-occurrence counts, AdaGrad on eq. 8, the evaluation.

From Pennington, Socher & Manning 2014 (§3 the model, §4.2 the counts and the training); the model is
nets/glove.py's. The words are word2vec's (training/word2vec.py): the same word-level tokenizer, the
same vocabulary rule (`train_vocabulary`: the most frequent lowercased letter runs) and the same stream
with out-of-vocabulary words removed, so the two models see the same text and answer the same
intrinsic evaluation (`word2vec.evaluate`: the project's analogy questions and similarity triples).

1. X is counted once, before training (§4.2): every pair of words at distance d ≤ window in the stream,
   either order (a symmetric window), adds 1/d to X_ij. The counts are built with array operations, one
   pass per distance, merged as sparse COO (`cooccurrence`).
2. The nonzero X_ij are visited in a new random order each epoch (a torch.Generator seeded from the
   run's seed) in batches; each batch takes one AdaGrad step (`GloVe.adagrad_step`) at the paper's
   initial rate 0.05, which AdaGrad then lowers per coordinate by itself.

The steps run in the project's one loop (`loop.fit`), like word2vec's: the step function updates the
weights itself (optimizer None) and returns the batch's loss; the number of steps is known in advance
(epochs × batches of the nonzero entries), so `max_iters` is exact and `max_seconds` stops a run early.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from playground.nets.glove import GloVe, GloVeConfig, GloVeVectors, weighting
from playground.training import loop
from playground.training.word2vec import encode_corpus, evaluate, read_lines, train_vocabulary


# ---------------------------------------------------------------------------------------------
# The co-occurrence matrix X (§4.2)


def _merge(keys: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the weights of equal keys: (unique keys, their sums), keys sorted."""
    unique, inverse = np.unique(keys, return_inverse=True)
    return unique, np.bincount(inverse, weights=weights, minlength=len(unique))


def cooccurrence(ids: torch.Tensor, vocab_size: int, window: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """X from a stream of word ids (N,): X_ij = Σ 1/d over the pairs of positions (t, t + d), 1 ≤ d ≤ window,
    holding i and j in either order. Returns the nonzero entries as COO: rows i (nnz,), columns j (nnz,)
    (int64) and X_ij (nnz,) (float32), sorted by (i, j). X is symmetric: each (i, j) comes with (j, i).

    A = the counts with j to the right of i; one vectorised pass per distance d (keys i·V + j, merged),
    then X = A + Aᵀ. Memory is a few arrays of the stream's length, never V × V."""
    V = vocab_size
    a = ids.numpy().astype(np.int64)
    keys, sums = np.zeros(0, np.int64), np.zeros(0, np.float64)
    for d in range(1, window + 1):
        if d >= len(a):
            break
        k_d, x_d = _merge(a[:-d] * V + a[d:], np.full(len(a) - d, 1.0 / d))   # pairs (t, t + d): i left, j right
        keys, sums = _merge(np.concatenate([keys, k_d]), np.concatenate([sums, x_d]))
    transposed = (keys % V) * V + keys // V                                  # (i, j) -> (j, i)
    keys, sums = _merge(np.concatenate([keys, transposed]), np.concatenate([sums, sums]))  # X = A + Aᵀ
    i, j = torch.from_numpy(keys // V), torch.from_numpy(keys % V)
    return i, j, torch.from_numpy(sums.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# Training


@dataclass
class GloVeTrainConfig:
    """`python -m playground.train glove --corpus ...`: vocabulary, counts, model and optimisation."""

    dim: int = 100                 # vector width (as word2vec-english, so the two compare at equal size)
    max_vocab: int = 20_000        # most frequent words kept (word2vec's rule); with dim, sets the file size
    min_count: int = 5             # rarer words are dropped before the vocabulary is cut (as word2vec)
    window: int = 10               # context words on each side, weighted 1/d (§4.2: symmetric, 10 words)
    x_max: float = 10.0            # f's cutoff; the paper's 100 is for 6B tokens: on a few million, few counts reach
                                   # 100 (most pairs would weigh ~0), so it is scaled down with the corpus
    alpha: float = 0.75            # f's exponent (eq. 9, the paper's 3/4)
    epochs: int = 25               # passes over the nonzero X_ij (the paper: 50 for vectors under 300 wide)
    batch_size: int = 4096         # nonzero entries per AdaGrad step
    learning_rate: float = 0.05    # AdaGrad's initial rate (§4.2)
    max_seconds: float = 0.0       # stop after this much training wall time; 0: no limit
    threads: int = 0               # torch.set_num_threads; 0 leaves PyTorch's default

    def __post_init__(self):
        assert self.max_vocab >= 2 and self.dim >= 1, "max_vocab and dim must be positive"
        assert self.window >= 1, f"window={self.window} must be at least 1"
        assert self.epochs >= 1 and self.batch_size >= 1, "epochs and batch_size must be at least 1"
        assert self.learning_rate > 0 and self.x_max > 0, "learning_rate and x_max must be positive"
        assert 0 < self.alpha <= 1, f"alpha={self.alpha} must lie in (0, 1]"


def build(vocab_size: int, cfg: GloVeTrainConfig) -> GloVe:
    return GloVe(GloVeConfig(vocab_size=vocab_size, dim=cfg.dim, x_max=cfg.x_max, alpha=cfg.alpha, window=cfg.window))


@torch.no_grad()
def mean_loss(model: GloVe, i: torch.Tensor, j: torch.Tensor, X: torch.Tensor, chunk: int = 1 << 18) -> float:
    """J (eq. 8) over all the given entries, divided by their number: the exact objective, no sampling."""
    total = 0.0
    for s in range(0, len(X), chunk):
        total += float(model(i[s : s + chunk], j[s : s + chunk], X[s : s + chunk]))
    return total / max(1, len(X))


def train(model: GloVe, i: torch.Tensor, j: torch.Tensor, X: torch.Tensor, cfg: GloVeTrainConfig, seed: int = 0,
          progress: bool = False, log_every: int = 500) -> dict:
    """AdaGrad on the nonzero entries (i, j, X_ij), each (nnz,), for cfg.epochs shuffled passes. Returns the
    history: the mean loss per logged interval and per epoch (J / entries seen), steps, wall time."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    g = torch.Generator().manual_seed(seed)
    G = model.new_accumulators()
    n = len(X)
    per_epoch = max(1, math.ceil(n / cfg.batch_size))
    started = time.perf_counter()
    epochs: list[dict] = []
    current = {"order": torch.arange(0), "sum": 0.0, "seen": 0, "epoch": -1}

    def close_epoch() -> None:
        if current["seen"]:
            epochs.append({"epoch": current["epoch"] + 1, "loss": round(current["sum"] / current["seen"], 5),
                           "entries": current["seen"], "seconds": round(time.perf_counter() - started, 1)})
        current["sum"], current["seen"] = 0.0, 0

    def step(it: int) -> float:
        epoch, b = divmod(it, per_epoch)
        if epoch != current["epoch"]:   # a new epoch: a new order of the nonzero entries
            close_epoch()
            current["order"], current["epoch"] = torch.randperm(n, generator=g), epoch
        idx = current["order"][b * cfg.batch_size : (b + 1) * cfg.batch_size]
        J = model.adagrad_step(i[idx], j[idx], X[idx], cfg.learning_rate, G)
        current["sum"], current["seen"] = current["sum"] + J, current["seen"] + len(idx)
        return J / max(1, len(idx))

    def record(it: int, losses: list, last: bool) -> dict | None:
        if not losses:
            return None
        return {"loss": round(sum(losses) / len(losses), 5)}

    model.train()
    settings = loop.Loop(cfg.epochs * per_epoch, log_every, max_seconds=cfg.max_seconds, show=progress,
                         desc="glove")
    state = loop.fit(model, None, step, settings, evaluate=record)
    close_epoch()
    model.eval()
    log = [{"step": h["iter"], "loss": h["loss"], "seconds": h["seconds"]} for h in state.history]
    return {"log": log, "epochs": epochs, "steps": state.it, "entries_seen": sum(e["entries"] for e in epochs),
            "seconds": round(time.perf_counter() - started, 1),
            "final_loss": epochs[-1]["loss"] if epochs else float("nan")}


# ---------------------------------------------------------------------------------------------
# `python -m playground.train glove` (train.KINDS; the trainer protocol: configs, train_kind, RESUMES)


def count_summary(X: torch.Tensor, cfg: GloVeTrainConfig) -> dict:
    """What the card says of X: its nonzero entries, their total, and how many reach f = 1."""
    f = weighting(X, cfg.x_max, cfg.alpha)
    return {"nonzero": int(len(X)), "total": round(float(X.double().sum()), 1),
            "at_x_max": int((X >= cfg.x_max).sum()), "mean_f": round(float(f.mean()), 4) if len(X) else 0.0}


RESUMES = False   # a run takes minutes and keeps no resume state; --resume is refused


def configs(kind: str) -> tuple:
    return (GloVeTrainConfig,)


def train_kind(cfg: GloVeTrainConfig, run) -> dict:
    """Vocabulary and stream (word2vec's), the counts X, AdaGrad on eq. 8; writes `glove-<first corpus>/` (or
    --name) with W + W̃ in fp16, the word-level tokenizer, and a card with the counts, the loss per epoch
    and the intrinsic evaluation (analogies, similarity triples)."""
    from playground import checkpoints

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    started = time.perf_counter()
    tok = train_vocabulary(read_lines(run.corpus), cfg.max_vocab, cfg.min_count)
    ids = encode_corpus(tok, read_lines(run.corpus))
    i, j, X = cooccurrence(ids, tok.get_vocab_size(), cfg.window)
    counted = time.perf_counter() - started
    print(f"glove: {len(ids):,} words, vocabulary {tok.get_vocab_size():,}, {len(X):,} nonzero X_ij "
          f"({counted:.0f} s)", flush=True)
    model = build(tok.get_vocab_size(), cfg)  # initial vectors from the generator train.py seeded with --seed
    loss_before = mean_loss(model, i, j, X)
    history = train(model, i, j, X, cfg, seed=run.seed, progress=True)
    loss_after = mean_loss(model, i, j, X)
    evaluation = evaluate(model.vectors(), tok.get_vocab())
    seconds = time.perf_counter() - started
    card = {
        "kind": "glove", "corpus": checkpoints.corpus_record(run.corpus), "tokens": int(len(ids)),
        "vocab_size": tok.get_vocab_size(), "dim": cfg.dim, "window": cfg.window,
        "cooccurrence": count_summary(X, cfg) | {"weighting": "1/d for a pair d words apart, symmetric window",
                                                 "seconds": round(counted, 1)},
        "steps": history["steps"], "entries_seen": history["entries_seen"], "wall_time_s": round(seconds, 1),
        "train_seconds": history["seconds"], "device": "cpu", "train_loss": history["final_loss"],
        "loss_before": round(loss_before, 5), "loss_after": round(loss_after, 5),
        "loss_note": "J (eq. 8) over every nonzero X_ij divided by their number; train_loss and the epochs' losses "
                     "are the same mean over the entries as they were visited (before each step's update)",
        "evaluation": evaluation, "train_config": asdict(cfg), "history": history,
        "storage": "float16; only W + W̃ (the vectors the paper uses, §4.2), not W, W̃, b, b̃ separately",
        "seed": run.seed, "command": run.command,
    }
    name = run.name or f"glove-{run.corpus[0].stem}"
    checkpoints.save(run.out / name, kind="glove", config=model.config, card=card,
                     model=GloVeVectors.from_glove(model).half(), tokenizer=tok)
    return {"name": name, "tokens": int(len(ids)), "nonzero": int(len(X)), "loss_before": loss_before,
            "loss_after": loss_after, "analogy": evaluation["analogy"]["all"], "similarity": evaluation["similarity"],
            "seconds": round(seconds, 1)}
