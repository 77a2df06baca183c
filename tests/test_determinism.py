"""The same inputs and seed give the same answer, whatever else the server is doing: every seeded computation
the app serves draws from its own torch.Generator, never from the process-wide one, so running them all at
once, beside a thread that keeps reseeding and drawing from the global generator, changes nothing.

The analysis functions are called directly (the app's answer cache would otherwise serve repeats)."""

from __future__ import annotations

import pytest
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

from playground import checkpoints
from playground.analysis import fill_mask, gradient_flow, sampling
from playground.nets.recurrent import RecurrentConfig, RecurrentLM
from playground.training import memory

TEXT = "The bank by the river was closed, so we walked on."


def seeded_calls() -> dict:
    """Every seeded computation of the app, small: name -> a function returning JSON-able data."""
    rnn = {key: checkpoints.shared(f"{key}-shakespeare") for key in ("rnn", "lstm", "gru")}
    tokenizer = rnn["rnn"].tokenizer
    gpt = checkpoints.shared("gpt-shakespeare")
    mlm = checkpoints.shared("bert-english")
    prompt = torch.tensor([gpt.tokenizer.encode("ROMEO:").ids])

    def fresh_flow():
        data, _ = gradient_flow.compare({k: c.model for k, c in rnn.items()}, tokenizer, TEXT, 40, fresh=True)
        return data

    return {
        "gradient_flow fresh": fresh_flow,
        "memory experiment": lambda: memory.run(memory.MemoryConfig(max_k=3, steps=15, hidden_size=8, seed=5)),
        "sampling": lambda: sampling.generate(gpt.model, prompt, 30, temperature=1.0, top_k=20, seed=7).tolist(),
        "masking demo": lambda: fill_mask.masking_demo(mlm.tokenizer, TEXT, seed=3, n_draws=200),
    }


def canonical(data) -> str:
    """The answer without its wall-clock timings (`seconds`, and `made`: when and where it ran)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("seconds", "made")}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return json.dumps(strip(data), sort_keys=True, default=str)


@pytest.mark.slow
def test_seeded_answers_are_the_same_alone_and_all_at_once_beside_a_noisy_neighbour():
    calls = seeded_calls()
    alone = {name: canonical(fn()) for name, fn in calls.items()}
    stop = threading.Event()

    def neighbour():  # another request that seeds and draws from the process-wide generator
        i = 0
        while not stop.is_set():
            torch.manual_seed(i)
            torch.rand(10_000)
            i += 1

    noise = threading.Thread(target=neighbour, daemon=True)
    noise.start()
    try:
        with ThreadPoolExecutor(8) as pool:
            futures = {(name, r): pool.submit(fn) for r in range(2) for name, fn in calls.items()}
            together = {key: canonical(f.result()) for key, f in futures.items()}
    finally:
        stop.set()
        noise.join()
    differ = sorted({name for (name, _), answer in together.items() if answer != alone[name]})
    assert not differ, f"answers that changed under load: {differ}"


def test_a_seeded_recurrent_model_is_the_global_seeds_model_without_touching_the_global_generator():
    for cell, extra in (("rnn", {}), ("lstm", {}), ("lstm", {"coupled": True}), ("gru", {})):
        config = RecurrentConfig(cell=cell, vocab_size=11, n_embd=5, hidden_size=7, **extra)
        torch.manual_seed(3)
        expected = RecurrentLM(config).state_dict()
        before = torch.get_rng_state()
        seeded = RecurrentLM.seeded(config, torch.Generator().manual_seed(3)).state_dict()
        assert torch.equal(before, torch.get_rng_state()), "the global generator was read or seeded"
        assert all(torch.equal(expected[k], seeded[k]) for k in expected), (cell, extra)
