"""Training MiniLM + LoRA + an MLM head (`python -m playground.train minilm-mlm`), the model of nets/minilm_mlm.py.

Only the adapters, the new MLM head and (optionally) the encoder's LayerNorms train; the base stays
frozen. Masking is BERT's: 15% of the positions, 80/10/10 ([MASK] / random / kept), from
training/masking.py. Each file of the corpus is a stream of WordPiece ids whose last part is held out;
a batch is windows [CLS] w_1 .. w_{T-2} [SEP] from a file chosen uniformly.

References: Devlin et al. 2019 (BERT, masked-LM); Hu et al. 2021 (LoRA).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from playground import checkpoints
from playground.nets import lora
from playground.nets.bert import BertForPreTraining
from playground.nets.minilm_mlm import (BLOCK_LINEARS, MINILM, MiniLMMLMConfig, base_dir, base_record, build,
                                        masked_logits, trained_state)
from playground.training import loop
from playground.training.masking import mask_tokens, topk_accuracy


@dataclass
class MiniLMMLMTrainConfig:
    """`python -m playground.train minilm-mlm` options: the adapters, then the optimisation."""

    rank: int = 8                   # LoRA rank r (the 0.84M trainable is about r = 16)
    alpha: float = 16.0             # LoRA α; α / r = 2 at r = 8
    targets: str = BLOCK_LINEARS    # which projections of each block get adapters
    train_layernorm: bool = True    # also train the encoder's LayerNorms (10k numbers)
    base: str = MINILM              # the pretrained encoder (a folder for tests and other BERTs)
    max_iters: int = 3000           # optimizer steps
    batch_size: int = 32            # sequences per step
    seq_len: int = 64               # tokens per sequence, [CLS] and [SEP] included: 64 keeps a step ~1 s on 2 cores
    mask_prob: float = 0.15         # BERT: 15% of the positions are selected (held-out masks always use 15%)
    whole_word: bool = False        # select whole words instead of WordPiece pieces
    learning_rate: float = 2e-3     # peak; adapters from zero want a large rate
    min_lr: float = 2e-4            # floor of the cosine decay
    warmup_iters: int = 50          # linear warmup
    lr_decay_iters: int = 0         # cosine decay length; 0 means max_iters
    weight_decay: float = 0.0       # none: the update B A already starts at zero and is low rank
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0          # global gradient-norm clipping; 0 turns it off
    eval_interval: int = 200        # steps between held-out evaluations (and checkpoint writes)
    eval_batches: int = 8           # held-out batches per evaluation (always the same ones, same masks)
    val_fraction: float = 0.02      # the last 2% of each file is held out, never trained on
    max_seconds: float = 0.0        # stop after this much wall time; 0: no limit
    threads: int = 0                # torch.set_num_threads; 0 leaves PyTorch's default
    bf16: bool = False              # bfloat16 autocast for the matmuls on a CPU (fp32 master weights): faster with AMX
    init: str = ""                  # a minilm-mlm checkpoint to start from (same rank and targets): training in stages

    def __post_init__(self):
        assert self.max_iters >= 1 and self.batch_size >= 1, "max_iters and batch_size must be positive"
        assert self.seq_len >= 3, f"seq_len={self.seq_len} leaves no room between [CLS] and [SEP]"
        assert 0.0 < self.mask_prob < 1.0, f"mask_prob must be in (0, 1), not {self.mask_prob}"
        assert 0 <= self.min_lr <= self.learning_rate, f"min_lr={self.min_lr} must lie in [0, learning_rate]"
        assert 0.0 < self.val_fraction < 0.5, f"val_fraction must be in (0, 0.5), not {self.val_fraction}"
        assert self.eval_interval >= 1 and self.eval_batches >= 1, "eval_interval and eval_batches must be positive"


# ---------------------------------------------------------------------------------------------
# Data: WordPiece ids per file, the last part of each held out


@dataclass
class MLMData:
    tokenizer: object                 # MiniLM's tokenizers.Tokenizer (WordPiece, uncased)
    train: list[torch.Tensor]         # per file: (N_i,) int64 ids, the first 1 - val_fraction
    val: list[torch.Tensor]           # per file: the last val_fraction, never trained on
    corpus: list[dict]                # [{name, sha256, bytes}]
    cls_id: int
    sep_id: int
    mask_id: int
    random_low: int                   # first id of a real token: random replacements skip [PAD], [unused*], ...

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()


def load_corpus(paths: list[Path], tokenizer, val_fraction: float) -> MLMData:
    """Each file as one stream of WordPiece ids (lines encoded in a batch, joined); the last
    `val_fraction` of each file is the held-out part, so every file is tested on unseen text."""
    train, val = [], []
    for path in paths:
        lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        ids = [i for e in tokenizer.encode_batch(lines, add_special_tokens=False) for i in e.ids]
        ids = torch.tensor(ids, dtype=torch.long)
        n_train = int(len(ids) * (1 - val_fraction))
        train.append(ids[:n_train])
        val.append(ids[n_train:])
    vocab = tokenizer.get_vocab()
    inverse = sorted((i, t) for t, i in vocab.items())
    random_low = next(i for i, t in inverse if not (t.startswith("[") and t.endswith("]")))  # MiniLM: 999 ("!")
    corpus = [{"name": Path(p).name, "sha256": checkpoints.sha256_file(p), "bytes": Path(p).stat().st_size}
              for p in paths]
    return MLMData(tokenizer, train, val, corpus, vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"], random_low)


def sample_windows(streams: list[torch.Tensor], n: int, seq_len: int, cls_id: int, sep_id: int,
                   generator: torch.Generator) -> torch.Tensor:
    """n windows [CLS] w_1 .. w_{T-2} [SEP] (n, T): a file chosen uniformly (each corpus weighs the
    same, whatever its size), then a uniform start inside it."""
    inner = seq_len - 2
    usable = [s for s in streams if len(s) > inner]
    assert usable, f"no file has more than {inner} tokens"
    f = torch.randint(len(usable), (n,), generator=generator)                        # (n,) file of each window
    rows = []
    for i in range(n):
        s = usable[int(f[i])]
        start = int(torch.randint(len(s) - inner, (1,), generator=generator))
        rows.append(s[start:start + inner])
    body = torch.stack(rows)                                                         # (n, T-2)
    return torch.cat([torch.full((n, 1), cls_id), body, torch.full((n, 1), sep_id)], dim=1)  # (n, T)


EVAL_MASK_PROB = 0.15  # held-out accuracy is always measured under BERT's masking, whatever the training rate


def mask_batch(data: MLMData, windows: torch.Tensor, cfg: MiniLMMLMTrainConfig, generator: torch.Generator,
               prob: float | None = None):
    special = (windows == data.cls_id) | (windows == data.sep_id)                    # (B, T)
    word_ids = None
    if cfg.whole_word:  # a piece "##x" continues the word before it
        cont = torch.tensor([data.tokenizer.id_to_token(int(i)).startswith("##") for i in windows.flatten()])
        starts = ~cont.view_as(windows) & ~special
        word_ids = torch.where(special, torch.tensor(-1), starts.long().cumsum(dim=1))
    return mask_tokens(windows, mask_id=data.mask_id, vocab_size=data.vocab_size, special=special,
                       prob=cfg.mask_prob if prob is None else prob, word_ids=word_ids, random_low=data.random_low,
                       generator=generator)


@torch.no_grad()
def evaluate(model: BertForPreTraining, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, float]:
    """Held-out masked-token loss and top-1 / top-5 accuracy over fixed (input_ids, labels) batches."""
    was_training = model.training
    model.eval()
    loss_sum, hits1, hits5, n = 0.0, 0.0, 0.0, 0
    for input_ids, labels in batches:
        logits, gold = masked_logits(model, input_ids, labels)
        loss_sum += F.cross_entropy(logits, gold, reduction="sum").item()
        acc = topk_accuracy(logits, gold, ks=(1, 5))
        hits1, hits5, n = hits1 + acc["top1"] * len(gold), hits5 + acc["top5"] * len(gold), n + len(gold)
    model.train(was_training)
    return {"loss": loss_sum / max(n, 1), "top1": hits1 / max(n, 1), "top5": hits5 / max(n, 1), "n": n}


HELD_OUT_PROTOCOL = ("the last val_fraction of each file's WordPiece stream, cut into consecutive windows of "
                     "seq_len - 2 tokens (the remainder of each file dropped), each [CLS] window [SEP]; 15% of the "
                     "tokens selected, 80/10/10 (torch.Generator seed); loss and top-1/top-5 over every selected token")


def held_out(model: BertForPreTraining, data: MLMData, seq_len: int, seed: int = 0, batch_size: int = 64) -> dict:
    """The model's figures over its whole held-out split (HELD_OUT_PROTOCOL): every held-out token is in a window."""
    inner = seq_len - 2
    windows = torch.cat([s[: len(s) // inner * inner].view(-1, inner) for s in data.val if len(s) >= inner])
    windows = torch.cat([torch.full((len(windows), 1), data.cls_id), windows,
                         torch.full((len(windows), 1), data.sep_id)], dim=1)              # (N, seq_len)
    g = torch.Generator().manual_seed(seed)
    cfg = MiniLMMLMTrainConfig(seq_len=seq_len)
    batches = []
    for start in range(0, len(windows), batch_size):
        m = mask_batch(data, windows[start:start + batch_size], cfg, g, prob=EVAL_MASK_PROB)
        batches.append((m.input_ids, m.labels))
    result = evaluate(model, batches)
    return {"protocol": HELD_OUT_PROTOCOL, "seed": seed, "seq_len": seq_len, "windows": len(windows),
            "masked_tokens": result["n"], **{k: round(result[k], 4) for k in ("loss", "top1", "top5")}}


# ---------------------------------------------------------------------------------------------
# Training (python -m playground.train minilm-mlm)


def _val_batches(data: MLMData, cfg: MiniLMMLMTrainConfig, seed: int, device: str) -> list:
    """The held-out set: the same windows and the same masks at every evaluation."""
    g_val = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(cfg.eval_batches):
        windows = sample_windows(data.val, cfg.batch_size, cfg.seq_len, data.cls_id, data.sep_id, g_val)
        m = mask_batch(data, windows, cfg, g_val, prob=EVAL_MASK_PROB)
        batches.append((m.input_ids.to(device), m.labels.to(device)))
    return batches


def _card(cfg: MiniLMMLMTrainConfig, run, config: MiniLMMLMConfig, data: MLMData, state: loop.TrainState,
          metrics: dict, counted: dict, earlier: dict, val_seed: int) -> dict:
    it, result = state.it, metrics["val"]
    return {
        "kind": "minilm-mlm", "model": "all-MiniLM-L6-v2 + LoRA adapters + MLM head (masked-LM)",
        "base": {"name": config.base, "package": config.base_package, "version": config.base_version,
                 "sha256": config.base_sha256},
        "corpus": data.corpus,
        "held_out": {"protocol": f"the last {cfg.val_fraction:.0%} of each file, never trained on (its figures: "
                                 "python -m playground.tools.held_out)"},
        "steps": it, "tokens_seen": it * cfg.batch_size * cfg.seq_len,
        "masked_tokens_seen": round(it * cfg.batch_size * (cfg.seq_len - 2) * cfg.mask_prob),
        "wall_time_s": round(state.elapsed, 1), "device": run.device,
        "train_loss": round(metrics["train"], 4), "val_loss": round(result["loss"], 4),
        "val_top1": round(result["top1"], 4), "val_top5": round(result["top5"], 4),
        "val_masked_tokens": result["n"], "val_mask_prob": EVAL_MASK_PROB,
        "trainable_params": counted["trainable"], "n_params": counted["total"],
        "trainable_ratio": round(counted["ratio"], 5),
        "trained": "LoRA A, B on " + config.targets + "; MLM head (transform, LayerNorm, bias; decoder tied "
                   "to the frozen token embedding)" + ("; encoder LayerNorms" if config.train_layernorm else ""),
        "train_config": dataclasses.asdict(cfg), "history": state.history, "seed": run.seed, "val_seed": val_seed,
        "command": run.command,
        **({"init": earlier} if earlier else {}),
    }


def _earlier_stage(cfg: MiniLMMLMTrainConfig, config: MiniLMMLMConfig, model: BertForPreTraining, seed: int) -> dict:
    """Start from the adapters, head and LayerNorms of the checkpoint `cfg.init`; returns what its card says of how
    it was made (its command, steps, corpus, curve), for this run's card: a model trained in stages names them all.
    The stages need seeds of their own: with the earlier one's, this run would draw its batches and masks again,
    step by step (the training loss falls, the held-out one does not)."""
    before = checkpoints.load(cfg.init)
    same = ("base", "rank", "alpha", "targets", "train_layernorm")
    if before.kind != "minilm-mlm" or any(getattr(before.config, k) != getattr(config, k) for k in same):
        raise SystemExit(f"--init={cfg.init} is not a minilm-mlm checkpoint with this run's {', '.join(same)}")
    if seed in [stage.get("seed") for stage in (before.card, *_stages(before.card))]:
        raise SystemExit(f"--seed={seed} is an earlier stage's: this run would draw its batches again; pass another")
    earlier_fraction = before.card.get("train_config", {}).get("val_fraction", cfg.val_fraction)
    if earlier_fraction != cfg.val_fraction:   # a file both runs read would be held out at another cut
        raise SystemExit(f"--val_fraction={cfg.val_fraction} is not the earlier stage's ({earlier_fraction}): "
                         "it trained on a part this run would hold out")
    from safetensors.torch import load_file

    state = load_file(before.path / "model.safetensors")       # checked by load(); the adapters before merging
    assert set(state) == set(trained_state(model)), "the checkpoint's tensors are not this model's trained ones"
    model.load_state_dict(state, strict=False)
    card = before.card
    earlier = {k: card[k] for k in ("steps", "tokens_seen", "masked_tokens_seen", "wall_time_s", "seed", "command",
                                    "history") if k in card}
    return {"checkpoint": str(cfg.init), "corpus": [c["sha256"] for c in card.get("corpus", [])], **earlier,
            "val_seed": card.get("val_seed", card.get("seed", 0) + 1),
            **({"init": card["init"]} if "init" in card else {})}


def _stages(card: dict) -> list[dict]:
    """The earlier stages a card names, the latest first."""
    stages = []
    while "init" in card:
        card = card["init"]
        stages.append(card)
    return stages


RESUMES = True   # fit() keeps resume state beside the checkpoint


def configs(kind: str) -> tuple:
    return (MiniLMMLMTrainConfig,)


def train_kind(cfg: MiniLMMLMTrainConfig, run) -> dict:
    """Train adapters and head on `run.corpus`; write `run.out/<name>` (default minilm-mlm) at every
    evaluation (atomic writes, card last) and at the end. `run` is playground.train.RunOptions."""
    import time

    from playground.checkpoints import read_hf_tokenizer

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = run.device
    torch.manual_seed(run.seed)
    started = time.perf_counter()
    tokenizer = read_hf_tokenizer(base_dir(cfg.base))
    data = load_corpus(run.corpus, tokenizer, cfg.val_fraction)
    counts = torch.bincount(torch.cat(data.train), minlength=data.vocab_size)
    config = MiniLMMLMConfig(base=cfg.base, rank=cfg.rank, alpha=cfg.alpha, targets=cfg.targets,
                             train_layernorm=cfg.train_layernorm, **base_record(cfg.base))
    model = build(config, counts)
    earlier = _earlier_stage(cfg, config, model, run.seed) if cfg.init else {}
    model = model.to(device)
    name = run.name or "minilm-mlm"
    counted = lora.count_parameters(model)
    optimizer = loop.make_optimizer(model, cfg, device)
    generator = torch.Generator().manual_seed(run.seed)
    val_seed = earlier.get("val_seed", run.seed + 1)   # a later stage keeps the first one's held-out batches
    val_batches = _val_batches(data, cfg, val_seed, device)
    print(f"{name}: {sum(len(s) for s in data.train):,} training tokens, {counted['trainable']:,} trainable of "
          f"{counted['total']:,} parameters ({100 * counted['ratio']:.2f}%), set up in "
          f"{time.perf_counter() - started:.1f} s")
    state, metrics = loop.TrainState(), {}

    def step(it: int):
        windows = sample_windows(data.train, cfg.batch_size, cfg.seq_len, data.cls_id, data.sep_id, generator)
        m = mask_batch(data, windows, cfg, generator)
        logits, gold = masked_logits(model, m.input_ids.to(device), m.labels.to(device))
        return F.cross_entropy(logits.float(), gold)

    def evaluate_val(it: int, losses: list, last: bool) -> dict:
        result = evaluate(model, val_batches)
        metrics.update(val=result, train=sum(losses) / len(losses) if losses else result["loss"])
        return {"train": round(metrics["train"], 4), "val": round(result["loss"], 4),
                "top1": round(result["top1"], 4), "top5": round(result["top5"], 4)}

    def save(it: int, final: bool) -> None:
        checkpoints.save(run.out / name, kind="minilm-mlm", config=config, model=model, tokenizer=tokenizer,
                         card=_card(cfg, run, config, data, state, metrics, counted, earlier, val_seed))

    model.train()
    settings = loop.Loop(cfg.max_iters, cfg.eval_interval, cfg.grad_clip, cfg.max_seconds, bf16=cfg.bf16, desc=name)
    loop.fit(model, optimizer, step, settings, evaluate=evaluate_val, save=save,
             lr=lambda it, _: loop.learning_rate(it, cfg), state=state, resume_dir=run.out / f".{name}.resume",
             resume=run.resume, rngs=[generator], device=device)
    result = metrics["val"]
    return {"name": name, "steps": state.history[-1]["iter"], "val_loss": result["loss"], "top1": result["top1"],
            "top5": result["top5"], "seconds": round(state.elapsed, 1), "trainable": counted["trainable"],
            "total": counted["total"], "history": state.history}
