"""Training entry point: `python -m playground.train <kind> --corpus FILE [FILE ...] [--key=value ...]`.

Common options: --corpus (UTF-8 text files), --out (the checkpoint folder's parent, default models/),
--device (auto: cuda, then mps, then cpu), --seed, --resume. Every other `--key=value` overrides a
field of the kind's dataclass config, converted to the field's type; an unknown key is an error
that names it and lists the keys there are.

Kinds:
    tokenizers   char, word, byte-level BPE, WordPiece and Unigram tokenizers, one folder each
    rnn, lstm, gru, gpt  character-level language models (playground/training/lm.py); writes <kind>-<corpus>/
    minilm-mlm   all-MiniLM-L6-v2 frozen + LoRA adapters + an MLM head (playground/training/minilm_mlm.py)
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
    classifier   a sentence classifier on the shipped assets/classify set (playground/training/classify.py):
                 --method=lstm|bilstm|probe-cls|probe-mean|lora|finetune (on MiniLM; bert-probe-cls, ...,
                 bert-finetune on our bert-english), --n_train=N labelled examples; no --corpus;
                 writes classify-<method>/ with its held-out accuracy
    (the language models' architecture config and their trainer's, LMTrainConfig, both take --key=value;
    --name sets the checkpoint folder)

--resume continues an interrupted run of the kinds that keep resume state (rnn, lstm, gru, gpt, bert,
minilm-mlm, elmo); on any other kind it is refused before anything runs.

Several GPUs (or CPU processes): the same command under torchrun, e.g.
    torchrun --nproc_per_node=2 -m playground.train gpt --corpus input.txt
runs DistributedDataParallel (nccl on CUDA, gloo on CPU); --batch_size stays the global batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import random
import shlex
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground import checkpoints


@dataclass
class RunOptions:
    """What every kind gets besides its own config."""

    corpus: list[Path]
    out: Path
    device: str
    seed: int
    resume: bool
    command: str   # the exact command line, recorded in card.json
    name: str = ""  # checkpoint folder under `out`
    kind: str = ""  # the kind on the command line (a module that trains several kinds tells them apart by it)


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
# The kinds: each is trained by a module of playground/training/, imported only when that kind is run.
# Every such module has the same three names (the trainer protocol):
#     configs(kind) -> tuple   the dataclasses --key=value fills (classes, or instances holding the kind's defaults)
#     train_kind(cfg, run) -> dict   cfg: one config, or a tuple when configs gave several; run: RunOptions
#     RESUMES: bool            whether --resume continues an interrupted run (else the CLI refuses it)

KINDS: dict[str, str] = {
    "tokenizers": "tokenizers",
    "rnn": "lm", "lstm": "lm", "gru": "lm", "gpt": "lm",   # the language models: one trainer (training/lm.py)
    "word2vec": "word2vec",
    "glove": "glove",
    "fasttext": "fasttext",
    "bert": "bert",
    "minilm-mlm": "minilm_mlm",
    "seq2seq": "seq2seq",
    "ngram": "ngram",
    "elmo": "elmo",
    "lora": "finetune", "sft": "finetune", "dpo": "finetune",   # LoRA adapters (training/finetune.py)
    "classifier": "classify",   # sentence classifiers on assets/classify (training/classify.py)
}

# the checkpoint kind (checkpoints.KINDS) a run writes, where it is not the kind's own name
WRITES = {"tokenizers": "tokenizer", "lora": "lora-adapter", "sft": "lora-adapter", "dpo": "lora-adapter"}

# kinds whose data is generated in code or shipped in assets/: they take no --corpus
GENERATED = {"seq2seq", "lora", "sft", "dpo", "classifier"}


def trainer(kind: str) -> types.ModuleType:
    """The module of playground/training/ that trains `kind`, imported now."""
    return importlib.import_module(f"playground.training.{KINDS[kind]}")


def checkpoint_kind(kind: str) -> str:
    """The kind of checkpoint (checkpoints.KINDS) a run of `kind` writes."""
    return WRITES.get(kind, kind)


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
    # allow_abbrev=False: a kind's own key must never be taken for a prefix of ours (ngram's --n=3 was --name=3)
    parser = argparse.ArgumentParser(prog="python -m playground.train", description=__doc__, allow_abbrev=False,
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
    module = trainer(args.kind)
    if args.resume and not module.RESUMES:
        parser.error(f"--resume: {args.kind} cannot resume an interrupted run (its trainer keeps no resume state); "
                     "run the command again without --resume")
    try:
        first, *more = module.configs(args.kind)
        config = apply_overrides(first, rest, *more)
    except ValueError as err:
        parser.error(str(err))
    if not args.corpus and args.kind not in GENERATED:
        parser.error(f"{args.kind} needs --corpus FILE [FILE ...]")
    for path in args.corpus:
        if not path.is_file():
            parser.error(f"--corpus {path}: no such file")
    run = RunOptions(corpus=args.corpus, out=args.out, device=checkpoints.resolve_device(args.device),
                     seed=args.seed, resume=args.resume, name=args.name, kind=args.kind,
                     command=shlex.join(["python", "-m", "playground.train", *argv]))
    return args.kind, config, run


def main(argv: list[str] | None = None) -> dict:
    kind, config, run = parse(sys.argv[1:] if argv is None else argv)
    seed_everything(run.seed)
    print(f"{kind}: {config}  device={run.device} seed={run.seed}", file=sys.stderr)
    history = trainer(kind).train_kind(config, run)
    print({k: v for k, v in history.items() if k != "history"})  # the per-evaluation history is in card.json
    return history


if __name__ == "__main__":
    main()
