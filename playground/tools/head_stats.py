"""`python -m playground.tools.head_stats [--model ID ...] [--windows N] [--tokens T] [--seed S] [--out DIR]`: every
attention head's six statistics (entropy, mean distance, previous-token, first-token, duplicate-token, induction)
over windows of the shipped corpus sample, written to assets/head_stats/<model id>.json for the Attention tab's
head finder.

The protocol is analysis/head_finder.py's (`corpus_stats`): by default 64 windows of 128 tokens (SmolLM2: 32), drawn
with seed 0 from assets/corpus_sample.txt. Each file records the corpus's sha256, the protocol (the windows' starts
included), what each model saw of that text in training, and the exact command; tests/test_head_stats.py checks that
the shipped numbers are what this command computes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from playground.analysis import attention as att
from playground.analysis import head_finder as hf
from playground.analysis import models


def build(model_id: str, windows: int | None = None, tokens: int | None = None, seed: int = hf.SEED,
          quiet: bool = False) -> dict:
    """The statistics file's content for one model of the registry (its id or alias)."""
    m = att.load(model_id)
    default_windows, default_tokens = hf.PROTOCOL.get(m.key, hf.DEFAULT_PROTOCOL)
    windows, tokens = windows or default_windows, tokens or default_tokens
    text = hf.CORPUS.read_text(encoding="utf-8")
    started = time.perf_counter()

    def progress(i: int, n: int) -> None:
        if not quiet:
            print(f"\r{m.key}: window {i}/{n}", end="", file=sys.stderr, flush=True)

    record = hf.corpus_stats(m, text, windows, tokens, seed, progress)
    if not quiet:
        print(file=sys.stderr)
    command = (f"python -m playground.tools.head_stats --model {m.key} --windows {windows} --tokens {tokens} "
               f"--seed {seed}")
    return {**record, "corpus": hf.corpus_record(), "command": command,
            "seconds": round(time.perf_counter() - started, 1), "torch": torch.__version__}


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(prog="python -m playground.tools.head_stats", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", nargs="*", help="model ids (default: every model the Attention tab shows)")
    parser.add_argument("--windows", type=int, help="windows of the corpus sample (default: 64; SmolLM2 32)")
    parser.add_argument("--tokens", type=int, help="tokens per window (default: 128)")
    parser.add_argument("--seed", type=int, default=hf.SEED)
    parser.add_argument("--out", default=str(hf.STATS_DIR), help="folder of the files (default: assets/head_stats)")
    args = parser.parse_args(argv)
    written = []
    for key in args.model or models.ids("bert", "gpt", "llama"):
        record = build(key, args.windows, args.tokens, args.seed)
        path = Path(args.out) / f"{record['model']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"{path}: {path.stat().st_size / 1e3:.0f} kB in {record['seconds']} s")
        written.append(str(path))
    return written


if __name__ == "__main__":
    main()
