"""The Inference tab's rows of the bench (`python -m playground.bench --inference-only`): issue #56's budgets, a
64-token text in <= 2 s (the KV cache, speculative decoding), every quantization format in <= 5 s, and the batching
experiment to batch 32 in <= 10 s with its progress shown. Each through its handler, as a page asks: the KV cache
view on SmolLM2 and on our GPT, the live engine view (its one-second window), the experiment once (its first
streamed answer, then its whole table), each speculative draft, and the quantization view the first time and again."""

from __future__ import annotations

import os
import time

from playground.tools.bench import TEXT_64, ms, time_calls


def inference_rows(runs: int) -> list[tuple]:
    from playground.analysis import kv_cache, models
    from playground.serving import batching, engine
    from playground.ui import inference_batching, inference_kv

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = [(f"  (load average as the Inference rows start: {load})", "", "", "", None)]
    median, p95 = time_calls(lambda: inference_kv.kv_cache(TEXT_64, "gpt-shakespeare", False), runs)
    rows.append(("kv_cache (our GPT, 64 characters, past its window): handler", ms(median), ms(p95), "≤ 2,000.0 ms",
                 median <= 2.0))
    if models.resolve(models.SMOLLM2) is None:
        return rows + [("kv_cache, batching (SmolLM2)", "not installed", "", "", None)]
    engine.for_model(models.get(models.SMOLLM2))     # the served twin, as the Generation tab's first answer builds it
    median, p95 = time_calls(lambda: inference_kv.kv_cache(TEXT_64, models.SMOLLM2, False, kv_cache.FOLLOW_UP, 8),
                             min(runs, 5), warmup=1)
    rows.append(("kv_cache (SmolLM2, 64 tokens, 8 answer tokens, a second turn): handler", ms(median), ms(p95),
                 "≤ 2,000.0 ms", median <= 2.0))
    started, first, last = time.perf_counter(), None, None
    for last in inference_batching.batching_experiment(inference_batching.PROMPT, False, batching.NEW, "32", 0):
        first = first or time.perf_counter() - started
    seconds = time.perf_counter() - started
    data = last[-1]
    rows.append((f"batching: the experiment to batch 32 ({data['prompt_tokens']} prompt tokens, {batching.NEW} each): "
                 "handler, the served twin already built",
                 f"{seconds:.1f} s", "", "≤ 10 s", seconds <= 10))
    rows.append(("  its first streamed answer (batch 1: the progress shown)", f"{first:.1f} s", "", "", None))
    for run in data["runs"]:
        rows.append((f"  batch {run['batch']}: a decode step, tokens/s (steps; the run)",
                     f"{ms(run['decode_ms'] / 1000) if run['decode_ms'] else '–'}",
                     f"{run['decode_tokens_per_s'] or '–'}; {run['tokens_per_s']}", "", None))
    fit = data["roofline"]["fit"] or {}
    rows.append(("  the fit a + b × rows; the turn", f"{fit.get('a_ms')} + {fit.get('b_ms')} × rows ms",
                 f"{fit.get('turn')} rows", "", None))
    rows.append(("  row 0 alone and in every batch", "identical bits" if data["invariant"] else "DIFFERS", "", "",
                 data["invariant"]))
    median, p95 = time_calls(lambda: inference_batching.engine_batch(time.time()), min(runs, 3), warmup=0)
    rows.append(("engine_batch (the live engine, a 1 s window): handler", ms(median), ms(p95), "", None))
    return rows + views_rows(runs)


def views_rows(runs: int) -> list[tuple]:
    """The Speculative decoding view (each draft, the tab's defaults, on a 64-token text) and the Quantization view
    (every format measured on a 64-token text: the first time, and again from its cache), through their handlers."""
    from playground.analysis import quantization as quant
    from playground.ui import inference_quant, inference_speculative

    rows = []
    for draft in ("lookup", "self"):
        median, p95 = time_calls(lambda: inference_speculative.speculative(TEXT_64, False, draft),
                                 min(runs, 3), warmup=1)
        rows.append((f"speculative decoding, {draft} draft (the tab's defaults, a 64-token text): handler", ms(median),
                     ms(p95), "≤ 2,000.0 ms", median <= 2.0))
    quant.forget()
    started = time.perf_counter()
    inference_quant.quantization(TEXT_64)
    first = time.perf_counter() - started
    median, p95 = time_calls(lambda: inference_quant.quantization(TEXT_64), min(runs, 3), warmup=0)
    rows.append(("quantization: every format on a 64-token text, the first time: handler", ms(first), "",
                 "≤ 5,000.0 ms", first <= 5.0))
    rows.append(("  the same text again (cached per text)", ms(median), ms(p95), "", None))
    return rows

