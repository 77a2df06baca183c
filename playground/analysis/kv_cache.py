"""The KV cache, measured on the model in front of the student: the Inference tab's KV cache view, as plain data.

Attention at position t reads the keys and values of every position up to t. A position's key and value depend only
on the tokens up to it, so once computed they never change, and a generation keeps them: the KV cache (every layer's
k and v, (B, n_kv_head, T, head_dim) each). A new token then costs a pass over one position instead of the whole
text; what the cache costs is memory, per token and per layer 2 (k and v) × n_kv_head × head_dim numbers.

Everything here is measured on the model's own `step` (nets/gpt.cached_step, shared by our GPT and SmolLM2's Llama):
- the bytes are the cache tensors' own `nbytes` (per layer, in all, and as the text grows: the cache after t tokens
  is the first t positions of the prompt's cache, exactly, since a position's k and v depend on the tokens up to it
  alone, the fact `crop_cache` rests on);
- grouped-query attention (Ainslie et al. 2023): SmolLM2's 9 query heads read 3 key/value heads, so its cache is
  the 3 kv heads; the multi-head cache it would need otherwise is the tensors its attention builds for every step
  (`k.repeat_interleave(3)`: each kv head once per query head of its group), measured here the same way;
- the time of a generation step with the cache (one position) and without it (the whole text again), each timed;
- a second chat turn: the conversation so far is the cache's prefix, so only the new turn is computed (the longest
  common prefix of the token ids: a chat template re-tokenized may differ where the answer ends); the logits with
  and without the reuse are compared;
- past n_positions (our GPT: 128 characters) the window slides: positions shift, cached keys no longer fit, and
  every step runs the whole window again (cached_step), which the timings show.
"""

from __future__ import annotations

import time

import torch

from playground.analysis import generation

MAX_CHARS = 2_000       # characters of the prompt read
MAX_PROMPT = 160        # SmolLM2's prompt tokens at most (the chat template's included): passes over the text
ANSWER = 8              # the answer's tokens by default (each a step with the cache)
MAX_ANSWER = 48
GPT_PAST = 24           # a model with a window (our GPT): steps decoded past it, to show the slide
SMALL = 10_000_000      # parameters under which every step is also timed without the cache (our GPT: a few ms)
FOLLOW_UP = "Say that again in one short sentence."


class KVCacheError(ValueError):
    """Input the view cannot read (a model without a KV cache): the message says what to do."""


def kv_bytes(kv) -> int:
    """The bytes of a cache's keys and values (`cache["kv"]`: per layer (k, v)), their tensors' nbytes."""
    return sum(k.nbytes + v.nbytes for k, v in kv)


def first_bytes(kv, t: int) -> int:
    """The bytes of the first t positions of every layer's k and v (views of the cache: their own nbytes)."""
    return sum(k[:, :, :t].nbytes + v[:, :, :t].nbytes for k, v in kv)


def mha_bytes(kv, group: int) -> int:
    """What a multi-head cache of the same attention holds: every kv head repeated for each query head of its group,
    the tensors grouped-query attention builds for a step (nets/llama.Attention), one layer at a time."""
    return sum(k.repeat_interleave(group, dim=1).nbytes + v.repeat_interleave(group, dim=1).nbytes for k, v in kv)


def layers(kv, positions: int) -> list[dict]:
    """Each layer's keys and values: shapes, dtype, bytes and bytes per token."""
    out = []
    for i, (k, v) in enumerate(kv):
        b = k.nbytes + v.nbytes
        out.append({"layer": i, "k_shape": list(k.shape), "v_shape": list(v.shape),
                    "dtype": str(k.dtype).split(".")[-1], "bytes": b, "bytes_per_token": b // positions})
    return out


def _lcp(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _timed(fn, *args, repeats: int = 1):
    """fn(*args) and its time: the shortest of `repeats` runs (a small model's passes take a few ms, which the other
    work of a shared machine can double)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - started)
    return out, best


def fit(m, prompt: str, chat: bool, notices: list[str], limit: int = MAX_PROMPT) -> tuple[str, generation.Prompt]:
    """The user's text and the prompt as the model reads it, cut to `limit` tokens (the user's text shortened, the
    chat template kept). A model whose window is no longer than the limit (our GPT) reads any length: past its
    window, the window slides."""
    p = generation.prepare(m, prompt, chat, notices)
    if len(p.ids) <= limit or m.config.n_positions <= limit:
        return prompt, p
    own = m.tokenizer.encode(prompt, add_special_tokens=False).ids
    keep = max(1, len(own) - (len(p.ids) - limit))
    user = generation.decode(m.tokenizer, own[:keep])
    cut = generation.prepare(m, user, chat, notices)
    notices.append(f"The prompt is {len(p.ids):,} tokens; this view reads at most {limit}: the first {keep} tokens "
                   "of your text are read" + (f" (with the chat template, {len(cut.ids)} tokens)." if chat else "."))
    return user, cut


def _decode(model, cache: dict, first: int, n: int, seen: int, uncached: set[int], keep: int, repeats: int):
    """n greedy steps with the cache from `first` (the token the prompt's pass chose): each step's time, the cache's
    positions and bytes, whether the window slid (its whole window computed again); at the steps in `uncached`, the
    same step without the cache (a pass over every token the cache holds) and the largest logit difference.
    Returns the steps, the tokens fed, and the cache once `keep` tokens were fed (the answer's: the second turn's)."""
    window = model.config.n_positions
    steps, fed, kept, token = [], [], cache, first
    for j in range(n):
        slid = cache["idx"].size(1) + 1 > window
        (logits, cache), seconds = _timed(model.step, torch.tensor([[token]]), cache)
        fed.append(token)
        seen += 1
        step = {"seen": seen, "positions": cache["idx"].size(1), "bytes": kv_bytes(cache["kv"]),
                "ms_cached": _ms(seconds), "computed": window if slid else 1, "slid": slid}
        if j in uncached:
            (full, _), seconds = _timed(model, cache["idx"], repeats=repeats)
            step.update(ms_uncached=_ms(seconds),
                        max_logit_diff=float(f"{float((full[0, -1] - logits[0, -1]).abs().max()):.3g}"))
        steps.append(step)
        if j + 1 == keep:
            kept = cache
        token = int(logits[0, -1].argmax())
    return steps, fed, kept


def _uncached_at(n: int, small: bool) -> set[int]:
    """The steps also timed without the cache: eight of them for a small model. SmolLM2's pass over the whole text
    takes a few hundred ms: its passes without the cache are the prompt's and the second turn's, at two lengths."""
    if not small:
        return set()
    return {round(i * (n - 1) / 7) for i in range(8)} if n > 8 else set(range(n))


def second_turn(m, p1: generation.Prompt, prompt: str, chat: bool, answer: list[int], cache: dict, follow_up: str,
                chunk: int | None, notices: list[str], repeats: int = 1) -> dict:
    """The conversation's next turn, computed from the cache of the turn so far (`cache` holds p1 and `answer`) and
    without it: the tokens reused and computed, their bytes and times, and the largest logit difference."""
    model, window = m.model, m.config.n_positions
    cut = [i for i, t in enumerate(answer) if t in p1.stops]
    said = answer[:cut[0]] if cut else answer                       # the answer up to its end of turn
    if chat and getattr(m, "chat", None) is not None:
        text = generation.decode(m.tokenizer, said).strip() or "…"
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": text},
                    {"role": "user", "content": follow_up}]
        ids = m.tokenizer.encode(m.chat(messages), add_special_tokens=False).ids
    else:
        ids = p1.ids + said + generation.encode_prompt(m, "\n" + follow_up, notices)[1]   # on a line of its own
    held = p1.ids + said
    reused = min(_lcp(held, ids), len(ids) - 1)
    if len(ids) > window or len(held) > window:
        notices.append(f"The second turn is past the model's window of {window} tokens: its positions shift, so "
                       "nothing of the cache is reused.")
        reused = 0
    ids_t = torch.tensor([ids])
    kept = model.crop_cache(cache, reused)
    (full, whole), full_s = _timed(model.step, ids_t, None, repeats=repeats)
    (fast, after), fast_s = _timed(model.step, ids_t[:, reused:], kept, repeats=repeats) if reused else \
        ((full, whole), full_s)
    in_prompt = min(_lcp(p1.ids, ids), len(ids) - 1)
    return {"follow_up": follow_up, "text": generation.decode(m.tokenizer, ids), "tokens": len(ids),
            "held": len(held), "reused": reused, "computed": len(ids) - reused,
            "bytes_reused": kv_bytes(kept["kv"]), "bytes_after": kv_bytes(after["kv"]),
            "ms_reused": _ms(fast_s), "ms_full": _ms(full_s),
            "max_logit_diff": float(f"{float((fast[0, -1] - full[0, -1]).abs().max()):.3g}"),
            "same_next_token": int(fast[0, -1].argmax()) == int(full[0, -1].argmax()),
            "engine_chunk": chunk, "engine_reused": (in_prompt // chunk) * chunk if chunk else 0}


@torch.inference_mode()
def measure(m, prompt: str, chat: bool, follow_up: str, n: int, notices: list[str], chunk: int | None = None) -> dict:
    """The KV cache of `m` (a registry record of a causal LM with a KV cache: our GPT, SmolLM2) over the prompt and
    `n` greedy tokens of answer, then a second turn (`follow_up`). `chunk`: the serving engine's prefix block (its
    reuse of the second turn is reported beside the cache's own). Plain data, the endpoint's JSON."""
    model, config = m.model, m.config
    if not hasattr(model, "crop_cache") or not hasattr(config, "n_head"):
        raise KVCacheError(f"{m.name} keeps no keys and values: choose our GPT or SmolLM2.")
    user, p = fit(m, prompt, chat, notices)
    group = config.n_head // getattr(config, "n_kv_head", config.n_head)
    window, T = config.n_positions, len(p.ids)
    small = sum(w.numel() for w in model.parameters()) < SMALL
    repeats = 3 if small else 1         # a small model's passes timed thrice, the shortest kept (a few ms each)
    (logits, cache), prefill_s = _timed(model.step, torch.tensor([p.ids]), None, repeats=repeats)
    first = int(logits[0, -1].argmax())
    held = cache["idx"].size(1)       # T, or our GPT's window when the prompt is longer
    # the cache after t tokens is the prompt's first t positions; past the window, the prompt's own is one point
    growth = [[t, first_bytes(cache["kv"], t)] for t in range(1, T + 1)] if T <= window else \
        [[T, kv_bytes(cache["kv"])]]
    total = max(n, window + GPT_PAST - T) if small and T + n <= window + GPT_PAST else n
    steps, fed, kept = _decode(model, cache, first, total, T, _uncached_at(total, small), n, repeats)
    growth += [[s["seen"], s["bytes"]] for s in steps]
    answer = fed[:n]
    engine_chunk = chunk if hasattr(model, "row_cache") else None   # our GPT's engine keeps no prefix (engine.Alone)
    turn = second_turn(m, p, user, chat, answer, kept, follow_up, engine_chunk, notices, repeats)
    per_token, mha = kv_bytes(cache["kv"]) // held, mha_bytes(cache["kv"], group)
    return {"model": m.name, "label": getattr(m, "label", m.name), "prompt": p.text, "prompt_tokens": T,
            "chat": bool(chat and getattr(m, "chat", None) is not None),
            "shape": {"n_layer": config.n_layer, "n_head": config.n_head, "n_kv_head": config.n_head // group,
                      "head_dim": cache["kv"][0][0].size(-1), "n_positions": window,
                      "dtype": str(cache["kv"][0][0].dtype).split(".")[-1],
                      "itemsize": cache["kv"][0][0].element_size()},
            "layers": layers(cache["kv"], held), "positions": held, "bytes": kv_bytes(cache["kv"]),
            "bytes_per_token": per_token, "bytes_per_token_per_layer": per_token // config.n_layer,
            "gqa": {"group": group, "bytes": kv_bytes(cache["kv"]), "mha_bytes": mha,
                    "ratio": round(mha / kv_bytes(cache["kv"]), 4)},
            "growth": {"seen": [g[0] for g in growth], "bytes": [g[1] for g in growth]},
            "prompt_ms": _ms(prefill_s), "steps": steps, "answer": generation.decode(m.tokenizer, answer),
            "answer_ids": answer,
            "answer_tokens": n, "second_turn": turn, "window": _window(model, config, steps, per_token),
            "notices": notices}


def _window(model, config, steps: list[dict], per_token: int) -> dict:
    """The cache's limit: where the window slid in these steps (our GPT), and the cache of a whole context (the
    per-token bytes times n_positions: arithmetic, no tensor of that size is made); the engine's row for SmolLM2."""
    slid = [s["seen"] for s in steps if s["slid"]]
    out = {"n_positions": config.n_positions, "slid_from": slid[0] if slid else None, "slid_steps": len(slid),
           "full_context_bytes": per_token * config.n_positions}
    if hasattr(model, "row_cache") and steps:
        row = model.row_cache(steps[-1]["seen"])   # torch.empty: what the engine allocates for this conversation
        out["engine_row"] = {"capacity": row.capacity, "bytes": row.nbytes}
    return out
