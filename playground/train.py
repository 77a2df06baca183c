"""Training entry point: `python -m playground.train <kind> --corpus FILE [FILE ...] [--key=value ...]`.

Common options: --corpus (UTF-8 text files), --out (the checkpoint folder's parent, default models/),
--device (auto: cuda, then mps, then cpu), --seed, --resume. Every other `--key=value` overrides a
field of the kind's dataclass config, converted to the field's type; an unknown key is an error
that names it and lists the keys there are.

Kinds:
    tokenizers   char, word, byte-level BPE, WordPiece and Unigram tokenizers, one folder each
    bert         a WordPiece vocabulary and a small BERT pre-trained on masked-LM + next-sentence prediction
    seq2seq      an encoder-decoder (--variant=none|bahdanau|dot|general|transformer) on a task generated in
                 code (playground/training/seq2seq.py): no --corpus; writes models/seq2seq-<variant>/
    word2vec     skip-gram or CBOW with negative sampling (playground/training/word2vec.py); writes
                 word2vec-<corpus>/ (or --name) with the analogy and similarity evaluation
    glove        GloVe (playground/training/glove.py): symmetric co-occurrence counts weighted 1/d, AdaGrad on the
                 weighted least squares; writes glove-<corpus>/ (or --name) with word2vec's evaluation
    fasttext     skip-gram over character n-grams (Bojanowski et al. 2017; playground/training/fasttext.py):
                 writes fasttext-<corpus>/ (or --name) with word2vec's evaluation and an out-of-vocabulary check
    ngram        a character n-gram LM (counts up to --n, add-k or Kneser-Ney) with a held-out table of every order
    elmo         ELMo's biLM (playground/training/elmo.py): forward and backward word LSTMs, held-out perplexity of each
    lora, sft, dpo  LoRA adapters on our GPT or SmolLM2 (--base=...): trained on a text (lora; assets/finetune/
                 lora_text.txt or --corpus), instruction-response pairs (sft) or preference triples (dpo);
                 writes <method>-<base>/ with every step's record and the texts before and after
    (language models register an `LMKind`: their architecture config plus `LMTrainConfig`; both take
    --key=value, and --name sets the checkpoint folder)

Several GPUs (or CPU processes): the same command under torchrun, e.g.
    torchrun --nproc_per_node=2 -m playground.train gpt --corpus input.txt
runs DistributedDataParallel (nccl on CUDA, gloo on CPU); --batch_size stays the global batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shlex
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from playground import checkpoints
from playground.training import tokenizers
from playground.training.lm import LMKind, LMTrainConfig, train_language_model


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
# Language models: an LMKind each (playground/training/lm.py trains them all)


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


# ---------------------------------------------------------------------------------------------
# Kinds with their own trainers (playground/training/)


def _word2vec_kind() -> tuple[type, Callable[[Any, RunOptions], dict]]:
    from playground.training import word2vec

    return word2vec.Word2VecTrainConfig, word2vec.train_kind


def _glove_kind() -> tuple[type, Callable[[Any, RunOptions], dict]]:
    """glove: co-occurrence counts and weighted least squares with AdaGrad (playground/training/glove.py)."""
    from playground.training import glove

    return glove.GloVeTrainConfig, glove.train_kind
def _fasttext_kind() -> tuple[type, Callable[[Any, RunOptions], dict]]:
    """fasttext: skip-gram over character n-grams hashed into buckets (playground/training/fasttext.py)."""
    from playground.training import fasttext

    return fasttext.FastTextTrainConfig, fasttext.train_kind


def _minilm_mlm_kind() -> tuple[type, Callable[[Any, RunOptions], dict]]:
    """minilm-mlm: all-MiniLM-L6-v2 frozen + LoRA adapters + an MLM head (playground/nets/minilm_mlm.py, playground/training/minilm_mlm.py)."""
    from playground.training import minilm_mlm

    return minilm_mlm.MiniLMMLMTrainConfig, minilm_mlm.train


def _bert_kind() -> tuple[type, Callable[[Any, RunOptions], dict]]:
    """bert: a WordPiece vocabulary and a small BERT pre-trained with MLM + NSP (playground/training/bert.py)."""
    from playground.training import bert

    return bert.BertTrainConfig, bert.train_bert


def _seq2seq_kind() -> tuple[tuple[type, type], Callable[[Any, RunOptions], dict]]:
    """seq2seq: the encoder-decoders of playground/nets/seq2seq.py on the task generated in playground/training/seq2seq.py
    (no --corpus): --variant=none|bahdanau|dot|general|transformer, plus the trainer's keys."""
    from playground.nets import seq2seq
    from playground.training import seq2seq as seq2seq_training

    return (seq2seq.Seq2SeqConfig, seq2seq_training.Seq2SeqTrainConfig), seq2seq_training.train


def _ngram_kind() -> tuple[type, Callable[[Any, RunOptions], dict]]:
    """ngram: counts of 1- to n-grams of characters, add-k or interpolated Kneser-Ney (playground/nets/ngram.py)."""
    from playground.training import ngram

    return ngram.NGramTrainConfig, ngram.train


def _elmo_kind() -> tuple[tuple[type, type], Callable[[Any, RunOptions], dict]]:
    """elmo: ELMo's biLM over words (playground/nets/elmo.py, playground/training/elmo.py): the net's keys and the trainer's."""
    from playground.nets.elmo import ELMoConfig
    from playground.training import elmo

    return (ELMoConfig, elmo.ELMoTrainConfig), elmo.train_kind


def _finetune_kind(method: str) -> tuple:
    """lora | sft | dpo: LoRA adapters on our GPT or SmolLM2 (playground/training/finetune.py), --base=..."""
    from playground.training import finetune

    return finetune.RECIPES[method], finetune.train_kind


# kinds whose data is generated in code or shipped in assets/: they take no --corpus
GENERATED = {"seq2seq", "lora", "sft", "dpo"}

# kind -> (config dataclass, or a tuple of them, and a train function) for tools, or an LMKind for language models
KINDS: dict[str, tuple[type | tuple, Callable[[Any, RunOptions], dict]] | LMKind] = {
    "tokenizers": (tokenizers.TokenizerTrainConfig, tokenizers.train_tokenizers),
    "rnn": _recurrent("rnn"),
    "lstm": _recurrent("lstm"),
    "gru": _recurrent("gru"),
    "gpt": _gpt(),
    "word2vec": _word2vec_kind(),
    "glove": _glove_kind(),
    "fasttext": _fasttext_kind(),
    "bert": _bert_kind(),
    "minilm-mlm": _minilm_mlm_kind(),
    "seq2seq": _seq2seq_kind(),
    "ngram": _ngram_kind(),
    "elmo": _elmo_kind(),
    "lora": _finetune_kind("lora"),
    "sft": _finetune_kind("sft"),
    "dpo": _finetune_kind("dpo"),
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
        history = train_language_model(kind, spec, model_config, train_config, run)
        print({k: v for k, v in history.items() if k != "history"})
    else:
        history = spec[1](config, run)
        print(history)
    return history


if __name__ == "__main__":
    main()
