"""Steering a causal LM by adding a direction to its residual stream (activation addition, Turner et al. 2023).

The direction comes from contrast prompts: the mean residual stream entering block `layer` over the positions (and
lines) of the positive prompts, minus the same over the negative ones ("Love" − "Hate"). Added, times a strength,
to the stream entering that block at every position of the prompt and of every generated token, it moves what the
model writes. The same prompt is continued twice with the same seed, with and without the addition, so that the
difference between the two texts is the direction's doing; the logit shift on chosen words at the prompt's last
position says by how much each word gained or lost, before any sampling.

SmolLM2 parks its attention on the first token of whatever it reads, and the stream there carries a few massive
dimensions (Sun et al. 2024, "Massive activations"): entering block 12, its norm is 24,096 on "I think the weather
today is", against 119 to 171 at the other positions. Averaged in, that position *is* the direction ("Love" −
"Hate" differ there by noise on the massive dimensions), and a strength of 4 turned the text into noise. So a model
trained with a document start (SmolLM2: `<|endoftext|>`) reads each contrast line after it, as it read every
document, and the means are taken over the line's own tokens: the sink is the document start, not the word. The
stream's norm reported for scale leaves the prompt's first position out for the same reason.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from playground.analysis import generation, sampling
from playground.analysis.induction import DOCUMENT_START
from playground.analysis.interventions import (InterventionError, Subject, answer_token, blocks, cache, clamp, kl,
                                               hooked, masked_lm, read)

MAX_STRENGTH = 20.0     # in units of the direction itself (the difference of the two means)
MAX_NEW = 60            # tokens generated each way
MAX_LINES = 16          # contrast prompts per side (each is one forward pass)
RULE = {"temperature": 0.8, "top_k": 0, "top_p": 0.95}  # how both continuations are sampled
# (model, prompt, positive, negative, layer, strength, words): contrasts that visibly steer each model. SmolLM2 at
# block 12, strength 1 (seed 0, 20 tokens): "quite ominous. I've heard the local news..." becomes "quite
# wonderful. I'm planning to bring the beautiful planet...", and "terrible" loses 1.71 nats of log-probability (a
# random push of the same norm: 0.04); at strength -1 the text stays ominous and "terrible" gains
# (tests/test_causal_lab.py). Strength 2 already frays the text.
PRESETS = {
    "Love − Hate (our GPT)": ("gpt-shakespeare", "ROMEO:\nI", "Love\nI love thee", "Hate\nI hate thee", 2, 2.0,
                              "l, h"),
    "Love − Hate, on the weather (SmolLM2)": ("smollm2-135m-instruct", "I think the weather today is",
                                              "Love\nI love this\nIt is wonderful", "Hate\nI hate this\nIt is terrible",
                                              12, 1.0, "wonderful, terrible"),
}


def _lines(text: str, notices: list[str]) -> list[str]:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if len(lines) > MAX_LINES:
        notices.append(f"{len(lines)} contrast prompts on one side: the first {MAX_LINES} are used")
    return lines[:MAX_LINES]


def direction(m, positive: str, negative: str, layer: int, notices: list[str]) -> torch.Tensor:
    """mean(h_layer over the positive lines' positions) − mean(h_layer over the negative lines'), (C,). Each line
    weighs the same, whatever its length."""
    sides = []
    for name, text in (("positive", positive), ("negative", negative)):
        lines = _lines(text, notices)
        if not lines:
            raise InterventionError(f"the {name} prompts are empty: one prompt per line (e.g. 'Love')")
        means = []
        for line in lines:
            s, first = _after_document_start(m, read(m, line, notices, f"a {name} prompt"))
            _, kept = cache(m.model, lambda s=s: s.predict(m.model), [(layer, "resid_pre")])
            means.append(kept[(layer, "resid_pre")][0, first:].mean(0))
        sides.append(torch.stack(means).mean(0))
    return sides[0] - sides[1]


def _after_document_start(m, s: Subject) -> tuple[Subject, int]:
    """A contrast line read after the model's document start, when it has one (SmolLM2), and the position its own
    tokens start at: (the line as read, 1); otherwise (the line, 0)."""
    start = DOCUMENT_START.get(m.family)
    start_id = m.tokenizer.token_to_id(start) if start else None
    if start_id is None:
        return s, 0
    ids = [start_id] + s.ids
    return Subject(s.m, ids, [start] + s.tokens, len(ids) - 1, s.masked, s.segments), 1


def _strength(value, notices: list[str]) -> float:
    try:
        v = float(value)
    except OverflowError:                    # an integer beyond a float's range
        v = MAX_STRENGTH * 2 if value > 0 else -MAX_STRENGTH * 2
    except (TypeError, ValueError):
        notices.append(f"strength {value!r} is not a number: 0 is used")
        return 0.0
    if v != v or abs(v) > MAX_STRENGTH:   # NaN, or beyond the range
        kept = 0.0 if v != v else max(-MAX_STRENGTH, min(MAX_STRENGTH, v))
        notices.append(f"strength {v} is out of range ±{MAX_STRENGTH:g}: {kept:g} is used")
        return kept
    return v


def _continue(m, ids: list[int], n: int, seed: int) -> tuple[str, list[int]]:
    tokens = [step["token"] for step in sampling.stream(m.model, torch.tensor([ids]), n, seed=seed,
                                                        stop=generation.stops(m), **RULE)]
    return generation.decode(m.tokenizer, tokens), tokens


def steer(m, prompt: str, positive: str, negative: str, layer=None, strength=4.0, words: str = "",
          max_new_tokens: int = 30, seed: int = 0) -> dict:
    """The prompt continued with and without `strength` × direction added at block `layer` (`direction`), with the
    same seed, and each of `words` (comma-separated) with its logit, probability and the shift of its
    log-probability at the prompt's last position, with and without; beside them the sanity check, the same strength
    along a random direction of the same norm (`random_direction`), and each one's KL at the next token. `layer`
    None: the middle block."""
    notices: list[str] = []
    if masked_lm(m):
        raise InterventionError(f"{m.name} is a masked LM: steering writes text, choose a causal LM (GPT, SmolLM2)")
    n_layer = len(blocks(m.model))
    layer = n_layer // 2 if layer is None else clamp(layer, 0, n_layer - 1, "layer", notices)
    strength = _strength(strength, notices)
    n = clamp(max_new_tokens, 1, MAX_NEW, "max_new_tokens", notices)
    s = read(m, prompt, notices, "the prompt")
    chosen = [w.strip() for w in (words or "").split(",") if w.strip()]
    with torch.inference_mode():
        d = direction(m, positive, negative, layer, notices)
        word_ids = [answer_token(m, w, notices, prompt) for w in chosen]
        plain_logits = s.predict()[0]
        plain_text, plain_ids = _continue(m, s.ids, n, seed)
        steered_logits, steered_text, steered_ids = _steered(m, s, layer, strength * d, n, seed)
        r = random_direction(d, seed)
        random_logits, random_text, random_ids = _steered(m, s, layer, strength * r, n, seed)
    # a logit's shift alone can mislead: every logit moves, and a word whose logit falls less than the others' gains
    # probability. Its log-probability's shift, log p_with − log p_without, has the sign of what it gains
    logp, logq, logr = (F.log_softmax(logits, -1) for logits in (plain_logits, steered_logits, random_logits))
    shifts = [{"word": w, "id": i, "logit_without": float(plain_logits[i]), "logit_with": float(steered_logits[i]),
               "shift": float(steered_logits[i] - plain_logits[i]), "prob_without": float(logp[i].exp()),
               "prob_with": float(logq[i].exp()), "shift_random": float(random_logits[i] - plain_logits[i]),
               "logp_shift": float(logq[i] - logp[i]), "logp_shift_random": float(logr[i] - logp[i])}
              for w, i in zip(chosen, word_ids)]
    return {"model": m.name, "prompt_tokens": s.tokens, "layer": layer, "strength": strength, "seed": seed,
            "sampling": RULE, "direction_norm": float(d.norm()),
            "stream_norm": _stream_norm(m, s, layer),
            "without": {"text": plain_text, "ids": plain_ids}, "with": {"text": steered_text, "ids": steered_ids},
            "kl": kl(plain_logits, steered_logits),
            "sanity": {"what": f"a random direction of the same norm (drawn with seed {seed}), the same strength",
                       "text": random_text, "ids": random_ids, "kl": kl(plain_logits, random_logits)},
            "shifts": shifts, "notices": notices}


def random_direction(d: torch.Tensor, seed: int) -> torch.Tensor:
    """A direction drawn uniformly on the sphere (a normal vector, normalised) with `d`'s norm: the steering's
    sanity check. A push of the same size in no chosen direction: what it changes, the contrast's direction did not
    earn."""
    r = torch.randn(d.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32).to(d.dtype)
    return r * (d.norm() / r.norm().clamp(min=1e-12))


def _steered(m, s: Subject, layer: int, add: torch.Tensor, n: int, seed: int):
    """The prompt's logits at its last position and its continuation, with `add` added to the stream entering
    `layer` at every position."""
    with hooked(m.model, {(layer, "resid_pre"): lambda out: out + add}):
        logits = s.predict()[0]
        text, ids = _continue(m, s.ids, n, seed)
    return logits, text, ids


def _stream_norm(m, s, layer: int) -> float:
    """The mean norm of the stream the direction is added to, for scale: over the prompt's positions, but its first
    when the model has a document start (its attention sink, whose massive norm would be the whole mean)."""
    first = 1 if DOCUMENT_START.get(m.family) and len(s.ids) > 1 else 0
    with torch.inference_mode():
        _, kept = cache(m.model, lambda: s.predict(m.model), [(layer, "resid_pre")])
    return float(kept[(layer, "resid_pre")][0, first:].norm(dim=-1).mean())
