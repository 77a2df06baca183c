"""Gradient flow through time: autograd against a hand-derived BPTT, vanishing and exploding with the
spectral scale of W_hh, the LSTM's carousel, gates in [0, 1], overflow reported, and the endpoint."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from playground.analysis import gradient_flow as introspect
from playground.nets.recurrent import RecurrentConfig, RecurrentLM


def _model(cell, V=12, m=6, n=16, seed=0, **kw):
    torch.manual_seed(seed)
    return RecurrentLM(RecurrentConfig(cell=cell, vocab_size=V, n_embd=m, hidden_size=n, **kw))


def _ids(T, V=12, seed=0):
    return [int(i) for i in np.random.RandomState(seed).randint(V, size=T + 1)]


@pytest.mark.parametrize("clip", [0.0, 0.05])
def test_two_step_elman_matches_hand_derived_bptt(clip):
    """T = 2, L = CE(W_hy h_2 + b_y, y):
        g_2 = dL/dh_2 = W_hy^T (p - e_y)
        g_1 = dL/dh_1 = W_hh^T ((1 - h_2^2) * g_2)          (with clipping: g_2 rescaled to norm <= clip first)
        dL/dx_t = W_ih^T ((1 - h_t^2) * g_t)"""
    model = _model("rnn", V=5, m=3, n=4)
    ids = [1, 3, 2]
    W = {k: v.double() for k, v in model.state_dict().items()}
    E, W_ih, W_hh = W["wte.weight"], W["encoder.cells.0.weight_ih"], W["encoder.cells.0.weight_hh"]
    b = W["encoder.cells.0.bias_ih"] + W["encoder.cells.0.bias_hh"]
    x1, x2 = E[ids[0]], E[ids[1]]
    h1 = torch.tanh(W_ih @ x1 + b)                       # h_0 = 0
    h2 = torch.tanh(W_ih @ x2 + W_hh @ h1 + b)
    p = torch.softmax(W["lm_head.weight"] @ h2 + W["lm_head.bias"], dim=0)
    g2 = W["lm_head.weight"].T @ (p - torch.nn.functional.one_hot(torch.tensor(ids[2]), 5).double())
    g2_sent = g2 * min(1.0, clip / g2.norm().item()) if clip else g2
    g1 = W_hh.T @ ((1 - h2**2) * g2_sent)
    g1_sent = g1 * min(1.0, clip / g1.norm().item()) if clip else g1
    dx1, dx2 = W_ih.T @ ((1 - h1**2) * g1_sent), W_ih.T @ ((1 - h2**2) * g2_sent)

    out = introspect.gradient_flow(model, ids, clip=clip)
    np.testing.assert_allclose(out["grad_norms_raw"], [g1.norm(), g2.norm()], rtol=1e-10)
    np.testing.assert_allclose(out["grad_norms"], [g1_sent.norm(), g2_sent.norm()], rtol=1e-10)
    np.testing.assert_allclose(out["x_grad_norms"], [dx1.norm(), dx2.norm()], rtol=1e-10)
    assert math.isclose(out["loss"], -math.log(p[ids[2]].item()), rel_tol=1e-10)
    if clip:
        assert g2.norm() > clip and np.all(out["grad_norms"] <= clip + 1e-12)


def test_small_sigma_vanishes_and_matches_the_predicted_rate():
    model = _model("rnn", n=32)
    out = introspect.gradient_flow(model, _ids(40), sigma=0.5)
    norms = out["grad_norms"]
    assert np.all(np.diff(norms) > 0), "going back in time, every step should shrink the gradient"
    assert norms[0] < 1e-6 * norms[-1] and out["status"] == "vanishing"
    rates = out["rates"]
    assert rates["sigma_max"] == pytest.approx(0.5)
    assert rates["measured"] < rates["bound"] <= 0.5 + 1e-9   # Pascanu et al.'s bound holds step by step
    assert rates["measured"] == pytest.approx(rates["predicted"], rel=0.3)


def test_large_sigma_explodes_and_clipping_tames_it():
    model = _model("rnn", n=32, nonlinearity="relu")
    out = introspect.gradient_flow(model, _ids(40), sigma=8.0)
    assert out["grad_norms"][0] > 1e3 * out["grad_norms"][-1]
    assert out["status"] in ("exploding", "overflow") and out["rates"]["measured"] > 1
    clipped = introspect.gradient_flow(model, _ids(40), sigma=8.0, clip=1.0)
    assert np.all(clipped["grad_norms"] <= 1.0 + 1e-9) and np.all(np.isfinite(clipped["grad_norms"]))
    assert clipped["grad_norms_raw"].max() > 1.0                   # what arrived before the clip


def test_overflow_is_reported_not_raised():
    model = _model("rnn", n=32, nonlinearity="relu")
    out = introspect.gradient_flow(model, _ids(300), sigma=10.0)
    assert out["status"] == "overflow" and "overflow" in out["message"]
    data = introspect.to_json(out)
    assert all(v is None or math.isfinite(v) for v in data["grad_norms"])  # NaN/inf -> null in JSON


def test_lstm_constant_error_carousel():
    """With f_t = 1 the cell state carries the gradient back undiminished: dc_t/dc_{t-1} = diag(f_t)."""
    model = _model("lstm", forget_bias=40.0)
    out = introspect.gradient_flow(model, _ids(60))
    assert out["rates"]["predicted"] == pytest.approx(1.0, abs=1e-6)   # every unit keeps it all
    cells = out["cell_grad_norms"]
    assert cells[0] > 0.5 * cells[-1], "the carousel should carry the gradient 60 steps back"
    plain = introspect.gradient_flow(_model("rnn"), _ids(60))
    assert plain["grad_norms"][0] < 1e-3 * plain["grad_norms"][-1]


@pytest.mark.parametrize("cell,gates", [("lstm", {"f", "i", "o", "c"}), ("gru", {"z", "r"})])
def test_gate_values_lie_in_zero_one(cell, gates):
    out = introspect.gradient_flow(_model(cell), _ids(30), units=8)
    assert set(out["gates"]) == gates
    for name in gates - {"c"}:
        g = out["gates"][name]
        assert g.shape == (30, 8) and g.min() >= 0 and g.max() <= 1
    for key in ("grad_norms", "x_grad_norms"):
        assert out[key].shape == (30,) and np.all(out[key] > 0)


def test_fresh_weights_and_activation_options():
    model = _model("rnn")
    a = introspect.gradient_flow(model, _ids(10), fresh=True, seed=1)
    b = introspect.gradient_flow(model, _ids(10), fresh=True, seed=1)
    c = introspect.gradient_flow(model, _ids(10))
    np.testing.assert_array_equal(a["grad_norms"], b["grad_norms"])
    assert not np.allclose(a["grad_norms"], c["grad_norms"])
    s = introspect.gradient_flow(model, _ids(10), activation="sigmoid")
    assert s["activation"] == "sigmoid" and s["rates"]["max_activation_derivative"] <= 0.25
    assert model.encoder.cells[0].nonlinearity == "tanh", "the model itself must not change"


def test_prepare_ids_repeats_cuts_and_names_unknown_characters():
    from playground.training.data import char_tokenizer

    tok = char_tokenizer("abc d")
    steps = introspect.prepare_ids(tok, "ab", 7)
    assert len(steps.ids) == 8 and "".join(steps.chars).startswith("ab ab") and "repeated" in steps.notices[0]
    assert steps.spans[:4] == [(0, 1), (1, 2), (-1, -1), (0, 1)]   # the space between copies is not in the text
    steps = introspect.prepare_ids(tok, "abz" * 10, 5)
    assert len(steps.ids) == 6 and any("z" in n for n in steps.notices) and any("first 6" in n for n in steps.notices)
    assert steps.spans == [(t, t + 1) for t in range(5)]
    with pytest.raises(ValueError, match="empty"):
        introspect.prepare_ids(tok, "", 5)


# ---------------------------------------------------------------------------------------------
# The endpoint, as an API user sees it


def flow(client, text="To be, or not to be", length=30, cells=("rnn", "lstm", "gru"), weights="trained",
         rescale=False, sigma=1.0, activation="tanh", clip=0.0):
    return client.predict(text, length, list(cells), weights, rescale, sigma, activation, clip,
                          api_name="/gradient_flow")


def test_gradient_flow_endpoint_returns_the_contract(client):
    *views, path, data = flow(client)
    assert data["T"] == 30 and len(data["chars"]) == 31
    for key in ("rnn", "lstm", "gru"):
        r = data["cells"][key]
        assert len(r["grad_norms"]) == len(r["x_grad_norms"]) == 30
        assert r["status"] in ("stable", "vanishing", "exploding", "overflow") and r["rates"]["measured"] > 0
    assert set(data["cells"]["lstm"]["gates"]) == {"f", "i", "o", "c"}
    assert set(data["cells"]["gru"]["gates"]) == {"z", "r"} and data["cells"]["rnn"]["gates"] == {}
    assert len(data["cells"]["lstm"]["gates"]["f"]) == 30
    assert 'gf-badge' in views[0]
    with open(path, encoding="utf-8") as f:
        assert '"grad_norms"' in f.read()


def test_gradient_flow_rescaling_moves_the_elman_rate(client):
    small = flow(client, cells=["rnn"], weights="fresh", rescale=True, sigma=0.3)[-1]["cells"]["rnn"]
    large = flow(client, cells=["rnn"], weights="fresh", rescale=True, sigma=8, activation="relu")[-1]["cells"]["rnn"]
    assert small["status"] == "vanishing" and small["rates"]["sigma_max"] == pytest.approx(0.3, rel=1e-3)
    assert large["rates"]["measured"] > 1 > small["rates"]["measured"]


def test_gradient_flow_explosion_is_flagged_and_clipping_keeps_it_finite(client):
    wild = flow(client, length=400, cells=["rnn"], weights="fresh", rescale=True, sigma=10, activation="relu")[-1]
    assert wild["cells"]["rnn"]["status"] == "overflow" and wild["cells"]["rnn"]["grad_norms"][0] is None
    tame = flow(client, length=400, cells=["rnn"], weights="fresh", rescale=True, sigma=3, activation="relu",
                clip=1.0)[-1]
    assert all(v is not None and v <= 1.0 + 1e-9 for v in tame["cells"]["rnn"]["grad_norms"])


def test_gradient_flow_bad_input_gets_clear_messages(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="text is empty"):
        flow(client, text="   ")
    with pytest.raises(AppError, match="at least one network"):
        flow(client, cells=[])
    with pytest.raises(AppError, match="maximum value 10"):
        flow(client, rescale=True, sigma=1e6)        # the slider itself refuses absurd scales
    with pytest.raises(AppError, match="minimum value"):
        flow(client, rescale=True, sigma=-1)
    with pytest.raises(AppError, match="maximum value 400"):
        flow(client, length=10**6)
    data = flow(client, text="x" * 50_000, length=400)[-1]   # very long text: cut, with a notice
    assert data["T"] == 400 and any("first 401" in n for n in data["notices"])
    assert flow(client, text="🦜 Ελληνικά", length=5)[-1]["T"] == 5   # unknown characters read as [UNK]


# ---------------------------------------------------------------------------------------------
# The memory experiment


def test_memory_batches_mark_the_key_k_steps_back_among_distractors():
    from playground.training.memory import MemoryConfig, distances, make_batch, vocab_size

    cfg = MemoryConfig(max_k=6)
    k = torch.tensor([1, 3, 6])
    x, y = make_batch(cfg, k, torch.Generator().manual_seed(0))
    assert x.shape == (3, 8)
    marker = vocab_size(cfg) - 1
    for row, key, distance in zip(x, y, k):
        assert (row == marker).nonzero().flatten().tolist() == [6 - distance.item()]  # one marker, then the key
        assert row[7 - distance.item()] == key
    many = make_batch(MemoryConfig(max_k=30), torch.full((64,), 30), torch.Generator().manual_seed(1))[0]
    assert (many[:, -30:] < cfg.n_keys).sum(1).float().mean() > 10  # keys after the marked one: distractors
    assert distances(MemoryConfig(max_k=30, n_distances=8)) == [1, 5, 9, 13, 18, 22, 26, 30]
    assert distances(MemoryConfig(max_k=3, n_distances=8)) == [1, 2, 3]


@pytest.mark.slow  # a training run
def test_memory_experiment_lstm_learns_a_short_delay_and_reports_progress():
    from playground.training.memory import MemoryConfig, run

    seen = []
    result = run(MemoryConfig(max_k=3, steps=80, hidden_size=16, eval_per_k=32, cells="lstm"),
                 lambda fraction, message: seen.append(fraction))
    r = result["cells"]["lstm"]
    assert result["k"] == [1, 2, 3] and len(r["accuracy"]) == len(r["test_loss"]) == 3 and min(r["accuracy"]) > 0.9
    assert r["loss_curve"][-1][1] < r["loss_curve"][0][1] and seen[-1] == pytest.approx(1.0)


def test_memory_cached_result_says_how_it_was_made():
    from playground.training.memory import load_cached

    cached = load_cached()
    assert cached is not None, "assets/memory_task.json is shipped (python -m playground.training.memory)"
    assert {"command", "seconds", "torch"} <= set(cached["made"]) and set(cached["cells"]) == {"rnn", "lstm", "gru"}
    assert all(len(r["accuracy"]) == len(cached["k"]) for r in cached["cells"].values())
    # the shipped run shows the lecture's point: the Elman RNN learns the short distances only, the gated cells all
    rnn, lstm, gru = (cached["cells"][c]["accuracy"] for c in ("rnn", "lstm", "gru"))
    assert rnn[0] > 0.9 and rnn[-1] < 0.5 and min(lstm) > 0.9 and min(gru) > 0.9


def test_memory_experiment_endpoint_runs_live(client):
    acc, loss, about, data = client.predict(3, 10, 4, 7, api_name="/memory_experiment")
    assert "Live result" in about and data["config"]["seed"] == 7 and data["k"] == [1, 2, 3]
    assert set(data["cells"]) == {"rnn", "lstm", "gru"}
    assert all(0 <= a <= 1 for r in data["cells"].values() for a in r["accuracy"])


# ---------------------------------------------------------------------------------------------
# Figure builders (arrays in, figures out)


def test_gradient_figures_have_the_expected_traces():
    from playground.figures import gradient_flow as fg

    chars = list("abcdefghijk")
    results = {key: introspect.to_json(introspect.gradient_flow(_model(key), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]))
               for key in ("rnn", "lstm", "gru")}
    labels = {"rnn": "Elman RNN", "lstm": "LSTM", "gru": "GRU"}
    flow_fig = fg.gradient_flow_figure(results, labels, chars)
    assert [t.name for t in flow_fig.data] == ["Elman RNN", "LSTM", "LSTM: cell c_t", "GRU"]
    assert flow_fig.layout.yaxis.type == "log" and len(flow_fig.data[0].x) == 10
    lstm = fg.gates_figure(results["lstm"]["gates"], chars, "LSTM")
    assert [t.type for t in lstm.data] == ["heatmap"] * 4 and lstm.data[0].z.shape == (16, 10)
    strip = fg.gradient_strip_html(chars, results, labels)
    assert strip.count('class="gf-ch"') == 3 * 10 and strip.count("gf-target") == 3
    results["rnn"]["status"], results["rnn"]["grad_norms"] = "overflow", [None] * 10
    assert "overflow" in fg.gradient_flow_figure(results, labels, chars).layout.title.text
    assert 'gf-badge gf-overflow' in fg.gradient_status_html(results, labels, ["a notice"])


def test_memory_figures_accuracy_with_chance_and_loss_curves():
    from playground.figures import gradient_flow as fg
    from playground.training.memory import load_cached

    acc, loss = fg.memory_figures(load_cached(), {"rnn": "Elman RNN", "lstm": "LSTM", "gru": "GRU"})
    assert len(acc.data) == 4 and acc.data[-1].name == "chance" and len(loss.data) == 3


def test_memory_experiment_leaves_the_global_random_state_alone():
    """The app runs it while serving: it must neither seed nor draw from torch's global generator,
    and the same config gives the same result."""
    from playground.training.memory import MemoryConfig, run

    cfg = MemoryConfig(max_k=3, steps=4, eval_per_k=4, hidden_size=4, cells="gru")
    torch.manual_seed(123)
    before = torch.get_rng_state()
    first = run(cfg)
    assert torch.equal(torch.get_rng_state(), before), "the experiment touched the global torch RNG"
    again = run(cfg)["cells"]["gru"]
    assert {k: v for k, v in again.items() if k != "seconds"} == {k: v for k, v in first["cells"]["gru"].items()
                                                                   if k != "seconds"}


def test_the_predicted_factor_follows_the_measured_one_for_the_shipped_models():
    """The naive estimate (a random direction at every step) is 2-4x off; the gradient turns towards the directions
    that shrink least. The Elman prediction (the Jacobian product's top Lyapunov exponent, from a random start,
    no loss) lands within 5% of the fitted factor; the gated cells' (their gates multiplied unit by unit) within 20%."""
    from playground.analysis import models

    text = "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun."
    tolerance = {"rnn": 0.05, "lstm": 0.2, "gru": 0.2}
    for kind, rel in tolerance.items():
        ckpt = models.find(f"{kind}-shakespeare")
        if ckpt is None:
            pytest.skip(f"{kind}-shakespeare is not shipped")
        ids = introspect.prepare_ids(ckpt.tokenizer, text, 120).ids
        rates = introspect.gradient_flow(ckpt.model, ids)["rates"]
        assert rates["predicted"] == pytest.approx(rates["measured"], rel=rel), (kind, rates)
        assert abs(rates["predicted"] - rates["measured"]) < abs(rates["naive"] - rates["measured"]), (kind, rates)


def test_the_tab_counts_each_shipped_model_s_parameters_as_torch_and_the_lecture_do():
    """The table under the plot: every parameter of the model, the recurrent part as torch.nn counts it (two bias
    vectors per gate) and as the lecture's formula k(mn + n^2 + n) does (one)."""
    from playground.analysis import models
    from playground.nets.recurrent import TORCH_CLASSES
    from playground.ui import gradient_tab

    shown = gradient_tab.models_md()
    for key in gradient_tab.LISTED:
        lm = models.get(f"{key}-shakespeare").model
        m, n, k = lm.config.n_embd, lm.config.hidden_size, {"rnn": 1, "lstm": 4, "gru": 3}[key]
        torch_count = sum(p.numel() for p in getattr(torch.nn, TORCH_CLASSES[key])(m, n).parameters())
        row = (f"| {gradient_tab.CELLS[key]} | {n} | {sum(p.numel() for p in lm.parameters()):,} | {k}(mn + n² + n) = "
               f"{k * (m * n + n * n + n):,} | {torch_count:,} |")
        assert row in shown, (row, shown)
