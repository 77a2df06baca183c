"""Induction heads (Olsson et al. 2022): a random token sequence repeated twice, and what the model does with it.

Random tokens cannot be predicted the first time: the loss on the first copy stays near ln(vocabulary). The second
time round a model with induction heads predicts each token from the earlier occurrence of the one before it ("A B
... A → B"), and its loss on the second copy falls. The heads that do it attend from each token of the second copy
to the token *after* its earlier occurrence: their induction score (the mean of that weight over the second copy) is
near 1. They are fed by previous-token heads in an earlier layer, which copy each token's predecessor into it; the
previous-token score is the mean weight on the token just before, over every position but the first.

The sequence: `n` distinct tokens drawn with the caller's seed (a torch.Generator of its own; distinct, so every
token of the second copy has exactly one earlier occurrence), from the model's ordinary tokens (no control token),
then the same `n` again. SmolLM2 reads the document separator `<|endoftext|>` first, as it began every document
in training (TransformerLens prepends a BOS token the same way); our character GPT has no such token.

The model runs through `run`, one call idx (1, T) -> (logits (1, T, V), internals): by default its own forward with
`return_internals`. An experiment that changes the model for one call (a head ablated) passes its own `run` and
gets the same analysis, the second copy's loss included.

`ablation` is the experiment that closes the argument: knock out the k heads with the highest induction score (their
output zeroed where W^O reads it, as interventions.ablate does for one head) and the second copy's loss comes back
up. Its sanity check is the same number of other heads, drawn with the seed from the rest: if knocking out any k
heads raised the loss as much, the induction heads would not be what the model copies with.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from playground.analysis import interventions as iv

N_MIN, N_MAX = 4, 100          # tokens per copy: a few, up to 100 (2 x 100 + 1 positions)
ABLATE_MAX = 20                # induction heads knocked out at most (and as many others, for the sanity check)
DEFAULT_N, DEFAULT_SEED = 40, 0
DOCUMENT_START = {"llama": "<|endoftext|>"}  # read first, as in training; the GPT's characters have none

Run = Callable[[torch.Tensor], tuple[torch.Tensor, dict]]


class InductionError(ValueError):
    """A model the view cannot run (no causal LM): the message says which to choose."""


def ordinary_ids(tokenizer) -> list[int]:
    """The ids the random sequence draws from: every token but the tokenizer's special (control) ones."""
    pool = list(range(tokenizer.get_vocab_size()))
    special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special and i < len(pool)}
    for i in sorted(special, reverse=True):      # a few deletions, not a 49,152-step Python loop (40 ms a call)
        del pool[i]
    return pool


def sequence(tokenizer, family: str, n: int, seed: int) -> tuple[list[int], int]:
    """The prefix (the document start, or nothing) and n distinct random tokens, twice: (ids, prefix length)."""
    pool = ordinary_ids(tokenizer)
    g = torch.Generator().manual_seed(seed)
    draw = [pool[i] for i in torch.randperm(len(pool), generator=g)[:n].tolist()]
    start = DOCUMENT_START.get(family)
    prefix = [tokenizer.token_to_id(start)] if start and tokenizer.token_to_id(start) is not None else []
    return prefix + draw + draw, len(prefix)


def token_losses(logits: torch.Tensor, ids: list[int]) -> np.ndarray:
    """−log p(t_i | t_<i) for i = 1 .. T−1 (the first token has no prediction): logits (1, T, V)."""
    target = torch.tensor(ids[1:], dtype=torch.long)
    return F.cross_entropy(logits[0, :-1].float(), target, reduction="none").numpy().astype(np.float64)


def scores(A: np.ndarray | tuple[np.ndarray, ...], p: int, n: int) -> dict[str, np.ndarray]:
    """Per head (L, H), from attention A (L, H, T, T) on prefix (p tokens) + r + r (n tokens each):
    `induction`, the mean over the second copy's queries q = p + n + t of A[q, p + t + 1] (the token after the
    earlier occurrence); `duplicate`, of A[q, p + t] (the earlier occurrence itself); `previous`, the mean over
    the queries i ≥ 1 of A[i, i − 1]."""
    W = np.stack(A).astype(np.float64)                                  # (L, H, T, T)
    T = W.shape[-1]
    t = np.arange(n)
    queries = p + n + t                                                 # the second copy
    return {"induction": W[..., queries, p + t + 1].mean(-1),
            "duplicate": W[..., queries, p + t].mean(-1),
            "previous": W[..., np.arange(1, T), np.arange(T - 1)].mean(-1)}


def default_run(model: torch.nn.Module) -> Run:
    """The model's own forward with `return_internals`: (logits, internals)."""
    def run(idx: torch.Tensor):
        logits, _, internals = model(idx, return_internals=True)
        return logits, internals
    return run


def induction(model: torch.nn.Module, tokenizer, family: str, n: int = DEFAULT_N, seed: int = DEFAULT_SEED,
              run: Run | None = None) -> dict:
    """The repeated random sequence through a causal LM (`run`, or its own forward): each token's loss, each copy's
    mean loss over its tokens after the first (the ones an induction head can predict in the second copy), and every
    head's induction, duplicate-token and previous-token score. Plain data (numpy arrays and numbers)."""
    if family not in ("gpt", "llama"):
        raise InductionError("Induction needs a causal language model (our GPT or SmolLM2): it measures the loss on "
                             "the repeated copy, which a BERT encoder does not predict.")
    ids, p = sequence(tokenizer, family, n, seed)
    with torch.inference_mode():
        logits, internals = (run or default_run(model))(torch.tensor([ids], dtype=torch.long))
    A = tuple(layer["attn"][0].float().numpy() for layer in internals["layers"])   # L x (H, T, T)
    losses = token_losses(logits, ids)                                  # losses[i - 1] is token i's
    first, second = copy_losses(losses, p, n)                           # tokens p+1 .. p+n-1, p+n+1 .. p+2n-1
    return {"ids": ids, "prefix": p, "n": n, "seed": seed, "losses": losses,
            "first_copy_loss": first, "second_copy_loss": second,
            "chance_loss": float(np.log(len(ordinary_ids(tokenizer)))), **scores(A, p, n)}


def copy_losses(losses: np.ndarray, p: int, n: int) -> tuple[float, float]:
    """Each copy's mean loss over its tokens after its first (the ones the first copy lets a model predict)."""
    return float(losses[p: p + n - 1].mean()), float(losses[p + n: p + 2 * n - 1].mean())


def ablation(model: torch.nn.Module, r: dict, k: int, seed: int) -> dict:
    """The sequence of `r` (an `induction` result) run again three times in one batch: as it is, with the k heads of
    highest induction score knocked out, and with k other heads drawn with `seed` from the rest knocked out. Each
    row's per-token losses and its copies' mean losses; the heads, as (layer, head, induction score)."""
    score = np.asarray(r["induction"])
    n_heads = score.size
    k = max(0, min(int(k), ABLATE_MAX, n_heads // 2))
    ranked = np.argsort(-score, axis=None, kind="stable")
    top = ranked[:k]
    rest = ranked[k:]
    control = rest[torch.randperm(len(rest), generator=torch.Generator().manual_seed(seed))[:k].numpy()]
    H = score.shape[1]
    edits = [iv.Edit(int(i) // H, "z", torch.tensor([row]), torch.zeros(()), head=int(i) % H)
             for row, chosen in ((1, top), (2, control)) for i in chosen]
    ids = torch.tensor([r["ids"]], dtype=torch.long).expand(3, -1)
    with torch.inference_mode(), iv.hooked(model, iv.edit_hooks(edits)):
        logits = model(ids)[0]
    rows = {}
    for row, name in enumerate(("none", "induction_heads", "control_heads")):
        losses = token_losses(logits[row: row + 1], r["ids"])
        first, second = copy_losses(losses, r["prefix"], r["n"])
        rows[name] = {"losses": losses, "first_copy_loss": first, "second_copy_loss": second}
    return {"k": k, "induction_heads": _named(score, top), "control_heads": _named(score, control), "runs": rows}


def _named(score: np.ndarray, flat: np.ndarray) -> list[tuple[int, int, float]]:
    """Flat head indices of a (layers, heads) table as (layer, head, score)."""
    H = score.shape[1]
    return [(int(i) // H, int(i) % H, float(score.flat[i])) for i in flat]


def limit(tokenizer, family: str, positions: int) -> int:
    """The longest copy the model can read twice (its positions, the document start) and draw distinct tokens for."""
    start = 1 if DOCUMENT_START.get(family) else 0
    return max(N_MIN, min(N_MAX, (positions - start) // 2, len(ordinary_ids(tokenizer))))


def view(m, n: int, seed: int, run: Run | None = None, ablate: int = 0) -> dict:
    """The induction view's JSON for a model of the Attention tab (analysis/attention.AttentionModel): the sequence
    as tokens, each token's loss, both copies' means, and per head (layer × head) the three scores, rounded; with
    `ablate` > 0, the `ablation` of that many top induction heads (and as many others) under "ablation"."""
    r = induction(m.model, m.tokenizer, m.family, n, seed, run)
    tokens = [m.tokenizer.decode([i], skip_special_tokens=False) for i in r["ids"]]
    data = {"model": m.key, "label": m.label.split(" (")[0], "n": n, "seed": seed, "prefix": r["prefix"],
            "ids": r["ids"], "tokens": tokens, "vocabulary": len(ordinary_ids(m.tokenizer)),
            "losses": np.round(r["losses"], 4).tolist(), "loss_of": "token i + 1 for losses[i]",
            **{k: round(r[k], 4) for k in ("first_copy_loss", "second_copy_loss", "chance_loss")},
            **{k: np.round(r[k], 4).tolist() for k in ("induction", "previous", "duplicate")}}
    if ablate > 0:
        a = ablation(m.model, r, ablate, seed)
        data["ablation"] = {
            "k": a["k"], "how": "zero (each head's output, where W^O reads it)",
            "control": f"{a['k']} other heads drawn with seed {seed} from the rest",
            **{key: [{"layer": l, "head": h, "induction": round(score, 4)} for l, h, score in a[key]]
               for key in ("induction_heads", "control_heads")},
            "runs": {name: {"losses": np.round(row["losses"], 4).tolist(),
                            **{k: round(row[k], 4) for k in ("first_copy_loss", "second_copy_loss")}}
                     for name, row in a["runs"].items()}}
    return data
