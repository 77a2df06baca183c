"""A synthetic long-range memory task: can an Elman RNN, an LSTM and a GRU of the same size learn to remember one
token for k steps?

Each sequence is a random string of *keys* (`n_keys` symbols) and *noise* (`n_noise` symbols). A *marker* stands
just before the key to remember, k steps before the end; after reading the whole sequence, the network must name
that key. The keys after it are distractors ("the last key seen" is wrong), so the network has to hold the marked
one. The only training signal is the loss at the last step, which has to travel k steps back through time to reach
the key: the vanishing gradient decides what can be learned. For each distance k of a grid up to `max_k`, each cell is
trained afresh on distances drawn uniformly from 1..k and tested on new sequences at exactly k (chance = 1/n_keys).
(One network trained once on every distance up to max_k either learns a latch that works at every distance or
none at all: its accuracy per distance is flat, and says nothing about distance.)

`python -m playground.training.memory` runs the default experiment and writes the result the app shows at once
(assets/memory_task.json), with the configuration, seed, versions and wall time that produced it.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from playground import checkpoints
from playground.checkpoints import resolve_device
from playground.nets.recurrent import KNOCKOUTS, RecurrentConfig, RecurrentLM
from playground.nets.recurrent import knockout as knockout_of
from playground.training import loop

CACHE = checkpoints.ASSETS_DIR / "memory_task.json"


@dataclass
class MemoryConfig:
    max_k: int = 30               # the farthest key; every sequence has max_k + 2 tokens
    n_distances: int = 8          # the distances k tried, evenly spread over 1..max_k
    n_keys: int = 4               # symbols to remember (chance accuracy 1/4)
    n_noise: int = 4              # distractor symbols
    hidden_size: int = 32         # n, the same for the three cells (so the LSTM has ~4x the Elman parameters)
    n_embd: int = 8               # m
    steps: int = 300              # Adam steps per cell and distance: ~1-3 s each on one CPU thread
    batch_size: int = 32
    learning_rate: float = 1e-2
    grad_clip: float = 1.0        # global norm, as in training the language models
    eval_per_k: int = 64          # test sequences per distance k
    log_every: int = 10           # loss-curve resolution, in steps
    seed: int = 0
    cells: str = "rnn,lstm,gru"
    knockout: str = "none"        # a gate held while training and testing (nets/recurrent.KNOCKOUTS), or none
    device: str = "auto"          # auto: cuda, then mps, then cpu (the batches are made on the CPU, then moved)

    def __post_init__(self):
        assert 1 <= self.max_k <= 200, f"max_k={self.max_k} must be in 1..200"
        assert self.n_distances >= 1, "need at least one distance"
        assert self.n_keys >= 2 and self.n_noise >= 1, "need at least 2 keys and 1 noise symbol"
        assert self.steps >= 1 and self.batch_size >= 1 and self.eval_per_k >= 1, "counts must be positive"
        assert self.knockout == "none" or self.knockout in KNOCKOUTS, \
            f"knockout={self.knockout!r} must be none or one of {', '.join(KNOCKOUTS)}"


def distances(cfg: MemoryConfig) -> list[int]:
    """The distances k tried: n_distances of them, evenly spread over 1..max_k (both ends included)."""
    n = min(cfg.n_distances, cfg.max_k)
    return sorted({round(1 + i * (cfg.max_k - 1) / max(n - 1, 1)) for i in range(n)})


def vocab_size(cfg: MemoryConfig) -> int:
    return cfg.n_keys + cfg.n_noise + 1  # the keys, the noise symbols, the marker


def make_batch(cfg: MemoryConfig, k: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """k (B,) distances -> x (B, L) tokens, y (B,) keys. Keys are ids 0..n_keys-1, noise the ids after them, the
    marker the last id. Every position holds a key or a noise symbol at random; the marker stands just before the
    key to remember, which is k steps before the end, so the keys after it are distractors: "the last key seen"
    is wrong, and the network must hold the marked one for k steps."""
    B, L = k.shape[0], cfg.max_k + 2
    x = torch.randint(cfg.n_keys + cfg.n_noise, (B, L), generator=generator)      # keys and noise everywhere
    y = torch.randint(cfg.n_keys, (B,), generator=generator)
    rows = torch.arange(B)
    x[rows, L - 2 - k] = vocab_size(cfg) - 1                                       # the marker
    x[rows, L - 1 - k] = y                                                         # the key, k steps before the end
    return x, y


def _loss(model: RecurrentLM, x, y, n_keys: int, knockout: str = "none"):
    logits, _ = model(x, clamp=knockout_of(knockout, model.config.cell))   # (B, L, V)
    last = logits[:, -1, :n_keys]                          # the answer, read at the last step only
    return F.cross_entropy(last, y), last


def _train_cell(cfg: MemoryConfig, cell: str, distance: int, device: str,
                progress: Callable[[float, str], None]) -> tuple[RecurrentLM, list]:
    """One cell trained on the task at distances up to `distance` with training/loop.py; returns the model and its loss
    curve [[step, loss], ...] (every log_every steps and the last). The app calls this while serving, so
    no global random state is touched: the weights and the batches come from the experiment's own
    generators (the weights are those that seeding the global generator would give)."""
    config = RecurrentConfig(cell=cell, vocab_size=vocab_size(cfg), n_embd=cfg.n_embd,
                             hidden_size=cfg.hidden_size)
    model = RecurrentLM.seeded(config, torch.Generator().manual_seed(cfg.seed)).to(device)
    g = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
    curve: list = []

    def step(it: int):
        k = torch.randint(1, distance + 1, (cfg.batch_size,), generator=g)  # every distance up to this one
        x, y = (t.to(device) for t in make_batch(cfg, k, g))
        return _loss(model, x, y, cfg.n_keys, cfg.knockout)[0]

    def log(it: int, losses: list, last: bool) -> None:
        """Called before step `it`: losses holds the loss of step it - 1."""
        done = it - 1
        if losses and (done % cfg.log_every == 0 or done == cfg.steps - 1):
            curve.append([done, round(losses[-1], 4)])
            progress((done + 1) / cfg.steps, f"training the {cell.upper()} at k = {distance}: step {done + 1}/"
                                              f"{cfg.steps}, loss {losses[-1]:.3f}")

    model.train()
    loop.fit(model, opt, step, loop.Loop(cfg.steps, 1, cfg.grad_clip, show=False), evaluate=log, device=device)
    return model, curve


def run(cfg: MemoryConfig, progress: Callable[[float, str], None] | None = None) -> dict:
    """Train each cell afresh for each distance and measure its accuracy there. Returns plain JSON-able data: per
    cell the accuracy and test loss per distance, and the loss curve of the training at the longest distance."""
    started = time.perf_counter()
    device = resolve_device(cfg.device)
    cells = [c for c in cfg.cells.split(",") if c]
    ks = distances(cfg)
    g_eval = torch.Generator().manual_seed(cfg.seed + 1)
    test_k = torch.tensor(ks).repeat_interleave(cfg.eval_per_k)                   # every distance, eval_per_k times
    x_eval, y_eval = (t.to(device) for t in make_batch(cfg, test_k, g_eval))      # the same test set for all
    out = {"config": asdict(cfg), "k": ks, "cells": {}}
    runs, done = len(cells) * len(ks), 0
    for cell in cells:
        t0 = time.perf_counter()
        accuracy, losses, curve, model = [], [], [], None
        for i, k in enumerate(ks):
            model, curve = _train_cell(cfg, cell, k, device, lambda f, msg, done=done: progress and progress(
                (done + f) / runs, msg))
            done += 1
            model.eval()
            rows = slice(i * cfg.eval_per_k, (i + 1) * cfg.eval_per_k)   # the test sequences at this distance
            with torch.no_grad():
                loss, logits = _loss(model, x_eval[rows], y_eval[rows], cfg.n_keys, cfg.knockout)
            accuracy.append(round((logits.argmax(-1) == y_eval[rows]).float().mean().item(), 4))
            losses.append(round(loss.item(), 4))
        out["cells"][cell] = {
            "accuracy": accuracy, "test_loss": losses, "loss_curve": curve,   # the curve: at the longest distance
            "n_params": sum(p.numel() for p in model.encoder.parameters()),
            "seconds": round(time.perf_counter() - t0, 2),
        }
    out["made"] = {"seconds": round(time.perf_counter() - started, 2), "torch": torch.__version__,
                   "python": platform.python_version(), "threads": torch.get_num_threads(),
                   "machine": platform.machine(), "device": device, "chance": 1 / cfg.n_keys}
    return out


def load_cached(path: Path = CACHE) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


if __name__ == "__main__":
    import sys

    torch.set_num_threads(1)  # (32, 32) matrices: a second thread costs more in synchronisation than it saves
    result = run(MemoryConfig(), lambda f, msg: print(f"\r{f:5.0%} {msg}", end="", file=sys.stderr))
    result["made"]["command"] = "python -m playground.training.memory"
    result["made"]["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    CACHE.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {CACHE}: " + ", ".join(f"{c} mean accuracy {sum(r['accuracy']) / len(r['accuracy']):.2f}"
                                          for c, r in result["cells"].items()), file=sys.stderr)
