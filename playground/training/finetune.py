"""From a pretrained model to an assistant (lecture 004): LoRA adapters trained three ways on a causal LM.

- `lora`: the next-token loss on a text, the pre-training objective on a new domain (Hu et al. 2021);
- `sft`: supervised fine-tuning on instruction-response pairs, the loss on the response tokens only: the prompt
  is given, not learnt (Ouyang et al. 2022, §3.5);
- `dpo`: direct preference optimisation (Rafailov et al. 2023, eq. 7) on {prompt x, chosen y_w, rejected y_l}:

      L_DPO = -log σ(β [(log π(y_w|x) - log π_ref(y_w|x)) - (log π(y_l|x) - log π_ref(y_l|x))])

  π is the model with its adapters (the policy), π_ref the frozen base; β log(π/π_ref) is the implicit reward.

A run is handed its base as the registry (analysis/models.py) records it: the app's one copy, frozen and shared,
with its tokenizer and chat template (the CLI, which sits below the registry, reads the same copy through
nets/adapters.base). Every run adapts a private copy of the base's module tree over its shared, frozen tensors
(nets/adapters.py), trains with the one training loop (training/loop.py), draws everything random from its own
generator, and reports each step as plain data. `live` runs one on a thread and yields its steps as they come;
closing it stops the run. The data sets were written for this project (assets/finetune/, CC0 like the rest of the
assets); their text and the losses on them are in finetune_data.py.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

from playground import checkpoints, heap
from playground.lru import Bounded
from playground.nets import adapters, lora
from playground.nets.adapters import BASES, GPT, SMOLLM2, TARGET_CHOICES, targets_for  # noqa: F401 - for the UI
from playground.training import loop
from playground.training.finetune_data import (DATA, IGNORE, TextFormat, batch, default_text, dpo_loss, example, pairs,
                                               preferences, response_logps, text_format, token_kl)

METHODS = ("lora", "sft", "dpo")


@dataclass
class FinetuneConfig:
    """`python -m playground.train lora|sft|dpo` options, and a live run's settings."""

    method: str = "lora"            # lora (a text), sft (instruction-response pairs), dpo (preference triples)
    base: str = adapters.GPT        # the pretrained model (nets/adapters.py BASES)
    targets: str = ""               # adapted matrices, comma-separated; "" = the base's default (W_q, W_v)
    rank: int = 8                   # LoRA r
    alpha: float = 16.0             # LoRA α (the update is scaled by α / r)
    steps: int = 40                 # optimizer steps
    batch_size: int = 8             # windows (lora), pairs (sft) or triples (dpo) per step
    seq_len: int = 64               # lora: tokens per training window
    learning_rate: float = 3e-3     # Adam, after a linear warmup of WARMUP steps; adapters from zero want a large one
    beta: float = 0.1               # dpo: β, how much the policy is held to the reference
    max_new_tokens: int = 60        # the greedy texts before and after
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self):
        assert self.method in METHODS, f"method must be one of {', '.join(METHODS)}, not {self.method!r}"
        assert self.base in adapters.BASES, f"base must be one of {', '.join(adapters.BASES)}, not {self.base!r}"
        assert self.steps >= 1 and self.batch_size >= 1, "steps and batch_size must be positive"
        assert self.seq_len >= 2, f"seq_len={self.seq_len}: a window needs an input and a target"
        assert self.beta > 0, f"beta must be positive, not {self.beta}"
        self.targets = self.targets or adapters.DEFAULT_TARGETS[self.base]

    def adapter_config(self) -> adapters.AdapterConfig:
        return adapters.AdapterConfig(self.base, self.targets, self.rank, self.alpha, self.method)


WARMUP = 5



# ---------------------------------------------------------------------------------------------
# A run


@dataclass
class Run:
    cfg: FinetuneConfig
    fmt: TextFormat
    base: torch.nn.Module                        # the frozen reference, shared
    model: torch.nn.Module                       # the policy: the base's copy with adapters
    generator: torch.Generator


def start(cfg: FinetuneConfig, base) -> Run:
    """A run on `base`, the model cfg.base names as the registry (analysis/models.py) records it: its model (frozen,
    shared: the run adapts a copy over its tensors), tokenizer, config, chat template and card."""
    assert base.id == cfg.base, f"the run is configured for {cfg.base}, not {base.id}"
    generator = torch.Generator().manual_seed(cfg.seed)
    return Run(cfg, text_format(base), base.model, adapters.adapt(base.model, cfg.adapter_config(), generator),
               generator)


def _draw(n: int, k: int, g: torch.Generator) -> list[int]:
    return torch.randperm(n, generator=g)[:k].tolist() if k <= n else torch.randint(0, n, (k,), generator=g).tolist()


HELD_OUT_SHARE = 0.1              # lora: the text's last tenth is never trained on


def split_text(fmt: TextFormat, text: str) -> tuple[list[int], list[int]]:
    """The text's tokens: the first 90% to train on, the last 10% held out (at least 2 tokens, at most a context)."""
    ids = fmt.encode(text)
    cut = len(ids) - max(2, int(len(ids) * HELD_OUT_SHARE))
    return ids[:cut], ids[cut:][:fmt.n_positions + 1]


def text_steps(run: Run, text: str) -> Callable[[int], tuple[torch.Tensor, dict]]:
    """lora: random windows of the text's training part, the next-token loss at every position."""
    ids = torch.tensor(split_text(run.fmt, text)[0])
    T = min(run.cfg.seq_len, run.fmt.n_positions, len(ids) - 1)
    assert T >= 2, "the text is too short to train on: give it at least a line"

    def step(it: int):
        starts = torch.randint(0, len(ids) - T, (run.cfg.batch_size,), generator=run.generator)
        x = torch.stack([ids[s:s + T] for s in starts.tolist()])
        y = torch.stack([ids[s + 1:s + T + 1] for s in starts.tolist()])
        logits, _ = run.model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        return loss, {}
    return step


def sft_steps(run: Run, rows: list[dict]) -> Callable[[int], tuple[torch.Tensor, dict]]:
    """sft: the cross entropy of the response tokens only (the prompt's labels are IGNORE)."""
    examples = [example(run.fmt, r["instruction"], r["response"]) for r in rows]

    def step(it: int):
        ids, labels = batch([examples[i] for i in _draw(len(examples), run.cfg.batch_size, run.generator)])
        logits, _ = run.model(ids)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=IGNORE)
        return loss, {"response_tokens": int((labels != IGNORE).sum())}
    return step


def dpo_steps(run: Run, rows: list[dict]) -> Callable[[int], tuple[torch.Tensor, dict]]:
    """dpo: chosen and rejected answers through the policy (with gradients) and the reference (without)."""
    chosen = [example(run.fmt, r["prompt"], r["chosen"]) for r in rows]
    rejected = [example(run.fmt, r["prompt"], r["rejected"]) for r in rows]

    def step(it: int):
        picked = _draw(len(rows), run.cfg.batch_size, run.generator)
        ids, labels = batch([chosen[i] for i in picked] + [rejected[i] for i in picked])
        with torch.no_grad():
            ref_logits, _ = run.base(ids)                       # π_ref: the frozen base, never trained
        logits, _ = run.model(ids)
        pi, ref, B = response_logps(logits, labels), response_logps(ref_logits, labels), len(picked)
        loss, terms = dpo_loss(pi[:B], pi[B:], ref[:B], ref[B:], run.cfg.beta)
        return loss, {**terms, "kl": token_kl(logits.detach(), ref_logits, labels)}
    return step


def train(run: Run, step: Callable[[int], tuple[torch.Tensor, dict]],
          report: Callable[[dict], None] = lambda record: None,
          should_stop: Callable[[], bool] = lambda: False) -> list[dict]:
    """The steps through training/loop.fit; each step's record (loss and its terms) goes to `report` as it is
    made. `should_stop` is asked before every step (a user's Stop): the run ends there, its adapters as trained."""
    cfg, records, terms = run.cfg, [], {}
    params = [p for p in run.model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=cfg.learning_rate)

    def one(it: int):
        if should_stop():
            raise StopIteration
        loss, found = step(it)
        terms.update(found, loss=loss.item())
        return loss

    def record(it: int, losses: list, last: bool) -> None:
        if terms:                                               # the step just taken (none before step 0)
            records.append({"step": it, **{k: round(v, 5) if isinstance(v, float) else v for k, v in terms.items()}})
            report(records[-1])
            terms.clear()

    rate = lambda it, _: cfg.learning_rate * min(1.0, (it + 1) / WARMUP)  # noqa: E731 - a short warmup
    loop.fit(run.model, optimizer, one, loop.Loop(cfg.steps, 1, cfg.grad_clip, show=False), evaluate=record, lr=rate)
    return records


# ---------------------------------------------------------------------------------------------
# What a run shows: exactness at step 0 and after merging, texts before and after


@torch.no_grad()
def greedy(model: torch.nn.Module, fmt: TextFormat, prompt: str, max_new: int, stop: bool) -> str:
    """The most probable continuation, token by token with the model's KV cache (`step`); with `stop`, up to
    the end of the answer. Greedy, so a run's texts depend only on its weights."""
    ids = fmt.encode(prompt)[-(fmt.n_positions - 1):]
    logits, cache = model.step(torch.tensor([ids]))
    out = []
    for _ in range(max_new):
        token = int(logits[0, -1].argmax())
        if stop and token == fmt.stop:
            break
        out.append(token)
        logits, cache = model.step(torch.tensor([[token]]), cache)
    return fmt.decode(out)


_BASE_TEXTS: Bounded[str] = Bounded(max_bytes=4 << 20, max_items=256)


def base_text(run: Run, prompt: str, max_new: int, stop: bool) -> str:
    """The base model's greedy text (the same for every run on it: kept, a few hundred strings at most)."""
    key = (run.cfg.base, prompt, max_new, stop)
    text = _BASE_TEXTS.get(key)
    if text is None:
        text = greedy(run.base, run.fmt, prompt, max_new, stop)
        _BASE_TEXTS.put(key, text)
    return text


def prompts(cfg: FinetuneConfig, fmt: TextFormat, text: str) -> list[tuple[str, str]]:
    """(what the user reads, what the model reads) for the texts before and after: the held-out instructions
    (sft, dpo), or the start of the text's first line (lora)."""
    if cfg.method == "lora":
        first = text.strip().splitlines()[0][:40] if text.strip() else "\n"
        return [(first, first)]
    rows = pairs(held_out=True) if cfg.method == "sft" else preferences(held_out=True)
    asked = [r["instruction"] if cfg.method == "sft" else r["prompt"] for r in rows]
    return [(q, fmt.prompt(q)) for q in asked]


@torch.no_grad()
def max_difference(a: torch.nn.Module, b: torch.nn.Module, ids: list[int]) -> float:
    """max |logits_a - logits_b| over one sequence."""
    x = torch.tensor([ids])
    return float((a(x)[0] - b(x)[0]).abs().max())


def first_example(fmt: TextFormat, method: str) -> tuple[list[int], list[int]]:
    """The first training pair (sft) or the first triple's chosen answer (dpo), as ids and labels."""
    if method == "sft":
        first = pairs()[0]
        return example(fmt, first["instruction"], first["response"])
    first = preferences()[0]
    return example(fmt, first["prompt"], first["chosen"])


def probe(fmt: TextFormat, cfg: FinetuneConfig, text: str) -> list[int]:
    """The sequence the exactness checks run on: the first training example."""
    if cfg.method == "lora":
        return fmt.encode(text)[:min(cfg.seq_len, fmt.n_positions)]
    return first_example(fmt, cfg.method)[0]


def mask_view(fmt: TextFormat, cfg: FinetuneConfig) -> dict:
    """The first training example's tokens and which of them the loss counts as targets (sft, dpo): the
    first token is never a target, the prompt's are masked out."""
    ids, labels = first_example(fmt, cfg.method)
    return {"tokens": [fmt.decode([i], special=True) for i in ids + [labels[-1]]],
            "in_loss": [False] + [t != IGNORE for t in labels]}


@torch.no_grad()
def _response_loss(model: torch.nn.Module, examples: list[tuple[list[int], list[int]]]) -> tuple[float, int]:
    """Cross entropy per answer token over `examples` (one at a time: no padding), and the number of tokens."""
    total, n = 0.0, 0
    for ids, labels in examples:
        logits, _ = model(torch.tensor([ids]))
        y = torch.tensor([labels])
        total += F.cross_entropy(logits[0], y[0], ignore_index=IGNORE, reduction="sum").item()
        n += int((y != IGNORE).sum())
    return total / max(n, 1), n


@torch.no_grad()
def held_out(run: Run, text: str) -> dict:
    """The adapted model against the base on what training never saw, with its protocol: lora, the text's last
    tenth (next-token loss); sft, the held-out pairs (loss per response token, the prompt masked); dpo, the
    held-out triples (the DPO loss, the reward margin and how often the chosen answer is ahead)."""
    cfg, fmt = run.cfg, run.fmt
    if cfg.method == "lora":
        tail = split_text(fmt, text)[1]
        examples = [(tail[:-1], tail[1:])]
        protocol = "the text's last 10% of tokens (never trained on), next-token loss at every position, nats/token"
    elif cfg.method == "sft":
        examples = [example(fmt, r["instruction"], r["response"]) for r in pairs(held_out=True)]
        protocol = ("the held-out pairs (assets/finetune/sft_held_out.jsonl, all of them), cross entropy per "
                    "response token with the prompt masked, nats/token")
    else:
        rows = preferences(held_out=True)
        ids, labels = batch([example(fmt, r["prompt"], r[k]) for k in ("chosen", "rejected") for r in rows])
        pi, ref = response_logps(run.model(ids)[0], labels), response_logps(run.base(ids)[0], labels)
        B = len(rows)
        loss, terms = dpo_loss(pi[:B], pi[B:], ref[:B], ref[B:], cfg.beta)
        return {"protocol": f"the {B} held-out triples (assets/finetune/dpo_held_out.jsonl, all of them), β = "
                            f"{cfg.beta:g}; the reference scores ln 2, margin 0, accuracy 0", "triples": B,
                "loss": round(loss.item(), 4), "margin": round(terms["margin"], 4),
                "accuracy": round(terms["accuracy"], 4)}
    after, n = _response_loss(run.model, examples)
    return {"protocol": protocol, "tokens": n, "loss_base": round(_response_loss(run.base, examples)[0], 4),
            "loss": round(after, 4)}


# What a run does besides its steps, in order: `execute` names each part as it begins (a live run shows it)
PHASES = {"loading": "reading the base model", "before": "the base model's texts before training",
          "after": "the adapted model's texts after training",
          "held_out": "evaluating the held-out loss (the adapted model and the base)",
          "merge": "checking that the merged W + (α/r) B A gives the same logits"}


def execute(run: Run, text: str | None = None, report: Callable[[dict], None] = lambda record: None,
            should_stop: Callable[[], bool] = lambda: False, phase: Callable[[str], None] = lambda name: None) -> dict:
    """A whole run as plain data: counts, step 0's exactness, every step's record, texts before and after,
    the merge's exactness, the loss mask (sft, dpo). The adapters stay in run.model. `phase` hears the name of
    each part (PHASES) as it begins: the steps are `report`ed, the rest takes seconds too on SmolLM2."""
    started = time.perf_counter()
    cfg, text = run.cfg, default_text() if text is None else text
    ids, asked, stop_at_end = probe(run.fmt, cfg, text), prompts(cfg, run.fmt, text), cfg.method != "lora"
    texts = lambda write: [{"prompt": q, "text": write(p)} for q, p in asked]  # noqa: E731
    result = {"method": cfg.method, "base": cfg.base, "config": asdict(cfg),
              "counts": {**lora.count_parameters(run.model), "matrices": lora.adapter_table(run.model)},
              "step0_max_abs_diff": max_difference(run.model, run.base, ids)}
    phase("before")
    result["before"] = texts(lambda p: base_text(run, p, cfg.max_new_tokens, stop_at_end))
    if cfg.method != "lora":
        result["mask"] = mask_view(run.fmt, cfg)
    step = {"lora": lambda: text_steps(run, text), "sft": lambda: sft_steps(run, pairs()),
            "dpo": lambda: dpo_steps(run, preferences())}[cfg.method]()
    result["steps"] = train(run, step, report, should_stop)
    result["stopped"] = len(result["steps"]) < cfg.steps
    if should_stop():  # the user left: nobody will read the texts after, the merge check or the held-out figures
        return result
    phase("after")
    result["after"] = texts(lambda p: greedy(run.model, run.fmt, p, cfg.max_new_tokens, stop_at_end))
    phase("held_out")
    result["held_out"] = held_out(run, text)
    phase("merge")
    merged = lora.merge_lora(lora.shared_copy(run.model))     # W + (α/r) B A in new tensors; the base untouched
    result["merged_max_abs_diff"] = max_difference(run.model, merged, ids)
    result["seconds"], result["threads"] = round(time.perf_counter() - started, 2), torch.get_num_threads()
    return result


def live(cfg: FinetuneConfig, text: str | None, base: Callable[[], object]) -> Iterator[dict]:
    """`execute` on a thread: yields {"phase": name} as each part of the run begins (PHASES: loading the base, the
    texts before, ..., the merge check), {"step": record} as each step ends, then {"result": ...}. `base()` gives the
    base (the registry's record; SmolLM2 read on its first use, the run's first phase). Closing the iterator (the
    user pressed Stop) ends the run at its next step and waits for it: nothing keeps training."""
    records: queue.Queue = queue.Queue()
    stop = threading.Event()

    def work():
        try:
            records.put({"phase": "loading"})
            run = start(cfg, base())
            records.put({"result": execute(run, text, lambda r: records.put({"step": r}), stop.is_set,
                                           lambda name: records.put({"phase": name}))})
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread, raised there
            records.put({"error": err})

    thread = threading.Thread(target=work, name="finetune", daemon=True)
    thread.start()
    try:
        while True:
            item = records.get()
            if "error" in item:
                raise item["error"]
            yield item
            if "result" in item:
                return
    finally:
        stop.set()
        thread.join()
        heap.release()  # the run's activations, gradients and moments (SFT or DPO on SmolLM2: about 400 MB)


# ---------------------------------------------------------------------------------------------
# python -m playground.train lora|sft|dpo: a shipped run, its adapters and its record in models/

RECIPES = {  # the shipped runs' settings (the app's live LoRA run is this one; its SFT and DPO runs are shorter)
    "lora": FinetuneConfig(method="lora", base=adapters.GPT, steps=60),
    "sft": FinetuneConfig(method="sft", base=adapters.SMOLLM2, steps=40, batch_size=4, learning_rate=2e-3,
                          max_new_tokens=40),
    "dpo": FinetuneConfig(method="dpo", base=adapters.SMOLLM2, steps=40, batch_size=2, learning_rate=3e-4,
                          max_new_tokens=40),
}
SHORT = {adapters.GPT: "gpt-shakespeare", adapters.SMOLLM2: "smollm2"}


RESUMES = False   # a run keeps no resume state (lora: seconds; sft, dpo: minutes); --resume is refused


def configs(kind: str) -> tuple:
    return (RECIPES[kind],)   # lora | sft | dpo: the shipped run's settings


def train_kind(cfg: FinetuneConfig, run) -> dict:
    """Train, then save the adapters and the whole record (steps, texts before and after) as the checkpoint
    `<method>-<base>` (or --name). --corpus gives lora another text; sft and dpo read assets/finetune/."""
    from dataclasses import replace

    cfg = replace(cfg, seed=run.seed)
    files = list(run.corpus) if run.corpus else {"lora": [DATA / "lora_text.txt"],
                                                  "sft": [DATA / "sft.jsonl", DATA / "sft_held_out.jsonl"],
                                                  "dpo": [DATA / "dpo.jsonl", DATA / "dpo_held_out.jsonl"]}[cfg.method]
    text = files[0].read_text(encoding="utf-8") if cfg.method == "lora" else None
    torch.manual_seed(run.seed)
    job = start(cfg, adapters.base(cfg.base))  # the CLI sits below the registry: nets/adapters reads the same copy
    result = execute(job, text, lambda r: print(f"step {r['step']}: loss {r['loss']:.4f}", flush=True))
    name = run.name or f"{cfg.method}-{SHORT[cfg.base]}"
    card = {"kind": "lora-adapter", "model": f"LoRA adapters ({cfg.method}) on {cfg.base}", "base": cfg.base,
            "corpus": checkpoints.corpus_record(files), "held_out": result["held_out"], "result": result,
            "command": run.command,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": "cpu", "seed": run.seed}
    checkpoints.save(run.out / name, kind="lora-adapter", config=cfg.adapter_config(), card=card, model=job.model)
    return {k: result[k] for k in ("method", "base", "seconds", "step0_max_abs_diff", "merged_max_abs_diff")}
