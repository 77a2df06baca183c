"""`python -m playground.train ngram --corpus tinyshakespeare.txt`: count every 1- to n-gram of characters of
the training split (the first 90%, as the recurrent models and the GPT were trained), and measure on the whole
held-out split, with the language models' own protocol (lm.HELD_OUT_PROTOCOL), every order from 1 to n with
both smoothings: the lectures' argument in numbers, beside the networks' cards."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from playground import checkpoints
from playground.nets.ngram import NGramConfig, NGramLM, count
from playground.training.data import load_text
from playground.training.lm import HELD_OUT_PROTOCOL


@dataclass
class NGramTrainConfig:
    n: int = 5                      # the longest m-gram counted
    smoothing: str = "kneser-ney"   # the shipped model's; the card's table has both
    k: float = 0.01                 # add-k's pseudo-count
    val_fraction: float = 0.1       # the last 10%, as every LM here
    block_size: int = 128           # held-out windows of the GPT's context (the recurrent models' cards: 64)


def held_out(model: NGramLM, ids: np.ndarray, block_size: int) -> dict:
    """The whole held-out split in windows of block_size, each read from its own start: lm.held_out_loss's
    protocol, computed for all positions at once."""
    n = (len(ids) - 1) // block_size
    x, y = ids[:n * block_size].reshape(n, block_size), ids[1:n * block_size + 1].reshape(n, block_size)
    loss = float(-model.target_log_probs(x, y).mean())
    return {"loss": round(loss, 4), "bits_per_token": round(loss / math.log(2), 4),
            "perplexity": round(math.exp(loss), 3), "windows": n, "block_size": block_size, "tokens": n * block_size,
            "protocol": HELD_OUT_PROTOCOL}


RESUMES = False   # counting takes seconds; --resume is refused


def configs(kind: str) -> tuple:
    return (NGramTrainConfig,)


def train_kind(cfg: NGramTrainConfig, run) -> dict:
    started = time.perf_counter()
    data = load_text(run.corpus, cfg.val_fraction)
    config = NGramConfig(vocab_size=data.vocab_size, n=cfg.n, smoothing=cfg.smoothing, k=cfg.k)
    model = NGramLM(config, count(data.train.numpy(), cfg.n, data.vocab_size))
    val = data.val.numpy()
    table = [{"n": m, "smoothing": s, **{k: v for k, v in held_out(model.sub_model(m, s), val, cfg.block_size).items()
                                         if k in ("loss", "perplexity")}}
             for m in range(1, cfg.n + 1) for s in ("add-k", "kneser-ney")]
    name = run.name or f"ngram-{run.corpus[0].stem.replace('tiny', '')}"
    card = {"kind": "ngram", "model": f"{cfg.n}-gram, {cfg.smoothing}", "corpus": data.corpus,
            "train_tokens": len(data.train), "n_params": model.num_params(),
            "grams": {m: int(getattr(model, f"keys_{m}").numel()) for m in range(1, cfg.n + 1)},
            "held_out": held_out(model, val, cfg.block_size), "held_out_table": table,
            "train_config": asdict(cfg), "seed": run.seed, "command": run.command, "device": "cpu",
            "wall_time_s": round(time.perf_counter() - started, 1)}
    checkpoints.save(run.out / name, kind="ngram", config=config, card=card, model=model, tokenizer=data.tokenizer)
    return {"name": name, **card["held_out"], "grams": card["grams"]}
