"""Exact resume after a kill: a GPT with dropout, a checkpoint and a resume state at every step, killed (SIGKILL,
as a lost machine would be) again and again; the run that was resumed after every kill ends with the weights and
history of the run that was never interrupted, bit for bit. A kill before the first state was written leaves
nothing to resume: that run starts again.

One run is killed at chosen steps and resumed each time from what the kill left: 12 processes (the uninterrupted
run alongside, a kill before anything is written, nine kills and the last resume) where ten separate runs killed
once each took 21. It keeps their power, and more:
- a resume that restores anything inexactly (weights, optimizer moments, the step, the history, a random state,
  the data's order) makes the chain differ from the uninterrupted run from that resume on, so the final comparison
  fails whichever kill it followed (planted: random states not restored, the history differed at step 2); a
  resume that fails outright is reported with its error at once;
- a state written so that a kill can leave it half-written (the pointer to it switched before its files are in)
  is caught by the kills aimed inside the writing of a resume state (five of nine: a random moment of the few
  milliseconds after its folder appears), where the ten random moments of a step hit it only by chance (planted
  in save_resume_state, that bug failed this test in each of three runs, the old one in the one run tried; the
  chain's first version, with random moments of a step only, in one run of two);
- the steps reach what ten random ones (7 to 35) did not: the first resume state (step 1), the end of the warmup
  (step 2), a resume of a run that was itself resumed, and the last steps, where the final checkpoint is written
  and the resume state removed."""

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

pytestmark = pytest.mark.process  # training runs killed and resumed

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


# When each kill comes: after step n's checkpoint, a random part of a step later ("step"), or while step n's resume
# state is being written, a random part of a few milliseconds after its folder appeared ("writing")
KILLS = ((1, "writing"), (2, "step"), (6, "writing"), (9, "step"), (14, "writing"), (20, "step"), (27, "writing"),
         (33, "step"), (38, "writing"))


def kill_at(child: subprocess.Popen, out: Path, step: int, moment: str, rng: random.Random) -> None:
    """SIGKILL at that moment of the run, whatever the machine's speed (torch's import takes a few seconds first)."""
    if moment == "writing":
        ready, delay = lambda: (out / ".run.resume" / f"step-{step}").exists() or steps_written(out) > step, 0.004
    else:
        ready, delay = lambda: steps_written(out) >= step, 0.02
    started = time.monotonic()
    while not ready() and child.poll() is None and time.monotonic() - started < 120:
        time.sleep(0.001)
    time.sleep(rng.uniform(0.0, delay))
    child.send_signal(signal.SIGKILL)
    child.wait()


@pytest.mark.timeout(600)
def test_a_run_killed_at_chosen_steps_resumes_bit_for_bit(tiny_corpus, tmp_path):
    # the uninterrupted run, on the other core meanwhile (each run has one thread)
    log = (tmp_path / "whole.log").open("w")
    whole = subprocess.Popen(command(tiny_corpus, tmp_path / "whole"), cwd=ROOT, env=ENV, stdout=log, stderr=log)
    out, rng = tmp_path / "killed", random.Random(0)
    state = out / ".run.resume"
    child = subprocess.Popen(command(tiny_corpus, out), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    child.send_signal(signal.SIGKILL)  # before it wrote anything: nothing to resume
    child.wait()
    assert not loop.has_resume_state(state) and steps_written(out) == 0
    resumed, kills = 0, []
    for step, moment in KILLS:
        again = ["--resume"] if loop.has_resume_state(state) else []  # none: the run starts again
        resumed += bool(again)
        with (tmp_path / f"kill-{step}.log").open("w+") as child_log:
            child = subprocess.Popen(command(tiny_corpus, out, *again), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                                     stderr=child_log)
            kill_at(child, out, step, moment, rng)
            kills.append((step, moment, steps_written(out), child.returncode))
            if child.returncode not in (0, -signal.SIGKILL):  # it failed by itself (a resume of a broken state)
                child_log.seek(0)
                raise AssertionError(f"the run {again} before the kill at {step} ({moment}) failed: {kills}\n"
                                     + child_log.read()[-2000:])
    assert all(code == -signal.SIGKILL and written < 40 for _, _, written, code in kills[:-1]), kills
    finished = kills[-1][3] == 0 and kills[-1][2] == 40  # a fast machine may end the run before the last kill
    if not finished:
        assert kills[-1][3] == -signal.SIGKILL and loop.has_resume_state(state), kills
        finish = subprocess.run(command(tiny_corpus, out, "--resume"), cwd=ROOT, env=ENV, capture_output=True,
                                text=True, timeout=240)
        assert finish.returncode == 0, finish.stderr[-2000:]
    assert resumed >= len(KILLS) - 3, f"only {resumed} of {len(KILLS)} runs resumed a state: {kills}"
    assert whole.wait(timeout=240) == 0, (tmp_path / "whole.log").read_text()[-2000:]
    log.close()
    reference_weights, reference_history = result(tmp_path / "whole")
    weights, history = result(out)
    assert history == reference_history, f"the resumed run's history differs (kills: {kills})"
    assert weights.keys() == reference_weights.keys()
    assert all(torch.equal(weights[k], reference_weights[k]) for k in reference_weights), f"kills: {kills}"
