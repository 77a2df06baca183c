"""The generation engine's rows (playground/serving/engine.py): a class's SmolLM2 generations at once.

In this process: the engine over SmolLM2's int8 twin (one weight plane, as served, and two), N students' own chat
questions streamed at once (N = 1, 4, 16, 32, 64), each its own seed; the class's tokens a second, each student's,
and the first token's wait. Beside them the model decoding alone as before the engine (fp16, `sampling.stream`).
Through a served app: N students' `/generate` calls at once over HTTP, the path a page takes.
`python -m playground.bench --engine-only`.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

from playground.serving.engine import QUESTIONS, weight_bits
from playground.tools.bench import percentiles
from playground.ui.process import SWITCH_INTERVAL

STREAMS = (1, 4, 16, 32, 64)
TOKENS = 64
RULE = dict(temperature=0.8, top_k=10, top_p=1.0)   # the Generation tab's defaults


def _class(engine, prompts: list[list[int]], tokens: int) -> dict:
    """Every prompt streamed at once, one thread a student: tokens a second for the class, each student's,
    and the first token's wait."""
    first, speed, made = [], [], []
    lock = threading.Lock()
    start = threading.Barrier(len(prompts) + 1)

    def student(i: int, ids: list[int]) -> None:
        start.wait()
        asked = time.perf_counter()
        got, shown = 0, None
        for _ in engine.stream(ids, tokens, RULE, i):
            got += 1
            shown = shown or time.perf_counter()
        with lock:
            first.append(shown - asked)
            speed.append(got / (time.perf_counter() - shown) if got > 1 else 0.0)
            made.append(got)

    threads = [threading.Thread(target=student, args=(i, ids)) for i, ids in enumerate(prompts)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    return {"class": sum(made) / wall, "first_p95": percentiles(first)[1], "each_p50": percentiles(speed)[0]}


CONFIGS = ((1, 1, STREAMS), (1, 2, (1, 32)), (2, 1, (1, 32)))   # weight planes, torch threads, streams


def gpt_rows(tokens: int = TOKENS) -> list[tuple]:
    """Our GPT through the same door (serving/engine.Alone: row by row, each row's own step): the class's tokens a
    second against concurrent streams, each student a line of the corpus sample as a prompt; beside them one
    generation decoding alone (`sampling.stream`), on one of torch's threads as a compute lane."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)                  # as a compute lane runs (ui/workers.share_cores)
    try:
        return _gpt_rows(tokens)
    finally:
        torch.set_num_threads(threads)


def _gpt_rows(tokens: int) -> list[tuple]:
    import torch

    from playground import checkpoints
    from playground.analysis import sampling
    from playground.serving.engine import Alone, Engine

    m = checkpoints.load(checkpoints.ROOT / "models" / "gpt-shakespeare")
    lines = [line for line in (checkpoints.ASSETS_DIR / "corpus_sample.txt").read_text().splitlines() if line][:64]
    prompts = [m.tokenizer.encode(line[:60]).ids for line in lines]
    with torch.inference_mode():
        ids = torch.tensor([prompts[0]])
        list(sampling.stream(m.model, ids, 4, seed=0, **RULE))                    # warm up
        started = time.perf_counter()
        n = len(list(sampling.stream(m.model, ids, tokens, seed=0, **RULE)))
    rows = [(f"generation engine: our GPT (gpt-shakespeare), lines of the corpus sample, {tokens} tokens each", "", "",
             "", None),
            ("  one generation decoding alone (sampling.stream), 1 thread",
             f"{n / (time.perf_counter() - started):.0f} tokens/s", "", "", None)]
    engine = Engine(Alone(m.model), None)
    for count in STREAMS:
        result = _class(engine, [prompts[i % len(prompts)] for i in range(count)], tokens)
        rows.append((f"    {count} stream(s): the class's tokens/s (each student's p50; first token p95)",
                     f"{result['class']:.0f} tokens/s", f"{result['each_p50']:.1f}/s; {result['first_p95']:.2f} s",
                     "", None))
    return rows


def engine_rows(tokens: int = TOKENS) -> list[tuple]:
    """The engine as served (8-bit weights, one torch thread: a compute lane's), then with both cores' threads, then
    with 14-bit weights; beside them one generation decoding alone as before the engine."""
    import torch

    from playground.analysis import models, sampling
    from playground.serving.engine import Engine

    if models.resolve(models.SMOLLM2) is None:
        return [("generation engine (SmolLM2)", "not installed", "", "", None)]
    lm = models.get(models.SMOLLM2)
    prompts = [lm.tokenizer.encode(lm.chat([{"role": "user", "content": q}])).ids for q in QUESTIONS]
    threads, switch = torch.get_num_threads(), sys.getswitchinterval()
    rows = [(f"generation engine: SmolLM2, students' own chat questions, {tokens} tokens each, top-k 10", "", "", "",
             None)]
    sys.setswitchinterval(SWITCH_INTERVAL)      # as a served process runs (ui/process.py): the readers' threads
    try:
        for planes, n_threads, streams in CONFIGS:
            torch.set_num_threads(n_threads)
            if (planes, n_threads) == CONFIGS[0][:2]:
                with torch.inference_mode():
                    ids = torch.tensor([prompts[0]])
                    list(sampling.stream(lm.model, ids, 4, seed=0, **RULE))
                    started = time.perf_counter()
                    n = len(list(sampling.stream(lm.model, ids, tokens, seed=0, **RULE)))
                rows.append(("  before the engine: one generation decoding alone (fp16, sampling.stream), 1 thread",
                             f"{n / (time.perf_counter() - started):.1f} tokens/s", "", "", None))
            started = time.perf_counter()
            twin = lm.model.int8(planes)
            built = time.perf_counter() - started
            engine = Engine(twin, lm.config.n_positions)
            list(engine.stream(prompts[0], 4, RULE, 0))                               # warm up
            served = (planes, n_threads) == (1 if weight_bits() == 8 else 2, 1)
            label = f"{'14' if planes == 2 else '8'}-bit weights, {n_threads} thread(s)" + (" (as served)" if served
                                                                                         else "")
            rows.append((f"  engine, {label}: the twin built", f"{built:.1f} s", "", "", None))
            for count in streams:
                result = _class(engine, [prompts[i % len(prompts)] for i in range(count)], tokens)
                budget = {1: "≥ 44 tokens/s", 32: "≥ 400 tokens/s"}.get(count, "") if served else ""
                ok = {1: result["class"] >= 44, 32: result["class"] >= 400}.get(count) if served else None
                rows.append((f"    {count} stream(s): the class's tokens/s (each student's p50; first token p95)",
                             f"{result['class']:.0f} tokens/s",
                             f"{result['each_p50']:.1f}/s; {result['first_p95']:.2f} s", budget, ok))
            alone = lm.tokenizer.encode(" ".join(["word"] * 50)).ids[:50]
            started = time.perf_counter()
            next(iter(engine.stream(alone, 1, RULE, 0)))
            first = time.perf_counter() - started
            rows.append(("    first token of a 50-token prompt, alone", f"{first:.2f} s", "",
                         "≤ 0.5 s" if served else "", first <= 0.5 if served else None))
            del engine, twin
    finally:
        torch.set_num_threads(threads)
        sys.setswitchinterval(switch)
    return rows


def generation_rows(name: str, result, ms, p95) -> list[tuple]:
    """The class's own generations (Generation's events): how many finished of those asked, each one's first token
    (its wait for a place included), its end, and its tokens a second once the first came. `ms`, `p95`: how
    bench_served formats and takes percentiles."""
    done = getattr(result, "generations", [])
    if not done:
        return []
    asked = len(done) + sum(1 for endpoint, _ in result.errors if endpoint == "generate")
    first, end = sorted(g[1] for g in done), sorted(g[2] for g in done)
    speed = sorted(g[3] / (g[2] - g[1]) for g in done if g[3] > 1 and g[2] > g[1])
    slowest = speed[min(len(speed) - 1, round(0.05 * (len(speed) - 1)))] if speed else None
    return [(f"  {name}: generations finished, of those asked", f"{len(done)} of {asked}", "", "all",
             len(done) == asked),
            (f"  {name}: a generation's first token (its wait for a place included)", ms(statistics.median(first)),
             ms(p95(first)), "p95 ≤ 2 s", p95(first) <= 2),
            (f"  {name}: a generation done ({statistics.mean(g[3] for g in done):.0f} tokens on average)",
             ms(statistics.median(end)), ms(p95(end)), "p95 ≤ 30 s", p95(end) <= 30),
            (f"  {name}: a student's tokens a second after the first (p50; the slowest 5%'s)",
             f"{statistics.median(speed):.1f}/s" if speed else "", f"{slowest:.1f}/s" if speed else "", "≥ 8/s",
             slowest is not None and slowest >= 8)]
