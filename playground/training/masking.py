"""BERT's token masking for masked-LM training, and masked-token accuracy.

Masking follows Devlin et al. 2019, §3.1 "Task #1: Masked LM": select 15% of the (non-special)
positions; of those, 80% become [MASK], 10% a random token and 10% stay unchanged; the model is
trained to predict the original token at the selected positions only (label -100 elsewhere, as in
`transformers`). Whole-word masking (the option of BERT's 2019 release, README "Whole Word Masking")
selects words instead of WordPiece pieces and then masks every piece of a selected word.

Used by both masked-LM trainers (training/bert.py, training/minilm_mlm.py) and by the Fill-mask tab's
analysis (analysis/fill_mask.py).

References: Devlin et al. 2019 (BERT); Google's BERT release (whole-word masking, 2019-05-31).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.nets.bert import IGNORE_INDEX

NOT_SELECTED, MASKED, RANDOM, KEPT = 0, 1, 2, 3  # values of Masking.action


@dataclass
class Masking:
    input_ids: torch.Tensor   # (B, T) ids after replacement
    labels: torch.Tensor      # (B, T) the original id where a position was selected, -100 elsewhere
    action: torch.Tensor      # (B, T) int8: 0 not selected, 1 replaced by [MASK], 2 by a random token, 3 kept


def _word_groups(word_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) word ids (-1 for specials) -> (B, T) index of the word each position belongs to, counted
    from 0 in each row. A word is a run of neighbouring positions with the same id, so ids that restart
    in sentence B (as `tokenizers` numbers the words of each sequence of a pair) stay distinct words."""
    prev = torch.full_like(word_ids[:, :1], -1)                          # (B, 1)
    starts = (word_ids >= 0) & (word_ids != torch.cat([prev, word_ids[:, :-1]], dim=1))  # (B, T)
    return starts.long().cumsum(dim=1).clamp(min=1) - 1                  # (B, T) in [0, T)


def mask_tokens(ids: torch.Tensor, *, mask_id: int, vocab_size: int, special: torch.Tensor,
                prob: float = 0.15, replace: tuple[float, float, float] = (0.8, 0.1, 0.1),
                word_ids: torch.Tensor | None = None, random_low: int = 0,
                generator: torch.Generator | None = None) -> Masking:
    """BERT's masking of a batch of token ids (B, T).

    Each non-special position is selected independently with probability `prob` (a Bernoulli draw, as
    `transformers`' DataCollatorForLanguageModeling; the original BERT script draws exactly
    round(prob * n) positions per sequence, which has the same mean). `special` (B, T) bool is True
    for [CLS] / [SEP] / [PAD], which are never selected. A selected position becomes [MASK] with
    probability replace[0], a token drawn uniformly from [random_low, vocab_size) with replace[1]
    (random_low skips the special-token ids), and keeps its token with replace[2]: the model cannot
    tell which inputs are real, so it has to predict every selected token from its context.

    With `word_ids` (B, T), -1 for specials, whole words are selected with probability `prob` and every
    piece of a selected word is selected; each piece then draws its own replacement, as in BERT's
    create_pretraining_data.py.
    """
    assert ids.dim() == 2, f"ids must be (B, T), not {tuple(ids.shape)}"
    assert special.shape == ids.shape, f"special {tuple(special.shape)} must match ids {tuple(ids.shape)}"
    assert 0.0 <= prob <= 1.0, f"prob must be in [0, 1], not {prob}"
    assert len(replace) == 3 and min(replace) >= 0 and abs(sum(replace) - 1.0) < 1e-6, \
        f"replace must be three non-negative fractions that sum to 1, not {replace}"
    assert 0 <= random_low < vocab_size, f"random_low ({random_low}) must be in [0, vocab_size={vocab_size})"
    B, T = ids.shape
    device = ids.device
    special = special.bool()
    if word_ids is None:
        selected = torch.rand(B, T, generator=generator, device=device) < prob       # (B, T): per token
    else:
        assert word_ids.shape == ids.shape, f"word_ids {tuple(word_ids.shape)} must match ids {tuple(ids.shape)}"
        group = _word_groups(word_ids)                                                # (B, T)
        chosen = torch.rand(B, T, generator=generator, device=device) < prob          # (B, T): one draw per word
        selected = chosen.gather(1, group) & (word_ids >= 0)                          # all pieces of a word alike
    selected &= ~special

    u = torch.rand(B, T, generator=generator, device=device)                         # which replacement
    action = torch.zeros(B, T, dtype=torch.int8, device=device)
    action[selected & (u < replace[0])] = MASKED
    action[selected & (u >= replace[0]) & (u < replace[0] + replace[1])] = RANDOM
    action[selected & (u >= replace[0] + replace[1])] = KEPT

    random_ids = torch.randint(random_low, vocab_size, (B, T), generator=generator, device=device)
    input_ids = ids.clone()
    input_ids[action == MASKED] = mask_id
    input_ids[action == RANDOM] = random_ids[action == RANDOM]
    labels = torch.where(selected, ids, torch.full_like(ids, IGNORE_INDEX))          # loss only where selected
    return Masking(input_ids=input_ids, labels=labels, action=action)


def topk_accuracy(logits: torch.Tensor, labels: torch.Tensor, ks=(1, 5)) -> dict[str, float]:
    """Fraction of the positions with labels != -100 whose label is among the k highest logits, for
    each k: {"top1": ..., "top5": ..., "n": number of positions counted}. logits (..., V), labels (...).
    With no labelled position every accuracy is 0.0 (and n is 0)."""
    assert logits.shape[:-1] == labels.shape, f"logits {tuple(logits.shape)} do not match labels {tuple(labels.shape)}"
    V = logits.size(-1)
    keep = labels != IGNORE_INDEX
    flat, gold = logits[keep], labels[keep]                             # (N, V), (N,)
    out: dict[str, float] = {}
    k_max = min(max(ks), V)
    top = flat.topk(k_max, dim=-1).indices if len(gold) else None        # (N, k_max)
    for k in ks:
        if top is None:
            out[f"top{k}"] = 0.0
        else:
            hit = (top[:, :min(k, V)] == gold[:, None]).any(dim=-1)      # (N,)
            out[f"top{k}"] = hit.float().mean().item()
    out["n"] = float(len(gold))
    return out
