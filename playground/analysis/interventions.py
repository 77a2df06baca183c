"""Interventions on a model's forward pass: read or replace an activation at a named hook point, and ablate.

The transformers carry hook points (nets/hooks.py) at the same sites in every block. Here they are used with plain
torch forward hooks, always installed by `hooked` and removed when it ends, whatever happens inside, so that no
hook outlives the computation that set it (the app's models are shared by every user).

A *subject* is a loaded model (analysis/models.py's record) with the text it reads: a causal LM (our GPT,
SmolLM2) predicts the token after the prompt; a masked LM (our BERT, MiniLM + MLM head) the token at its first
[MASK]. `ablate` knocks out one head, one layer's attention or one MLP, by zero, by its mean over a reference text,
or by its values on that other text (resample), and reports the prediction before and after; `sweep` ranks every
head by how much knocking it out moves the current prediction. Each answer carries a sanity check: the same
experiment on a copy of the model whose weights were drawn again (seeded), where an "effect" means nothing.

Rows of one batch carry different interventions (`Edit`s name their rows), so a sweep over 270 heads is a few
batched forward passes, not 270 separate ones. Everything runs under `torch.inference_mode()` but the attribution
of analysis/patching.py, which needs a gradient.
"""

from __future__ import annotations

import copy
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from playground.analysis import generation
from playground.text import token_label
from playground.nets import bert
from playground.nets.llama import Llama, rope_angles

TARGETS = ("head", "attn", "mlp")        # what `ablate` knocks out: one head, a layer's attention, a layer's MLP
HOWS = ("zero", "mean", "resample")      # with what: zeros, the mean over a reference text, that text's values
SITE_OF = {"head": "z", "attn": "attn_out", "mlp": "mlp_out"}
TOP = 10                                 # tokens shown before / after, and top movers
MAX_TOKENS = 64                          # the longest text an experiment reads (the grids are layers x positions)
REINIT_SEED = 1234                       # the sanity check's weights


class InterventionError(ValueError):
    """Input an experiment cannot run on; the message is meant for the user."""


# ---------------------------------------------------------------------------------------------
# Hook points and hooks


def blocks(model) -> torch.nn.ModuleList:
    """The blocks of our GPT, Llama, BERT encoder or BERT with heads, in order."""
    for path in ("transformer.h", "model.layers", "bert.blocks", "blocks"):
        found = model
        for part in path.split("."):
            found = getattr(found, part, None)
        if isinstance(found, torch.nn.ModuleList):
            return found
    raise InterventionError(f"{type(model).__name__} has no transformer blocks to intervene on")


def hook_point(model, layer: int, site: str):
    """The HookPoint of `site` (nets/hooks.SITES) in block `layer`."""
    block = blocks(model)[layer]
    if site == "z":
        return (block.attn if hasattr(block, "attn") else block.self_attn).hook_z   # GPT and BERT, Llama
    return getattr(block, f"hook_{site}")


@contextmanager
def hooked(model, hooks: dict[tuple[int, str], Callable[[torch.Tensor], torch.Tensor | None]]):
    """Forward hooks on the hook points (layer, site) -> fn(activation) (a replacement, or None to keep it), for the
    duration of the `with`; removed however it ends.

    The models are shared by every user of the server, so a hook acts only in the thread that set it: another
    computation running the same model meanwhile (another student's attention, another patching grid) reads the
    model as it is. Before, a concurrent grid on the same GPT met this one's patched activations (a shape error
    under the load test; wrong numbers when the shapes happened to agree)."""
    owner = threading.get_ident()
    handles = []
    try:
        for (layer, site), fn in hooks.items():
            handles.append(hook_point(model, layer, site).register_forward_hook(
                lambda _module, _inputs, out, fn=fn: fn(out) if threading.get_ident() == owner else None))
        yield
    finally:
        for handle in handles:
            handle.remove()


@dataclass
class Edit:
    """Replace, in the batch rows `rows`, the activation at (layer, site) by `value`: at position `pos` (None: every
    position) and, for the heads' output `z` (B, T, nh, hs), only head `head` (None: every head)."""

    layer: int
    site: str
    rows: torch.Tensor            # (n,) long
    value: torch.Tensor           # broadcastable to the replaced part of each row, (n, ...) or one row's
    pos: torch.Tensor | None = None
    head: int | torch.Tensor | None = None


def edit_hooks(edits: list[Edit]) -> dict[tuple[int, str], Callable]:
    """The hooks that apply `edits` (several per site allowed, applied in order) to a copy of the activation."""
    by_site: dict[tuple[int, str], list[Edit]] = {}
    for e in edits:
        by_site.setdefault((e.layer, e.site), []).append(e)

    def apply(site_edits: list[Edit]):
        def fn(out: torch.Tensor) -> torch.Tensor:
            out = out.clone()
            for e in site_edits:
                index = (e.rows,) if e.pos is None else (e.rows, e.pos)
                if e.head is not None:
                    index = (*index, slice(None), e.head) if e.pos is None else (*index, e.head)
                out[index] = e.value.to(out.dtype)
            return out
        return fn

    return {key: apply(site_edits) for key, site_edits in by_site.items()}


def cache(model, run: Callable[[], torch.Tensor], sites: list[tuple[int, str]]):
    """Run `run()` (a forward pass of `model`) and keep the activations at `sites`: (its output, {site: tensor})."""
    kept: dict[tuple[int, str], torch.Tensor] = {}

    def keep(key):
        def fn(out):
            kept[key] = out.detach()
        return fn

    with hooked(model, {key: keep(key) for key in sites}):
        out = run()
    return out, kept


def _run_blocks(model, layer: int, x: torch.Tensor) -> torch.Tensor:
    """The blocks from `layer` on over the stream x (n, T, C) entering it, every position read (no padding)."""
    rest = blocks(model)[layer:]
    if isinstance(model, Llama):
        c = model.config
        cos, sin = rope_angles(torch.arange(x.shape[1]), c.head_dim, c.rope_theta)
        for block in rest:
            x = block(x, cos, sin)[0]
        return x
    for block in rest:
        x = block(x)[0]
    return x


def _output_layer(model, h: torch.Tensor) -> torch.Tensor:
    """Logits (n, V) from the last stream at one position per row, (n, C): the final norm and output layer (an MLM
    head for a masked LM), always in fp32 (the half-stored SmolLM2 multiplies a few positions in fp16 otherwise, and
    a batch's rows would not be comparable with a single row)."""
    if hasattr(model, "mlm"):
        return model.mlm(h, model.bert.embeddings.tok.weight)
    if isinstance(model, Llama):
        h = model.model.norm(h)
        weight = model.model.embed_tokens.weight if model.config.tie_word_embeddings else model.lm_head.weight
        return F.linear(h, weight.to(h.dtype))
    return model.unembed(h)


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
        """The logits (n, T, V) of n copies of the text (each row may carry its own edits)."""
        model = self.m.model if model is None else model
        if not self.masked:
            return model(self.batch(n))[0].float()
        segments = torch.tensor([self.segments] * n)
        return model(self.batch(n), segments)[0].float()

    def streams(self, model=None) -> list[torch.Tensor]:
        """The stream entering every block in one plain run, (1, T, C) each."""
        model = self.m.model if model is None else model
        keys = [(layer, "resid_pre") for layer in range(len(blocks(model)))]
        _, kept = cache(model, lambda: self.predict(model), keys)
        return [kept[key] for key in keys]

    def predict_from(self, model, layer: int, x: torch.Tensor, hooks: dict | None = None) -> torch.Tensor:
        """The logits (n, V) at the predicting position when the blocks from `layer` on run on the stream x (n, T, C)
        that enters it, under `hooks`. An intervention at block `layer` or later leaves the blocks before it as they
        were, so they are not run again: a patching grid's row for layer l costs L − l blocks, not L."""
        with hooked(model, hooks or {}):
            return _output_layer(model, _run_blocks(model, layer, x)[:, self.at]).float()

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
    return m.family == "bert"


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
        "kl": float((p * (logp - logq)).sum()),
        "top1": {"token": labels(s.m, [best])[0], "id": best, "logp_before": float(logp[best]),
                 "logp_after": float(logq[best]), "change": float(logq[best] - logp[best])},
        "loss_before": losses(s, before), "loss_after": losses(s, after),
    }


# ---------------------------------------------------------------------------------------------
# Ablation


def _layer_head(m, layer, head, target: str, notices: list[str]) -> tuple[int, int | None]:
    layer = clamp(layer, 0, len(blocks(m.model)) - 1, "layer", notices)
    if target != "head":
        return layer, None
    return layer, clamp(head, 0, m.shape.heads - 1, "head", notices)


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


def _layer_rows(model, s: Subject, ref: Subject | None, how: str, layer: int, heads: list[int],
                stream: torch.Tensor, act: torch.Tensor | None) -> torch.Tensor:
    """Logits (n, V) at the predicting position with head heads[i] of `layer` knocked out in row i, the blocks run
    from `layer` on the plain run's stream entering it."""
    index = torch.tensor(heads)
    value = replacement(model, s, ref, layer, "z", how, index, act)
    edit = Edit(layer, "z", torch.arange(len(heads)), value, head=index)
    return s.predict_from(model, layer, stream.expand(len(heads), -1, -1), edit_hooks([edit]))


def head_effects(model, s: Subject, ref: Subject | None, how: str, n_layer: int, n_head: int,
                 progress: Callable[[float, str], None] | None = None) -> dict:
    """Every head's effect on the prediction at `s.at`: KL(before ‖ after) and the change of the top-1 token's
    log-probability, as (n_layer, n_head) lists: one batched pass per layer, its heads one per row, from the
    stream entering that layer."""
    streams = s.streams(model)
    heads_out = [(layer, "z") for layer in range(n_layer)]
    acts = {} if ref is None else cache(model, lambda: ref.predict(model), heads_out)[1]   # one reference run
    base = F.log_softmax(s.predict_from(model, 0, streams[0])[0], -1)
    best = int(base.argmax())
    kl, change = torch.zeros(n_layer, n_head), torch.zeros(n_layer, n_head)
    for layer in range(n_layer):
        rows = _layer_rows(model, s, ref, how, layer, list(range(n_head)), streams[layer], acts.get((layer, "z")))
        after = F.log_softmax(rows, -1)
        kl[layer] = (base.exp() * (base - after)).sum(-1)
        change[layer] = after[:, best] - base[best]
        if progress is not None:
            progress((layer + 1) / n_layer, f"{(layer + 1) * n_head} of {n_layer * n_head} heads")
    return {"kl": kl.tolist(), "top1_change": change.tolist(),
            "top1": {"token": labels(s.m, [best])[0], "id": best, "logp": float(base[best])}}


def sweep(m, text: str, how: str = "zero", reference: str = "", sanity: bool = True,
          progress: Callable[[float, str], None] | None = None) -> dict:
    """"Which heads matter here?": every head knocked out in turn (by `how`), ranked by the KL divergence it causes
    at the predicting position. With `sanity`, the same sweep's largest KL on the re-initialised model."""
    notices: list[str] = []
    _checked("head", how)
    s = read(m, text, notices)
    n_layer, n_head = len(blocks(m.model)), m.shape.heads
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
