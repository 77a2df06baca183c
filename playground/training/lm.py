"""Training a language model (GPT, the recurrent LMs, any model with `forward(idx, targets) -> (logits, loss)`).

`python -m playground.train gpt|rnn|lstm|gru --corpus FILE`: each kind is an `LMKind` (the architecture's
config, its training defaults, a build function; KINDS below) and `train_kind` trains it. The loop is
training/loop.py's; here are the step (a random window of the training split, next-token loss), the
loss estimate on fixed batches and the checkpoint with its card.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

import torch

from playground import checkpoints
from playground.training import loop
from playground.training.data import get_batch


@dataclass
class LMTrainConfig:
    """Optimisation of a language model; each kind brings its own defaults (LMKind.train_config)."""

    max_iters: int = 2000           # optimizer steps
    batch_size: int = 12            # sequences per step, summed over all processes under torchrun
    block_size: int = 64            # training context in tokens (a GPT's own block_size must be at least this)
    learning_rate: float = 1e-3     # peak, after warmup
    min_lr: float = 1e-4            # floor of the cosine decay (nanoGPT: learning_rate / 10)
    warmup_iters: int = 100         # linear warmup from 0: Adam's early steps are noisy
    lr_decay_iters: int = 0         # cosine decay length; 0 means max_iters
    weight_decay: float = 0.1       # on matrices only, not on biases and norms
    beta1: float = 0.9
    beta2: float = 0.99             # small data, few steps: a shorter second-moment memory (nanoGPT char recipe)
    grad_clip: float = 1.0          # clip the global gradient norm; 0 turns it off
    eval_interval: int = 250        # steps between validation estimates (and checkpoint writes)
    eval_iters: int = 20            # batches per loss estimate
    target_val_loss: float = 0.0    # stop once the validation estimate reaches this; 0: never (the training race)
    max_seconds: float = 0.0        # stop after this much training wall time; 0: no limit
    threads: int = 0                # torch.set_num_threads; 0 leaves PyTorch's default (one per core)
    dtype: str = "auto"             # matmul precision: float32, bfloat16 autocast (fp32 weights and optimizer; 3x
                                    # faster matmuls on CPUs with AMX and on recent GPUs, ~35x slower where emulated),
                                    # or auto: bfloat16 where the hardware runs it natively (loop.native_bf16)

    def __post_init__(self):
        assert self.max_iters >= 1, f"max_iters={self.max_iters} must be at least 1"
        assert self.batch_size >= 1 and self.block_size >= 1, "batch_size and block_size must be positive"
        assert 0 <= self.min_lr <= self.learning_rate, f"min_lr={self.min_lr} must lie in [0, learning_rate]"
        assert self.eval_interval >= 1 and self.eval_iters >= 1, "eval_interval and eval_iters must be positive"
        assert self.dtype in ("auto", "float32", "bfloat16"), \
            f"dtype must be auto, float32 or bfloat16, not {self.dtype!r}"


@dataclass(frozen=True)
class LMKind:
    model_config: type                                   # the architecture's dataclass
    train_config: LMTrainConfig                          # this kind's training defaults
    build: Callable[[Any, Any], Any]                     # (model config, TextData) -> nn.Module
    checkpoint_kind: str = ""                            # kind in checkpoints.KINDS; default: the CLI kind
    card: Callable[[Any], dict] | None = None           # (built model) -> extra card.json fields


EVAL_LOGITS = 1 << 24  # logits per forward when estimating the loss (64 MB in fp32)


def estimate_loss(model, data, cfg: LMTrainConfig, device: str, seed: int) -> dict[str, float]:
    """Mean loss over `eval_iters` batches of each split, always the same batches (a fixed seed), so
    successive estimates differ because the model changed, not because the batches did.

    The batches go through the model stacked, as few forwards as the logits' memory allows (one for
    the race's 8 x 32 sequences): the same numbers as a forward per batch, at a third of the time on a
    CPU, where a small model's forward is mostly per-operation overhead."""
    per_forward = max(1, EVAL_LOGITS // (cfg.batch_size * cfg.block_size * data.vocab_size))  # batches
    was_training = model.training
    model.eval()
    out = {}
    with torch.inference_mode():
        for split, ids in (("train", data.train), ("val", data.val)):
            g = torch.Generator().manual_seed(seed)
            batches = [get_batch(ids, cfg.block_size, cfg.batch_size, g, device) for _ in range(cfg.eval_iters)]
            total = 0.0
            for i in range(0, len(batches), per_forward):
                chunk = batches[i:i + per_forward]  # equal-sized batches: the chunk's mean weighs each equally
                _, loss = model(torch.cat([x for x, _ in chunk]), torch.cat([y for _, y in chunk]))
                total += loss.item() * len(chunk)
            out[split] = total / len(batches)
    model.train(was_training)
    return out


HELD_OUT_PROTOCOL = ("the whole held-out split (the last 10% of the corpus) in non-overlapping windows of block_size "
                     "tokens, each predicted from the window's own start (no context carried across windows); the "
                     "mean next-token loss over every predicted token, in nats")


def held_out_loss(model, ids: torch.Tensor, block_size: int, device: str = "cpu",
                  windows_per_forward: int = 64) -> dict:
    """The loss over the whole held-out split, as cards report it beside the training-time estimate (which
    reads `eval_iters` random batches): HELD_OUT_PROTOCOL."""
    n = (len(ids) - 1) // block_size
    assert n >= 1, f"{len(ids)} held-out tokens are too few for block_size={block_size}"
    x = ids[: n * block_size].view(n, block_size)
    y = ids[1: n * block_size + 1].view(n, block_size)
    was_training = model.training
    model.eval()
    total = 0.0
    with torch.inference_mode():
        for i in range(0, n, windows_per_forward):
            _, loss = model(x[i:i + windows_per_forward].to(device), y[i:i + windows_per_forward].to(device))
            total += loss.item() * len(x[i:i + windows_per_forward])  # every window has block_size tokens
    model.train(was_training)
    loss = total / n
    return {"loss": round(loss, 4), "bits_per_token": round(loss / math.log(2), 4), "windows": n,
            "block_size": block_size, "tokens": n * block_size, "protocol": HELD_OUT_PROTOCOL}


def train_lm(model, data, cfg: LMTrainConfig, run, *, kind: str, model_config: Any, name: str,
             extra_card: dict | None = None) -> dict:
    """Train a language model with the `forward(idx, targets) -> (logits, loss)` contract; write
    `run.out/name` (model, config, tokenizer, card) at every evaluation and at the end.

    Under torchrun every process draws the same global batch from the same generator and trains on
    its own slice, so N processes follow the trajectory of one process with the whole batch.
    """
    dist_info, device = loop.init_distributed(run.device)
    assert cfg.batch_size % dist_info.world == 0, (
        f"batch_size={cfg.batch_size} must divide among {dist_info.world} processes")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    dtype, notice = loop.matmul_dtype(cfg.dtype, device)
    if notice and dist_info.main:
        print(notice, file=sys.stderr)
    torch.manual_seed(run.seed)
    raw_model = model.to(device)
    optimizer = loop.make_optimizer(model, cfg, device)
    generator = torch.Generator().manual_seed(run.seed)
    if dist_info.world > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[dist_info.local_rank] if device.startswith("cuda") else None)
    n_params = sum(p.numel() for p in raw_model.parameters())
    share = cfg.batch_size // dist_info.world
    lo, hi = dist_info.rank * share, (dist_info.rank + 1) * share
    state, losses = loop.TrainState(), {}

    def step(it: int):
        x, y = get_batch(data.train, cfg.block_size, cfg.batch_size, generator, device)  # the global batch
        return model(x[lo:hi], y[lo:hi])[1]                                                 # this process's slice

    def evaluate(it: int, _train_losses: list, _last: bool) -> dict:
        losses.update(estimate_loss(raw_model, data, cfg, device, run.seed + 1))
        return {"train": round(losses["train"], 4), "val": round(losses["val"], 4)}

    def save(it: int, final: bool) -> None:
        card = {
            "kind": kind, "corpus": data.corpus, "steps": it,
            "tokens_seen": it * cfg.batch_size * cfg.block_size, "wall_time_s": round(state.elapsed, 1),
            "device": device, "matmul_dtype": dtype, "processes": dist_info.world, "n_params": n_params,
            "train_loss": round(losses["train"], 4), "val_loss": round(losses["val"], 4),
            "val_bits_per_token": round(losses["val"] / math.log(2), 4),
            "train_config": dataclasses.asdict(cfg), "history": state.history, "seed": run.seed,
            "command": run.command, **(extra_card or {}),
        }
        if final:  # the estimate above reads eval_iters batches; the card reports the whole split too
            card["held_out"] = held_out_loss(raw_model, data.val, cfg.block_size, device)
        checkpoints.save(run.out / name, kind=kind, config=model_config, card=card, model=raw_model,
                         tokenizer=data.tokenizer)

    model.train()
    settings = loop.Loop(cfg.max_iters, cfg.eval_interval, cfg.grad_clip, cfg.max_seconds,
                         bf16=dtype == "bfloat16", desc=name)
    loop.fit(model, optimizer, step, settings, evaluate=evaluate, save=save,
             lr=lambda it, _: loop.learning_rate(it, cfg),
             stop_when=lambda _: cfg.target_val_loss > 0 and losses["val"] <= cfg.target_val_loss,
             state=state, resume_dir=run.out / f".{name}.resume", resume=run.resume, rngs=[generator],
             device=device, dist_info=dist_info)
    loop.leave_distributed(dist_info)
    return {"iters": state.history[-1]["iter"], "train_loss": losses["train"], "val_loss": losses["val"],
            "seconds": round(state.elapsed, 1), "n_params": n_params, "history": state.history}


def train_language_model(kind: str, spec: LMKind, model_config: Any, cfg: LMTrainConfig, run) -> dict:
    """Read the corpus, build the kind's model and train it; the folder is --name or <kind>-<corpus>."""
    from playground.training.data import load_text

    data = load_text(run.corpus)
    model = spec.build(model_config, data)
    model_config = getattr(model, "config", model_config)  # the built model's config knows the vocabulary size
    name = run.name or f"{kind}-{run.corpus[0].stem}"
    return train_lm(model, data, cfg, run, kind=spec.checkpoint_kind or kind, model_config=model_config, name=name,
                    extra_card=spec.card(model) if spec.card else None)


# ---------------------------------------------------------------------------------------------
# The kinds rnn, lstm, gru and gpt (playground/train.py's trainer protocol: configs, train_kind, RESUMES)


def _recurrent(cell: str) -> LMKind:
    """rnn | lstm | gru: character-level recurrent LMs of comparable size (playground/nets/recurrent.py)."""
    from playground.nets import recurrent

    # char-rnn's recipe, shortened for a CPU: Adam(W) at 2e-3, BPTT over 64 characters, clipping (RNNs need it)
    train = LMTrainConfig(max_iters=3000, batch_size=32, block_size=64, learning_rate=2e-3, min_lr=2e-4,
                          warmup_iters=50, weight_decay=0.0, grad_clip=1.0, eval_interval=250, eval_iters=20)
    return LMKind(recurrent.DEFAULT_CONFIGS[cell], train, recurrent.build_lm, card=recurrent.card_fields)


def _gpt() -> LMKind:
    """gpt: a character-level GPT (playground/nets/gpt.py), the shipped models/gpt-shakespeare recipe."""
    from playground.nets import gpt

    # nanoGPT's char recipe made for a few CPU minutes: no dropout, a higher peak rate with a short warmup
    train = LMTrainConfig(max_iters=2000, batch_size=24, block_size=128, learning_rate=2e-3, min_lr=2e-4,
                          warmup_iters=100, weight_decay=0.1, grad_clip=1.0, eval_interval=250, eval_iters=20)
    return LMKind(gpt.GPTConfig, train, gpt.build_lm)


# kind -> its LMKind, built when asked (each imports its net)
KINDS: dict[str, Callable[[], LMKind]] = {
    "rnn": lambda: _recurrent("rnn"),
    "lstm": lambda: _recurrent("lstm"),
    "gru": lambda: _recurrent("gru"),
    "gpt": _gpt,
}

RESUMES = True   # fit() keeps resume state beside the checkpoint at every evaluation


def configs(kind: str) -> tuple:
    """The architecture's config and this kind's training defaults: --key=value goes to whichever has the key."""
    spec = KINDS[kind]()
    return spec.model_config, spec.train_config


def train_kind(cfg: tuple[Any, LMTrainConfig], run) -> dict:
    model_config, train_config = cfg
    return train_language_model(run.kind, KINDS[run.kind](), model_config, train_config, run)
