"""The generation engine: one per served causal LM, and a whole class's generations advance in one batch.

"Everyone, ask SmolLM2 your own question" used to be served one generation at a time. A decode step reads every
weight once whatever the batch, so the rows after the first are nearly free until the arithmetic catches up: the
engine keeps every running generation in one batch and advances them all with one step, the iteration-level
scheduling of Orca (Yu et al., OSDI 2022) and vLLM (Kwon et al., SOSP 2023):

- **Continuous batching.** A request joins the batch at the next step and leaves it the step it ends (its stop
  token, its length, or its reader gone: a closed stream frees the row within one step). Each row has its own
  decoding rule, seed (its own torch.Generator), stop tokens and length.
- **Chunked prefill.** A prompt enters in chunks of CHUNK positions at fixed boundaries (0, CHUNK, 2 CHUNK, ...)
  beside the generating rows, at most PREFILL positions a step, so a long prompt never stalls the others.
- **Prefix sharing.** Every full chunk of a prompt is kept, keyed by the tokens up to its end (vLLM's automatic
  prefix caching; SGLang's RadixAttention keeps a tree of the same): the chat template's system turn, tool
  calling's 449-token instructions and the shipped prompts are computed once for the class. Bounded in bytes.
- **Batch-invariant by construction.** A seeded answer is the same bits alone and beside any others: the products
  are integer sums (nets/int8.py), everything else is per row or elementwise, attention is each row's own
  (nets/llama.Attention.ragged), and a prompt's chunks are cut the same way whatever is running (so a prefix from
  the cache is the very tensor the prompt would have computed). tests/test_engine.py checks it bit for bit.
- **Fair.** Waiting requests are admitted first come, first served; a step feeds every running row, and the
  prefill budget goes round the prefilling rows in turn.

The engine serves its model's int8 twin (Llama.int8): what that costs against fp16 (next-token KL, greedy
agreement) is measured by `quality` and shown in the Generation tab's card; the attention, lens and lab views
keep the exact model.
"""

from __future__ import annotations

import atexit
import math
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from playground import heap
from playground.analysis import generation, sampling
from playground.lru import Bounded
from playground.nets import kernels

CHUNK = 64              # prompt positions per prefill chunk; also the prefix cache's block
PREFILL = 256           # prompt positions a step takes at most, over every prefilling row
MAX_ROWS = 64           # rows in a step at most; later requests wait their turn
PREFIX_BYTES = 64 << 20  # the shared prompts' keys and values kept (SmolLM2: 2.9 MB a chunk, 22 chunks)
_END = object()


class Refused(generation.GenerationError):
    """A request the engine cannot take (the message says why): it never enters the batch."""


@dataclass(eq=False)
class Request:
    """One generation: its prompt, rule and seed in; its steps out through `steps`, each as (the distribution, the
    token), made a sampling.step_record by its reader."""

    ids: list[int]
    n: int                                  # new tokens at most
    rule: dict                              # temperature, top_k, top_p (sampling.distribution)
    seed: int | None
    stops: frozenset[int]
    steps: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    cache: object = None                    # its RowCache once admitted
    made: int = 0                           # tokens generated
    last: int | None = None                 # the token sampled last, the next step's input
    cancelled: bool = False
    generator: torch.Generator = field(init=False)

    def __post_init__(self):
        self.generator = sampling._generator(self.seed)

    @property
    def prefilling(self) -> bool:
        return self.cache.length < len(self.ids)


class Engine:
    """Continuous batching over `model` (anything with `row_cache(capacity)` and `step_rows(new, caches)`, as
    nets/llama.Llama): `stream` a request's steps from any thread; one thread of the engine's own steps them all."""

    def __init__(self, model, context: int | None, max_rows: int = MAX_ROWS, prefix_bytes: int = PREFIX_BYTES):
        self.model, self.context, self.max_rows = model, context, max_rows
        self.chunk = getattr(model, "chunk", CHUNK)    # None: a prompt enters whole, and no prefix is kept
        self.prefixes: Bounded[tuple] = Bounded(prefix_bytes, size=lambda kv: sum(t.nbytes for t in kv))
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self._wake = threading.Condition()
        self._pid = None                    # the process whose thread steps (a fork starts its own)
        self._thread, self._closing = None, False
        self.stats = {"steps": 0, "tokens": 0, "prefilled": 0, "prefix_hits": 0, "busy_seconds": 0.0}

    # ---- what a caller sees

    def submit(self, ids: list[int], n: int, rule: dict, seed: int | None, stops: frozenset[int]) -> Request:
        """A request in the queue, or Refused: no prompt, no token asked, or more than the context."""
        if not ids:
            raise Refused("The prompt has no tokens.")
        if n < 1:
            raise Refused("Ask for at least one new token.")
        if self.context is not None and len(ids) + n > self.context:
            raise Refused(f"The prompt ({len(ids):,} tokens) and {n:,} new tokens exceed the model's context of "
                          f"{self.context:,} tokens: shorten the prompt or ask for fewer tokens.")
        request = Request(list(ids), n, dict(rule), seed, frozenset(stops))
        with self._wake:
            self._start()
            self.waiting.append(request)
            self._wake.notify()
        return request

    def place(self, request: Request) -> int:
        """How many requests wait before this one (0: it is in the batch, or next in)."""
        with self._wake:
            return next((i for i, r in enumerate(self.waiting) if r is request), 0)

    def stream(self, ids: list[int], n: int, rule: dict, seed: int | None,
               stops: frozenset[int] = frozenset()) -> Iterator[dict]:
        """The steps of one generation as they are made (what sampling.stream yields for the same model alone);
        closing the iterator (the reader left) frees its row at the next step."""
        request = self.submit(ids, n, rule, seed, stops)
        try:
            while (step := request.steps.get()) is not _END:
                if isinstance(step, BaseException):
                    raise step
                yield sampling.step_record(*step)   # on the reader's thread: the engine's goes on stepping
        finally:
            request.cancelled = True

    def snapshot(self) -> dict:
        """What the engine is doing now, read without stopping it (the Inference tab's live batch): each running
        row's prompt, position (the keys and values it holds) and tokens made of those asked for; how many wait;
        the counters since it started (`stats`); the clock (time.perf_counter), to make rates of two snapshots."""
        with self._wake:
            running, waiting, stats = list(self.running), len(self.waiting), dict(self.stats)
        rows = []
        for request in running:
            cache = request.cache      # None once finished: the engine's thread goes on meanwhile
            if cache is not None:
                rows.append({"prompt": len(request.ids), "position": cache.length, "made": request.made,
                             "new": request.n})
        return {"rows": rows, "waiting": waiting, "stats": stats, "max_rows": self.max_rows,
                "time": time.perf_counter()}

    # ---- the engine's thread

    def _start(self) -> None:
        if self._pid != os.getpid():  # first use in this process (a forked compute process has no thread of ours)
            self._pid = os.getpid()
            self.waiting.clear()
            self.running.clear()
            self._closing = False
            self._thread = threading.Thread(target=self._loop, name="generation-engine", daemon=True)
            self._thread.start()
            atexit.register(self.close)

    def close(self) -> None:
        """Stop stepping at the end of the current step (at the process's exit: a thread left inside a torch
        operation while the interpreter tears torch down aborts the process)."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self.waiting and not self.running and not self._closing:
                    self._wake.wait()
                if self._closing:
                    return
                while self.waiting and len(self.running) < self.max_rows:
                    self._admit(self.waiting.popleft())
            started = time.perf_counter()
            try:
                with torch.inference_mode():
                    self._step()
            except Exception as err:  # noqa: BLE001 - every row of the failed step is told, the engine goes on
                for request in self.running:
                    request.steps.put(RuntimeError(f"The generation failed: {err}"))
                self._finish(list(self.running))
            self.stats["busy_seconds"] += time.perf_counter() - started

    def _admit(self, request: Request) -> None:
        """A row for the request: its cache, sized for its prompt and answer, begun from the longest kept prefix."""
        if request.cancelled:
            return
        request.cache = self.model.row_cache(len(request.ids) + request.n)
        blocks = (len(request.ids) - 1) // CHUNK if self.chunk else 0  # the last token's chunk is always computed
        for block in range(1, blocks + 1):
            kept = self.prefixes.get(tuple(request.ids[:block * CHUNK]))
            if kept is None:
                break
            span = slice((block - 1) * CHUNK, block * CHUNK)
            for mine, theirs in zip(request.cache.kv, kept):
                mine[:, :, span] = theirs
            request.cache.length = block * CHUNK
        self.stats["prefix_hits"] += request.cache.length // CHUNK
        self.running.append(request)

    def _step(self) -> None:
        """One step: every generating row's last token and the next prompt chunks, through the model at once."""
        self._finish([r for r in self.running if r.cancelled])     # their readers left: their rows go first
        new, caches, rows, budget = [], [], [], PREFILL
        for request in self.running:
            if not request.prefilling:
                new.append(torch.tensor([request.last]))
                caches.append(request.cache)
                rows.append((request, True))
                continue
            start = request.cache.length           # prefill: chunks at fixed boundaries, while the budget lasts
            while start < len(request.ids) and budget > 0:
                end = min((start // CHUNK + 1) * CHUNK, len(request.ids)) if self.chunk else len(request.ids)
                new.append(torch.tensor(request.ids[start:end]))
                caches.append(request.cache)
                rows.append((request, end == len(request.ids)))   # the prompt's last chunk gives the first token
                budget -= end - start
                self.stats["prefilled"] += end - start
                start = end
        if not new:
            return
        logits = self.model.step_rows(new, caches)
        self.stats["steps"] += 1
        emitting = []
        for (request, emits), piece, row in zip(rows, new, logits):
            if self.chunk and (piece.numel() > 1 or request.made == 0):
                self._keep_prefix(request)
            if emits:
                emitting.append((request, row))
        self._emit(emitting)
        self._finish([r for r in self.running if r.cancelled or r.made >= r.n or r.last in r.stops])

    def _keep_prefix(self, request: Request) -> None:
        """Keep every full chunk of the prompt computed so far (its keys and values, per layer), for the next prompt
        that begins with the same tokens."""
        cache = request.cache
        for block in range(1, min(cache.length, len(request.ids)) // CHUNK + 1):
            key = tuple(request.ids[:block * CHUNK])
            if key not in self.prefixes:
                span = slice((block - 1) * CHUNK, block * CHUNK)
                self.prefixes.put(key, [kv[:, :, span].clone() for kv in cache.kv])   # each layer's

    def _emit(self, rows: list[tuple[Request, torch.Tensor]]) -> None:
        """Sample each row's next token by its own rule and generator, as sampling.stream does (distribution, then
        choose), and hand it over: the rows at once in C++ where the kernels are built (nets/csrc/sample.cpp: the
        same operations, without Python's lock, which a class's reader threads hold in turn)."""
        if not rows:
            return
        ops = kernels.loaded()
        if ops is None or rows[0][1].device.type != "cpu":
            drawn = []
            for request, logits in rows:
                d = sampling.distribution(logits, **request.rule)
                drawn.append((d, sampling.choose(d, request.rule.get("temperature", 1.0), request.generator)))
        else:
            rules = [sampling.full_rule(request.rule) for request, _ in rows]
            uniforms = [float(torch.rand((), generator=request.generator, dtype=torch.float64)) if t > 0
                        else math.nan for (request, _), (t, _, _) in zip(rows, rules)]
            probs, kept, n_k, n_p, tokens = ops.sample_rows(torch.stack([row for _, row in rows]).float(),
                                                             *map(list, zip(*rules)), uniforms,
                                                             sampling.TINY_TEMPERATURE)
            drawn = [(sampling.Distribution(*d), t) for *d, t in zip(probs, kept, n_k, n_p, tokens)]
        for (request, _), (d, token) in zip(rows, drawn):
            request.made += 1
            request.last = token
            self.stats["tokens"] += 1
            request.steps.put((d, token))

    def _finish(self, done: list[Request]) -> None:
        if not done:
            return
        with self._wake:                            # the rows are free before their readers hear the end
            self.running = [r for r in self.running if r not in done]
        for request in done:
            request.cache = None                    # its keys and values go with it
            request.steps.put(_END)
        heap.trim()


@dataclass
class Solo:
    """One row's state in a model decoded row by row (Alone): the model's own step cache, and its positions."""

    state: object = None
    length: int = 0


class Alone:
    """A model without batched rows (our GPT, the recurrent LMs, the n-gram: small models, a step of one row takes
    well under a millisecond) behind the engine's door: each row steps alone through the model's own `step`, the
    prompt whole and then a token at a time, the very calls sampling.stream makes, so a seeded answer is the same
    bits through the engine as decoded alone, and a GPT slides its window past its context as there."""

    chunk = None            # a prompt enters whole; no prefix is shared (there are no keys and values to share)

    def __init__(self, model):
        self.model = model

    def row_cache(self, capacity: int) -> Solo:
        return Solo()

    def step_rows(self, new: list[torch.Tensor], caches: list[Solo]) -> torch.Tensor:
        out = []
        for piece, row in zip(new, caches):
            logits, row.state = self.model.step(piece[None], row.state)
            row.length += piece.numel()
            out.append(logits[0, -1])
        return torch.stack(out)


# ---- one engine per served model, in each process that generates

_engines: dict[int, Engine] = {}
_engines_lock = threading.Lock()
# A class's own questions: the engine's cost is measured on them (`cost`) and its speed by the bench
QUESTIONS = ("What is the capital of Peru?", "Write a haiku about the sea.", "Why is the sky blue?",
             "Explain photosynthesis to a child.", "Give me three tips for learning to code.",
             "What does a transformer's attention do?", "Name a famous painting and its painter.",
             "How do vaccines work?", "Tell me a joke about cats.", "What is 17 times 23?",
             "Summarise Romeo and Juliet in two sentences.", "Suggest a name for a bakery.",
             "What causes the seasons?", "Translate 'good morning' into French.",
             "Write a limerick about a robot.", "What is the difference between weather and climate?")
COST_TEXT_TOKENS = 192   # of the shipped corpus sample, for the next-token distributions
COST_TOKENS = 24         # greedy tokens of each question


def weight_bits() -> int:
    """The bits of a weight in the served twin: PLAYGROUND_ENGINE_BITS, 8 (one int8 plane: next-token KL 5e-3 against
    the fp16 model, top-1 agreement 97%) or 14 (two planes: as exact as fp16, its greedy answers the model's own, for
    twice the bytes). 8 by default, chosen by measurement (docs/performance.md): a decode step of one row reads
    every weight once, at one core's memory bandwidth, so one student alone gets 14 bits' tokens a second times
    about 1.8, and a class of 32 about 1.4; 14 bits meets neither budget on one core."""
    bits = os.environ.get("PLAYGROUND_ENGINE_BITS", "8")
    if bits not in ("8", "14"):
        raise ValueError(f"PLAYGROUND_ENGINE_BITS is {bits!r}: 8 or 14")
    return int(bits)


def for_model(m) -> Engine:
    """The engine serving `m` (a registry record of a causal LM), made on its first use in this process. A model
    with batched rows (nets/llama.Llama: `int8`, `row_cache`, `step_rows`) is served through its int8 twin
    (nets/int8.py, weight_bits(); SmolLM2's, 135 MB in 8 bits), built by the process that generates (a server's
    slow compute process) when its first generation asks, and kept there; any other steps row by row (Alone)."""
    with _engines_lock:
        engine = _engines.get(id(m.model))
        if engine is None:
            if hasattr(m.model, "int8"):
                engine = Engine(m.model.int8(planes=1 if weight_bits() == 8 else 2), m.config.n_positions)
                heap.release()  # the float and int32 copies the quantization made (the output layer's: 113 MB each)
            else:
                engine = Engine(Alone(m.model), None)
            engine.source = m.model     # kept alive with its engine, so its id names no other model later
            _engines[id(m.model)] = engine
        return engine


def serving(m) -> Engine | None:
    """The engine serving `m` in this process if a generation has made one (for_model), else None; it makes none."""
    with _engines_lock:
        return _engines.get(id(m.model))


def install() -> None:
    """Every sampled generation of a causal LM goes through its model's engine (analysis/generation.decoded); the
    engine's kernels are built now (nets/kernels.py: about 30 s the first time on a machine, then read
    from torch's build folder), before a server forks the compute processes that use it."""
    from playground.analysis.models import CAUSAL
    from playground.nets import kernels

    kernels.kernel()

    for kind in (*CAUSAL, "llama"):
        generation.ENGINES[kind] = for_model


def cost(m, questions: int = 6) -> dict:
    """What serving `m` through its engine costs against the model the other views read (fp16 storage), measured
    now: the next-token distributions on the first COST_TEXT_TOKENS tokens of the shipped corpus sample (mean KL,
    top-1 agreement, the largest logit difference), and greedy answers to the first `questions` of QUESTIONS,
    COST_TOKENS tokens each (how many are identical, and the share of tokens before the first difference)."""
    import datetime

    from playground.analysis import sampling
    from playground.checkpoints import ROOT

    started = time.perf_counter()
    engine = for_model(m)
    text = (ROOT / "assets" / "corpus_sample.txt").read_text(encoding="utf-8")
    ids = torch.tensor([m.tokenizer.encode(text).ids[:COST_TEXT_TOKENS]])
    with torch.inference_mode():
        exact, served = m.model(ids)[0][0].float(), engine.model(ids)[0][0].float()
    p, q = exact.log_softmax(-1), served.log_softmax(-1)
    prompts = [m.tokenizer.encode(m.chat([{"role": "user", "content": x}])).ids for x in QUESTIONS[:questions]]
    stop = generation.stops(m)
    greedy = dict(temperature=0, top_k=0, top_p=1.0)
    requests = [engine.submit(ids_, COST_TOKENS, greedy, 0, stop) for ids_ in prompts]   # decoded as one batch
    same, agreed, total = 0, 0, 0
    for request, prompt in zip(requests, prompts):
        ours = [token for _, token in iter(request.steps.get, _END)]
        with torch.inference_mode():
            theirs = [s["token"] for s in sampling.stream(m.model, torch.tensor([prompt]), COST_TOKENS, temperature=0,
                                                          stop=stop)]
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        same += ours == theirs
        agreed, total = agreed + first, total + len(theirs)
    bits = 8 if engine.model.lm_head.planes == 1 else 14
    return {"date": datetime.date.today().isoformat(), "weights": f"{bits}-bit integer weights (nets/int8.py)",
            "kl": float(f"{float((p.exp() * (p - q)).sum(-1).mean()):.3g}"),
            "top1_agreement": round(float((exact.argmax(-1) == served.argmax(-1)).float().mean()), 4),
            "max_logit_diff": round(float((exact - served).abs().max()), 4), "text_tokens": ids.size(1),
            "questions": len(prompts), "identical_answers": same,
            "tokens_before_a_difference": round(agreed / total, 4),
            "seconds": round(time.perf_counter() - started, 1),
            "protocol": (f"the fp16 model (the other views') against the engine's twin: next-token distributions at "
                         f"each of the first {ids.size(1)} tokens of assets/corpus_sample.txt (mean KL(fp16 ‖ "
                         f"served) in nats); greedy answers of {COST_TOKENS} tokens to {len(prompts)} chat questions "
                         "(serving/engine.QUESTIONS), the engine's in one batch, the fp16 model's one by one")}
