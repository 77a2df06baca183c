"""The one training loop: `fit(model, optimizer, step, loop, ...)` with a step function per trainer.

Every trainer (language models, BERT, MiniLM + LoRA, seq2seq, word2vec, the memory experiment) brings
only what is its own: `step(it) -> loss` (draw a batch, return the loss on it), `evaluate` (the
held-out numbers) and `save` (its checkpoint). The loop does the rest, the same way for all:

    for it in 0..max_iters:
        evaluate at it % eval_interval == 0 and at the end; save a checkpoint and the resume state
        lr = schedule(it); loss = step(it); loss.backward(); clip the global norm; optimizer.step()

The schedule is nanoGPT's: linear warmup, then a cosine decay to min_lr (Loshchilov & Hutter 2017).

Resuming is exact: the resume state holds the trained weights, the optimizer's moments, the step, the
history, every random state (torch's CPU and CUDA generators, numpy's, Python's and the trainer's own
data generators) and what the trainer counts (`TrainState.extra`). It is written into a new folder,
then one atomic rename of a pointer file makes it the current one: an interruption at any moment
leaves either the previous state or the new one, never half of each. No pickle: tensors go through
safetensors, the rest through JSON.

Under torchrun (WORLD_SIZE > 1) `init_distributed` joins the process group; the language-model
trainer wraps its model in DistributedDataParallel, every process stops together (`agree`) and leaves the group
together (`leave_distributed`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch


def learning_rate(it: int, cfg: Any) -> float:
    """Linear warmup, then cosine decay to min_lr (Loshchilov & Hutter 2017, as in nanoGPT). `cfg` has
    learning_rate, min_lr, warmup_iters, lr_decay_iters (0: max_iters) and max_iters."""
    decay_iters = cfg.lr_decay_iters or cfg.max_iters
    if it < cfg.warmup_iters:
        return cfg.learning_rate * (it + 1) / (cfg.warmup_iters + 1)
    if it >= decay_iters:
        return cfg.min_lr
    progress = (it - cfg.warmup_iters) / max(1, decay_iters - cfg.warmup_iters)
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.learning_rate - cfg.min_lr)


def make_optimizer(model: torch.nn.Module, cfg: Any, device: str) -> torch.optim.AdamW:
    """AdamW over the trainable parameters, with weight decay on matrices (dim ≥ 2: weights, embeddings)
    and none on biases and norm gains. `cfg` has learning_rate, weight_decay, beta1, beta2."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    fused = device.startswith(("cuda", "cpu"))  # one fused kernel for all parameters (CPU: ~4% faster steps)
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2), fused=fused or None)


# ---------------------------------------------------------------------------------------------
# Several processes (torchrun)


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str) -> tuple[Dist, str]:
    """Under torchrun (WORLD_SIZE > 1): join the process group; one GPU per process on CUDA."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Dist(), device
    import torch.distributed as dist

    backend = "nccl" if device.startswith("cuda") else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    d = Dist(rank=dist.get_rank(), world=dist.get_world_size(), local_rank=int(os.environ.get("LOCAL_RANK", 0)))
    if device.startswith("cuda"):
        device = f"cuda:{d.local_rank}"
        torch.cuda.set_device(device)
    return d, device


def leave_distributed(dist_info: Dist) -> None:
    """Every process leaves the group together (a barrier), then destroys it. A process that left at once while
    another still wrote the checkpoint aborted at exit now and then (SIGABRT, "terminate called without an active
    exception"): a starved gloo worker thread released its last collective's tensors only after Python had begun
    to finalize, and a thread that asks for the GIL then is ended inside a destructor (its core dump). DDP keeps
    the group's threads alive to the exit, so destroying the group does not end them; the barrier's wait lets
    them finish first. A stripped-down repro on one shared core: 6 aborts in 30 runs, 0 in 30 with the barrier."""
    if dist_info.world == 1:
        return
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()


def agree(stop: bool, dist_info: Dist, device: str) -> bool:
    """Every process stops together (clocks differ between processes; a lone stop would hang DDP)."""
    if dist_info.world == 1:
        return stop
    import torch.distributed as dist

    flag = torch.tensor([float(stop)], device=device)  # nccl reduces only GPU tensors
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


# ---------------------------------------------------------------------------------------------
# What a run has done, and its exact resume state


@dataclass
class TrainState:
    it: int = 0                                      # the next step to take
    elapsed: float = 0.0                             # training wall time so far, evaluations included
    history: list[dict] = field(default_factory=list)  # one record per evaluation
    extra: dict = field(default_factory=dict)        # the trainer's own JSON-able counters (pairs seen, ...)


RandomState = torch.Generator | random.Random


def _random_states(rngs: list[RandomState]) -> tuple[dict[str, torch.Tensor], dict]:
    """Every random state: tensors (torch's, numpy's key) and JSON (Python's, numpy's position)."""
    tensors = {"torch.cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        tensors |= {f"torch.cuda.{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())}
    kind, key, pos, has_gauss, gauss = np.random.get_state()
    tensors["numpy.key"] = torch.from_numpy(key.astype(np.int64))
    meta = {"numpy": [kind, int(pos), int(has_gauss), float(gauss)], "python": random.getstate(), "own": []}
    for i, r in enumerate(rngs):
        if isinstance(r, torch.Generator):
            tensors[f"own.{i}"] = r.get_state()
            meta["own"].append(None)
        else:
            meta["own"].append(r.getstate())
    return tensors, meta


def _set_random_states(tensors: dict[str, torch.Tensor], meta: dict, rngs: list[RandomState]) -> None:
    torch.set_rng_state(tensors["torch.cpu"])
    if torch.cuda.is_available() and "torch.cuda.0" in tensors:
        torch.cuda.set_rng_state_all([tensors[f"torch.cuda.{i}"] for i in range(torch.cuda.device_count())])
    kind, pos, has_gauss, gauss = meta["numpy"]
    np.random.set_state((kind, tensors["numpy.key"].numpy().astype(np.uint32), pos, has_gauss, gauss))
    random.setstate(_as_tuples(meta["python"]))
    for i, r in enumerate(rngs):
        if isinstance(r, torch.Generator):
            r.set_state(tensors[f"own.{i}"])
        else:
            r.setstate(_as_tuples(meta["own"][i]))


def _as_tuples(x):
    """JSON turned Python's random state (a tuple holding a tuple) into lists; setstate wants tuples."""
    return tuple(_as_tuples(v) for v in x) if isinstance(x, list) else x


def _trained(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def save_resume_state(folder: Path, model, optimizer, state: TrainState, rngs: list[RandomState]) -> None:
    """Write the resume state into folder/step-<it>, then point folder/current at it (an atomic rename)."""
    from safetensors.torch import save_file

    step_dir = folder / f"step-{state.it}"
    shutil.rmtree(step_dir, ignore_errors=True)
    step_dir.mkdir(parents=True)
    weights = {k: p.detach().cpu().contiguous().clone() for k, p in _trained(model).items()}
    save_file(weights, str(step_dir / "model.safetensors"))   # float32, whatever the checkpoint ships
    opt = optimizer.state_dict() if optimizer is not None else {"state": {}, "param_groups": []}
    tensors = {f"state.{i}.{k}": v.detach().cpu().contiguous() for i, s in opt["state"].items() for k, v in s.items()}
    random_tensors, random_meta = _random_states(rngs)
    save_file(tensors | {f"random.{k}": v for k, v in random_tensors.items()}, str(step_dir / "optimizer.safetensors"))
    meta = {"iter": state.it, "elapsed": state.elapsed, "history": state.history, "extra": state.extra,
            "param_groups": opt["param_groups"], "random": random_meta}
    (step_dir / "trainer.json").write_text(json.dumps(meta), encoding="utf-8")
    (folder / "current.tmp").write_text(step_dir.name, encoding="utf-8")
    os.replace(folder / "current.tmp", folder / "current")    # the one step that switches states
    for old in folder.glob("step-*"):
        if old != step_dir:
            shutil.rmtree(old, ignore_errors=True)


def has_resume_state(folder: Path) -> bool:
    return (folder / "current").is_file()


def load_resume_state(folder: Path, model, optimizer, state: TrainState, rngs: list[RandomState]) -> None:
    """Restore what save_resume_state wrote: weights, optimizer, step, history, counters, random states."""
    from safetensors.torch import load_file

    if not has_resume_state(folder):
        raise FileNotFoundError(f"--resume: no interrupted run in {folder}")
    step_dir = folder / (folder / "current").read_text(encoding="utf-8").strip()
    weights = load_file(str(step_dir / "model.safetensors"))
    with torch.no_grad():
        for name, p in _trained(model).items():
            p.copy_(weights[name])
    tensors = load_file(str(step_dir / "optimizer.safetensors"))
    meta = json.loads((step_dir / "trainer.json").read_text(encoding="utf-8"))
    if optimizer is not None:
        opt_state: dict = {}
        for key, value in tensors.items():
            if key.startswith("state."):
                _, index, name = key.split(".", 2)
                opt_state.setdefault(int(index), {})[name] = value
        optimizer.load_state_dict({"state": opt_state, "param_groups": meta["param_groups"]})
    _set_random_states({k.removeprefix("random."): v for k, v in tensors.items() if k.startswith("random.")},
                       meta["random"], rngs)
    state.it, state.elapsed, state.history = meta["iter"], meta["elapsed"], meta["history"]
    state.extra.update(meta["extra"])


# ---------------------------------------------------------------------------------------------
# The loop


def native_bf16(device: str) -> bool:
    """Whether `device` runs bfloat16 matmuls natively: CUDA with bf16 support, MPS, or a CPU with AMX or
    AVX512_BF16 (Intel Sapphire Rapids and later, AMD Zen 4). Elsewhere, an AVX2-only CPU (most laptops, AMD
    EPYC before Zen 4), PyTorch emulates bf16 and a training step takes ~35x longer than in float32."""
    kind = torch.device(device).type
    if kind == "cuda":
        return torch.cuda.is_bf16_supported()
    if kind == "mps":
        return True
    capability = torch.backends.cpu.get_cpu_capability()  # "AVX2", "AVX512", ...: it does not name AMX
    if "AMX" in capability or "BF16" in capability:
        return True
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")  # Linux
    except OSError:
        return False
    return re.search(r"\b(amx_bf16|avx512_bf16)\b", flags) is not None


def matmul_dtype(requested: str, device: str) -> tuple[str, str | None]:
    """The precision to train in, and a notice for the user: `auto` is bfloat16 where the hardware runs it
    natively and float32 elsewhere; `bfloat16` asked for is kept (fit() warns where it is emulated)."""
    if requested == "float32":
        return "float32", None
    native = native_bf16(device)
    if requested == "auto":
        return ("bfloat16", None) if native else ("float32", f"--dtype=auto: {device} has no native bfloat16 "
                                                  "(no AMX or AVX512_BF16), so this run trains in float32")
    return "bfloat16", None  # asked for: fit() warns if it is emulated


@dataclass
class Loop:
    """How long and how a trainer runs; each trainer fills it from its own config."""

    max_iters: int | None          # optimizer steps; None: until `step` raises StopIteration (the data ran out)
    eval_interval: int             # steps between evaluations (and checkpoint writes)
    grad_clip: float = 0.0         # clip the global gradient norm; 0 turns it off
    max_seconds: float = 0.0       # stop (with a final evaluation) before the wall time passes this; 0: no limit
    bf16: bool = False             # bfloat16 autocast around the step's forward
    desc: str = ""                 # the progress bar's label
    show: bool = True              # draw a progress bar
    expected_iters: int = 0        # the bar's length when max_iters is None


def _autocast(bf16: bool, device: str, warn: bool):
    """bfloat16 autocast around the forward, or nothing; a warning where the hardware emulates bfloat16."""
    if not bf16:
        return contextlib.nullcontext()
    if warn and not native_bf16(device):
        print(f"warning: bfloat16 on {device} without native support is emulated: a step takes ~35x longer than in "
              "float32 (--dtype=auto trains in bfloat16 only where the hardware has it)", file=sys.stderr)
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def fit(model, optimizer, step: Callable[[int], Any], loop: Loop, *,
        evaluate: Callable[[int, list, bool], dict | None], save: Callable[[int, bool], None] | None = None,
        lr: Callable[[int, float], float] | None = None, stop_when: Callable[[dict], bool] | None = None,
        state: TrainState | None = None, resume_dir: Path | None = None, resume: bool = False,
        rngs: list[RandomState] = (), device: str = "cpu", dist_info: Dist | None = None) -> TrainState:
    """Train `model` until max_iters (or the data, or max_seconds) runs out; returns the TrainState.

    step(it) -> loss: one batch's loss (a tensor to backpropagate), a float when the step updated the
    weights itself (`optimizer` None: word2vec's written-out SGD), or None to skip the update.
    evaluate(it, losses, last) -> the history record (without iter and seconds), or None for none;
    `losses` are the training losses since the previous evaluation. save(it, final) writes the
    checkpoint after each recorded evaluation (main process only); unless final, the resume state in
    resume_dir follows. lr(it, elapsed) sets the optimizer's rate before each step. stop_when(record)
    ends the run early (a target loss).
    """
    from tqdm import tqdm

    dist_info, state, rngs = dist_info or Dist(), state or TrainState(), list(rngs)
    if resume:
        load_resume_state(resume_dir, _unwrapped(model), optimizer, state, rngs)
    start = state.it
    params = [p for p in model.parameters() if p.requires_grad]
    # mixed precision (Micikevicius et al. 2018): bf16 matmuls, fp32 weights, optimizer and loss; bf16 keeps
    # fp32's exponent range, so no loss scaling is needed
    autocast = _autocast(loop.bf16, device, warn=dist_info.main)
    total = (loop.max_iters + 1) if loop.max_iters is not None else loop.expected_iters
    bar = tqdm(total=total, initial=start, desc=loop.desc, unit="step", disable=not (dist_info.main and loop.show))
    clock = time.perf_counter() - state.elapsed
    losses: list = []
    eval_seconds = 0.0  # how long the last evaluation took: the final one must fit in max_seconds too
    it = start

    def checkpoint(it: int, last: bool) -> bool:
        """Evaluate, record, save; True when the run stops here."""
        nonlocal losses, eval_seconds
        before = time.perf_counter()
        record = evaluate(it, [float(x) for x in losses], last)
        losses = []
        state.elapsed = time.perf_counter() - clock   # wall time, evaluations included (as nanoGPT's is)
        eval_seconds = time.perf_counter() - before
        if record is None:
            return last
        state.it = it
        state.history.append({"iter": it, **record, "seconds": round(state.elapsed, 1)})
        stop = last or (stop_when is not None and stop_when(record)) or (
            loop.max_seconds > 0 and state.elapsed >= loop.max_seconds)
        stop = agree(stop, dist_info, device)
        if dist_info.main and save is not None:
            save(it, stop)
            _keep_resume_state(resume_dir, stop, _unwrapped(model), optimizer, state, rngs)
        bar.set_postfix({k: f"{v:.3f}" for k, v in record.items() if isinstance(v, float)})
        return stop

    while True:
        elapsed = time.perf_counter() - clock
        out_of_time = loop.max_seconds > 0 and agree(elapsed + eval_seconds >= loop.max_seconds, dist_info, device)
        last = it == loop.max_iters or out_of_time
        resumed_here = resume and it == start  # this step's evaluation is already in the history
        if ((it % loop.eval_interval == 0 and not resumed_here) or last) and checkpoint(it, last):
            break
        if optimizer is not None and lr is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr(it, time.perf_counter() - clock)
        try:
            with autocast:
                loss = step(it)
        except StopIteration:   # the data ran out: end with an evaluation, unless this step just had one
            if it % loop.eval_interval != 0:
                checkpoint(it, True)
            break
        if loss is not None:
            if optimizer is not None:
                _update(loss, optimizer, params, loop.grad_clip)
            losses.append(loss.detach() if isinstance(loss, torch.Tensor) else loss)
        it += 1
        bar.update(1)
    bar.close()
    state.it = it
    return state


def _update(loss: torch.Tensor, optimizer, params: list, grad_clip: float) -> None:
    """Backpropagate, clip the global gradient norm, take the optimizer's step."""
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _keep_resume_state(resume_dir: Path | None, final: bool, model, optimizer, state: TrainState, rngs) -> None:
    """After a checkpoint: the resume state follows it; a finished run leaves none."""
    if resume_dir is None:
        return
    if final:
        shutil.rmtree(resume_dir, ignore_errors=True)
    else:
        save_resume_state(resume_dir, model, optimizer, state, rngs)


def _unwrapped(model):
    """The model inside DistributedDataParallel (its weights are the ones to save)."""
    return getattr(model, "module", model)
