"""Exact resume after a kill at a random moment: a GPT with dropout, a checkpoint and a resume state at every
step, killed (SIGKILL, as a lost machine would be) at random times in ten trials; every resumed run ends with
the weights and history of the run that was never interrupted, bit for bit. A kill before the first state was
written leaves nothing to resume: that run starts again."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from playground.training import loop

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--n_layer=1", "--n_head=2", "--n_embd=16", "--n_positions=16", "--block_size=16", "--batch_size=4",
        "--max_iters=40", "--eval_interval=1", "--eval_iters=1", "--warmup_iters=2", "--dropout=0.1",
        "--dtype=float32", "--threads=1", "--device=cpu", "--seed=3"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def command(corpus: str, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "playground.train", "gpt", "--corpus", corpus, "--out", str(out), "--name=run",
            *ARGS, *extra]


def result(out: Path) -> tuple[dict, list]:
    weights = load_file(str(out / "run" / "model.safetensors"))
    card = json.loads((out / "run" / "card.json").read_text(encoding="utf-8"))
    history = [{k: v for k, v in record.items() if k != "seconds"} for record in card["history"]]
    return weights, history


def steps_written(out: Path) -> int:
    """The steps of the run's last checkpoint (written whole by a rename, so never read half-written); 0 before."""
    try:
        return json.loads((out / "run" / "card.json").read_text(encoding="utf-8"))["steps"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return 0


@pytest.mark.timeout(600)
def test_a_run_killed_at_random_moments_resumes_bit_for_bit(tiny_corpus, tmp_path):
    subprocess.run(command(tiny_corpus, tmp_path / "whole"), cwd=ROOT, env=ENV, check=True, capture_output=True,
                   timeout=240)
    reference_weights, reference_history = result(tmp_path / "whole")
    rng = random.Random(0)
    resumed = 0
    for trial in range(10):
        out = tmp_path / f"trial-{trial}"
        child = subprocess.Popen(command(tiny_corpus, out), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        # a random moment of the run, whatever the machine's speed: once it has written step `target`'s
        # checkpoint (torch's import takes a few seconds first), a random part of a step later
        target, started = rng.randint(1, 38), time.monotonic()
        while steps_written(out) < target and child.poll() is None and time.monotonic() - started < 120:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.02))
        child.send_signal(signal.SIGKILL)
        child.wait()
        again = ["--resume"] if loop.has_resume_state(out / ".run.resume") else []
        card = out / "run" / "card.json"
        resumed += bool(again) and (not card.exists() or json.loads(card.read_text())["steps"] < 40)
        finish = subprocess.run(command(tiny_corpus, out, *again), cwd=ROOT, env=ENV, capture_output=True,
                                text=True, timeout=240)
        assert finish.returncode == 0, finish.stderr[-2000:]
        weights, history = result(out)
        assert history == reference_history, f"trial {trial}: the resumed run's history differs"
        assert all(torch.equal(weights[k], reference_weights[k]) for k in reference_weights), f"trial {trial}"
    assert resumed >= 5, f"only {resumed} of 10 kills interrupted the run after its first resume state"
