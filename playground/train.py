"""Training entry point: `python -m playground.train <kind> --corpus FILE [FILE ...] [--key=value ...]`.

Common options: --corpus (UTF-8 text files), --out (the checkpoint folder's parent, default models/),
--device (auto: cuda, then mps, then cpu), --seed, --resume. Every other `--key=value` overrides a
field of the kind's dataclass config, converted to the field's type; an unknown key is an error
that names it and lists the keys there are.

Kinds:
    tokenizers   char, word, byte-level BPE, WordPiece and Unigram tokenizers, one folder each
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shlex
import sys
import time
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from playground import checkpoints, tokenization


@dataclass
class RunOptions:
    """What every kind gets besides its own config."""

    corpus: list[Path]
    out: Path
    device: str
    seed: int
    resume: bool
    command: str   # the exact command line, recorded in card.json


def corpus_record(paths: list[Path]) -> list[dict]:
    return [{"name": p.name, "sha256": checkpoints.sha256_file(p), "bytes": p.stat().st_size} for p in paths]


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
# kind: tokenizers


def train_tokenizers(cfg: tokenization.TokenizerTrainConfig, run: RunOptions) -> dict:
    """Train each algorithm on the whole corpus and write `tok-<algorithm>/`; write the corpus sample
    that the app retrains on to assets/corpus_sample.txt."""
    from tqdm import tqdm

    corpus = corpus_record(run.corpus)
    algorithms = cfg.algorithms.split(",")
    history = {}
    bar = tqdm(algorithms, desc="tokenizers", unit="tokenizer")
    for algorithm in bar:
        bar.set_postfix_str(algorithm)
        vocab_size = {"word": cfg.word_vocab_size, "char": 100_000}.get(algorithm, cfg.vocab_size)
        min_frequency = cfg.char_min_frequency if algorithm == "char" else 0
        start = time.perf_counter()
        tok = tokenization.train(algorithm, tokenization.read_lines(run.corpus), vocab_size, min_frequency)
        seconds = time.perf_counter() - start
        card = {
            "kind": "tokenizer",
            "algorithm": algorithm,
            "vocab_size": tok.get_vocab_size(),
            "corpus": corpus,
            "wall_time_s": round(seconds, 2),
            "device": "cpu (the tokenizers library trains in Rust threads)",
            "seed": run.seed,
            "command": run.command,
        }
        checkpoints.save(run.out / f"tok-{algorithm}", kind="tokenizer",
                         config=tokenization.TokenizerConfig(algorithm=algorithm, vocab_size=vocab_size), card=card,
                         tokenizer=tok)
        history[algorithm] = {"vocab_size": tok.get_vocab_size(), "wall_time_s": round(seconds, 2)}
    sample = tokenization.corpus_sample(run.corpus, cfg.sample_bytes)
    sample_path = Path(cfg.sample_path or tokenization.SAMPLE_PATH)
    sample_path.write_text(sample, encoding="utf-8")
    history["sample"] = {"path": str(sample_path), "chars": len(sample)}
    return history


# kind -> (config dataclass, train function)
KINDS: dict[str, tuple[type, Callable[[Any, RunOptions], dict]]] = {
    "tokenizers": (tokenization.TokenizerTrainConfig, train_tokenizers),
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


def apply_overrides(config_cls: type, overrides: list[str]) -> Any:
    hints = typing.get_type_hints(config_cls)
    fields = {f.name for f in dataclasses.fields(config_cls)}
    values = {}
    for item in overrides:
        if not item.startswith("--") or "=" not in item:
            raise ValueError(f"expected --key=value, got {item!r}")
        key, value = item[2:].split("=", 1)
        key = key.replace("-", "_")
        if key not in fields:
            raise ValueError(f"unknown option --{key} for {config_cls.__name__}; options: "
                             + ", ".join(f"--{f}" for f in sorted(fields)))
        values[key] = coerce(value, hints[key], key)
    try:
        return config_cls(**values)
    except AssertionError as err:
        raise ValueError(str(err)) from None


def parse(argv: list[str]) -> tuple[str, Any, RunOptions]:
    parser = argparse.ArgumentParser(prog="python -m playground.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("--corpus", nargs="+", required=True, type=Path, help="UTF-8 text file(s)")
    parser.add_argument("--out", type=Path, default=checkpoints.MODELS_DIR, help="parent folder of the checkpoint")
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps")
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    args, rest = parser.parse_known_args(argv)
    config_cls, _ = KINDS[args.kind]
    try:
        config = apply_overrides(config_cls, rest)
    except ValueError as err:
        parser.error(str(err))
    for path in args.corpus:
        if not path.is_file():
            parser.error(f"--corpus {path}: no such file")
    run = RunOptions(corpus=args.corpus, out=args.out, device=checkpoints.resolve_device(args.device),
                     seed=args.seed, resume=args.resume,
                     command=shlex.join(["python", "-m", "playground.train", *argv]))
    return args.kind, config, run


def main(argv: list[str] | None = None) -> dict:
    kind, config, run = parse(sys.argv[1:] if argv is None else argv)
    seed_everything(run.seed)
    _, train_fn = KINDS[kind]
    print(f"{kind}: {config}  device={run.device} seed={run.seed}", file=sys.stderr)
    history = train_fn(config, run)
    print(history)
    return history


if __name__ == "__main__":
    main()
