"""Chain of thought with SmolLM2, as plain data: one question answered directly and "step by step", side by side.

Chain-of-thought prompting (Wei et al. 2022; the zero-shot "Let's think step by step" of Kojima et al. 2022) asks a
model to write its intermediate steps before the answer, so each step is context for the next. Whether a 135M model
gains from it is an empirical question: the shipped set of word problems (assets/reasoning/word_problems.json,
written for this project) and `python -m playground.tools.chain_of_thought` measure it, and the tab shows the
figures with their protocol beside the live answers.

The protocol, one for both ways: the question is the user's turn of SmolLM2's chat template, followed by one
instruction line (PROMPTS); the model's answer is decoded until its end of turn or the way's token budget; the
answer is the *last* whole number in what it wrote (commas inside numbers ignored), or none.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from playground.analysis import generation
from playground.checkpoints import ASSETS_DIR

PROBLEMS = ASSETS_DIR / "reasoning" / "word_problems.json"
RESULTS = ASSETS_DIR / "reasoning" / "results.json"

WAYS = ("direct", "step_by_step")
PROMPTS = {   # the line after the question: the only difference between the two ways
    "direct": "Give only the final answer, as a number.",
    "step_by_step": "Let's think step by step, then give the final answer as a number.",
}
# each way's token budget: an answer, or the steps and an answer (160: a two-step problem's steps take ~60 tokens;
# a reply caught repeating itself runs to the budget, and on a shared 2-core CPU each token costs ~0.1-0.5 s)
MAX_NEW = {"direct": 32, "step_by_step": 160}
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@lru_cache(maxsize=1)
def problems() -> list[dict]:
    """The shipped word problems: [{id, question, answer}]."""
    return json.loads(PROBLEMS.read_text(encoding="utf-8"))["problems"]


def measured() -> dict | None:
    """The accuracy the evaluation script measured and wrote (None before it has run)."""
    return json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else None


def extract_answer(text: str) -> float | None:
    """The last number in `text` (the protocol's answer), as a number: "so 3 + 5 = 8 apples." -> 8."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    value = float(found[-1].replace(",", ""))
    return int(value) if value.is_integer() else value


def prompt_text(question: str, way: str) -> str:
    """The user's turn for one way: the question, then the way's instruction."""
    return f"{question.strip()}\n{PROMPTS[way]}"


def answer(m, question: str, way: str, rule: dict, seed: int, notices: list[str], max_new: int | None = None) -> dict:
    """One way's answer: {way, prompt (as the model reads it, chat template included), text (what it wrote), steps
    (each token with its probability and the top candidates: generation.named), answer (extracted), n_tokens}."""
    if way not in WAYS:
        raise ValueError(f"unknown way {way!r}; choose from {', '.join(WAYS)}")
    prepared = generation.prepare(m, prompt_text(question, way), True, notices)
    steps: list[dict] = []
    for steps in generation.sampled(m, prepared, max_new or MAX_NEW[way], rule, seed):
        pass
    text = "".join(s["token"] for s in steps)
    return {"way": way, "prompt": prepared.text, "text": text, "steps": steps, "answer": extract_answer(text),
            "n_tokens": len(steps), "stopped": bool(steps) and steps[-1]["id"] in prepared.stops}


def compare(m, question: str, rule: dict, seed: int, notices: list[str], expected: float | None = None) -> dict:
    """The `chain_of_thought` endpoint's JSON: the question answered both ways with the same decoding rule and seed,
    {model, question, expected, temperature, top_k, top_p, seed, protocol, prompts (each way's user turn), direct,
    step_by_step, notices}; with an
    `expected` answer (a shipped problem's), each way also says whether it is `correct`."""
    data = {"model": m.name, "question": question, "expected": expected, **rule, "seed": seed,
            "protocol": PROTOCOL, "prompts": {way: prompt_text(question, way) for way in WAYS}, "notices": notices}
    for way in WAYS:
        data[way] = answer(m, question, way, rule, seed, notices)
        data[way]["correct"] = None if expected is None else data[way]["answer"] == expected
    return data


PROTOCOL = ("The question as the user's turn of SmolLM2's chat template, then one line: "
            + " or ".join(f'"{p}"' for p in PROMPTS.values())
            + f"; decoded up to the end of turn or {MAX_NEW['direct']} / {MAX_NEW['step_by_step']} new tokens; "
              "the answer is the last number in the reply.")
