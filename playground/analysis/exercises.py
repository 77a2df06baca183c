"""Predict, then reveal: questions a student answers before the app shows the answer, one or two per tab.

Every answer is computed when asked, by the same analysis code the tab uses (the tokenizers, the BPE trace, the
attention head summary, the gradient flow, the masked LM, the seq2seq evaluation in the card), never written here.
An exercise is a question, the kind of answer it takes (a whole number, or one of a list of choices) and a function
that computes the answer and a sentence that explains it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import torch

from playground.analysis import attention as att
from playground.analysis import fill_mask, gradient_flow, models, subwords, tokenization
from playground.analysis.embeddings import words

LECTURE_BPE_TABLE = "low 5\nlower 2\nnewest 6\nwidest 3\nhighest 2"    # the Tokenization tab's default
GRADIENT_TEXT = ("The king, my lord, is come to the castle, and the queen with him; they will dine with us tonight "
                 "and ride at dawn.")
THRESHOLD = 1e-3


@dataclass(frozen=True)
class Exercise:
    id: str
    tab: str
    question: str
    kind: str                                   # "number" (a whole number) or "choice"
    choices: tuple[str, ...] = ()
    solve: Callable[[], tuple[str, str]] = lambda: ("", "")   # -> (the answer, why)


def _shipped(name: str) -> models.Model:
    """A model of the registry the answer is computed with; an error when it is not shipped here."""
    if models.resolve(name) is None:
        raise RuntimeError(f"{name} is not shipped here")
    return models.get(name)


def _tokens(word: str, key: str) -> tuple[str, str]:
    enc = tokenization.encode(tokenization.load(key), word)
    return str(enc["n_tokens"]), f"{key} splits {word!r} into {enc['n_tokens']}: {' | '.join(enc['tokens'])}."


def _next_merge() -> tuple[str, str]:
    trace = subwords.trace(LECTURE_BPE_TABLE, 4)["merges"]
    done = ", ".join("".join(m["pair"]) for m in trace[:3])
    m = trace[3]
    return "".join(m["pair"]), (f"After the merges {done}, the most frequent adjacent pair is {m['pair'][0]} + "
                                f"{m['pair'][1]} ({m['count']} times): it becomes {m['new_symbol']!r}.")


@lru_cache(maxsize=1)
def _summary() -> tuple[dict, list[str]]:
    m = att.load_minilm()
    enc = att.encode(m, "The quick brown fox jumps over the lazy dog near the river bank.")
    return att.head_summary(att.attention(m, enc), enc.tokens), enc.tokens


def _previous_head(layer: int) -> tuple[str, str]:
    scores = _summary()[0]["previous"][layer]
    best = int(np.argmax(scores))
    return str(best), (f"In MiniLM's layer {layer}, head {best} puts {scores[best]:.0%} of each token's attention on "
                       f"the token before it (the next best head: {np.sort(scores)[-2]:.0%}).")


def _gradient_step(cell: str) -> tuple[str, str]:
    ckpt = _shipped(f"{cell}-shakespeare")
    data, _ = gradient_flow.compare({cell: ckpt.model}, ckpt.tokenizer, GRADIENT_TEXT, 100)
    norms = np.array(data["cells"][cell]["grad_norms"], dtype=float)          # |dL_T/dh_t|, t = 1..T
    below = np.flatnonzero(norms[::-1] < THRESHOLD)                               # steps back from T
    if not len(below):
        return "never", (f"Over all 100 steps the {cell.upper()}'s gradient stays above {THRESHOLD:g} "
                         f"(smallest: {norms.min():.1e}).")
    back = int(below[0])
    return str(back), (f"|∂L_T/∂h_t| of the {cell.upper()} falls below {THRESHOLD:g} {back} steps before the last "
                       f"character (t = {100 - back}); at the start it is {norms[0]:.1e}.")


def _blank() -> tuple[str, str]:
    ckpt = _shipped("minilm-mlm")
    pred = fill_mask.fill_mask(ckpt.model, ckpt.tokenizer, "Paris is the [MASK] of France.", top_k=5)
    top = [p["token_str"] for p in pred]
    return top[0], f"minilm-mlm's five most probable words: {', '.join(top)}."


def _analogy() -> tuple[str, str]:
    space = words.word2vec_space()
    if space is None:
        raise RuntimeError("word2vec-english is not shipped here")
    answers = words.analogy(space, "king", "man", "woman", [], k=5)["answers"]
    return answers[0]["word"], ("Our word2vec's five nearest words to king − man + woman (3CosAdd, the inputs left "
                                "out): " + ", ".join(f"{a['word']} ({a['score']:.2f})" for a in answers) + ".")


@torch.no_grad()
def _next_character() -> tuple[str, str]:
    ckpt = _shipped("gpt-shakespeare")
    prompt = "ROMEO:\nBut soft, what light through yonder windo"
    ids = torch.tensor([ckpt.tokenizer.encode(prompt).ids])
    probs = torch.softmax(ckpt.model(ids)[0][0, -1], -1)
    top = probs.topk(3)
    shown = [(ckpt.tokenizer.id_to_token(int(i)), float(p)) for p, i in zip(top.values, top.indices)]
    return shown[0][0], ("Our GPT's most probable next characters: " +
                         ", ".join(f"{c!r} ({p:.0%})" for c, p in shown) + ": it has read Romeo and Juliet.")


def _seq2seq_limit() -> tuple[str, str]:
    card = models.card("seq2seq-none") if models.resolve("seq2seq-none") else {}
    acc = card.get("accuracy_by_length") or {}
    if not acc:
        raise RuntimeError("seq2seq-none is not shipped here")
    for (low, high), a in zip(acc["buckets"], acc["accuracy"]):
        if a < 0.5:
            return str(low - 1), (f"Without attention, exact match falls below 50% for sources of {low}–{high} words "
                                  f"({a:.0%}); up to {low - 1} words it is at least 50% (held-out, "
                                  f"{card['held_out']['per_length']} "
                                  "sources per length).")
    return "never", "Without attention the model stays above 50% at every length measured."


EXERCISES = [
    Exercise("tokens-bpe", "Tokenization", "How many tokens does our byte-level BPE make of 'unbelievably'?", "number",
             solve=lambda: _tokens("unbelievably", "bpe")),
    Exercise("tokens-wordpiece", "Tokenization", "And MiniLM's WordPiece, of 'unbelievably'?", "number",
             solve=lambda: _tokens("unbelievably", "minilm")),
    Exercise("tokens-unigram", "Tokenization", "And our Unigram tokenizer (SentencePiece style), of 'unbelievably'?",
             "number", solve=lambda: _tokens("unbelievably", "unigram")),
    Exercise("tokens-char", "Tokenization", "And the character tokenizer, of 'naïve 👩‍💻'?", "number",
             solve=lambda: _tokens("naïve 👩‍💻", "char")),
    Exercise("bpe-merge", "Tokenization", "The lecture's table (low 5, lower 2, newest 6, widest 3, highest 2): "
             "which pair does BPE merge 4th?", "choice", ("es", "est", "lo", "low", "ne", "wi", "st"),
             solve=_next_merge),
    Exercise("previous-head", "Attention", "Which head of MiniLM's layer 0 attends to the previous token?",
             "choice", tuple(str(h) for h in range(12)), solve=lambda: _previous_head(0)),
    Exercise("gradient-rnn", "RNN gradient flow", "How many steps before the last character does the Elman RNN's "
             f"gradient fall below {THRESHOLD:g} (100 steps)?", "number", solve=lambda: _gradient_step("rnn")),
    Exercise("gradient-lstm", "RNN gradient flow", f"And the LSTM's? (a number, or 'never')", "number",
             solve=lambda: _gradient_step("lstm")),
    Exercise("analogy", "Embeddings", "king − man + woman in our word2vec: which word comes first?", "choice",
             ("queen", "princess", "prince", "monarch", "daughter", "throne", "woman"), solve=_analogy),
    Exercise("next-char", "Generation", "After 'ROMEO: But soft, what light through yonder windo', which character "
             "does our GPT find most probable?", "choice", ("w", "n", "u", "r", "s", "e", "space"),
             solve=_next_character),
    Exercise("blank", "Masked-LM fill-in", "Which word does minilm-mlm put first in 'Paris is the [MASK] of France.'?",
             "choice", ("capital", "city", "heart", "center", "king", "seat", "pride"), solve=_blank),
    Exercise("seq2seq-limit", "Seq2seq attention", "Up to how many words does seq2seq without attention still "
             "translate at least half of its sources exactly?", "number", solve=_seq2seq_limit),
]
BY_ID = {e.id: e for e in EXERCISES}


def listing() -> list[dict]:
    return [{"id": e.id, "tab": e.tab, "question": e.question, "kind": e.kind, "choices": list(e.choices)}
            for e in EXERCISES]


@lru_cache(maxsize=None)
def solution(exercise_id: str) -> tuple[str, str]:
    """The answer and its explanation, computed once per process (the shipped models do not change)."""
    return BY_ID[exercise_id].solve()


def normalise(exercise: Exercise, value) -> str:
    """A student's answer as it is compared and counted: a whole number, 'never', or one of the choices, lower case.
    An answer that cannot be one (a word where a number goes, a choice the question does not offer) is refused
    with what it should be ('' stays '': the caller says it is empty)."""
    text = " ".join(str(value if value is not None else "").split()).lower()[:40]
    if exercise.kind == "number" and text not in ("never", ""):
        try:
            number = float(text)
        except ValueError:
            raise ValueError("Your answer should be a number, e.g. 4: a whole number (or 'never'), not "
                             f"{text!r}.") from None
        if not np.isfinite(number) or number != int(number) or abs(number) > 10**6:
            raise ValueError(f"Your answer should be a whole number, e.g. 4, not {text!r}.")
        text = str(int(number))
    elif exercise.kind == "choice" and text and text not in {c.lower() for c in exercise.choices}:
        raise ValueError(f"Your answer should be one of: {', '.join(exercise.choices)} (not {text!r}).")
    return text


def check(exercise_id: str, value) -> dict:
    """Whether `value` is the answer, with the answer and why."""
    if exercise_id not in BY_ID:
        raise KeyError(f"Unknown exercise {exercise_id!r}; there are {', '.join(BY_ID)}.")
    exercise = BY_ID[exercise_id]
    given = normalise(exercise, value)
    truth, why = solution(exercise_id)
    return {"id": exercise_id, "question": exercise.question, "given": given, "answer": truth,
            "correct": given == truth.lower(), "why": why}
