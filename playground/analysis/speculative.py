"""Speculative decoding with SmolLM2-135M-Instruct, greedy: the Inference tab's Speculative decoding view.

A cheap draft proposes γ tokens; the model reads the last accepted token and all γ drafted ones in **one** forward
pass with its KV cache (Llama.step), which gives its own next token after each of them. The drafted tokens are kept
as long as each is the model's own greedy choice; at the first that is not, the model's token replaces it, and the
cache is cut back to what was kept (Llama.crop_cache). Every pass thus yields between 1 and γ + 1 tokens, and the text
is the model's own greedy text (Leviathan et al. 2023; Chen et al. 2023: with greedy decoding, acceptance is plain
equality). A decoding step on a CPU reads every weight once, whatever the number of positions, so checking γ
tokens costs about one step: the speed-up is the tokens gained per pass, less the draft's own cost.

Two drafts:
- **prompt lookup** (Saxena 2023): the last n tokens (n = 3, then 2, then 1) searched in the text so far (the prompt
  and what has been written), as his reference code does: the first earlier occurrence's next γ tokens are the
  draft. Free, and right where the answer copies its prompt (a rewrite, a quote, code).
- **self-draft** (early exit, as Draft & Verify, Zhang et al. 2023, and LayerSkip, Elhoushi et al. 2024, use it):
  SmolLM2's first k layers, then its own final norm and output layer, run γ times one token at a time. It reuses
  the model's own cache of those k layers (the same keys and values), so it reads only the tokens it drafts.

Both decoders run with every product in fp32 (nets/llama.fp32_products): the half-stored model otherwise multiplies a
pass of a few positions in fp16 and a longer one in fp32, and a verification pass of γ + 1 positions would not
compute what one step computes. The outputs are compared token for token with plain greedy decoding of the same
prompt: equal bit for bit (the view shows it). What remains is float arithmetic's own: a product of several rows may
sum in another order than one row's (a few 1e-6 of a logit), so two tokens whose logits tie that closely could come
out in either order; the view reports the plain run's closest call (its smallest gap between the top two logits).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from playground.analysis import generation
from playground.lru import Bounded
from playground.nets.llama import Llama, fp32_products

DRAFTS = {"lookup": "prompt lookup (n-gram copy)", "self": "self-draft (first k layers, early exit)"}
MAX_NEW = 64           # new tokens at most
MAX_PROMPT = 256       # prompt tokens at most (a longer prompt is cut to its end, with a notice)
MAX_GAMMA = 8          # draft tokens per verification at most
MAX_NGRAM = 3          # prompt lookup's longest n-gram (Saxena's default)


class SpeculativeError(ValueError):
    """Input the view cannot decode (no prompt, a draft depth outside the model): the message says what to do."""


@dataclass
class Decoded:
    """One decoding: the new tokens, the model's forward passes and the time they took."""

    tokens: list[int]
    passes: int                        # the whole model's forward passes (the prompt's included)
    seconds: float
    draft_passes: int = 0              # the self-draft's passes (k layers each)
    draft_seconds: float = 0.0
    steps: list[dict] = field(default_factory=list)   # each verification: drafted, accepted, the model's token
    gaps: list[float] = field(default_factory=list)   # plain greedy: the top two logits' gap at each token


def _last(logits: torch.Tensor) -> tuple[int, float]:
    """The greedy token of the last position and its margin over the runner-up."""
    top = logits[0, -1].topk(2)
    return int(top.indices[0]), float(top.values[0] - top.values[1])


@torch.inference_mode()
def greedy(model: Llama, prompt: list[int], max_new: int, stops: frozenset[int]) -> Decoded:
    """Plain greedy decoding with the KV cache: the prompt in one pass, then one pass per new token."""
    started = time.perf_counter()
    with fp32_products():
        logits, cache = model.step(torch.tensor([prompt]), None)
        token, gap = _last(logits)
        out, gaps = [token], [gap]
        while token not in stops and len(out) < max_new:
            logits, cache = model.step(torch.tensor([[token]]), cache)
            token, gap = _last(logits)
            out.append(token)
            gaps.append(gap)
    return Decoded(out, len(out), time.perf_counter() - started, gaps=gaps)


def prompt_lookup(seq: list[int], gamma: int, max_ngram: int = MAX_NGRAM) -> tuple[list[int], str]:
    """Saxena's draft: the last n tokens of `seq` (n = max_ngram down to 1) found earlier in `seq`; the γ tokens that
    followed their first occurrence. ([], reason) when no n-gram recurs."""
    for n in range(min(max_ngram, len(seq) - 1), 0, -1):
        tail = seq[-n:]
        for start in range(len(seq) - n):                    # the first occurrence, the tail itself left out
            if seq[start:start + n] == tail:
                drafted = seq[start + n:start + n + gamma]
                if drafted:
                    return drafted, f"the last {n} token{'s' if n > 1 else ''} found at position {start}"
    return [], "no n-gram of the text's end occurs earlier: a plain step"


def early_exit(model: Llama, k: int) -> Llama:
    """The self-draft: a Llama of the model's first k layers, its final norm and its output layer, the very modules
    (no copy: the draft reads the model's weights)."""
    if not 1 <= k < model.config.n_layer:
        raise SpeculativeError(f"The self-draft's depth k must be 1 to {model.config.n_layer - 1} layers, not {k}.")
    with torch.device("meta"):
        draft = Llama(dataclasses.replace(model.config, n_layer=k))
    draft.model.embed_tokens, draft.model.norm = model.model.embed_tokens, model.model.norm
    draft.model.layers = nn.ModuleList(model.model.layers[:k])
    if not model.config.tie_word_embeddings:
        draft.lm_head = model.lm_head
    return draft.eval()


def self_draft(draft: Llama, cache: dict, pending: int, gamma: int) -> list[int]:
    """γ tokens from the first k layers, one at a time, from the model's own cache of those layers (keys and values
    of every position before `pending`: a layer's keys depend only on the layers below it)."""
    k = draft.config.n_layer
    own = {"idx": cache["idx"], "kv": cache["kv"][:k]}
    drafted, token = [], pending
    for _ in range(gamma):
        logits, own = draft.step(torch.tensor([[token]]), own)
        token = int(logits[0, -1].argmax())
        drafted.append(token)
    return drafted


@torch.inference_mode()
def speculative(model: Llama, prompt: list[int], max_new: int, stops: frozenset[int], how: str, gamma: int,
                k: int = 0) -> Decoded:
    """Greedy decoding with a draft (`how`: "lookup" or "self", with k layers) of γ tokens per verification pass."""
    draft = early_exit(model, k) if how == "self" else None
    started, drafting, draft_passes = time.perf_counter(), 0.0, 0
    steps: list[dict] = []
    with fp32_products():
        logits, cache = model.step(torch.tensor([prompt]), None)
        out, passes = [_last(logits)[0]], 1          # the cache holds prompt + out[:-1]; out[-1] is pending
        while out[-1] not in stops and len(out) < max_new:
            g = min(gamma, max_new - len(out))
            began = time.perf_counter()
            if draft is None:
                drafted, source = prompt_lookup(prompt + out, g)
            else:
                drafted, source = self_draft(draft, cache, out[-1], g), f"the first {k} layers"
                draft_passes += g
            drafting += time.perf_counter() - began
            logits, cache = model.step(torch.tensor([[out[-1], *drafted]]), cache)
            passes += 1
            chosen = logits[0].argmax(-1).tolist()   # the model's token after out[-1] and after each drafted one
            accepted = 0
            while accepted < len(drafted) and drafted[accepted] == chosen[accepted]:
                accepted += 1
                if drafted[accepted - 1] in stops:   # an accepted stop token ends the text, as in plain greedy
                    break
            new = drafted[:accepted]
            if not new or new[-1] not in stops:
                new.append(chosen[accepted])         # the model's own token where the draft went wrong, or after it
            new = new[:max_new - len(out)]
            steps.append({"drafted": drafted, "accepted": accepted, "emitted": new, "source": source})
            out += new
            cache = model.crop_cache(cache, len(prompt) + len(out) - 1)
    return Decoded(out, passes, time.perf_counter() - started, draft_passes, drafting, steps)


# plain greedy of the last prompts (the tokens, passes, time and gaps: a few kB each), so that trying another draft
# or depth on the same prompt decodes only the speculative run
_plain: Bounded[Decoded] = Bounded(4 << 20, max_items=64)


def compare(m, prompt: str, chat: bool, how: str, k: int, gamma: int, max_new: int) -> dict:
    """Plain greedy and speculative decoding of one prompt with SmolLM2 (`m`, the registry's record): both texts,
    whether they are the same token for token, each verification step, the acceptance rate and the speed-up in wall
    time and in the model's forward passes. Plain data, the endpoint's JSON."""
    if how not in DRAFTS:
        raise SpeculativeError(f"Unknown draft {str(how)[:40]!r}; choose from {', '.join(DRAFTS)}.")
    notices: list[str] = []
    p = generation.prepare(m, prompt, chat, notices)
    ids = p.ids
    if len(ids) > MAX_PROMPT:
        notices.append(f"The prompt has {len(ids):,} tokens; its last {MAX_PROMPT} are read.")
        ids = ids[-MAX_PROMPT:]
    key = (tuple(ids), max_new)
    plain = _plain.get(key)
    if plain is None:
        plain = greedy(m.model, ids, max_new, p.stops)
        _plain.put(key, plain)
    spec = speculative(m.model, ids, max_new, p.stops, how, gamma, k)
    return _report(m.tokenizer, p.text, ids, plain, spec, how, k, gamma, max_new) | {"notices": notices}


def _report(tokenizer, text: str, ids: list[int], plain: Decoded, spec: Decoded, how: str, k: int, gamma: int,
            max_new: int) -> dict:
    def pieces(tokens: list[int]) -> list[str]:   # each token as text, the end-of-turn token as itself
        return [tokenizer.decode([t], skip_special_tokens=False) for t in tokens]

    def run(d: Decoded) -> dict:
        return {"text": tokenizer.decode(d.tokens, skip_special_tokens=False), "tokens": pieces(d.tokens),
                "ids": d.tokens, "passes": d.passes, "seconds": round(d.seconds, 3)}

    drafted = sum(len(s["drafted"]) for s in spec.steps)
    accepted = sum(s["accepted"] for s in spec.steps)
    differ = next((i for i, (a, b) in enumerate(zip(plain.tokens, spec.tokens)) if a != b),
                  None if len(plain.tokens) == len(spec.tokens) else min(len(plain.tokens), len(spec.tokens)))
    steps = [{"source": s["source"], "drafted": pieces(s["drafted"]), "accepted": s["accepted"],
              "rejected": pieces(s["drafted"][s["accepted"]:]), "emitted": pieces(s["emitted"]),
              "drafted_ids": s["drafted"], "emitted_ids": s["emitted"]} for s in spec.steps]
    return {"prompt": text, "prompt_tokens": len(ids), "draft": how, "draft_label": DRAFTS[how],
            "k": k if how == "self" else None, "gamma": gamma, "max_new": max_new, "plain": run(plain),
            "speculative": run(spec) | {"draft_passes": spec.draft_passes,
                                        "draft_seconds": round(spec.draft_seconds, 3)},
            "identical": differ is None, "first_difference": differ,
            "closest_call": float(f"{min(plain.gaps):.4g}") if plain.gaps else None,
            "steps": steps, "drafted": drafted, "accepted": accepted,
            "acceptance_rate": round(accepted / drafted, 4) if drafted else None,
            "tokens_per_pass": round(len(spec.tokens) / max(spec.passes - 1, 1), 3),
            "speedup_time": round(plain.seconds / spec.seconds, 3) if spec.seconds else None,
            "speedup_passes": round(plain.passes / spec.passes, 3)}
