"""DistributedDataParallel as a user runs it: `torchrun` with two CPU processes (gloo) follows the
same trajectory as one process with the same global batch: each process trains on its half of the
batch and DDP averages the gradients, which is the gradient of the whole batch's mean loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # torchrun and its two gloo processes

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--n_layer=1", "--n_head=2", "--n_embd=16", "--n_positions=16", "--block_size=16", "--batch_size=8",
        "--max_iters=12", "--eval_interval=6", "--eval_iters=2", "--warmup_iters=2", "--learning_rate=3e-3",
        "--threads=1"]


def train(corpus: str, out: Path, name: str, processes: int) -> list[dict]:
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
                if processes > 1 else [sys.executable])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([*launcher, "-m", "playground.train", "gpt", "--corpus", corpus, "--out", str(out),
                             f"--name={name}", "--device=cpu", *ARGS], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    card = json.loads((out / name / "card.json").read_text(encoding="utf-8"))
    assert card["processes"] == processes
    return card["history"]


@pytest.mark.skipif(sys.platform == "win32", reason="gloo over localhost")
def test_two_gloo_processes_match_one_process(tiny_corpus, tmp_path):
    one = train(tiny_corpus, tmp_path, "one", 1)
    two = train(tiny_corpus, tmp_path, "two", 2)
    assert [h["iter"] for h in one] == [h["iter"] for h in two] == [0, 6, 12]
    for a, b in zip(one, two):
        assert abs(a["train"] - b["train"]) < 2e-3 and abs(a["val"] - b["val"]) < 2e-3, (a, b)
    assert one[-1]["train"] < one[0]["train"] - 0.1  # and it did learn something
