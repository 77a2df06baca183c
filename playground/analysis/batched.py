"""Hooks on the nets' hook points, and many interventions run as the rows of one forward pass.

The transformers carry hook points (nets/hooks.py) at the same sites in every block. Here they are used with plain
torch forward hooks, always installed by `hooked` and removed when it ends, whatever happens inside, so that no
hook outlives the computation that set it (the app's models are shared by every user).

An experiment of many interventions (a patching grid of L layers × T positions, a sweep over every head) is not run
as that many forward passes. An intervention at block l changes nothing before block l; in a causal model, a change
at position p changes nothing at the positions before p. So `run` takes each row's stream where its intervention
starts: the rows join one batch at their own block (the rows of block l join just before block l runs), and, in a
causal model, only the positions from `pos0` on are computed, the earlier positions' keys and values being those
of the plain run (`Trace`). A whole grid is then one pass of L block calls over a growing batch, not one pass per
layer: on a CPU a block call costs a few milliseconds however few rows it has (SmolLM2's half-stored weights are
converted for every call; the threads synchronise for every product), and big products run at the CPU's speed.

Nothing is approximated: each row is the forward pass it stands for (tests/test_batched.py compares every row
with the one-at-a-time intervention). The rows of a request are the request's alone, in an order fixed by it, and
the products are taken in fp32 whatever the batch size (`fp32_products`): the same input, the same numbers.
"""

from __future__ import annotations

import dataclasses
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from playground.nets.llama import Llama, rope_angles

ROW_TOKENS = 4096   # rows × positions (earlier ones included) in a pass at most: SmolLM2's MLP then holds at most
#                   3 × 4096 × 1536 fp32 (75 MB), its attention 2 × 4096 × 9 heads × 64 (19 MB)


class InterventionError(ValueError):
    """Input an experiment cannot run on; the message is meant for the user."""


# ---------------------------------------------------------------------------------------------
# Hook points and hooks


def blocks(model) -> torch.nn.ModuleList:
    """The blocks of our GPT, Llama, BERT encoder or BERT with heads, in order."""
    for path in ("transformer.h", "model.layers", "bert.blocks", "blocks"):
        found = model
        for part in path.split("."):
            found = getattr(found, part, None)
        if isinstance(found, torch.nn.ModuleList):
            return found
    raise InterventionError(f"{type(model).__name__} has no transformer blocks to intervene on")


def hook_point(model, layer: int, site: str):
    """The HookPoint of `site` (nets/hooks.SITES) in block `layer`."""
    block = blocks(model)[layer]
    if site == "z":
        return (block.attn if hasattr(block, "attn") else block.self_attn).hook_z   # GPT and BERT, Llama
    return getattr(block, f"hook_{site}")


@contextmanager
def hooked(model, hooks: dict[tuple[int, str], Callable[[torch.Tensor], torch.Tensor | None]]):
    """Forward hooks on the hook points (layer, site) -> fn(activation) (a replacement, or None to keep it), for the
    duration of the `with`; removed however it ends.

    The models are shared by every user of the server, so a hook acts only in the thread that set it: another
    computation running the same model meanwhile (another student's attention, another patching grid) reads the
    model as it is. Before, a concurrent grid on the same GPT met this one's patched activations (a shape error
    under the load test; wrong numbers when the shapes happened to agree)."""
    owner = threading.get_ident()
    handles = []
    try:
        for (layer, site), fn in hooks.items():
            handles.append(hook_point(model, layer, site).register_forward_hook(
                lambda _module, _inputs, out, fn=fn: fn(out) if threading.get_ident() == owner else None))
        yield
    finally:
        for handle in handles:
            handle.remove()


@dataclass
class Edit:
    """Replace, in the batch rows `rows`, the activation at (layer, site) by `value`: at position `pos` (None: every
    position) and, for the heads' output `z` (B, T, nh, hs), only head `head` (None: every head)."""

    layer: int
    site: str
    rows: torch.Tensor            # (n,) long
    value: torch.Tensor           # broadcastable to the replaced part of each row, (n, ...) or one row's
    pos: torch.Tensor | None = None
    head: int | torch.Tensor | None = None


def edit_hooks(edits: list[Edit]) -> dict[tuple[int, str], Callable]:
    """The hooks that apply `edits` (several per site allowed, applied in order) to a copy of the activation."""
    by_site: dict[tuple[int, str], list[Edit]] = {}
    for e in edits:
        by_site.setdefault((e.layer, e.site), []).append(e)

    def apply(site_edits: list[Edit]):
        def fn(out: torch.Tensor) -> torch.Tensor:
            out = out.clone()
            for e in site_edits:
                index = (e.rows,) if e.pos is None else (e.rows, e.pos)
                if e.head is not None:
                    index = (*index, slice(None), e.head) if e.pos is None else (*index, e.head)
                out[index] = e.value.to(out.dtype)
            return out
        return fn

    return {key: apply(site_edits) for key, site_edits in by_site.items()}


def cache(model, run: Callable[[], torch.Tensor], sites: list[tuple[int, str]]):
    """Run `run()` (a forward pass of `model`) and keep the activations at `sites`: (its output, {site: tensor})."""
    kept: dict[tuple[int, str], torch.Tensor] = {}

    def keep(key):
        def fn(out):
            kept[key] = out.detach()
        return fn

    with hooked(model, {key: keep(key) for key in sites}):
        out = run()
    return out, kept


def output_layer(model, h: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
    """Logits (n, V) from the last stream at one position per row, (n, C): the final norm and output layer (an MLM
    head for a masked LM), always in fp32 (the half-stored SmolLM2 multiplies a few positions in fp16 otherwise, and
    a batch's rows would not be comparable with a single row). With `columns`, only those logits, (n, len(columns)):
    a logit difference needs two of SmolLM2's 49,152 (whose fp16 table is otherwise converted for every call)."""
    if hasattr(model, "mlm"):
        logits = model.mlm(h, model.bert.embeddings.tok.weight)
        return logits if columns is None else logits[:, columns]
    if isinstance(model, Llama):
        h = model.model.norm(h)
        weight = model.model.embed_tokens.weight if model.config.tie_word_embeddings else model.lm_head.weight
    else:
        h, weight = model.transformer.ln_f(h), model.transformer.wte.weight          # our GPT, tied
    weight = weight if columns is None else weight[columns]
    return F.linear(h, weight.to(h.dtype))


# ---------------------------------------------------------------------------------------------
# Blocks run from any layer, on any positions


class _Entered(Exception):
    """Raised by the hook that has what it wanted: the stream entering the first block."""


def embedded(model, s) -> torch.Tensor:
    """The stream entering the first block for the text of `s` (interventions.Subject), (1, T, C): the model's own
    forward, stopped there (every family embeds in its own way: positions, segments, scale)."""
    got = {}

    def stop(out):
        got["x"] = out.detach()
        raise _Entered

    try:
        with hooked(model, {(0, "resid_pre"): stop}):
            s.logits(model)
    except _Entered:
        return got["x"]
    raise InterventionError(f"{type(model).__name__}'s first block was never reached")


def block_step(model, layer: int, x: torch.Tensor, pos0: int = 0, past=None):
    """Block `layer` over the stream x (n, S, C) of positions pos0 .. pos0 + S − 1, the earlier positions' keys and
    values `past` (causal models): (its output, its keys and values, None for a BERT)."""
    block = blocks(model)[layer]
    if isinstance(model, Llama):
        c = model.config
        cos, sin = rope_angles(torch.arange(pos0, pos0 + x.shape[1]), c.head_dim, c.rope_theta)
        return block(x, cos, sin, past)[:2]
    if hasattr(block, "attn") and hasattr(block.attn, "c_attn"):       # our GPT
        return block(x, past)[:2]
    return block(x)[0], None                                          # a BERT block: every position, both ways


@dataclass
class Trace:
    """One plain run of a text: the stream entering each block (1, T, C), each block's keys and values (None for a
    BERT), the activations at the sites asked for, and the logits (1, V) at the predicting position."""

    streams: list[torch.Tensor]
    kvs: list | None
    kept: dict[tuple[int, str], torch.Tensor]
    logits: torch.Tensor


def trace(model, s, sites: list[tuple[int, str]] = (), columns: torch.Tensor | None = None) -> Trace:
    """The plain run of `s` (interventions.Subject) through every block, keeping what `run` starts from; its
    logits only at `columns` when given (output_layer)."""
    x0 = embedded(model, s)

    def plain():
        streams, kvs, x = [], [], x0
        for layer in range(len(blocks(model))):
            streams.append(x)
            x, kv = block_step(model, layer, x)
            kvs.append(kv)
        return streams, kvs, x

    (streams, kvs, x), kept = cache(model, plain, list(sites))
    return Trace(streams, None if kvs[0] is None else kvs, kept, output_layer(model, x[:, s.at], columns).float())


@dataclass
class Rows:
    """n rows that join the batch at block `layer`: their stream entering it, x (n, S, C), of the positions pos0 ..
    pos0 + S − 1 (the earlier ones, in a causal model, are the plain run's), and the edits made inside that block
    (their `rows` count from 0 among these n, their `pos` from position 0)."""

    layer: int
    x: torch.Tensor
    edits: list[Edit] = field(default_factory=list)
    pos0: int = 0


def _one_pass(model, at: int, groups: list[Rows], base: Trace, step: Callable[[], None],
              columns: torch.Tensor | None) -> torch.Tensor:
    """The groups (in layer order, one pos0) as one batch that grows block by block; logits (n, V) at `at`."""
    x, n, g, pos0 = None, 0, 0, groups[0].pos0
    for layer in range(groups[0].layer, len(blocks(model))):
        edits = []
        while g < len(groups) and groups[g].layer == layer:        # these rows join here, at the end of the batch
            new = groups[g]
            edits += [dataclasses.replace(e, rows=e.rows + n, pos=None if e.pos is None else e.pos - pos0)
                      for e in new.edits]
            x = new.x if x is None else torch.cat([x, new.x])
            n, g = n + len(new.x), g + 1
        past = None
        if pos0 and base.kvs is not None:                        # positions < pos0: the plain run's keys and values
            past = tuple(t[:, :, :pos0].expand(n, -1, -1, -1) for t in base.kvs[layer])
        with hooked(model, edit_hooks(edits)):
            x, _ = block_step(model, layer, x, pos0, past)
        step()
    return output_layer(model, x[:, at - pos0], columns).float()


def run(model, at: int, groups: list[Rows], base: Trace, progress: Callable[[float, str], None] | None = None,
        columns: torch.Tensor | None = None) -> torch.Tensor:
    """The logits (N, V) at position `at` of every row of `groups`, in their order (only `columns` of them when
    given). The groups come sorted by (pos0, layer); a pass takes the groups of one pos0, at most ROW_TOKENS rows ×
    positions (whole groups; the positions before pos0 count, as their keys and values are copied for every row), and
    runs from its first group's layer on."""
    order = [(g.pos0, g.layer) for g in groups]
    assert order == sorted(order), "the groups must come sorted by (pos0, layer)"
    if base.kvs is None:
        assert all(g.pos0 == 0 for g in groups), "a BERT reads every position: its rows start at position 0"
    passes, size = [], 0
    for group in groups:
        tokens = group.x.shape[0] * (group.pos0 + group.x.shape[1])     # the earlier keys and values count too
        if not passes or group.pos0 != passes[-1][0].pos0 or size + tokens > ROW_TOKENS:
            passes.append([])
            size = 0
        passes[-1].append(group)
        size += tokens
    if not passes:
        return torch.zeros(0)
    L, rows = len(blocks(model)), sum(len(g.x) for g in groups)
    total, done = sum(L - p[0].layer for p in passes), [0]

    def step():
        done[0] += 1
        if progress is not None:
            progress(done[0] / total, f"{done[0]} of {total} block calls ({rows} runs as rows)")
    return torch.cat([_one_pass(model, at, p, base, step, columns) for p in passes])
