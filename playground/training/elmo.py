"""Training ELMo's biLM (`python -m playground.train elmo --corpus ...`): a word vocabulary, the stream of word ids,
the two directions' losses through the one loop, and the held-out perplexity of each direction.

Peters et al. 2018 trained their biLM on the 1B Word Benchmark (sentences, a character CNN, sampled softmax, ten
epochs on GPUs). Here: a word-level vocabulary of the corpus's ~10,000 most frequent words (word2vec's tokenizer:
lowercased letter runs), the corpus read as one stream of words (line breaks are not tokens), random windows of
`block_size` words as every LM here trains (training/data.get_batch), the full softmax, and a few CPU minutes.
Unlike word2vec, out-of-vocabulary words stay in the stream as [UNK] (id 0): a language model must predict them.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Iterable

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from playground import checkpoints
from playground.nets.elmo import ELMo, ELMoConfig
from playground.training import loop
from playground.training.data import TextData, get_batch
from playground.training.lm import LMTrainConfig, estimate_loss
from playground.training.word2vec import read_lines, train_vocabulary


@dataclass
class ELMoTrainConfig(LMTrainConfig):
    """The vocabulary and the optimisation; LMTrainConfig's fields with the defaults of the shipped model."""

    max_vocab: int = 10_000         # most frequent words kept ([UNK] comes on top); with n_embd, sets the size
    min_count: int = 3              # rarer words are [UNK] even when the vocabulary has room
    val_fraction: float = 0.1       # the last 10% of the word stream is held out (unseen text, not shuffled lines)
    max_iters: int = 20_000         # an upper bound: the shipped run stops on max_seconds first
    batch_size: int = 32            # windows per step
    block_size: int = 64            # words per window (BPTT length); the held-out windows have the same length
    learning_rate: float = 2e-3     # Adam(W) with the LSTM LMs' peak rate
    min_lr: float = 2e-4
    warmup_iters: int = 100
    lr_decay_iters: int = 0         # 0: max_iters; the cosine follows the clock when max_seconds is set
    weight_decay: float = 0.0       # the embedding is also the softmax: decay would pull rare words' rows to 0
    eval_interval: int = 100        # steps between estimates (and checkpoint writes)
    eval_iters: int = 10            # windows x batch of each split per estimate (the full softmax is the cost)
    threads: int = 1                # torch.set_num_threads: the CPU is shared, one core is ours
    dtype: str = "float32"          # no native bfloat16 on the machines this was trained on

    def __post_init__(self):
        super().__post_init__()
        assert self.max_vocab >= 1 and self.min_count >= 1, "max_vocab and min_count must be positive"
        assert 0 < self.val_fraction < 1, f"val_fraction={self.val_fraction} must lie in (0, 1)"


def encode_words(tok: Tokenizer, lines: Iterable[str]) -> torch.Tensor:
    """The corpus as one stream of word ids (N,), out-of-vocabulary words kept as [UNK] (id 0). (word2vec's
    encode_corpus drops them, as the original word2vec does; a language model must predict them.)"""
    encodings = tok.encode_batch(list(lines), add_special_tokens=False)
    return torch.tensor([i for e in encodings for i in e.ids], dtype=torch.long)


def word_data(paths, cfg: ELMoTrainConfig) -> TextData:
    """Vocabulary (trained on the whole corpus, as word2vec's), the word stream, its contiguous split."""
    tok = train_vocabulary(read_lines(paths), cfg.max_vocab, cfg.min_count)
    train, val = split_words(encode_words(tok, read_lines(paths)), cfg.val_fraction)
    return TextData(tokenizer=tok, train=train, val=val, corpus=checkpoints.corpus_record(paths))


def split_words(ids: torch.Tensor, val_fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The contiguous split: the first (1 - val_fraction) of the word stream trains, the rest is held out."""
    n_train = int(len(ids) * (1 - val_fraction))
    return ids[:n_train], ids[n_train:]


HELD_OUT_PROTOCOL = (
    "the whole held-out split (the last 10% of the word stream) in consecutive windows of block_size + 1 words "
    "w_0..w_T, each starting on the previous window's last word and read from its own start (no state carried "
    "across windows), the last window shorter where the split ends; the forward LM reads w_0..w_{T-1} and "
    "predicts w_1..w_T, the backward LM reads w_T..w_1 and predicts w_{T-1}..w_0, so each direction scores every "
    "held-out word once bar one (the forward LM the first, the backward LM the last); perplexity = exp(mean "
    "negative log-likelihood in nats) per direction, and of their mean (the training loss)")


def held_out_windows(n_words: int, block_size: int) -> list[tuple[int, int]]:
    """(start, T) of each held-out window: words start .. start + T, T = block_size except in the last window,
    which takes what is left; together they score words 1 .. n_words - 1 forward and 0 .. n_words - 2 backward."""
    assert n_words >= 2, f"{n_words} held-out words are too few: a window needs two"
    return [(i, min(block_size, n_words - 1 - i)) for i in range(0, n_words - 1, block_size)]


def held_out(model: ELMo, ids: torch.Tensor, block_size: int, windows_per_forward: int = 32) -> dict:
    """The held-out perplexity of each direction and of their mean over the whole split: HELD_OUT_PROTOCOL."""
    windows = held_out_windows(len(ids), block_size)
    full = [i for i, T in windows if T == block_size]                      # the equal windows, batched
    batches = [torch.tensor(full[i:i + windows_per_forward]) for i in range(0, len(full), windows_per_forward)]
    batches += [torch.tensor([i]) for i, T in windows if T < block_size]    # the short last window on its own
    was_training, (nll_f, nll_b, tokens) = model.training, (0.0, 0.0, 0)
    model.eval()
    with torch.inference_mode():
        for starts in batches:
            T = min(block_size, len(ids) - 1 - int(starts[0]))
            at = starts[:, None] + torch.arange(T + 1)                      # (n, T + 1): w_0 .. w_T
            xb, yb = ids[at[:, :-1]], ids[at[:, 1:]]                        # w_0..w_{T-1}, w_1..w_T
            (logits_f, logits_b), _ = model(xb, yb)
            nll_f += F.cross_entropy(logits_f.flatten(0, 1), yb.flatten(), reduction="sum").item()
            nll_b += F.cross_entropy(logits_b.flatten(0, 1), xb.flatten(), reduction="sum").item()
            tokens += xb.numel()
    model.train(was_training)
    f, b = nll_f / tokens, nll_b / tokens
    return {"loss_forward": round(f, 4), "loss_backward": round(b, 4), "loss_mean": round((f + b) / 2, 4),
            "perplexity_forward": round(math.exp(f), 2), "perplexity_backward": round(math.exp(b), 2),
            "perplexity_mean": round(math.exp((f + b) / 2), 2), "windows": len(windows), "block_size": block_size,
            "words": len(ids), "tokens_per_direction": tokens, "unk_share": round(float((ids == 0).float().mean()), 4),
            "protocol": HELD_OUT_PROTOCOL}


def held_out_of_checkpoint(ckpt, paths) -> dict:
    """held_out() recomputed for a saved ELMo (tools/held_out.py): its own vocabulary over the corpus its card
    names, the same split and block_size, its stored (fp16) weights."""
    train_config = ckpt.card["train_config"]
    _, val = split_words(encode_words(ckpt.tokenizer, read_lines(paths)), train_config["val_fraction"])
    return held_out(ckpt.model, val, train_config["block_size"])


def fp16_copy(model: ELMo) -> ELMo:
    """The weights in fp16 for the checkpoint (half the bytes); `checkpoints.load` builds a float32 model and
    load_state_dict converts back."""
    half = ELMo(model.config)
    half.load_state_dict(model.state_dict())
    return half.half()


def as_loaded(stored: ELMo) -> ELMo:
    """The fp16 copy back in float32, as `checkpoints.load` gives it: the model the card's figures describe."""
    model = ELMo(stored.config)
    model.load_state_dict(stored.state_dict())
    return model


RESUMES = True   # fit() keeps resume state beside the checkpoint


def configs(kind: str) -> tuple:
    return ELMoConfig, ELMoTrainConfig   # the net's keys and the trainer's


def train_kind(configs: tuple[ELMoConfig, ELMoTrainConfig], run) -> dict:
    """`python -m playground.train elmo --corpus ...`: vocabulary, word stream, the biLM trained through
    loop.fit; writes `elmo-<first corpus>/` (or --name) at every estimate, with the whole held-out split's
    perplexities in the final card. The weights are stored in fp16."""
    model_config, cfg = configs
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    dtype, notice = loop.matmul_dtype(cfg.dtype, run.device)
    if notice:
        print(notice, file=sys.stderr)
    data = word_data(run.corpus, cfg)
    model_config = dataclasses.replace(model_config, vocab_size=data.vocab_size)   # from the data, never typed in
    model = ELMo(model_config)
    generator = torch.Generator().manual_seed(run.seed)
    model.reset_parameters(generator)       # the initial weights come from the run's own generator
    model = model.to(run.device)
    optimizer = loop.make_optimizer(model, cfg, run.device)
    state, losses, results = loop.TrainState(), {}, {}
    name = run.name or f"elmo-{run.corpus[0].stem}"

    def step(it: int):
        x, y = get_batch(data.train, cfg.block_size, cfg.batch_size, generator, run.device)
        return model(x, y)[1]                                   # (NLL_fwd + NLL_bwd) / 2

    def evaluate(it: int, _losses: list, _last: bool) -> dict:
        losses.update(estimate_loss(model, data, cfg, run.device, run.seed + 1))
        return {"train": round(losses["train"], 4), "val": round(losses["val"], 4)}

    def save(it: int, final: bool) -> None:   # (`final` is fit's flag: the run stops here)
        card = _card(model, data, cfg, run, it, state, losses, dtype)
        stored = fp16_copy(model)
        if final:   # the estimates read eval_iters batches; the card reports the whole held-out split too, for
            # the weights as stored (fp16, computed in float32 as checkpoints.load gives them back)
            card["held_out"] = results["held_out"] = held_out(as_loaded(stored).to(run.device),
                                                              data.val.to(run.device), cfg.block_size)
        checkpoints.save(run.out / name, kind="elmo", config=model.config, card=card, model=stored,
                         tokenizer=data.tokenizer)

    model.train()
    settings = loop.Loop(cfg.max_iters, cfg.eval_interval, cfg.grad_clip, cfg.max_seconds,
                         bf16=dtype == "bfloat16", desc=name)
    loop.fit(model, optimizer, step, settings, evaluate=evaluate, save=save, lr=_schedule(cfg),
             state=state, resume_dir=run.out / f".{name}.resume", resume=run.resume, rngs=[generator],
             device=run.device)
    return {"name": name, "steps": state.it, "train_loss": losses["train"], "val_loss": losses["val"],
            "seconds": round(state.elapsed, 1), "held_out": results.get("held_out")}


def _schedule(cfg: ELMoTrainConfig):
    """Warmup then cosine decay over max_iters, or over max_seconds when a time budget is set (whichever is
    further along), so a run cut by the clock still ends at min_lr."""
    def lr(it: int, seconds: float) -> float:
        if cfg.max_seconds <= 0:
            return loop.learning_rate(it, cfg)
        as_if = max(it, int(cfg.max_iters * seconds / cfg.max_seconds)) if it >= cfg.warmup_iters else it
        return loop.learning_rate(as_if, cfg)
    return lr


def _card(model: ELMo, data: TextData, cfg: ELMoTrainConfig, run, it: int, state, losses: dict, dtype: str) -> dict:
    return {
        "kind": "elmo", "corpus": data.corpus, "steps": it, "tokens_seen": it * cfg.batch_size * cfg.block_size,
        "words": {"train": len(data.train), "held_out": len(data.val)}, "vocab_size": data.vocab_size,
        "wall_time_s": round(state.elapsed, 1), "device": run.device, "matmul_dtype": dtype,
        "n_params": model.num_params(), "storage": "float16 (trained in float32; loaded back into float32)",
        "train_loss": round(losses["train"], 4), "val_loss": round(losses["val"], 4),
        "loss_note": "mean of the forward and backward LMs' next/previous-word NLL in nats, estimated on "
                     f"{cfg.eval_iters} fixed batches of each split",
        "mix": {"s": [0.0] * (model.config.n_layer + 1), "gamma": 1.0,
                "note": "the app's default ELMo mix: s = 0, γ = 1, the plain average of the L+1 layers (no task "
                        "to fit them on here)"},
        "train_config": dataclasses.asdict(cfg), "history": state.history, "seed": run.seed,
        "command": run.command,
    }
