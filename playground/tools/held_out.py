"""`python -m playground.tools.held_out MODEL --corpus FILE [FILE ...]`: a language model's loss over its whole
held-out split (training/lm.py's HELD_OUT_PROTOCOL), written into its card.json as `held_out`.

Training writes it at the end of every run; this adds it to a checkpoint made before that, with the corpus
its card names (checked by sha256) and the checkpoint's own tokenizer."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from playground import checkpoints
from playground.training import data, lm


def held_out(name: str, corpus: list[Path]) -> dict:
    ckpt = checkpoints.load(name)
    recorded = [c["sha256"] for c in ckpt.card.get("corpus", [])]
    given = [checkpoints.sha256_file(p) for p in corpus]
    if recorded and given != recorded:
        raise SystemExit(f"{', '.join(map(str, corpus))} is not the corpus {ckpt.name}'s card names "
                         f"({', '.join(c['name'] for c in ckpt.card['corpus'])})")
    text = data.load_text(corpus, tokenizer=ckpt.tokenizer)
    block_size = ckpt.card["train_config"]["block_size"]
    return lm.held_out_loss(ckpt.model, text.val, block_size)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m playground.tools.held_out", description=__doc__)
    parser.add_argument("model", help="a checkpoint name in models/ or a folder")
    parser.add_argument("--corpus", nargs="+", type=Path, required=True)
    args = parser.parse_args(argv)
    result = held_out(args.model, args.corpus)
    card_path = checkpoints.resolve(args.model) / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    card["held_out"] = result
    card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.model}: held-out loss {result['loss']} nats/token over {result['windows']} windows of "
          f"{result['block_size']} (the card's estimate: {card.get('val_loss')})")
    return result


if __name__ == "__main__":
    main()
