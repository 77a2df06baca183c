"""The Inference tab's Batching view, as plain data: the engine serving SmolLM2 in this process, live, and an
experiment a student runs, the same prompt decoded at batch 1, 2, 4, ... 32.

- **Live** (`live`): two snapshots of the engine that serves the class's generations (engine.serving: the one
  `for_model` made; none until a generation asked for it), WINDOW seconds apart: its rows and each row's position,
  the steps it took meanwhile, their mean time and the tokens a second.
- **Experiment** (`experiment`): an engine of its own (engine.Engine, the same code as the class's) over the served
  twin itself (for_model's: no second copy of the weights), one per process, one experiment at a time. For each
  batch size B, B rows of the prompt, each sampled with its own seed (row i: seed + i), each writing `n` tokens. The
  engine's model is wrapped to time each step it takes (`Timed`): a step whose rows all decode (no prompt being
  read beside them) is a decode step of that many rows; their median is the batch's step time. The wall time of
  the whole run gives the tokens a second a reader saw (prompts, sampling and all). Row 0 has the same seed at every
  size: its distributions and tokens are compared with those it had alone, bit for bit (the engine is
  batch-invariant by construction: nets/int8.py, nets/llama.Attention.ragged).
"""

from __future__ import annotations

import datetime
import os
import statistics
import threading
import time
from collections.abc import Iterator

import torch

from playground import heap
from playground.analysis import batching as roofline_of
from playground.analysis.generation import decode
from playground.serving import engine

SIZES = (1, 2, 4, 8, 16, 32)   # the batch sizes, doubling
MAX_PROMPT = 24                # prompt tokens: 32 rows' prompts take 3 steps of the engine's prefill (PREFILL), the
#                                experiment's costliest part (a prompt's positions are a batch of their own)
NEW = 6                        # tokens each row writes, by default (a 32-row batch: 3 or more steps of all its
#                                rows decoding, after the prompts')
MAX_NEW = 16                   # a row's tokens at most: the experiment's time grows with them (its memory does not:
#                                the rows' caches, and each step's distributions read as they come)
RULE = dict(temperature=0.8, top_k=40, top_p=1.0)   # sampled: each row's own generator decides its tokens
WINDOW = 1.0                   # seconds between the live view's two snapshots
EXPERIMENT_PREFIX_BYTES = 8 << 20  # its engine's prefix cache: a prompt of 24 tokens never fills a 64-token chunk


class Timed:
    """A model behind the engine's door (row_cache, step_rows) that times each step it is given: the seconds, the
    pieces, the positions and how many pieces are one decoding row's token."""

    def __init__(self, model):
        self.model, self.log = model, []

    def row_cache(self, capacity: int):
        return self.model.row_cache(capacity)

    def step_rows(self, new: list[torch.Tensor], caches: list) -> torch.Tensor:
        started = time.perf_counter()
        out = self.model.step_rows(new, caches)
        self.log.append({"seconds": time.perf_counter() - started, "pieces": len(new),
                         "positions": sum(t.numel() for t in new), "decoding": sum(t.numel() == 1 for t in new)})
        return out


_lock = threading.Lock()            # one experiment at a time in a process: its batch is its own
_runners: dict[int, tuple[engine.Engine, Timed]] = {}


def _runner(served: engine.Engine) -> tuple[engine.Engine, Timed]:
    """The experiments' engine over the served twin, made on first use in this process and kept (its thread waits)."""
    key = id(served.model)
    if key not in _runners:
        timed = Timed(served.model)
        _runners[key] = engine.Engine(timed, served.context, max_rows=max(SIZES),
                                      prefix_bytes=EXPERIMENT_PREFIX_BYTES), timed
    return _runners[key]


def _rates(a: dict, b: dict) -> dict:
    """The engine's work between two snapshots."""
    steps = b["stats"]["steps"] - a["stats"]["steps"]
    busy = b["stats"]["busy_seconds"] - a["stats"]["busy_seconds"]
    tokens = b["stats"]["tokens"] - a["stats"]["tokens"]
    return {"window_s": round(b["time"] - a["time"], 3), "steps": steps, "tokens": tokens,
            "step_ms": round(busy / steps * 1000, 2) if steps else None,
            "tokens_per_s": round(tokens / (b["time"] - a["time"]), 1)}


def live(m, window: float = WINDOW) -> dict:
    """The engine serving `m` in this process now: its rows (prompt, position, tokens made and asked for), the
    requests waiting, and over `window` seconds its steps, their mean time and the tokens a second."""
    served = engine.serving(m)
    when = datetime.datetime.now().isoformat(timespec="seconds")
    if served is None:
        return {"serving": False, "measured_at": when, "rows": [], "waiting": 0, "pid": os.getpid()}
    first = served.snapshot()
    time.sleep(window)
    last = served.snapshot()
    return {"serving": True, "measured_at": when, "pid": os.getpid(), "rows": last["rows"],
            "waiting": last["waiting"], "max_rows": last["max_rows"], **_rates(first, last),
            "totals": {k: round(v, 3) if isinstance(v, float) else v for k, v in last["stats"].items()},
            "weights": f"{8 if served.model.lm_head.planes == 1 else 14}-bit integer weights (nets/int8.py)"}


def _read(requests: list, n: int) -> list[tuple]:
    """Every request's n steps, a step of each in turn (so that no row's steps pile up unread: each holds two
    vocabulary-sized distributions), and row 0's kept: (the distribution, the token), as the engine hands them."""
    kept = []
    for _ in range(n):
        for i, request in enumerate(requests):
            step = request.steps.get()
            if isinstance(step, BaseException):
                raise step
            if i == 0:
                kept.append(step)
    return kept


def _run(runner: engine.Engine, timed: Timed, ids: list[int], n: int, seed: int, size: int) -> tuple[dict, list]:
    """One batch: `size` rows of the prompt at once; its timings, and row 0's steps."""
    timed.log.clear()
    before, started = dict(runner.stats), time.perf_counter()
    requests = [runner.submit(ids, n, RULE, seed + i, frozenset()) for i in range(size)]
    row0 = _read(requests, n)
    wall = time.perf_counter() - started
    decode = [s["seconds"] for s in timed.log if s["decoding"] == s["pieces"] == size]
    return {"batch": size, "wall_s": round(wall, 3), "tokens": size * n, "tokens_per_s": round(size * n / wall, 1),
            "steps": len(timed.log), "prefill_steps": sum(s["decoding"] < s["pieces"] for s in timed.log),
            "decode_steps": len(decode), "decode_ms": round(statistics.median(decode) * 1000, 2) if decode else None,
            "decode_tokens_per_s": round(size / statistics.median(decode), 1) if decode else None,
            "model_s": round(sum(s["seconds"] for s in timed.log), 3),
            "engine_busy_s": round(runner.stats["busy_seconds"] - before["busy_seconds"], 3),
            "points": [[s["decoding"], round(s["seconds"] * 1000, 2)] for s in timed.log
                       if s["decoding"] == s["pieces"]]}, row0


def _same(alone: list[tuple], batched: list[tuple]) -> dict:
    """Row 0 alone and in a batch: the same tokens, and the same distributions bit for bit."""
    tokens = [t for _, t in alone] == [t for _, t in batched]
    bits = all(torch.equal(a.probs, b.probs) and torch.equal(a.kept, b.kept) for (a, _), (b, _) in zip(alone, batched))
    diff = max(float((a.probs - b.probs).abs().max()) for (a, _), (b, _) in zip(alone, batched))
    return {"same_tokens": tokens, "same_bits": bits, "max_prob_diff": diff}


def experiment(m, ids: list[int], n: int, seed: int, sizes: tuple[int, ...] = SIZES) -> Iterator[dict]:
    """The prompt `ids` decoded at each batch size in turn through an engine over `m`'s served twin: after each,
    the results so far (plain data, the endpoint's JSON). Yields {"waiting": True} first when another experiment
    holds this process's engine."""
    served = engine.for_model(m)          # the served twin: made here on first use, as a generation would
    if not _lock.acquire(blocking=False):
        yield {"waiting": True}
        _lock.acquire()
    try:
        runner, timed = _runner(served)
        others = len(served.snapshot()["rows"])
        per_position = served.model.row_cache(1).nbytes          # one position's keys and values, every layer
        runs, alone, tokens = [], None, {}
        for size in sizes:
            result, row0 = _run(runner, timed, ids, n, seed, size)
            alone = alone or row0
            result["row0"] = _same(alone, row0)
            tokens[size] = [t for _, t in row0]
            runs.append(result)
            yield _report(m, served, ids, n, seed, runs, tokens, per_position, others) | {"sizes": list(sizes)}
    finally:
        _lock.release()
        heap.trim()


def _report(m, served, ids: list[int], n: int, seed: int, runs: list[dict], tokens: dict, per_position: int,
            others: int) -> dict:
    measured = {r["batch"]: r["decode_ms"] / 1000 for r in runs if r["decode_ms"] is not None}
    positions = len(ids) + (n - 1) / 2                 # a decode step's keys, on average over the answer
    return {"waiting": False, "measured_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
            "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "pid": os.getpid(),
            "others_served": others, "prompt": decode(m.tokenizer, ids), "prompt_tokens": len(ids),
            "new_tokens": n, "seed": seed, "rule": RULE,
            "weights": f"{8 if served.model.lm_head.planes == 1 else 14}-bit integer weights (nets/int8.py)",
            "runs": runs, "row0_ids": tokens[runs[0]["batch"]],
            "row0_text": decode(m.tokenizer, tokens[runs[0]["batch"]]),
            "invariant": all(r["row0"]["same_bits"] and r["row0"]["same_tokens"] for r in runs),
            "roofline": roofline_of.roofline(served.model, per_position, positions, measured)}
