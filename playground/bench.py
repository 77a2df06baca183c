"""`python -m playground.bench`: measure the budgets of DESIGN.md and print one table.

Rows: app ready time and resident memory (a fresh process that imports app.py, which loads every
model and builds the UI), then each endpoint's median and p95 latency, measured twice: the handler
called in-process (what the budgets are about) and a round trip through gradio_client to a launched
app on localhost (what a user waits for). Options: --runs N (default 30), --no-http.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
# 32 tokens for the byte-level BPE (the budgets are stated for a 32-token input)
TEXT_32 = "The quick brown fox jumps over the lazy dog, then naps beside the river bank while the old farmer counts his sheep."
BPE_TABLE = "low 5\nlower 2\nnewest 6\nwidest 3\nhighest 2"
ALL = ["char", "word", "bpe", "wordpiece", "unigram", "minilm"]


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def time_calls(fn: Callable[[], object], runs: int, warmup: int = 2) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def app_ready() -> tuple[float, float, float]:
    """Wall time of a fresh `import app` (seconds, from process start), import alone, and its RSS (MB)."""
    code = ("import time; t = time.perf_counter(); import app, psutil; "
            "print(time.perf_counter() - t, psutil.Process().memory_info().rss / 2**20)")
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    imported, rss = map(float, out.stdout.split()[-2:])
    return wall, imported, rss


def endpoint_calls() -> dict[str, tuple[Callable, tuple, float | None]]:
    """name -> (handler, arguments, budget in seconds or None)."""
    from playground.ui import tokenization_tab as tab

    return {
        "tokenize (6 tokenizers, 32 tokens)": (lambda *a: list(tab.tokenize(*a)), (TEXT_32, ALL), 0.030),
        "bpe_trace (lecture table, 10 merges)": (tab.bpe_trace, (BPE_TABLE, 10), None),
        "bpe_segment (3 words)": (tab.bpe_segment, (BPE_TABLE, 10, "lowest newer wider"), None),
        "explain_split (WordPiece + Unigram)": (tab.explain_split, ("unaffable tokenization", "wordpiece"), None),
        "normalize (4 steps)": (tab.normalize_text, (TEXT_32, ["lowercase", "punctuation", "stopwords", "stem"]), None),
    }


def retrain_seconds() -> tuple[float, float]:
    """Retraining BPE, WordPiece and Unigram on the corpus sample at a vocabulary size not yet cached."""
    from playground import tokenization

    samples = []
    for size in (1_000, 2_000, 4_000):
        start = time.perf_counter()
        for algorithm in tokenization.RETRAINABLE:
            tokenization.retrained(algorithm, size + 7)  # +7: never a size the app has cached
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def http_latencies(runs: int) -> dict[str, tuple[float, float]]:
    """Round trips through gradio_client to the app launched on a free localhost port."""
    import socket

    import app
    from gradio_client import Client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app.demo.launch(**app.LAUNCH, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        calls = {
            "tokenize (6 tokenizers, 32 tokens)": ("/tokenize", (TEXT_32, ALL, False, 2000)),
            "bpe_trace (lecture table, 10 merges)": ("/bpe_trace", (BPE_TABLE, 10)),
            "bpe_segment (3 words)": ("/bpe_segment", (BPE_TABLE, 10, "lowest newer wider")),
            "explain_split (WordPiece + Unigram)": ("/explain_split", ("unaffable tokenization", "wordpiece")),
            "normalize (4 steps)": ("/normalize", (TEXT_32, ["lowercase", "punctuation", "stopwords", "stem"])),
        }
        return {name: time_calls(lambda: client.predict(*args, api_name=api), runs) for name, (api, args) in calls.items()}
    finally:
        app.demo.close()


def ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:,.1f} ms"


def main(argv: list[str] | None = None) -> list[tuple]:
    parser = argparse.ArgumentParser(prog="python -m playground.bench", description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--no-http", action="store_true", help="skip the gradio_client round trips")
    args = parser.parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    sys.path.insert(0, str(ROOT))

    rows = []  # (metric, median, p95, budget, ok)
    wall, imported, rss = app_ready()
    rows.append(("app ready (fresh process: import, models, UI)", f"{wall:.2f} s", "", "≤ 8 s", wall <= 8))
    rows.append(("  of which `import app`", f"{imported:.2f} s", "", "", None))
    rows.append(("resident memory after start", f"{rss:,.0f} MB", "", "≤ 1,536 MB", rss <= 1536))

    calls = endpoint_calls()
    http = {} if args.no_http else http_latencies(args.runs)
    for name, (fn, call_args, budget) in calls.items():
        median, p95 = time_calls(lambda: fn(*call_args), args.runs)
        rows.append((f"{name}: handler", ms(median), ms(p95), "" if budget is None else f"≤ {ms(budget)}",
                     None if budget is None else median <= budget))
        if name in http:
            h_median, h_p95 = http[name]
            rows.append((f"{name}: HTTP round trip", ms(h_median), ms(h_p95), "", None))
    median, p95 = retrain_seconds()
    rows.append(("retrain BPE + WordPiece + Unigram on the 600 kB sample", ms(median), ms(p95), "< 1 s per MB",
                 median <= 0.6))

    print(f"\nNLP Playground bench: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {args.runs} runs per row\n")
    widths = [max(len(str(r[i])) for r in rows + [("metric", "median", "p95", "budget")]) for i in range(4)]
    header = ("metric", "median", "p95", "budget")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " | ok |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|----|")
    for metric, median, p95, budget, ok in rows:
        mark = "" if ok is None else ("yes" if ok else "NO")
        print("| " + " | ".join(str(v).ljust(w) for v, w in zip((metric, median, p95, budget), widths)) + f" | {mark:<2} |")
    return rows


if __name__ == "__main__":
    main()
