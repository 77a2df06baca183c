"""The Inference tab's Batching view (serving/batching.py, analysis/batching.py, ui/inference_batching.py): the
weights and FLOPs a step reads and does are the model's own (counted here from its config), the fit reads a known
line back, one seeded row is the same bits alone and in every batch (and the same tokens as an engine of its own
gives it), the live view reads the engine serving SmolLM2, and bad input gets a clear message."""

from __future__ import annotations

import gradio as gr
import pytest
import torch

from playground.analysis import batching as roof
from playground.analysis import generation, models
from playground.figures import inference_engine as fe
from playground.nets.llama import Llama, LlamaConfig
from playground.serving import batching, engine

PROMPT = "The bank raised its interest rates again."


@pytest.fixture(scope="module")
def smol():
    from tests.smollm2_reference import require_smollm2

    require_smollm2()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield models.get(models.SMOLLM2)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def run(smol):
    p = generation.prepare(smol, PROMPT, False, [])
    *_, last = batching.experiment(smol, p.ids, 3, 7, (1, 2, 4))
    return p, last


def matrix_shapes(c) -> list[tuple[int, int]]:
    """(out, in) of every matrix a decode step of SmolLM2's twin multiplies by, from its config alone: the fused
    W^Q W^K W^V, W^O, the fused W_gate W_up, W_down in each layer, and the output layer."""
    hs = c.n_embd // c.n_head
    layer = [((c.n_head + 2 * c.n_kv_head) * hs, c.n_embd), (c.n_embd, c.n_head * hs), (2 * c.n_inner, c.n_embd),
             (c.n_embd, c.n_inner)]
    return layer * c.n_layer + [(c.vocab_size, c.n_embd)]


def test_the_weights_a_step_reads_are_the_model_s_own(smol):
    twin = engine.for_model(smol).model
    shapes, planes = matrix_shapes(smol.config), twin.lm_head.planes
    params = sum(n * k for n, k in shapes)
    w = roof.weight_matrices(twin)
    assert w["params"] == params == 134_479_872 and w["matrices"] == len(shapes) == 121
    # one byte a weight per int8 plane, and a float32 scale per output channel per plane
    assert w["bytes"] == planes * params + 4 * planes * sum(n for n, _ in shapes)
    fp16 = roof.weight_matrices(smol.model)        # the model the other views read: fp16, the tied output layer once
    assert fp16["params"] == params and fp16["bytes"] == 2 * params


def test_a_step_s_bytes_flops_and_the_fit_are_computed_not_typed():
    torch.manual_seed(0)
    tiny = Llama(LlamaConfig(vocab_size=97, n_positions=64, n_layer=2, n_head=6, n_kv_head=2, n_embd=48, n_inner=96))
    P = 2 * (48 * 48 + 2 * 48 * 16 + 48 * 48 + 3 * 48 * 96) + 97 * 48   # q, k, v, o, SwiGLU's three; tied output
    measured = {B: 0.05 + 0.002 * B for B in (1, 2, 4, 8)}
    out = roof.roofline(tiny, kv_per_token=1024, positions=10, measured=measured)
    assert out["weights"]["params"] == P and out["weights"]["bytes"] == 4 * P
    attention = 4 * 2 * 6 * 8 * 10                          # q k^T and the weighted v: 2 T d FLOPs each, per head
    assert out["flops_per_token"] == 2 * P + attention
    eight = out["steps"][-1]
    assert eight["bytes"] == 4 * P + 8 * 10 * 1024 and eight["flops"] == 8 * (2 * P + attention)
    fit = out["fit"]
    assert fit["a_ms"] == pytest.approx(50) and fit["b_ms"] == pytest.approx(2) and fit["turn"] == pytest.approx(25)
    assert fit["ceiling_tokens_per_s"] == pytest.approx(500) and fit["predicted_tokens_per_s"]["8"] == round(8 / 0.066, 1)
    assert roof.fit([4, 4], [0.1, 0.2]) is None                 # one batch size: no line


def test_each_batch_size_is_measured(run):
    p, data = run
    assert [r["batch"] for r in data["runs"]] == [1, 2, 4] and data["prompt_tokens"] == len(p.ids)
    for r in data["runs"]:
        assert r["tokens"] == 3 * r["batch"] and r["decode_ms"] is not None and r["decode_steps"] >= 1
        assert all(rows <= r["batch"] for rows, _ in r["points"])
    assert data["roofline"]["fit"] is not None and data["load_average"] is not None


def test_one_seeded_row_is_the_same_bits_alone_and_in_every_batch(smol, run):
    p, data = run
    assert data["invariant"] and all(r["row0"] == {"same_tokens": True, "same_bits": True, "max_prob_diff": 0.0}
                                     for r in data["runs"])
    served = engine.for_model(smol)
    alone = engine.Engine(served.model, served.context)        # an engine of its own, the row by itself
    try:
        tokens = [s["token"] for s in alone.stream(p.ids, 3, batching.RULE, 7)]
    finally:
        alone.close()
    assert tokens == data["row0_ids"]


def test_the_check_says_so_when_a_row_differs():
    from playground.analysis.sampling import distribution

    logits = torch.randn(50)
    a = distribution(logits, **batching.RULE)
    b = distribution(logits + torch.tensor([1e-3] + [0.0] * 49), **batching.RULE)
    assert batching._same([(a, 1)], [(a, 1)])["same_bits"]
    differs = batching._same([(a, 1)], [(b, 1)])
    assert not differs["same_bits"] and differs["same_tokens"] and differs["max_prob_diff"] > 0


def test_the_live_view_reads_the_engine_serving_smollm2(smol):
    assert engine.serving(type("Record", (), {"model": object()})()) is None
    assert not batching.live(type("Record", (), {"model": object()})())["serving"]
    served = engine.for_model(smol)
    ids = generation.prepare(smol, PROMPT, False, []).ids
    request = served.submit(ids, 60, batching.RULE, 0, frozenset())
    try:
        request.steps.get()                                  # it is in the batch
        data = batching.live(smol, window=0.5)
    finally:
        request.cancelled = True
    assert data["serving"] and data["steps"] > 0 and data["tokens_per_s"] > 0
    row = next(r for r in data["rows"] if r["prompt"] == len(ids) and r["new"] == 60)
    assert len(ids) <= row["position"] <= len(ids) + 60 and 1 <= row["made"] <= 60
    text = fe.live_markdown(data)
    assert "rows** in the batch" in text or "row** in the batch" in text


def test_the_figure_and_its_text_come_from_the_same_data(run):
    _, data = run
    fig = fe.batch_figure(data)
    median = next(t for t in fig.data if t.name == "median step")
    assert list(median.x) == [1, 2, 4] and list(median.y) == [r["decode_ms"] for r in data["runs"]]
    text = fe.batching_markdown(data)
    assert text.count("identical bits") == 3 and "134.5 M weights" in text


def test_bad_input_gets_a_clear_message(smol):
    from playground.ui.inference_batching import batching_experiment

    with pytest.raises(gr.Error, match="Type a prompt"):
        next(batching_experiment(""))
    with pytest.raises(gr.Error, match="largest batch"):
        next(batching_experiment(PROMPT, False, 2, "3"))
    *_, (_, _, _, data) = batching_experiment(PROMPT * 200, False, 100, "1", 1)    # 8,000 characters, 100 tokens
    notices = " ".join(data["notices"])
    assert "2,000" in notices and "New tokens 100 is out of range" in notices and data["new_tokens"] == batching.MAX_NEW
    assert f"reads at most {batching.MAX_PROMPT}" in notices and data["prompt_tokens"] <= batching.MAX_PROMPT + 2


def test_the_table_is_streamed_as_each_size_is_measured(smol):
    from playground.ui.inference_batching import batching_experiment

    answers = list(batching_experiment(PROMPT, False, 2, "2", 5))
    tables = [table for _, table, _, _ in answers]
    assert "Measuring batch 2 (2 of 2)" in tables[0] and tables[0].count("identical bits") == 1
    assert "Measuring" not in tables[-1] and tables[-1].count("identical bits") == 2
    assert answers[-1][2].endswith(".json") and all(a[2] is not answers[-1][2] for a in answers[:-1])
