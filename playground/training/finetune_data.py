"""The fine-tuning runs' text (training/finetune.py): each base's tokenizer and prompt format, the data sets of
assets/finetune/ (a text, instruction-response pairs, preference triples) as token ids with their labels, and
the losses on them: the response's log-probability, DPO's loss (Rafailov et al. 2023, eq. 7), the per-token KL
to the base.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from playground import checkpoints

DATA = checkpoints.ASSETS_DIR / "finetune"
IGNORE = -100                                    # a label that adds nothing to the loss (F.cross_entropy's default)


# ---------------------------------------------------------------------------------------------
# Text in and out of each base: its tokenizer, its prompt format, where an answer ends


@dataclass
class TextFormat:
    """How one base reads and writes. A model with a chat template (SmolLM2) reads its template and ends a turn with
    its end-of-turn token (<|im_end|>); one without (our GPT, which knows only Shakespeare's characters) reads a turn
    as `Q: ...\\nA: ...`, ended by a newline."""

    tokenizer: object
    n_positions: int
    stop: int                                    # the token that ends an answer
    chat: Callable[[list[dict]], str] | None     # messages -> the chat-formatted prompt; None: the Q/A format

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def decode(self, ids: list[int], special: bool = False) -> str:
        """The text of `ids`; a chat model's control tokens (<|im_start|>, ...) only with `special` (the GPT's
        [UNK] always shows)."""
        return self.tokenizer.decode(ids, skip_special_tokens=self.chat is not None and not special)

    def prompt(self, instruction: str) -> str:
        if self.chat is not None:
            return self.chat([{"role": "user", "content": instruction}])
        return f"Q: {instruction}\nA:"

    def answer(self, response: str) -> str:
        """What follows the prompt in a training example: the response and the end of the turn."""
        if self.chat is not None:
            return response + self.tokenizer.id_to_token(self.stop)
        return f" {response}\n"


def text_format(base) -> TextFormat:
    """How `base` reads and writes: `base` is a record of the registry (analysis/models.py; nets/adapters.Base for
    the CLI): its tokenizer, config (n_positions), chat template, and card (`eos_id` with a chat template)."""
    tok = base.tokenizer
    stop = base.card["eos_id"] if base.chat is not None else tok.token_to_id("\n")
    return TextFormat(tok, base.config.n_positions, stop, base.chat)


def read_jsonl(path: Path, keys: tuple[str, ...]) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for n, row in enumerate(rows, 1):
        assert set(row) == set(keys), f"{path.name} line {n}: the keys must be {keys}, not {tuple(row)}"
    return rows


def pairs(held_out: bool = False) -> list[dict]:
    return read_jsonl(DATA / ("sft_held_out.jsonl" if held_out else "sft.jsonl"), ("instruction", "response"))


def preferences(held_out: bool = False) -> list[dict]:
    return read_jsonl(DATA / ("dpo_held_out.jsonl" if held_out else "dpo.jsonl"), ("prompt", "chosen", "rejected"))


def default_text() -> str:
    return (DATA / "lora_text.txt").read_text(encoding="utf-8")


def example(fmt: TextFormat, prompt: str, response: str) -> tuple[list[int], list[int]]:
    """One SFT (or DPO) sequence: ids = prompt + answer, labels = IGNORE on every prompt token (the loss mask)
    and the next token's id on the answer's. labels[t] is the target of position t (shifted by one)."""
    p, a = fmt.encode(fmt.prompt(prompt)), fmt.encode(fmt.answer(response))
    ids = (p + a)[:fmt.n_positions + 1]
    targets = [IGNORE] * (len(p) - 1) + a                          # position t predicts ids[t + 1]
    return ids[:-1], targets[:len(ids) - 1]


def batch(examples: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (B, T) ids and labels; padding is IGNORE, and a causal model never reads past position t."""
    T = max(len(ids) for ids, _ in examples)
    ids = torch.tensor([i + [0] * (T - len(i)) for i, _ in examples])
    labels = torch.tensor([t + [IGNORE] * (T - len(t)) for _, t in examples])
    return ids, labels


# ---------------------------------------------------------------------------------------------
# The losses


def response_logps(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log π(y|x) per sequence: the sum over the answer's tokens (labels != IGNORE) of log p(token). (B,)"""
    mask = labels != IGNORE
    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)    # (B, T)
    return (picked * mask).sum(-1)


def dpo_loss(pi_w: torch.Tensor, pi_l: torch.Tensor, ref_w: torch.Tensor, ref_l: torch.Tensor,
             beta: float) -> tuple[torch.Tensor, dict]:
    """Rafailov et al. eq. 7, mean over the batch, and its terms: the implicit rewards r = β (log π - log π_ref)
    of the chosen and the rejected answers, their margin, and how often the chosen one is ahead."""
    reward_w, reward_l = beta * (pi_w - ref_w), beta * (pi_l - ref_l)
    margin = reward_w - reward_l
    loss = -F.logsigmoid(margin).mean()
    terms = {"chosen_logp": pi_w.mean().item(), "rejected_logp": pi_l.mean().item(),
             "chosen_ref_logp": ref_w.mean().item(), "rejected_ref_logp": ref_l.mean().item(),
             "chosen_reward": reward_w.mean().item(), "rejected_reward": reward_l.mean().item(),
             "margin": margin.mean().item(), "accuracy": (margin > 0).float().mean().item()}
    return loss, terms


def token_kl(logits: torch.Tensor, ref_logits: torch.Tensor, labels: torch.Tensor) -> float:
    """KL(π || π_ref) of the next-token distributions, exact over the vocabulary, averaged over the answers'
    positions: how far the policy has moved from the reference where it is trained."""
    mask = labels != IGNORE
    logp, ref = torch.log_softmax(logits.float(), -1), torch.log_softmax(ref_logits.float(), -1)
    kl = (logp.exp() * (logp - ref)).sum(-1)                                    # (B, T)
    return float((kl * mask).sum() / mask.sum().clamp(min=1))
