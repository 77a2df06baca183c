"""`python -m playground.bench`: measure the budgets of DESIGN.md and print one table.

Rows: app ready time and resident memory (a fresh process that imports app.py, which loads every
model and builds the UI), then each endpoint's median and p95 latency, measured twice: the handler
called in-process (what the budgets are about) and a round trip through gradio_client to a launched
app on localhost (what a user waits for). Options: --runs N (default 30), --no-http.
The rows measured in-process are in playground/tools/bench.py, those of a served app in
playground/tools/bench_served.py.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

from playground.tools.bench import (RACE_REFERENCE_S, RACE_TARGET, REFERENCE_ARGS, ROOT, app_ready, classify_rows,
                                    embeddings_rows, endpoint_calls, finetune_rows, generation_beside_python,
                                    generation_speed, heads_rows, ms, retrain_seconds_per_mb, time_calls,
                                    tool_round_trip_rows, training_race)
from playground.tools.bench_browser import browser_rows
from playground.tools.bench_causal import causal_rows
from playground.tools.bench_engine import engine_rows, gpt_rows
from playground.tools.bench_follow import follow_rows
from playground.tools.bench_inference import inference_rows
from playground.tools.bench_rooms import rooms_rows
from playground.tools.bench_served import (attention_bytes, class_quiz_rows, every_tab_rows, http_latencies,
                                           hub_rows, lecture_hall_rows, load_rows, serving_rows,
                                           smollm2_memory_rows, smollm2_rows, soak_rows)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground.bench", description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--no-http", action="store_true", help="skip the gradio_client round trips")
    parser.add_argument("--race", metavar="TINYSHAKESPEARE", help="also run the GPT training race on this file")
    parser.add_argument("--load", action="store_true", help="also run the load test (20 users x 50 requests)")
    parser.add_argument("--soak", action="store_true", help="also run the soak test (2,000 requests)")
    parser.add_argument("--students", type=int, default=0, help="also run a lecture hall of this many students")
    parser.add_argument("--think", type=float, default=10.0, help="the students' mean think time in seconds")
    parser.add_argument("--class-seconds", type=float, default=120.0, help="how long the lecture hall lasts")
    parser.add_argument("--hall-only", action="store_true", help="only the lecture hall rows (with --students)")
    parser.add_argument("--hall-model", choices=["smollm2"], help="the browsers' hall with attention and generation "
                        "on this model (with --hall-only)")
    parser.add_argument("--heads-only", action="store_true", help="only the induction and head finder rows")
    parser.add_argument("--causal-only", action="store_true", help="only the Causal lab rows")
    parser.add_argument("--rooms-only", action="store_true", help="only the class database's rows (answers at once, "
                        "follow-me's propagation; on PostgreSQL too when DATABASE_URL is set)")
    parser.add_argument("--follow-only", action="store_true", help="only follow me through the page's protocol (200 "
                        "pages; one copy, and two behind nginx when DATABASE_URL names a PostgreSQL database)")
    parser.add_argument("--classify-only", action="store_true", help="only the Classify view's row")
    parser.add_argument("--browser-only", action="store_true", help="only the page in Chromium: opening it and "
                        "drawing each answer, the app's frontend beside Gradio's own (--runs pages each)")
    parser.add_argument("--engine-only", action="store_true", help="only the generation engine: SmolLM2's tokens a "
                        "second for 1 to 64 students at once (playground/serving/engine.py)")
    parser.add_argument("--inference-only", action="store_true", help="only the Inference tab's rows: the KV cache, "
                        "batching (the experiment to batch 32), speculative decoding, quantization (a 64-token text)")
    parser.add_argument("--every-tab-only", action="store_true", help="only the memory after every tab's heaviest "
                        "paths, the Causal lab's included")
    return parser


def main(argv: list[str] | None = None) -> list[tuple]:
    args = _parser().parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    sys.path.insert(0, str(ROOT))

    only = {"hall_only": lambda: lecture_hall_rows(args.students or 200, args.think, args.class_seconds,
                                                   args.hall_model),
            "heads_only": lambda: heads_rows(args.runs), "causal_only": lambda: causal_rows(min(args.runs, 5)),
            "rooms_only": rooms_rows, "classify_only": lambda: classify_rows(args.runs),
            "every_tab_only": every_tab_rows, "follow_only": follow_rows,
            "browser_only": lambda: browser_rows(min(args.runs, 10)),
            "engine_only": lambda: [*engine_rows(), *gpt_rows()],
            "inference_only": lambda: inference_rows(min(args.runs, 10))}
    for flag, some_rows in only.items():
        if getattr(args, flag):
            return _table(some_rows(), args.runs)
    rows = []  # (metric, median, p95, budget, ok)
    wall, imported, rss = app_ready()
    rows.append(("app ready (fresh process: import, models, UI)", f"{wall:.2f} s", "", "≤ 8 s", wall <= 8))
    rows.append(("  of which `import app`", f"{imported:.2f} s", "", "", None))
    rows.append(("resident memory after start (import app)", f"{rss:,.0f} MB", "", "≤ 1,536 MB", rss <= 1536))
    rows += serving_rows()

    calls = endpoint_calls()
    http = {} if args.no_http else http_latencies(args.runs)
    for name, (fn, call_args, budget) in calls.items():
        median, p95 = time_calls(lambda: fn(*call_args), args.runs)
        rows.append((f"{name}: handler", ms(median), ms(p95), "" if budget is None else f"≤ {ms(budget)}",
                     None if budget is None else median <= budget))
        if name in http:
            h_median, h_p95 = http[name]
            rows.append((f"{name}: HTTP round trip", ms(h_median), ms(h_p95), "", None))
    rows.extend(embeddings_rows(args.runs))
    sent, layer = attention_bytes()
    rows.append((f"attention (512 tokens): bytes sent to the browser (the largest layer, {layer})",
                 f"{sent / 2**20:.2f} MB", "", "≤ 2 MB", sent <= 2 * 2**20))
    for algorithm, rate in retrain_seconds_per_mb().items():
        budget = algorithm != "unigram"  # the "well under a second per megabyte" is BPE's and WordPiece's
        rows.append((f"retrain {algorithm} on the corpus sample", f"{rate:.2f} s/MB", "", "< 1 s/MB" if budget else "",
                     rate < 1 if budget else None))
    speeds = generation_speed()
    rows.append(("generate 120 tokens (within the context), KV cache", f"{speeds['cache']:,.0f} tokens/s", "",
                 "≥ 200 tokens/s", speeds["cache"] >= 200))
    rows.append(("  the same without the cache", f"{speeds['no cache']:,.0f} tokens/s", "", "", None))
    rows.append(("  500 tokens: the window slides past the context", f"{speeds['sliding']:,.0f} tokens/s", "", "",
                 None))
    alone, beside = generation_beside_python()
    rows.append(("a new prompt's 200 tokens (Generation's handler) alone", f"{alone:.2f} s", "", "", None))
    rows.append(("  the same beside a thread running Python (a busy server's event loop)", f"{beside:.2f} s", "", "",
                 None))
    rows += [*smollm2_rows(), *engine_rows(), *gpt_rows(), *hub_rows(), *tool_round_trip_rows(), *smollm2_memory_rows(),
             *heads_rows(args.runs), *inference_rows(min(args.runs, 10)),
             *causal_rows(min(args.runs, 5))]  # SmolLM2, heads, the Causal lab
    rows.extend(finetune_rows())
    rows.extend(class_quiz_rows())
    rows.extend(rooms_rows())
    rows.extend(follow_rows())
    rows.extend(every_tab_rows())
    rows.extend(browser_rows(min(args.runs, 5)))
    if args.load:
        rows.extend(load_rows())
    if args.soak:
        rows.extend(soak_rows())
    if args.students:
        rows.extend(lecture_hall_rows(args.students, args.think, args.class_seconds))
    if args.race:
        seconds, last = training_race(args.race)
        rows.append((f"training race: wall time to val loss {RACE_TARGET} (gpt, step {last['iter']})",
                     "never" if seconds is None else f"{seconds:.1f} s", "", f"≤ {RACE_REFERENCE_S:.0f} s (nanoGPT)",
                     seconds is not None and seconds <= RACE_REFERENCE_S))
        reference, last = training_race(args.race, REFERENCE_ARGS)
        rows.append((f"  nanoGPT's recipe through our trainer, same machine: 2,000 steps, val loss {last['val']:.3f}",
                     f"{last['seconds']:.1f} s", "", "", None))
        if seconds is not None:
            rows.append(("  ours to the target / nanoGPT's recipe to its end, side by side",
                         f"{seconds / last['seconds']:.2f}", "", "≤ 1", seconds <= last["seconds"]))
    return _table(rows, args.runs)


def _table(rows: list[tuple], runs: int) -> list[tuple]:
    print(f"\nNLP Playground bench: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {runs} runs per row\n")
    widths = [max(len(str(r[i])) for r in rows + [("metric", "median", "p95", "budget")]) for i in range(4)]
    header = ("metric", "median", "p95", "budget")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " | ok |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|----|")
    for metric, median, p95, budget, ok in rows:
        mark = "" if ok is None else ("yes" if ok else "NO")
        print("| " + " | ".join(str(v).ljust(w) for v, w in zip((metric, median, p95, budget), widths))
              + f" | {mark:<2} |")
    return rows


if __name__ == "__main__":
    main()
