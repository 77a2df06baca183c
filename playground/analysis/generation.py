"""What the Generation tab shows, as plain data: the prompt as a model reads it (its tokens, the chat template,
the tokens that stop it), the decoding steps with token strings (the API's format) streamed as they are made, beam
search with the distribution at each step of the best beam, two models compared with the prompt's perplexity, and
a GPT's causal attention over a text, read through the Attention tab's one path to a model's internals.

A model here is anything with `name`, `kind`, `model`, `tokenizer`, `config`, `card` and `chat` (the chat template
as messages -> prompt, or None): a `checkpoints.Checkpoint` or a record of the registry (analysis/models.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from playground.analysis import attention, sampling, tokenization
from playground.text import MAX_CHARS, clean_text, token_label
from playground.text import Encoded


def token_text(tokenizer, i: int) -> str:
    """A token as the vocabulary has it: its string, or for a byte-level BPE (GPT-2's, SmolLM2's) its bytes read as
    UTF-8 (a piece of a character shows as �). For a candidate in a list; the text a chosen token adds to the
    generated text is `tokenization.Detokenizer`'s."""
    piece = tokenizer.id_to_token(i)
    raw = tokenization.token_bytes(piece) if tokenization.is_byte_level(tokenizer) and piece is not None else None
    return piece if raw is None else raw.decode("utf-8", errors="replace")


def decode(tokenizer, ids: list[int]) -> str:
    """The text of ids, each character once: what the pieces of a `Detokenizer` concatenate to."""
    return "".join(tokenization.Detokenizer(tokenizer).pieces(ids))


def named(reader: tokenization.Detokenizer, step: dict) -> dict:
    """A `sampling.step_record` with token strings in place of ids (the API's format), ids kept beside. `token` is
    the text the chosen token adds after the steps before it (`reader` has read the prompt and them): "" for a
    byte that leaves a character unfinished, the whole character on the byte that completes it, so the steps'
    tokens concatenate to the generated text (the JSON's `text` after its `prompt`). A byte-level token's own bytes
    are in `bytes` (hex)."""
    tokenizer = reader.tokenizer
    token = lambda i: token_text(tokenizer, i)  # noqa: E731
    out = {**step, "id": step["token"], "token": reader.add(step["token"]),
           "top": [[token(i), round(p, 6)] for i, p in step["top"]],
           "prob": round(step["prob"], 6), "p_model": round(step["p_model"], 6), "entropy": round(step["entropy"], 4)}
    if reader.byte_level:
        out["bytes"] = reader.raw(step["token"]).hex(" ")
    return out


def finish(reader: tokenization.Detokenizer, steps: list[dict]) -> list[dict]:
    """The end of a generation: bytes of a character the last steps left unfinished go on the last step as U+FFFD
    (as `decode` of the whole text shows them), so the tokens still concatenate to the text."""
    if steps:
        steps[-1]["token"] += reader.flush()
    return steps


def beam(model, tokenizer, ids: list[int], width: int, max_new: int) -> tuple[list[dict], dict]:
    """Beam search from `ids`: the best beam's steps (named) and {beam_width, log_prob, greedy_log_prob
    (of greedy decoding, to compare), beams: [{text, log_prob}]}."""
    with torch.inference_mode():
        steps, logp, beams = sampling.beam_steps(model, torch.tensor([ids]), max_new, width)
        greedy = sampling.generate(model, torch.tensor([ids]), max_new, temperature=0)
        greedy_logp = float(sampling.sequence_log_prob(model, greedy)[0])
    info = {"beam_width": width, "log_prob": round(logp, 4), "greedy_log_prob": round(greedy_logp, 4),
            "beams": [{"text": decode(tokenizer, [int(i) for i in b[len(ids):]]), "log_prob": round(s, 4)}
                      for b, s in beams]}
    reader = tokenization.Detokenizer(tokenizer, ids)
    return finish(reader, [named(reader, s) for s in steps]), info


def causal_attention(name: str, ids: list[int], layer: int, head: int, notices: list[str]) -> dict:
    """One layer and head (0-based) of the GPT `name` over ids, the last n_positions of them: the
    `generation_attention` endpoint's JSON {model, tokens, layer, head, attention (T x T, rounded)}."""
    m = attention.load(name)  # the registry's GPT as the Attention tab sees it (kept there)
    if len(ids) > m.max_tokens:
        notices.append(f"Showing the last {m.max_tokens} tokens (the model's context).")
        ids = ids[-m.max_tokens:]
    tokens = [m.tokenizer.id_to_token(i) for i in ids]
    A = attention.attention(m, Encoded(tokens, ids, [0] * len(ids)))[layer][head]   # (T, T)
    rows = [[round(float(v), 4) for v in row] for row in A]
    return {"model": name, "tokens": tokens, "layer": layer, "head": head, "attention": rows}


LENS_MAX_TOKENS = 48  # positions the logit lens shows (each layer's logits over the whole vocabulary, per position)


def has_logit_lens(model) -> bool:
    """Whether the logit lens reads `model`: a causal LM whose internals carry the stream "hidden" and that has an
    output layer to read it through, `unembed` (our GPT, a LoRA-adapted GPT, Llama); a recurrent LM or the n-gram
    has none."""
    return callable(getattr(model, "unembed", None))


@torch.inference_mode()
def logit_lens(model, tokenizer, ids: list[int], notices: list[str]) -> dict:
    """The logit lens (nostalgebraist 2020): the model's final norm and output layer applied to the residual stream
    after the embedding and after every block, so each layer says what it would predict next at each position.
    Per (layer, position): the top token and its probability, and the probability of the token the last layer
    predicts there. Works for every net whose internals carry "hidden" and that has `unembed` (has_logit_lens)."""
    if len(ids) > LENS_MAX_TOKENS:
        notices.append(f"The logit lens shows the last {LENS_MAX_TOKENS} of the text's {len(ids)} tokens.")
        ids = ids[-LENS_MAX_TOKENS:]
    *_, internals = model(torch.tensor([ids]), return_internals=True)
    hidden = internals["hidden"]
    final = model.unembed(hidden[-1])[0].argmax(-1)                            # (T,) the last layer's choice
    top_tokens, top_probs, final_probs = [], [], []
    for h in hidden:                                                            # one layer at a time: (1, T, V)
        p = torch.softmax(model.unembed(h)[0].float(), dim=-1)                 # (T, V)
        prob, token = p.max(dim=-1)
        top_tokens.append([token_text(tokenizer, int(i)) for i in token])
        top_probs.append([round(float(x), 4) for x in prob])
        final_probs.append([round(float(p[t, int(i)]), 4) for t, i in enumerate(final)])
    return {"tokens": [token_text(tokenizer, i) for i in ids], "ids": ids,
            "layers": ["embedding"] + [f"block {i}" for i in range(1, len(hidden))],
            "top_token": top_tokens, "top_prob": top_probs,
            "final_token": [token_text(tokenizer, int(i)) for i in final], "final_token_prob": final_probs,
            "notices": notices}


def ngram_context(model, tokenizer, seen: list[int]) -> dict:
    """What an n-gram model read for its next token: the last n - 1 tokens (`sees`) and the highest order whose
    context it had counted (`order`: n, none backed off; 0, the uniform distribution)."""
    n = model.config.n
    _, order = model.distribution(seen)
    return {"sees": decode(tokenizer, seen[-(n - 1):]) if n > 1 else "", "order": int(order), "n": n}


# ---------------------------------------------------------------------------------------------
# The prompt as a model reads it, and the continuation


class GenerationError(ValueError):
    """A prompt that cannot be made (a chat turn the template refuses): the message says why."""


@dataclass
class Prompt:
    """What a model continues: the text as it reads it (decoded from `ids`), its ids, and the tokens that end it."""

    text: str
    ids: list[int]
    stops: frozenset[int]


def stops(m) -> frozenset[int]:
    """The tokens that end a generation: SmolLM2's end of turn and end of text (our char models have none)."""
    if m.kind != "llama":
        return frozenset()
    return frozenset({m.card["eos_id"], m.tokenizer.token_to_id("<|endoftext|>")} - {None})


def chat_prompt(m, prompt: str, chat: bool, notices: list[str]) -> str:
    """The prompt as the user's turn of the model's chat template (`chat`), or as it is."""
    if not chat:
        return prompt
    if getattr(m, "chat", None) is None:
        notices.append(f"{m.name} has no chat template (only SmolLM2-135M-Instruct has one): continuing the "
                       "prompt as it is.")
        return prompt
    try:
        return m.chat([{"role": "user", "content": prompt}])
    except ValueError as err:
        raise GenerationError(f"Chat: {err}") from None


def encode_prompt(m, prompt: str | None, notices: list[str]) -> tuple[str, list[int]]:
    """The prompt's ids and its text as the model reads it (decoded from those ids: SmolLM2's byte tokens of one
    emoji each carry the emoji's offsets, so text rebuilt from offsets would repeat it). Rules: characters the model
    never saw are left out (with a notice); an empty prompt starts from a new line, the way every speech in the
    corpus does."""
    prompt, more = clean_text(prompt, MAX_CHARS)
    notices.extend(more)
    enc = m.tokenizer.encode(prompt, add_special_tokens=False)
    unk = tokenization.unk_id(m.tokenizer)  # [UNK], or <unk>; None for a byte-level BPE, which knows every text
    unknown = sorted({prompt[s:e] for (s, e), i in zip(enc.offsets, enc.ids) if i == unk and e > s})
    if unknown:
        shown = " ".join(token_label(c) for c in unknown[:20]) + (" …" if len(unknown) > 20 else "")
        notices.append(f"{len(unknown)} character(s) are not in {m.name}'s vocabulary and were left out: {shown}")
    kept = [i for i in enc.ids if i != unk]
    if not kept:
        notices.append("The prompt is empty (or has no character the model knows): starting from a new line.")
        kept = m.tokenizer.encode("\n", add_special_tokens=False).ids
    return decode(m.tokenizer, kept), kept


def prepare(m, prompt: str | None, chat: bool, notices: list[str]) -> Prompt:
    """The prompt of a generation: the user's turn of the chat template when `chat`, its tokens, its stops."""
    text, ids = encode_prompt(m, chat_prompt(m, prompt or "", chat, notices) if chat else prompt, notices)
    return Prompt(text, ids, stops(m))


# The batched decoders: a model's kind -> a function giving the engine that serves that model (playground/serving/
# engine.install registers them where a server runs). A kind without one decodes each generation on its own.
ENGINES: dict[str, Callable] = {}


def decoded(m, prompt: Prompt, n: int, rule: dict, seed: int, past: dict | None = None,
            last: dict | None = None) -> Iterator[dict]:
    """The steps (sampling.step_record) of one continuation: from the engine that serves `m`'s kind, batched with
    everyone else's, or alone. `past`, `last`: the step caches of sampling.stream, for a model decoded alone (an
    engine keeps the prompts' shared beginnings itself)."""
    engine = ENGINES.get(m.kind)
    if engine is not None:
        return engine(m).stream(prompt.ids, n, rule, seed, prompt.stops)
    start = 0 if past is None else past["idx"].size(1)
    return sampling.stream(m.model, torch.tensor([prompt.ids[start:]]), n, seed=seed, stop=prompt.stops, past=past,
                           last=last, **rule)


def sampled(m, prompt: Prompt, n: int, rule: dict, seed: int, context: bool = True, past: dict | None = None,
            last: dict | None = None) -> Iterator[list[dict]]:
    """The steps of a sampled continuation (`rule`: temperature, top_k, top_p), the list so far after each new step
    (with `context`, an n-gram's steps also say what it saw and the order that answered); once the last is yielded,
    the list is `finish`ed. `past`: the step cache of the prompt's first ids (only the rest is run); `last`
    receives the cache after the last step (sampling.stream; both only where no engine serves the model)."""
    steps: list[dict] = []
    seen = list(prompt.ids)
    reader = tokenization.Detokenizer(m.tokenizer, prompt.ids)  # each step's text, after the prompt's
    for step in decoded(m, prompt, n, rule, seed, past, last):
        steps.append(named(reader, step))
        if context and m.kind == "ngram":  # what the n-gram saw and the order that answered (where it backed off)
            steps[-1].update(ngram_context(m.model, m.tokenizer, seen))
        seen.append(step["token"])
        yield steps
    finish(reader, steps)


def generate(m, prompt: Prompt, strategy: str, rule: dict, seed: int, n: int, notices: list[str],
             chat: bool | None = None, width: int | None = None) -> Iterator[tuple[list[dict], dict | None]]:
    """The /generate endpoint's data: (the steps so far, None) while sampling, then (the steps, the JSON)
    {model, prompt, strategy, temperature, top_k, top_p, seed, max_new_tokens, notices, text, steps[, chat][, beam]}:
    `text` is `prompt` followed by the steps' tokens. `chat` None: not asked; `width`: beam search, `n` tokens for
    each of `width` beams."""
    data = {"model": m.name, "prompt": prompt.text, "strategy": strategy, **rule, "seed": seed, "max_new_tokens": n,
            "notices": notices, "text": "", "steps": []}
    if chat:
        data["chat"] = getattr(m, "chat", None) is not None
    if width is not None:
        steps, info = beam(m.model, m.tokenizer, prompt.ids, width, n)
        data.update(steps=steps, text=prompt.text + "".join(s["token"] for s in steps), beam=info)
        yield steps, data
        return
    steps: list[dict] = []
    for steps in sampled(m, prompt, n, rule, seed):
        yield steps, None
    data.update(steps=steps, text=prompt.text + "".join(s["token"] for s in steps))  # the steps' tokens make the text
    yield steps, data


def compared(m, prompt: str | None, n: int, rule: dict, seed: int, notices: list[str]) -> tuple[str, dict]:
    """One model of /compare_generate: the prompt as it reads it, and {text, prompt_perplexity, notices, temperature,
    top_k, top_p, steps}; the perplexity over the model's context (its last positions) and None under 2 tokens."""
    text, ids = encode_prompt(m, prompt, notices)
    context = getattr(m.config, "n_positions", None)
    scored = ids[-context:] if context else ids
    if context and len(ids) > context:
        notices.append(f"Perplexity over the last {context} tokens (the model's context).")
    with torch.inference_mode():
        ppl = sampling.perplexity(m.model, torch.tensor([scored])) if len(scored) >= 2 else None
    steps: list[dict] = []
    for steps in sampled(m, Prompt(text, ids, stops(m)), n, rule, seed, context=False):
        pass
    return text, {"text": text + "".join(s["token"] for s in steps), "prompt_perplexity": ppl, "notices": notices,
                  **rule, "steps": steps}
