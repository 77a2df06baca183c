"""Training entry point: `python -m playground.train <kind> --corpus FILE [FILE ...] [--key=value ...]`.

Common options: --corpus (UTF-8 text files), --out (the checkpoint folder's parent, default models/),
--device (auto: cuda, then mps, then cpu), --seed, --resume. Every other `--key=value` overrides a
field of the kind's dataclass config, converted to the field's type; an unknown key is an error
that names it and lists the keys there are.

Kinds:
    tokenizers   char, word, byte-level BPE, WordPiece and Unigram tokenizers, one folder each
    bert         a WordPiece vocabulary and a small BERT pre-trained on masked-LM + next-sentence prediction
    seq2seq      an encoder-decoder (--variant=none|bahdanau|dot|general|transformer) on a task generated in
                 code (playground/seq2seq_task.py): no --corpus; writes models/seq2seq-<variant>/
    word2vec     skip-gram or CBOW with negative sampling (playground/word2vec.py); writes
                 word2vec-<corpus>/ (or --name) with the analogy and similarity evaluation
    (language models register an `LMKind`: their architecture config plus `LMTrainConfig`; both take
    --key=value, and --name sets the checkpoint folder)

Several GPUs (or CPU processes): the same command under torchrun, e.g.
    torchrun --nproc_per_node=2 -m playground.train gpt --corpus input.txt
runs DistributedDataParallel (nccl on CUDA, gloo on CPU); --batch_size stays the global batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import shlex
import shutil
import sys
import time
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from playground import checkpoints
from playground.training import tokenizers


@dataclass
class RunOptions:
    """What every kind gets besides its own config."""

    corpus: list[Path]
    out: Path
    device: str
    seed: int
    resume: bool
    command: str   # the exact command line, recorded in card.json
    name: str = ""  # checkpoint folder under `out` (language models)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np
        import torch

        np.random.seed(seed)
        torch.manual_seed(seed)
    except ImportError:
        pass


# ---------------------------------------------------------------------------------------------
# Language models: one loop for every kind (GPT, recurrent LMs, ...)


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
    dtype: str = "float32"          # matmul precision: float32, or bfloat16 autocast (fp32 weights and optimizer;
                                    # 3x faster matmuls on CPUs with AMX, and on recent GPUs)

    def __post_init__(self):
        assert self.max_iters >= 1, f"max_iters={self.max_iters} must be at least 1"
        assert self.batch_size >= 1 and self.block_size >= 1, "batch_size and block_size must be positive"
        assert 0 <= self.min_lr <= self.learning_rate, f"min_lr={self.min_lr} must lie in [0, learning_rate]"
        assert self.eval_interval >= 1 and self.eval_iters >= 1, "eval_interval and eval_iters must be positive"
        assert self.dtype in ("float32", "bfloat16"), f"dtype must be float32 or bfloat16, not {self.dtype!r}"


@dataclass(frozen=True)
class LMKind:
    model_config: type                                   # the architecture's dataclass
    train_config: LMTrainConfig                          # this kind's training defaults
    build: Callable[[Any, Any], Any]                     # (model config, TextData) -> nn.Module
    checkpoint_kind: str = ""                            # kind in checkpoints.KINDS; default: the CLI kind
    card: Callable[[Any], dict] | None = None           # (built model) -> extra card.json fields


def learning_rate(it: int, cfg: LMTrainConfig) -> float:
    """Linear warmup, then cosine decay to min_lr (Loshchilov & Hutter 2017, as in nanoGPT)."""
    decay_iters = cfg.lr_decay_iters or cfg.max_iters
    if it < cfg.warmup_iters:
        return cfg.learning_rate * (it + 1) / (cfg.warmup_iters + 1)
    if it >= decay_iters:
        return cfg.min_lr
    progress = (it - cfg.warmup_iters) / max(1, decay_iters - cfg.warmup_iters)
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.learning_rate - cfg.min_lr)


def make_optimizer(model, cfg: LMTrainConfig, device: str):
    """AdamW with weight decay on matrices (dim ≥ 2: weights, embeddings) and none on biases and norm gains."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    fused = device.startswith(("cuda", "cpu"))  # one fused kernel for all parameters (CPU: ~4% faster steps)
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2), fused=fused or None)


@dataclass
class _Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def _init_distributed(device: str) -> tuple[_Dist, str]:
    """Under torchrun (WORLD_SIZE > 1): join the process group; one GPU per process on CUDA."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return _Dist(), device
    import torch
    import torch.distributed as dist

    backend = "nccl" if device.startswith("cuda") else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    d = _Dist(rank=dist.get_rank(), world=dist.get_world_size(), local_rank=int(os.environ.get("LOCAL_RANK", 0)))
    if device.startswith("cuda"):
        device = f"cuda:{d.local_rank}"
        torch.cuda.set_device(device)
    return d, device


def _agree(stop: bool, dist_info: _Dist, device: str) -> bool:
    """Every process stops together (clocks differ between processes; a lone stop would hang DDP)."""
    if dist_info.world == 1:
        return stop
    import torch
    import torch.distributed as dist

    flag = torch.tensor([float(stop)], device=device)  # nccl reduces only GPU tensors
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


EVAL_LOGITS = 1 << 24  # logits per forward when estimating the loss (64 MB in fp32)


def estimate_loss(model, data, cfg: LMTrainConfig, device: str, seed: int) -> dict[str, float]:
    """Mean loss over `eval_iters` batches of each split, always the same batches (a fixed seed), so
    successive estimates differ because the model changed, not because the batches did.

    The batches go through the model stacked, as few forwards as the logits' memory allows (one for
    the race's 8 x 32 sequences): the same numbers as a forward per batch, at a third of the time on a
    CPU, where a small model's forward is mostly per-operation overhead."""
    import torch

    per_forward = max(1, EVAL_LOGITS // (cfg.batch_size * cfg.block_size * data.vocab_size))  # batches
    was_training = model.training
    model.eval()
    out = {}
    with torch.inference_mode():
        for split, ids in (("train", data.train), ("val", data.val)):
            g = torch.Generator().manual_seed(seed)
            batches = [_batch(ids, cfg.block_size, cfg.batch_size, g, device) for _ in range(cfg.eval_iters)]
            total = 0.0
            for i in range(0, len(batches), per_forward):
                chunk = batches[i:i + per_forward]  # equal-sized batches: the chunk's mean weighs each equally
                _, loss = model(torch.cat([x for x, _ in chunk]), torch.cat([y for _, y in chunk]))
                total += loss.item() * len(chunk)
            out[split] = total / len(batches)
    model.train(was_training)
    return out


def _batch(ids, block_size, batch_size, generator, device):
    from playground.training.data import get_batch

    return get_batch(ids, block_size, batch_size, generator, device)


def _save_resume_state(folder: Path, optimizer, it: int, generator, history: list, elapsed: float) -> None:
    """Optimizer moments and the batch generator's state as safetensors, the rest as JSON: resuming
    needs no pickle either."""
    from safetensors.torch import save_file

    state = optimizer.state_dict()
    tensors = {f"state.{i}.{k}": v.detach().cpu().contiguous() for i, s in state["state"].items() for k, v in s.items()}
    tensors["generator"] = generator.get_state()
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "optimizer.safetensors.tmp"))
    os.replace(folder / "optimizer.safetensors.tmp", folder / "optimizer.safetensors")
    meta = {"iter": it, "elapsed": elapsed, "history": history,
            "param_groups": [{k: v for k, v in g.items() if k != "params"} | {"params": g["params"]}
                             for g in state["param_groups"]]}
    (folder / "trainer.json.tmp").write_text(json.dumps(meta), encoding="utf-8")
    os.replace(folder / "trainer.json.tmp", folder / "trainer.json")


def _load_resume_state(folder: Path, optimizer, generator) -> tuple[int, list, float]:
    from safetensors.torch import load_file

    tensors = load_file(str(folder / "optimizer.safetensors"))
    meta = json.loads((folder / "trainer.json").read_text(encoding="utf-8"))
    state: dict = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    generator.set_state(tensors["generator"])
    return meta["iter"], meta["history"], meta["elapsed"]


def train_lm(model, data, cfg: LMTrainConfig, run: RunOptions, *, kind: str, model_config: Any, name: str,
             extra_card: dict | None = None) -> dict:
    """Train a language model with the `forward(idx, targets) -> (logits, loss)` contract; write
    `run.out/name` (model, config, tokenizer, card) at every evaluation and at the end.

    Under torchrun every process draws the same global batch from the same generator and trains on
    its own slice, so N processes follow the trajectory of one process with the whole batch.
    """
    import torch
    from tqdm import tqdm

    dist_info, device = _init_distributed(run.device)
    assert cfg.batch_size % dist_info.world == 0, (
        f"batch_size={cfg.batch_size} must divide among {dist_info.world} processes")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(run.seed)
    model.to(device)
    raw_model = model
    optimizer = make_optimizer(model, cfg, device)
    generator = torch.Generator().manual_seed(run.seed)
    folder = run.out / name
    resume_dir = run.out / f".{name}.resume"  # outside the checkpoint: never shipped, deleted when done
    start_it, history, elapsed = 0, [], 0.0
    if run.resume:
        if not (resume_dir / "trainer.json").is_file():
            raise FileNotFoundError(f"--resume: no interrupted run in {resume_dir}")
        raw_model.load_state_dict(checkpoints.load(folder).model.state_dict())
        start_it, history, elapsed = _load_resume_state(resume_dir, optimizer, generator)
    if dist_info.world > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[dist_info.local_rank] if device.startswith("cuda") else None)
    n_params = sum(p.numel() for p in raw_model.parameters())
    share = cfg.batch_size // dist_info.world
    lo, hi = dist_info.rank * share, (dist_info.rank + 1) * share

    def checkpoint(it: int, losses: dict, final: bool) -> None:
        if not dist_info.main:
            return
        card = {
            "kind": kind, "corpus": data.corpus, "steps": it,
            "tokens_seen": it * cfg.batch_size * cfg.block_size, "wall_time_s": round(elapsed, 1),
            "device": device, "processes": dist_info.world, "n_params": n_params,
            "train_loss": round(losses["train"], 4), "val_loss": round(losses["val"], 4),
            "val_bits_per_token": round(losses["val"] / math.log(2), 4),
            "train_config": dataclasses.asdict(cfg), "history": history, "seed": run.seed, "command": run.command,
            **(extra_card or {}),
        }
        checkpoints.save(folder, kind=kind, config=model_config, card=card, model=raw_model, tokenizer=data.tokenizer)
        if final:
            shutil.rmtree(resume_dir, ignore_errors=True)
        else:
            _save_resume_state(resume_dir, optimizer, it, generator, history, elapsed)

    # mixed precision (Micikevicius et al. 2018): bf16 matmuls, fp32 weights, optimizer and loss; bf16 keeps
    # fp32's exponent range, so no loss scaling is needed
    autocast = torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=cfg.dtype == "bfloat16")
    model.train()
    bar = tqdm(range(start_it, cfg.max_iters + 1), initial=start_it, total=cfg.max_iters + 1, desc=name,
               disable=not dist_info.main, unit="step")
    losses = {"train": float("nan"), "val": float("nan")}
    started = time.perf_counter() - elapsed
    for it in bar:
        last = it == cfg.max_iters
        resumed_here = run.resume and it == start_it  # this step's estimate is already in the history
        if (it % cfg.eval_interval == 0 and not resumed_here) or last:
            losses = estimate_loss(raw_model, data, cfg, device, run.seed + 1)
            elapsed = time.perf_counter() - started  # wall time, evaluations included (as nanoGPT's is)
            history.append({"iter": it, "train": round(losses["train"], 4), "val": round(losses["val"], 4),
                            "seconds": round(elapsed, 1)})
            stop = last or (cfg.target_val_loss > 0 and losses["val"] <= cfg.target_val_loss) or (
                cfg.max_seconds > 0 and elapsed >= cfg.max_seconds)
            stop = _agree(stop, dist_info, device)
            checkpoint(it, losses, final=stop)
            bar.set_postfix(train=f"{losses['train']:.3f}", val=f"{losses['val']:.3f}")
            if stop:
                break

        for group in optimizer.param_groups:
            group["lr"] = learning_rate(it, cfg)
        x, y = _batch(data.train, cfg.block_size, cfg.batch_size, generator, device)  # the global batch
        with autocast:
            _, loss = model(x[lo:hi], y[lo:hi])                                        # this process's slice
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    result = {"iters": history[-1]["iter"], "train_loss": losses["train"], "val_loss": losses["val"],
              "seconds": round(elapsed, 1), "n_params": n_params, "history": history}
    if dist_info.world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()
    return result


def _train_language_model(kind: str, spec: LMKind, model_config: Any, cfg: LMTrainConfig, run: RunOptions) -> dict:
    from playground.training.data import load_text

    data = load_text(run.corpus)
    model = spec.build(model_config, data)
    model_config = getattr(model, "config", model_config)  # the built model's config knows the vocabulary size
    name = run.name or f"{kind}-{run.corpus[0].stem}"
    return train_lm(model, data, cfg, run, kind=spec.checkpoint_kind or kind, model_config=model_config, name=name,
                    extra_card=spec.card(model) if spec.card else None)


def _recurrent(cell: str) -> LMKind:
    """rnn | lstm | gru: character-level recurrent LMs of comparable size (playground/recurrent.py)."""
    from playground.nets import recurrent

    # char-rnn's recipe, shortened for a CPU: Adam(W) at 2e-3, BPTT over 64 characters, clipping (RNNs need it)
    train = LMTrainConfig(max_iters=3000, batch_size=32, block_size=64, learning_rate=2e-3, min_lr=2e-4,
                          warmup_iters=50, weight_decay=0.0, grad_clip=1.0, eval_interval=250, eval_iters=20)
    return LMKind(recurrent.DEFAULT_CONFIGS[cell], train, recurrent.build_lm, card=recurrent.card_fields)


def _gpt() -> LMKind:
    """gpt: a character-level GPT (playground/gpt.py), the shipped models/gpt-shakespeare recipe."""
    from playground.nets import gpt

    # nanoGPT's char recipe made for a few CPU minutes: no dropout, a higher peak rate with a short warmup
    train = LMTrainConfig(max_iters=2000, batch_size=24, block_size=128, learning_rate=2e-3, min_lr=2e-4,
                          warmup_iters=100, weight_decay=0.1, grad_clip=1.0, eval_interval=250, eval_iters=20)
    return LMKind(gpt.GPTConfig, train, gpt.build_lm)


# ---------------------------------------------------------------------------------------------
# kind: word2vec (playground/word2vec.py)


def _word2vec_kind() -> tuple[type, Callable[[Any, RunOptions], dict]]:
    from playground.nets import word2vec

    return word2vec.Word2VecTrainConfig, word2vec.train_kind


def _minilm_mlm_kind() -> tuple[type, Callable[[Any, RunOptions], dict]]:
    """minilm-mlm: all-MiniLM-L6-v2 frozen + LoRA adapters + an MLM head (playground/minilm_mlm.py)."""
    from playground.training import minilm_mlm

    return minilm_mlm.MiniLMMLMTrainConfig, minilm_mlm.train


def _bert_kind() -> tuple[type, Callable[[Any, RunOptions], dict]]:
    """bert: a WordPiece vocabulary and a small BERT pre-trained with MLM + NSP (playground/mlm.py)."""
    from playground.training import bert as mlm

    return mlm.BertTrainConfig, mlm.train_bert


def _seq2seq_kind() -> tuple[tuple[type, type], Callable[[Any, RunOptions], dict]]:
    """seq2seq: the encoder-decoders of playground/seq2seq.py on the task generated in playground/seq2seq_task.py
    (no --corpus): --variant=none|bahdanau|dot|general|transformer, plus the trainer's keys."""
    from playground.nets import seq2seq
    from playground.training import seq2seq as seq2seq_task

    return (seq2seq.Seq2SeqConfig, seq2seq_task.Seq2SeqTrainConfig), seq2seq_task.train


GENERATED = {"seq2seq"}  # kinds whose data is generated in code: they take no --corpus

# kind -> (config dataclass, or a tuple of them, and a train function) for tools, or an LMKind for language models
KINDS: dict[str, tuple[type | tuple, Callable[[Any, RunOptions], dict]] | LMKind] = {
    "tokenizers": (tokenizers.TokenizerTrainConfig, tokenizers.train_tokenizers),
    "rnn": _recurrent("rnn"),
    "lstm": _recurrent("lstm"),
    "gru": _recurrent("gru"),
    "gpt": _gpt(),
    "word2vec": _word2vec_kind(),
    "bert": _bert_kind(),
    "minilm-mlm": _minilm_mlm_kind(),
    "seq2seq": _seq2seq_kind(),
}


# ---------------------------------------------------------------------------------------------
# --key=value overrides into a dataclass


def coerce(value: str, annotation: Any, key: str) -> Any:
    """Convert a command-line string to the type a config field declares."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):  # `int | None`
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value.lower() in ("none", "null"):
            return None
        return coerce(value, options[0], key)
    if annotation is bool:
        lowered = value.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"--{key} takes true or false, not {value!r}")
    if annotation in (int, float):
        try:
            number = float(value.replace("_", ""))
        except ValueError:
            raise ValueError(f"--{key} takes a number, not {value!r}") from None
        if annotation is int:
            if not number.is_integer():
                raise ValueError(f"--{key} takes a whole number, not {value!r}")
            return int(number)
        return number
    return value


def apply_overrides(config: type | Any, overrides: list[str], *more: type | Any) -> Any:
    """--key=value items into one or more dataclasses (classes, or instances holding the defaults);
    each key goes to the dataclass that has that field. Returns one instance per dataclass given
    (a single one when only one was given)."""
    targets = [config, *more]
    fields = [{f.name for f in dataclasses.fields(t)} for t in targets]
    overlap = set.intersection(*fields) if len(fields) > 1 else set()
    assert not overlap, f"configs share field names {sorted(overlap)}"
    values: list[dict] = [{} for _ in targets]
    for item in overrides:
        if not item.startswith("--") or "=" not in item:
            raise ValueError(f"expected --key=value, got {item!r}")
        key, value = item[2:].split("=", 1)
        key = key.replace("-", "_")
        where = next((i for i, names in enumerate(fields) if key in names), None)
        if where is None:
            raise ValueError(f"unknown option --{key}; options: "
                             + ", ".join(f"--{f}" for names in fields for f in sorted(names)))
        cls = targets[where] if isinstance(targets[where], type) else type(targets[where])
        values[where][key] = coerce(value, typing.get_type_hints(cls)[key], key)
    built = []
    try:
        for target, vals in zip(targets, values):
            built.append(target(**vals) if isinstance(target, type) else dataclasses.replace(target, **vals))
    except AssertionError as err:
        raise ValueError(str(err)) from None
    return built[0] if len(built) == 1 else tuple(built)


def parse(argv: list[str]) -> tuple[str, Any, RunOptions]:
    parser = argparse.ArgumentParser(prog="python -m playground.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("--corpus", nargs="*", default=[], type=Path,
                        help="UTF-8 text file(s); required except for " + ", ".join(sorted(GENERATED)))
    parser.add_argument("--out", type=Path, default=checkpoints.MODELS_DIR, help="parent folder of the checkpoint")
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps")
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run of --name in --out")
    parser.add_argument("--name", default="", help="checkpoint folder (language models; default <kind>-<corpus>)")
    args, rest = parser.parse_known_args(argv)
    spec = KINDS[args.kind]
    try:
        if isinstance(spec, LMKind):
            config = apply_overrides(spec.model_config, rest, spec.train_config)
        elif isinstance(spec[0], tuple):  # several dataclasses (architecture and training)
            config = apply_overrides(spec[0][0], rest, *spec[0][1:])
        else:
            config = apply_overrides(spec[0], rest)
    except ValueError as err:
        parser.error(str(err))
    if not args.corpus and args.kind not in GENERATED:
        parser.error(f"{args.kind} needs --corpus FILE [FILE ...]")
    for path in args.corpus:
        if not path.is_file():
            parser.error(f"--corpus {path}: no such file")
    run = RunOptions(corpus=args.corpus, out=args.out, device=checkpoints.resolve_device(args.device),
                     seed=args.seed, resume=args.resume, name=args.name,
                     command=shlex.join(["python", "-m", "playground.train", *argv]))
    return args.kind, config, run


def main(argv: list[str] | None = None) -> dict:
    kind, config, run = parse(sys.argv[1:] if argv is None else argv)
    seed_everything(run.seed)
    spec = KINDS[kind]
    print(f"{kind}: {config}  device={run.device} seed={run.seed}", file=sys.stderr)
    if isinstance(spec, LMKind):
        model_config, train_config = config
        history = _train_language_model(kind, spec, model_config, train_config, run)
        print({k: v for k, v in history.items() if k != "history"})
    else:
        history = spec[1](config, run)
        print(history)
    return history


if __name__ == "__main__":
    main()
