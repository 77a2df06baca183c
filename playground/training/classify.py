"""Training the sentence classifiers (kind `classifier`) on assets/classify: from scratch, or by transfer from a
pre-trained encoder (all-MiniLM-L6-v2, or our bert-english).

    python -m playground.train classifier --method=lstm|bilstm|probe-cls|probe-mean|lora|finetune
                                          [--n_train=N] [--seed=S]
    (bert-probe-cls, bert-probe-mean, bert-lora, bert-finetune: the same ways on our BERT)

The data is the shipped set (tools/classify_data.py: which of five corpora a sentence comes from), its held-out
split never trained on. `--n_train` takes that many labelled examples from the training split, the same number of
each class as far as it divides (a seeded draw): the x axis of the lecture's picture, accuracy against labels.

- lstm, bilstm: a word vocabulary from the examples used (every word of a small draw; words seen twice in a large
  one), a new embedding and LSTM, Adam. Batches hold sentences of one length, so no padding is read and h_T is the
  last word's state (nets/classifier.py).
- probe-cls, probe-mean: MiniLM's features computed once (frozen, inference mode), a linear head trained on them
  full-batch with Adam: a linear probe.
- lora: adapters on W^Q and W^V and the head, trained together through the frozen encoder, in minibatches.
- finetune: the top block (`--top`) and the head trained in full, in minibatches. The frozen blocks below give the
  same numbers at every step (no dropout), so each sentence's state entering the top block is computed once and
  training runs the top block alone; the trained block is then rounded to its stored int8 form before the run is
  measured (nets/classifier.py).
- bert-*: the same four ways on our bert-english (pre-trained by this project; MiniLM was pre-trained elsewhere on
  far more text), its tokenizer framing each sentence as [CLS] ... [SEP].

Every run evaluates on the whole held-out split (accuracy and cross-entropy) and records the protocol in its card.
The loop is written out here (a few lines per method, no resume: a run takes seconds to minutes).
"""

from __future__ import annotations

import gzip
import json
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from playground import checkpoints
from playground.nets.classifier import (RECURRENT, ClassifierConfig, RecurrentClassifier, TransferClassifier,
                                        BASES, as_stored, build_transfer)

DATA = checkpoints.ROOT / "assets" / "classify" / "sentences.jsonl.gz"
UNK = "[UNK]"
# per method: optimizer steps, learning rate, batch size (probes: full batch)
_WAYS = {"probe-cls": (300, 1e-2, 0), "probe-mean": (300, 1e-2, 0), "lora": (150, 1e-3, 16),
         "finetune": (300, 2e-4, 16)}
DEFAULTS = {"lstm": (1500, 3e-3, 32), "bilstm": (1500, 3e-3, 32), **_WAYS, **{f"bert-{w}": v for w, v in _WAYS.items()}}
RESUMES = False   # a run takes seconds to a few minutes and keeps no resume state; --resume is refused


@dataclass
class ClassifyTrainConfig:
    n_train: int = 0          # labelled examples used (0: the whole training split), evenly per class, seeded
    steps: int = 0            # optimizer steps (0: the method's default, DEFAULTS)
    lr: float = 0.0           # Adam's learning rate (0: the method's default)
    batch_size: int = -1      # -1: the method's default; 0: every example at every step (the probes' default)
    weight_decay: float = 1e-4  # AdamW's decoupled decay, the same for every method
    max_len: int = 64         # transfer: tokens per sentence at most ([CLS] and [SEP] included)
    data: str = ""            # the examples file (default: assets/classify/sentences.jsonl.gz)


def load_examples(path: str | Path = "") -> dict[str, list[dict]]:
    """{train: [...], held_out: [...]}, each example {text, label, split}, in the file's order."""
    path = Path(path or DATA)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {split: [r for r in rows if r["split"] == split] for split in ("train", "held_out")}


def draw(train: list[dict], n: int, seed: int) -> list[dict]:
    """n examples, classes in turn (each class's examples in a seeded order), so that every class has n // K or
    n // K + 1; the whole split for n <= 0 or n >= its size."""
    if n <= 0 or n >= len(train):
        return list(train)
    rng = random.Random(seed)
    by_class: dict[str, list[dict]] = {}
    for e in train:
        by_class.setdefault(e["label"], []).append(e)
    for items in by_class.values():
        rng.shuffle(items)
    turns = [e for i in range(max(map(len, by_class.values()))) for items in by_class.values()
             if i < len(items) for e in [items[i]]]
    return turns[:n]


def word_tokenizer(texts: list[str]):
    """A WordLevel tokenizer (lower-cased; words and punctuation apart) over the words of `texts`: every word of a
    draw under 1,000 sentences, else the words seen at least twice; [UNK] (id 0) for the rest."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    pre = pre_tokenizers.Whitespace()
    norm = normalizers.Lowercase()
    counts = Counter(w for t in texts for w, _ in pre.pre_tokenize_str(norm.normalize_str(t)))
    least = 1 if len(texts) < 1000 else 2
    vocab = {UNK: 0}
    for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if c >= least:
            vocab[w] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.normalizer, tok.pre_tokenizer = norm, pre
    return tok


def encode_batch(tokenizer, texts: list[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """WordPiece ids ([CLS] ... [SEP], cut to max_len) padded with [PAD] = 0, and the attention mask (B, T)."""
    encs = [tokenizer.encode(t).ids for t in texts]
    encs = [e[: max_len - 1] + [e[-1]] if len(e) > max_len else e for e in encs]  # keep [SEP] last
    T = max(map(len, encs))
    idx = torch.zeros(len(encs), T, dtype=torch.long)
    mask = torch.zeros(len(encs), T, dtype=torch.long)
    for i, e in enumerate(encs):
        idx[i, : len(e)], mask[i, : len(e)] = torch.tensor(e), 1
    return idx, mask


def _by_length(ids: list[list[int]]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, e in enumerate(ids):
        groups.setdefault(len(e), []).append(i)
    return groups


def recurrent_logits(model: RecurrentClassifier, ids: list[list[int]]) -> torch.Tensor:
    """Logits (N, K) of every sentence, computed in groups of one length (no padding)."""
    out = torch.empty(len(ids), len(model.config.classes))
    for _, members in _by_length(ids).items():
        out[members] = model(torch.tensor([ids[i] for i in members]))
    return out


def transfer_logits(model: TransferClassifier, texts: list[str], max_len: int, batch: int = 64):
    """Logits (N, K), sentences sorted by length into batches (little padding), returned in their order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = torch.empty(len(texts), len(model.config.classes))
    for s in range(0, len(order), batch):
        members = order[s: s + batch]
        out[members] = model(*encode_batch(model.tokenizer, [texts[i] for i in members], max_len))
    return out


def evaluate(logits: torch.Tensor, gold: torch.Tensor) -> dict:
    return {"accuracy": round(float((logits.argmax(-1) == gold).float().mean()), 4),
            "loss": round(float(F.cross_entropy(logits, gold)), 4), "examples": len(gold)}


def _optimizer(params, lr: float, weight_decay: float):
    return torch.optim.AdamW([p for p in params if p.requires_grad], lr=lr, weight_decay=weight_decay)


def _recurrent(config: ClassifierConfig, cfg: ClassifyTrainConfig, train: list[dict], gold, g, progress):
    tok = word_tokenizer([e["text"] for e in train])
    config.vocab_size = tok.get_vocab_size()
    model = _seeded(RecurrentClassifier(config), g).train()
    ids = [tok.encode(e["text"]).ids for e in train]
    groups = list(_by_length(ids).values())
    weights = torch.tensor([len(m) for m in groups], dtype=torch.float)  # a length as often as its sentences
    steps, lr, bs = _settings(cfg, config.method)
    opt = _optimizer(model.parameters(), lr, cfg.weight_decay)
    for step in range(steps):
        members = groups[int(torch.multinomial(weights, 1, generator=g))]
        pick = torch.randperm(len(members), generator=g)[:bs].tolist()
        batch = [members[i] for i in pick]
        loss = F.cross_entropy(model(torch.tensor([ids[i] for i in batch])), gold[batch])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        progress(step + 1, steps)
    return model.eval(), tok


def _seeded(model: RecurrentClassifier, g: torch.Generator) -> RecurrentClassifier:
    """torch.nn's initialisations drawn from `g` (nothing seeds the process-wide generator): N(0, 1) embeddings,
    U(-1/sqrt(H), 1/sqrt(H)) for the LSTM, U(-1/sqrt(in), 1/sqrt(in)) for the head (nn.Linear's bound)."""
    with torch.no_grad():
        model.embed.weight.normal_(0.0, 1.0, generator=g)
        for p in model.rnn.parameters():
            p.uniform_(-model.config.n_hidden ** -0.5, model.config.n_hidden ** -0.5, generator=g)
        for p in model.head.parameters():
            p.uniform_(-model.head.in_features ** -0.5, model.head.in_features ** -0.5, generator=g)
    return model


def features(encoder, tokenizer, texts: list[str], max_len: int, batch: int = 64) -> tuple[torch.Tensor, ...]:
    """A frozen encoder's h_L[CLS] and mean-pooled h_L of each sentence (N, C) each."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    C = encoder.config.n_embd
    cls, mean = torch.empty(len(texts), C), torch.empty(len(texts), C)
    with torch.inference_mode():
        for s in range(0, len(order), batch):
            members = order[s: s + batch]
            idx, mask = encode_batch(tokenizer, [texts[i] for i in members], max_len)
            h = encoder(idx, attention_mask=mask)[0]                           # (B, T, C)
            m = mask.unsqueeze(-1).float()
            cls[members], mean[members] = h[:, 0], (h * m).sum(1) / m.sum(1)
    return cls, mean


def train_head(head: torch.nn.Linear, x: torch.Tensor, gold: torch.Tensor, steps: int, lr: float, wd: float,
               progress=lambda i, n: None) -> None:
    """A linear probe: the head alone, full batch, on fixed features."""
    opt = _optimizer(head.parameters(), lr, wd)
    for step in range(steps):
        loss = F.cross_entropy(head(x), gold)
        opt.zero_grad()
        loss.backward()
        opt.step()
        progress(step + 1, steps)


def _lora(model: TransferClassifier, cfg, texts, gold, g, progress) -> None:
    _minibatches(model, cfg, gold, g, progress,
                 lambda batch: model(*encode_batch(model.tokenizer, [texts[i] for i in batch], cfg.max_len)))


def _minibatches(model: TransferClassifier, cfg, gold, g, progress, logits) -> None:
    """AdamW on the model's trainable parameters: each step a minibatch of the examples drawn from `g`, the
    cross-entropy of `logits(batch)` (their logits), the gradient clipped at norm 1. Leaves the model in eval mode."""
    steps, lr, bs = _settings(cfg, model.config.method)
    model.train()
    opt = _optimizer(model.parameters(), lr, cfg.weight_decay)
    for step in range(steps):
        batch = torch.randperm(len(gold), generator=g)[:bs].tolist()
        loss = F.cross_entropy(logits(batch), gold[batch])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        progress(step + 1, steps)
    model.eval()


def _settings(cfg: ClassifyTrainConfig, method: str) -> tuple[int, float, int]:
    steps, lr, bs = DEFAULTS[method]
    return cfg.steps or steps, cfg.lr or lr, bs if cfg.batch_size < 0 else cfg.batch_size


def run(method: str, cfg: ClassifyTrainConfig, seed: int = 0, data: dict | None = None,
        progress=lambda i, n: None) -> dict:
    """Train one classifier and measure it on the whole held-out split: {model, tokenizer, config, held_out, ...}.
    `data` (load_examples' answer) is read from cfg.data when None; `progress(i, n)` after each step."""
    started = time.perf_counter()
    data = data or load_examples(cfg.data)
    classes = sorted({e["label"] for e in data["train"]}, key=[e["label"] for e in data["train"]].index)
    train = draw(data["train"], cfg.n_train, seed)
    g = torch.Generator().manual_seed(seed)
    config = ClassifierConfig(method=method, labels=",".join(classes),
                              pooling="mean" if method.endswith("probe-mean") else "cls")
    gold = torch.tensor([classes.index(e["label"]) for e in train])
    held_gold = torch.tensor([classes.index(e["label"]) for e in data["held_out"]])
    held_texts = [e["text"] for e in data["held_out"]]
    texts = [e["text"] for e in train]
    if method in RECURRENT:
        model, tok = _recurrent(config, cfg, train, gold, g, progress)
        with torch.inference_mode():
            held = evaluate(recurrent_logits(model, [tok.encode(t).ids for t in held_texts]), held_gold)
    else:
        model, tok = _transfer(config, cfg, texts, gold, g, progress)
        with torch.inference_mode():
            held = evaluate(transfer_logits(model, held_texts, cfg.max_len), held_gold)
    steps, lr, bs = _settings(cfg, method)
    return {"model": model, "tokenizer": tok, "config": config, "held_out": held, "n_train": len(train),
            "steps": steps, "lr": lr, "batch_size": bs, "seconds": round(time.perf_counter() - started, 1)}


def _transfer(config, cfg, texts, gold, g, progress):
    model = build_transfer(config, generator=g)       # sets config.base_sha256: the base it starts from
    if config.way == "lora":
        _lora(model, cfg, texts, gold, g, progress)
    elif config.way == "finetune":
        _finetune(model, cfg, texts, gold, g, progress)
    else:
        cls, mean = features(model.bert, model.tokenizer, texts, cfg.max_len)
        steps, lr, _ = _settings(cfg, config.method)
        train_head(model.head, cls if config.pooling == "cls" else mean, gold, steps, lr, cfg.weight_decay, progress)
    return model.eval(), model.tokenizer


def _finetune(model: TransferClassifier, cfg, texts, gold, g, progress) -> None:
    """The top blocks and the head on h_L[CLS], in minibatches, from each sentence's state below them (computed once:
    the frozen blocks give the same numbers at every step), then rounded to the stored form (as_stored)."""
    assert model.bert.config.dropout == 0.0, "the states below the top blocks are computed once: no dropout"
    states = states_below(model, texts, cfg.max_len)
    _minibatches(model, cfg, gold, g, progress, lambda batch: logits_above(model, [states[i] for i in batch]))
    as_stored(model)


def states_below(model: TransferClassifier, texts: list[str], max_len: int) -> list[torch.Tensor]:
    """Each sentence's state entering the top `config.top` blocks, (T_i, C) without padding."""
    below = model.bert.blocks[: len(model.bert.blocks) - model.config.top]
    states = []
    with torch.no_grad():
        for i in range(0, len(texts), 64):
            idx, mask = encode_batch(model.tokenizer, texts[i: i + 64], max_len)
            x = model.bert.embeddings(idx, torch.zeros_like(idx))
            for block in below:
                x, _ = block(x, mask.bool())
            states += [x[j, : int(mask[j].sum())].clone() for j in range(len(x))]
    return states


def logits_above(model: TransferClassifier, states: list[torch.Tensor]) -> torch.Tensor:
    """The head on h_L[CLS] from states_below's states: the top blocks over the batch padded with zeros (a padded
    position is masked as a key, so it never reaches a real token)."""
    x = torch.nn.utils.rnn.pad_sequence(states, batch_first=True)                     # (B, T, C)
    mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(h), dtype=torch.bool) for h in states], batch_first=True)
    for block in model.bert.blocks[len(model.bert.blocks) - model.config.top:]:
        x, _ = block(x, mask)
    return model.head(x[:, 0])


# ---------------------------------------------------------------------------------------------
# the trainer protocol (train.KINDS): configs, train_kind, RESUMES


def configs(kind: str) -> tuple:
    return (ClassifierConfig, ClassifyTrainConfig)


PROTOCOL = ("accuracy and mean cross-entropy over the whole held-out split of assets/classify (1,000 sentences, "
            "200 per class), which no run trains on or selects by; one run, its seed as given")


def train_kind(cfgs, run) -> dict:
    """`python -m playground.train classifier`: the protocol's entry (`run`: train.py's run options)."""
    return _train_kind(cfgs, run)


def _train_kind(cfgs, run_options) -> dict:
    config, cfg = cfgs
    from tqdm import tqdm

    bar = tqdm(desc=f"classifier {config.method}", unit="step")

    def progress(i, n):
        bar.total = n
        bar.update(i - bar.n)

    data_file = Path(cfg.data or DATA)
    result = run(config.method, cfg, run_options.seed, progress=progress)
    bar.close()
    model = result["model"]
    name = run_options.name or f"classify-{config.method}"
    n_params = sum(p.numel() for p in model.parameters())
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)   # what training changed
    card = {"kind": "classifier", "model": _describe(config), "corpus": checkpoints.corpus_record([data_file]),
            "data": f"assets/classify ({result['n_train']} training sentences used; tools/classify_data.py)",
            "n_params": n_params, "trainable_params": trained, "steps": result["steps"],
            "examples_seen": result["steps"] * (result["batch_size"] or result["n_train"]),
            "held_out": {"protocol": PROTOCOL, "seed": run_options.seed, **result["held_out"]},
            "train_config": {**asdict(cfg), **{k: result[k] for k in ("n_train", "steps", "lr", "batch_size")}},
            "seed": run_options.seed, "command": run_options.command,
            "device": "cpu", "wall_time_s": result["seconds"]}
    if config.way == "finetune":
        card["storage"] = (f"the top {config.top} block(s)' matrices as int8, one fp32 scale per output row; their "
                           "biases and LayerNorms and the head in fp32; the held-out figures are measured on these "
                           "weights; the frozen blocks come from the base")
    tokenizer = result["tokenizer"] if config.method in RECURRENT else None  # a base's comes with the base
    checkpoints.save(run_options.out / name, kind="classifier", config=result["config"], card=card, model=model,
                     tokenizer=tokenizer)
    return {"name": name, **result["held_out"], "seconds": result["seconds"]}


def _describe(config: ClassifierConfig) -> str:
    if config.method in RECURRENT:
        return {"lstm": "an LSTM read many-to-one (h_T -> linear), from scratch",
                "bilstm": "a bidirectional LSTM ([h_T fwd; h_1 bwd] -> linear), from scratch"}[config.method]
    base = BASES[config.base]
    return {"probe-cls": f"{base} frozen, a linear probe on h_L[CLS]",
            "probe-mean": f"{base} frozen, a linear probe on the mean of h_L",
            "lora": f"{base} + LoRA (r={config.rank}, W^Q and W^V) and a linear head on h_L[CLS]",
            "finetune": f"{base} with its top {config.top} block(s) fine-tuned in full (stored as int8 per row) and a "
                        "linear head on h_L[CLS]"}[config.way]
