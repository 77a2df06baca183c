"""Interventions on a model's forward pass: read or replace an activation at a named hook point, and ablate.

The hooks themselves (`hooked`, `Edit`, `cache`) live in analysis/batched.py, with the runner that makes many
interventions the rows of one forward pass; their names are imported here, where the experiments use them.

A *subject* is a loaded model (analysis/models.py's record) with the text it reads: a causal LM (our GPT,
SmolLM2) predicts the token after the prompt; a masked LM (our BERT, MiniLM + MLM head) the token at its first
[MASK]. `ablate` knocks out one head, one layer's attention or one MLP, by zero, by its mean over a reference text,
or by its values on that other text (resample), and reports the prediction before and after; `sweep` ranks every
head by how much knocking it out moves the current prediction. Each answer carries a sanity check: the same
experiment on a copy of the model whose weights were drawn again (seeded), where an "effect" means nothing.

Rows of one batch carry different interventions (`Edit`s name their rows), so a sweep over 270 heads is one
batched forward pass whose rows join at their own layer (analysis/batched.run), not 270 separate ones. Everything
runs under `torch.inference_mode()` but the attribution of analysis/patching.py, which needs a gradient.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from playground.analysis import batched, generation, models
from playground.analysis.batched import (Edit, InterventionError, blocks, cache, edit_hooks, hook_point,  # noqa: F401
                                         hooked)
from playground.nets import bert
from playground.nets.llama import fp32_products
from playground.text import token_label

TARGETS = ("head", "attn", "mlp")        # what `ablate` knocks out: one head, a layer's attention, a layer's MLP
HOWS = ("zero", "mean", "resample")      # with what: zeros, the mean over a reference text, that text's values
SITE_OF = {"head": "z", "attn": "attn_out", "mlp": "mlp_out"}
TOP = 10                                 # tokens shown before / after, and top movers
MAX_TOKENS = 64                          # the longest text an experiment reads (the grids are layers x positions)
REINIT_SEED = 1234                       # the sanity check's weights


# ---------------------------------------------------------------------------------------------
# What a model reads and what it predicts


@dataclass
class Subject:
    """A text as one model reads it, and the position whose prediction an experiment watches."""

    m: object                     # analysis/models.Model
    ids: list[int]
    tokens: list[str]
    at: int                       # the predicting position: the last (causal) or the first [MASK] (masked)
    masked: bool                  # a masked LM (BERT, MiniLM + MLM head)
    segments: list[int] | None = None

    def batch(self, n: int = 1) -> torch.Tensor:
        return torch.tensor([self.ids] * n)

    def logits(self, model=None, n: int = 1) -> torch.Tensor:
        """The logits (n, T, V) of n copies of the text (each row may carry its own edits). Every product in fp32
        (`fp32_products`): a half-stored model (SmolLM2 in the app) would otherwise multiply a text of a few
        positions in fp16 (1e-2 off in the logits) and a longer one in fp32, so the lab's numbers would depend on the
        text's length; in fp32 they are those of the weights as stored, whatever the length or the batch."""
        model = self.m.model if model is None else model
        with fp32_products():
            if not self.masked:
                return model(self.batch(n))[0].float()
            segments = torch.tensor([self.segments] * n)
            return model(self.batch(n), segments)[0].float()

    def predict(self, model=None, n: int = 1, hooks: dict | None = None) -> torch.Tensor:
        """The logits (n, V) at the predicting position only, under `hooks`. The last block's output is cut to that
        position by one more hook, so the output layer (49,152 wide for SmolLM2) runs on one position per row,
        not on all of them; nothing after the last block mixes positions."""
        model = self.m.model if model is None else model
        last = (len(blocks(model)) - 1, "resid_post")
        cut = {last: lambda out: out[:, self.at:self.at + 1]}
        hooks = dict(hooks or {})
        if last in hooks:                      # an edit there first, then the cut
            edit = hooks.pop(last)

            def edit_then_cut(out):
                new = edit(out)
                return (out if new is None else new)[:, self.at:self.at + 1]
            cut = {last: edit_then_cut}
        with hooked(model, {**hooks, **cut}):
            return self.logits(model, n)[:, 0]


def masked_lm(m) -> bool:
    """Whether `m` reads as a BERT ([CLS] A [SEP], the prediction at its [MASK]): every masked-LM family the
    registry offers (our BERT, MiniLM + LoRA)."""
    return m.family in models.MASKED


def offered(masked: bool = True) -> list[str]:
    """The ids of the registry's models the lab runs on: the causal LMs (our GPT, SmolLM2 when installed), then, with
    `masked`, the masked LMs with an MLM head (MiniLM + LoRA, our BERT; MiniLM itself is an encoder without one)."""
    causal = models.ids("gpt", "llama")
    return causal + [name for name in models.ids(*models.MASKED) if name != models.MINILM] if masked else causal


def labels(m, ids: list[int]) -> list[str]:
    """Each token as text (a byte-level token's bytes decoded as far as they go)."""
    return [token_label(generation.decode(m.tokenizer, [i])) if not masked_lm(m)
            else m.tokenizer.id_to_token(i) for i in ids]


def read(m, text: str, notices: list[str], what: str = "the text", need_mask: bool = True) -> Subject:
    """`text` as the model reads it, cut to MAX_TOKENS (with a notice). A masked LM needs a [MASK] in it (but in a
    reference text, `need_mask` False: its predicting position is then its last)."""
    if not hasattr(m.model, "forward") or (masked_lm(m) and not hasattr(m.model, "mlm")):
        raise InterventionError(f"{m.name} has no output layer to watch (it is an encoder without an LM head)")
    if masked_lm(m):
        text = (text or "").replace("[mask]", "[MASK]").replace("<mask>", "[MASK]")
        enc = bert.encode(m.tokenizer, text, max_len=MAX_TOKENS + 2)
        if enc.n_cut:
            notices.append(f"{what} was cut to {MAX_TOKENS} tokens")
        mask = m.tokenizer.token_to_id("[MASK]")
        if mask not in enc.ids and not need_mask:
            return Subject(m, enc.ids, enc.tokens, len(enc.ids) - 1, True, enc.segments)
        if mask not in enc.ids:
            raise InterventionError(f"{what} needs a [MASK] for {m.name} to predict (e.g. 'Paris is the [MASK] of "
                                    f"France.')")
        return Subject(m, enc.ids, enc.tokens, enc.ids.index(mask), True, enc.segments)
    _, ids = generation.encode_prompt(m, text, notices)
    if len(ids) > MAX_TOKENS:
        notices.append(f"{what} was cut to its last {MAX_TOKENS} tokens")
        ids = ids[-MAX_TOKENS:]
    return Subject(m, ids, labels(m, ids), len(ids) - 1, False)


def answer_token(m, word: str, notices: list[str], prompt_text: str = "") -> int:
    """The token id of an answer `word` as it would follow the prompt (SmolLM2's words start with their space);
    a word the tokenizer splits: its first piece, said in a notice."""
    word = (word or "").strip("\n")
    if not word.strip():
        raise InterventionError("an answer is empty: type the word whose logit the experiment follows")
    if masked_lm(m):
        ids = m.tokenizer.encode(word.strip(), add_special_tokens=False).ids
    else:
        lead = " " if m.family == "llama" and not word[0].isspace() and not prompt_text[-1:].isspace() else ""
        _, ids = generation.encode_prompt(m, lead + word, [])
    if not ids:
        raise InterventionError(f"{m.name} cannot read the answer {word!r}")
    if len(ids) > 1:
        pieces = labels(m, ids)
        notices.append(f"'{word.strip()}' is {len(ids)} tokens for {m.name} ({' | '.join(pieces)}): its first, "
                       f"'{pieces[0]}', is used")
    return ids[0]


def clamp(value, low: int, high: int, name: str, notices: list[str]) -> int:
    """An integer in [low, high]; out of range (or not a number) it is clamped, with a notice."""
    try:
        v = int(value)
    except OverflowError:                    # ±inf
        v = high if value > 0 else low
    except (TypeError, ValueError):
        notices.append(f"{name} {value!r} is not a number: {low} is used")
        return low
    if not low <= v <= high:
        notices.append(f"{name} {v} is out of range {low}..{high}: {min(max(v, low), high)} is used")
    return min(max(v, low), high)


def reinitialised(model, seed: int = REINIT_SEED):
    """A copy of `model` with its weights drawn again from its own generator (the process's stays untouched):
    matrices and embeddings N(0, 0.02), norm gains 1, biases 0: the sanity check's model, with the same
    architecture and no training."""
    twin = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in twin.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g).mul_(0.02))
            else:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
    return twin.eval()


# ---------------------------------------------------------------------------------------------
# Distributions before and after


def top(m, probs: torch.Tensor, k: int = TOP) -> list[dict]:
    values, ids = probs.topk(min(k, probs.numel()))
    return [{"token": labels(m, [int(i)])[0], "id": int(i), "prob": float(v)} for v, i in zip(values, ids)]


def losses(s: Subject, logits: torch.Tensor) -> list[float | None]:
    """Per position: a causal LM's −log p of the next token (None at the last position, which has none); a masked
    LM's −log p of the token that is there (None at [MASK], whose token is unknown)."""
    logp = F.log_softmax(logits, dim=-1)
    ids = torch.tensor(s.ids)
    if not s.masked:
        return [float(-logp[t, ids[t + 1]]) for t in range(len(s.ids) - 1)] + [None]
    return [None if t == s.at else float(-logp[t, ids[t]]) for t in range(len(s.ids))]


def kl(before: torch.Tensor, after: torch.Tensor) -> float:
    """KL(softmax(before) ‖ softmax(after)) of two logit vectors, in nats."""
    p = F.softmax(before, -1)
    return float((p * (F.log_softmax(before, -1) - F.log_softmax(after, -1))).sum())


def compare(s: Subject, before: torch.Tensor, after: torch.Tensor) -> dict:
    """Before/after at the predicting position: the top tokens, the top movers, KL(before ‖ after) in nats, the
    change of the top-1 token's log-probability; and the loss at every position."""
    p, q = F.softmax(before[s.at], -1), F.softmax(after[s.at], -1)
    logp, logq = F.log_softmax(before[s.at], -1), F.log_softmax(after[s.at], -1)
    change = q - p
    movers = change.abs().topk(TOP).indices
    best = int(p.argmax())
    return {
        "before": top(s.m, p), "after": top(s.m, q),
        "movers": [{"token": labels(s.m, [int(i)])[0], "id": int(i), "before": float(p[i]), "after": float(q[i]),
                    "change": float(change[i])} for i in movers],
        "kl": kl(before[s.at], after[s.at]),
        "top1": {"token": labels(s.m, [best])[0], "id": best, "logp_before": float(logp[best]),
                 "logp_after": float(logq[best]), "change": float(logq[best] - logp[best])},
        "loss_before": losses(s, before), "loss_after": losses(s, after),
    }


# ---------------------------------------------------------------------------------------------
# Ablation


def n_heads(m) -> int:
    """The heads per layer the registry records for `m`; a message, never a head clamped to −1, when it records
    none (a model without attention heads the lab can name)."""
    if m.shape.heads < 1:
        raise InterventionError(f"{m.name} has no attention heads recorded in its registry shape: knock out a layer's "
                                "attention or MLP instead, or choose another model")
    return m.shape.heads


def _layer_head(m, layer, head, target: str, notices: list[str]) -> tuple[int, int | None]:
    layer = clamp(layer, 0, len(blocks(m.model)) - 1, "layer", notices)
    if target != "head":
        return layer, None
    return layer, clamp(head, 0, n_heads(m) - 1, "head", notices)


def _reference(m, s: Subject, how: str, reference: str, notices: list[str]) -> Subject | None:
    """The text whose activations a mean or resample ablation uses (its own text when none is given)."""
    if how == "zero":
        return None
    if not (reference or "").strip():
        notices.append(f"no reference text for the {how} ablation: the text itself is used")
        return s
    ref = read(m, reference, notices, "the reference text", need_mask=False)
    if how == "resample" and len(ref.ids) != len(s.ids):
        notices.append(f"the reference text has {len(ref.ids)} tokens and the text {len(s.ids)}: position t takes "
                       f"the reference's position t mod {len(ref.ids)}")
    return ref


def replacement(model, s: Subject, ref: Subject | None, layer: int, site: str, how: str,
                heads: torch.Tensor | None = None, act: torch.Tensor | None = None) -> torch.Tensor:
    """What an ablated activation becomes, for one row or (with `heads`, n of them) n rows: 0; the mean over the
    reference's positions; or the reference's value at each position (t mod its length). `act`: the reference's
    activation there, (1, T_ref, ...), when the caller has it already."""
    if how == "zero":
        return torch.zeros(())
    if act is None:
        _, kept = cache(model, lambda: ref.predict(model), [(layer, site)])
        act = kept[(layer, site)]
    act = act[0]                                                    # (T_ref, C) or (T_ref, nh, hs)
    value = act.mean(0) if how == "mean" else act[torch.arange(len(s.ids)) % len(ref.ids)]
    if heads is None:
        return value                                                # (C,) or (T, C); (nh, hs) or (T, nh, hs)
    if how == "mean":
        return value[heads][:, None]                                # (n, 1, hs)
    return value[:, heads].movedim(1, 0)                            # (n, T, hs)


def _checked(target: str, how: str) -> None:
    if target not in TARGETS:
        raise InterventionError(f"target is one of {', '.join(TARGETS)}, not {target!r}")
    if how not in HOWS:
        raise InterventionError(f"the ablation is one of {', '.join(HOWS)}, not {how!r}")


def _ablated(model, s: Subject, ref: Subject | None, target: str, layer: int, head: int | None, how: str):
    """The logits (T, V) before and after the ablation, on `model`."""
    site = SITE_OF[target]
    value = replacement(model, s, ref, layer, site, how)
    if head is not None and value.dim():
        value = value[..., head, :]
    with hooked(model, edit_hooks([Edit(layer, site, torch.tensor([1]), value, head=head)])):
        before, after = s.logits(model, 2)                          # row 0 as it is, row 1 ablated
    return before, after


def ablate(m, text: str, target: str = "head", layer=0, head=0, how: str = "zero", reference: str = "",
           sanity: bool = True) -> dict:
    """Knock out head `head` of layer `layer` (target "head"), the layer's whole attention ("attn") or its MLP
    ("mlp") by `how`, and compare the prediction before and after (`compare`). With `sanity`, the same on the
    re-initialised model (`reinitialised`): its KL and top-1 change, which a trained model's effect should dwarf."""
    notices: list[str] = []
    _checked(target, how)
    s = read(m, text, notices)
    layer, head = _layer_head(m, layer, head, target, notices)
    with torch.inference_mode():
        ref = _reference(m, s, how, reference, notices)
        before, after = _ablated(m.model, s, ref, target, layer, head, how)
        data = {"model": m.name, "tokens": s.tokens, "position": s.at, "target": target, "layer": layer,
                "head": head, "how": how, **compare(s, before, after), "notices": notices}
        if sanity:
            twin = reinitialised(m.model)
            b, a = _ablated(twin, s, ref, target, layer, head, how)
            check = compare(s, b, a)
            data["sanity"] = {"model": "re-initialised weights (seed %d)" % REINIT_SEED, "kl": check["kl"],
                              "top1_change": check["top1"]["change"]}
    return data


def head_effects(model, s: Subject, ref: Subject | None, how: str, n_layer: int, n_head: int,
                 progress: Callable[[float, str], None] | None = None) -> dict:
    """Every head's effect on the prediction at `s.at`: KL(before ‖ after) and the change of the top-1 token's
    log-probability, as (n_layer, n_head) lists. One batched pass (analysis/batched.run): a row per head, joining
    at its layer with the plain run's stream entering it, its head replaced there."""
    with fp32_products():
        base = batched.trace(model, s)
        heads_out = [(layer, "z") for layer in range(n_layer)]
        acts = {} if ref is None else cache(model, lambda: ref.predict(model), heads_out)[1]   # one reference run
        index = torch.arange(n_head)
        groups = [batched.Rows(layer, base.streams[layer].expand(n_head, -1, -1),
                               [Edit(layer, "z", index, replacement(model, s, ref, layer, "z", how, index,
                                                                    acts.get((layer, "z"))), head=index)])
                  for layer in range(n_layer)]
        rows = batched.run(model, s.at, groups, base, progress)                  # (n_layer * n_head, V)
    before = F.log_softmax(base.logits[0], -1)
    best = int(before.argmax())
    after = F.log_softmax(rows, -1)
    kl = (before.exp() * (before - after)).sum(-1).view(n_layer, n_head)
    change = (after[:, best] - before[best]).view(n_layer, n_head)
    return {"kl": kl.tolist(), "top1_change": change.tolist(),
            "top1": {"token": labels(s.m, [best])[0], "id": best, "logp": float(before[best])}}


def sweep(m, text: str, how: str = "zero", reference: str = "", sanity: bool = True,
          progress: Callable[[float, str], None] | None = None) -> dict:
    """"Which heads matter here?": every head knocked out in turn (by `how`), ranked by the KL divergence it causes
    at the predicting position. With `sanity`, the same sweep's largest KL on the re-initialised model."""
    notices: list[str] = []
    _checked("head", how)
    s = read(m, text, notices)
    n_layer, n_head = len(blocks(m.model)), n_heads(m)
    with torch.inference_mode():
        ref = _reference(m, s, how, reference, notices)
        effects = head_effects(m.model, s, ref, how, n_layer, n_head, progress)
        ranked = sorted(((kl, l, h) for l, row in enumerate(effects["kl"]) for h, kl in enumerate(row)), reverse=True)
        data = {"model": m.name, "tokens": s.tokens, "position": s.at, "how": how, "layers": n_layer,
                "heads": n_head, **effects,
                "ranking": [{"layer": l, "head": h, "kl": kl, "top1_change": effects["top1_change"][l][h]}
                            for kl, l, h in ranked],
                "notices": notices}
        if sanity:
            twin = reinitialised(m.model)
            check = head_effects(twin, s, ref, how, n_layer, n_head)
            data["sanity"] = {"model": "re-initialised weights (seed %d)" % REINIT_SEED,
                              "max_kl": max(max(row) for row in check["kl"])}
    return data
