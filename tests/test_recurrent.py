"""Recurrent cells: parity with torch.nn (outputs, final states and gradients), the LM contract, the variants."""

from __future__ import annotations

import math

import pytest
import torch

from playground.nets import recurrent
from playground.nets.recurrent import RecurrentConfig, RecurrentEncoder, RecurrentLM

TOL = dict(atol=1e-5, rtol=1e-5)


def _pair(kind, num_layers, bidirectional, nonlinearity="tanh", I=5, H=7):
    torch.manual_seed(0)
    ours = RecurrentEncoder(kind, I, H, num_layers, bidirectional, nonlinearity=nonlinearity)
    cls = getattr(torch.nn, recurrent.TORCH_CLASSES[kind])
    extra = {"nonlinearity": nonlinearity} if kind == "rnn" else {}
    theirs = cls(I, H, num_layers, batch_first=True, bidirectional=bidirectional, **extra)
    ours.load_torch_state_dict(theirs.state_dict())  # their random weights into our cells
    return ours, theirs


def _state(kind, L, B, H, generator):
    h = torch.randn(L, B, H, generator=generator)
    return (h, torch.randn(L, B, H, generator=generator)) if kind == "lstm" else h


def _flat(state):
    return torch.cat([s.flatten() for s in state]) if isinstance(state, tuple) else state.flatten()


@pytest.mark.parametrize("kind,num_layers,bidirectional,nonlinearity", [
    ("rnn", 1, False, "tanh"), ("rnn", 2, True, "relu"), ("lstm", 1, False, "tanh"), ("lstm", 2, True, "tanh"),
    ("gru", 1, False, "tanh"), ("gru", 3, True, "tanh"),
])
def test_parity_with_torch_nn_outputs_states_and_gradients(kind, num_layers, bidirectional, nonlinearity):
    ours, theirs = _pair(kind, num_layers, bidirectional, nonlinearity)
    g = torch.Generator().manual_seed(1)
    B, T, D = 3, 6, 2 if bidirectional else 1
    x = torch.randn(B, T, 5, generator=g)
    state = _state(kind, num_layers * D, B, 7, g)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()

    out1, s1 = ours(x1, state, fused=False)         # our explicit loop over the equations
    out2, s2 = theirs(x2, state)
    assert out1.shape == out2.shape == (B, T, D * 7)
    torch.testing.assert_close(out1, out2, **TOL)
    torch.testing.assert_close(_flat(s1), _flat(s2), **TOL)

    # the same scalar of outputs and final states: gradients w.r.t. the input and every weight agree
    w = torch.randn(out1.shape, generator=g)
    ((out1 * w).sum() + _flat(s1).square().sum()).backward()
    ((out2 * w).sum() + _flat(s2).square().sum()).backward()
    torch.testing.assert_close(x1.grad, x2.grad, **TOL)
    ours_grads = {name: p.grad for name, p in zip(ours.torch_state_dict(), [
        dict(ours.named_parameters())[mine] for mine, _ in ours._torch_names()])}
    for name, p in theirs.named_parameters():
        torch.testing.assert_close(ours_grads[name], p.grad, **TOL, msg=f"gradient of {name}")


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_fused_fast_path_equals_the_explicit_loop(kind):
    ours, _ = _pair(kind, 2, False)
    x = torch.randn(2, 9, 5)
    fast, s_fast = ours(x, fused=True)
    slow, s_slow = ours(x, fused=False)
    torch.testing.assert_close(fast, slow, **TOL)
    torch.testing.assert_close(_flat(s_fast), _flat(s_slow), **TOL)


def test_state_dict_round_trips_to_torch_names():
    ours, theirs = _pair("lstm", 2, True)
    assert set(ours.torch_state_dict()) == set(theirs.state_dict())
    for name, tensor in theirs.state_dict().items():
        assert torch.equal(ours.torch_state_dict()[name], tensor)


def test_gru_uses_the_keep_convention_of_cho_and_torch():
    """z_t = 1 copies h_{t-1} forward exactly: h_t = (1 - z_t) n_t + z_t h_{t-1}."""
    cell = recurrent.GRUCell(3, 4)
    with torch.no_grad():
        cell.bias_ih[4:8].fill_(50.0)   # z block of (r, z, n): sigma(50) == 1 in float32
    h = torch.randn(2, 4)
    h_t, _ = cell(torch.randn(2, 3), h)
    torch.testing.assert_close(h_t, h)


def test_lstm_variants_peephole_and_coupled():
    x, B = torch.randn(2, 5, 3), 2
    peep = RecurrentEncoder("lstm", 3, 4, peephole=True)
    assert {"weight_ci", "weight_cf", "weight_co"} <= {n.split(".")[-1] for n, _ in peep.named_parameters()}
    out, _, internals = peep(x, return_internals=True)
    assert out.shape == (B, 5, 4) and not peep.fusable
    # peepholes change the result: zero them and the cell is the plain LSTM again
    plain = RecurrentEncoder("lstm", 3, 4)
    plain.cells[0].load_state_dict({k: v for k, v in peep.cells[0].state_dict().items() if "weight_c" not in k})
    assert not torch.allclose(out, plain(x, fused=False)[0])
    with torch.no_grad():
        for name in ("weight_ci", "weight_cf", "weight_co"):
            getattr(peep.cells[0], name).zero_()
    torch.testing.assert_close(peep(x)[0], plain(x, fused=False)[0])

    coupled = RecurrentEncoder("lstm", 3, 4, coupled=True)
    assert coupled.cells[0].weight_ih.shape == (12, 3)   # three blocks: f, g, o
    _, _, internals = coupled(x, return_internals=True)
    gates = internals["layers"][0]["gates"]
    torch.testing.assert_close(gates["i"], 1 - gates["f"])


def test_lm_contract_loss_at_init_and_step_matches_forward():
    torch.manual_seed(0)
    V = 20
    for cell in ("rnn", "lstm", "gru"):
        model = RecurrentLM(RecurrentConfig(cell=cell, vocab_size=V, n_embd=8, hidden_size=16, num_layers=2))
        idx = torch.randint(V, (3, 10))
        logits, loss = model(idx, idx)
        assert logits.shape == (3, 10, V)
        assert abs(loss.item() - math.log(V)) < 0.3, f"{cell}: loss at init {loss.item():.2f} vs ln V"
        assert model(idx)[1] is None
        # feeding the tokens in two pieces through step() gives the same logits as one forward pass
        with torch.no_grad():
            first, cache = model.step(idx[:, :4])
            second, _ = model.step(idx[:, 4:], cache)
        torch.testing.assert_close(torch.cat([first, second], dim=1), logits.detach(), **TOL)


def test_lm_is_causal():
    model = RecurrentLM(RecurrentConfig(cell="gru", vocab_size=11, n_embd=4, hidden_size=8))
    idx = torch.randint(11, (1, 8))
    changed = idx.clone()
    changed[0, 5] = (idx[0, 5] + 1) % 11
    a, b = model(idx)[0], model(changed)[0]
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_lm_overfits_one_batch():
    torch.manual_seed(0)
    model = RecurrentLM(RecurrentConfig(cell="lstm", vocab_size=10, n_embd=8, hidden_size=32))
    idx = torch.randint(10, (4, 16))
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    for _ in range(80):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1


@pytest.mark.parametrize("cell, gates", [("rnn", 1), ("lstm", 4), ("gru", 3)])
def test_parameter_counts_lecture_formula_and_torch(cell, gates):
    m, n = 64, 128
    counts = recurrent.parameter_counts(RecurrentConfig(cell=cell, vocab_size=10, n_embd=m, hidden_size=n))
    torch_count = sum(p.numel() for p in getattr(torch.nn, recurrent.TORCH_CLASSES[cell])(m, n).parameters())
    assert sum(p.numel() for p in RecurrentEncoder(cell, m, n).parameters()) == torch_count == counts["recurrent_torch"]
    assert counts["recurrent_formula"] == gates * (m * n + n * n + n)   # the lecture's: 4(mn + n^2 + n) for the LSTM
    assert torch_count - counts["recurrent_formula"] == gates * n       # torch's second bias vector b_h*


def test_config_invariants_have_messages():
    with pytest.raises(AssertionError, match="must be one of"):
        RecurrentConfig(cell="transformer")
    with pytest.raises(AssertionError, match="LSTM options"):
        RecurrentConfig(cell="gru", peephole=True)


def test_reorder_cache_keeps_the_chosen_rows():
    model = RecurrentLM(RecurrentConfig(cell="lstm", vocab_size=9, n_embd=4, hidden_size=6, num_layers=2))
    idx = torch.randint(9, (3, 5))
    _, cache = model.step(idx)
    index = torch.tensor([2, 2, 0])
    picked = model.reorder_cache(cache, index)
    _, expected = model.step(idx[index])
    for a, b in zip(picked, expected):
        torch.testing.assert_close(a, b, **TOL)


def test_internals_have_the_same_keys_for_every_cell():
    """One contract: internals["layers"][i] is {"h", "c", "gates"}; c_t for the LSTM only."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3)
    for kind, gate_names in (("rnn", {"a"}), ("lstm", {"i", "f", "g", "o"}), ("gru", {"r", "z", "n"})):
        encoder = RecurrentEncoder(kind, 3, 4, num_layers=2, bidirectional=True)
        out, _, internals = encoder(x, return_internals=True)
        assert len(internals["layers"]) == 4, kind            # 2 layers x 2 directions
        for l, layer in enumerate(internals["layers"]):
            assert set(layer) == {"h", "c", "gates"} and set(layer["gates"]) == gate_names, kind
            assert len(layer["h"]) == 5 and layer["gates"][next(iter(gate_names))].shape == (2, 5, 4)
            assert (layer["c"] is None) == (kind != "lstm")
        last = internals["layers"][2:]                          # the top layer, forward and reversed
        torch.testing.assert_close(out, torch.cat([torch.stack(d["h"], dim=1) for d in last], dim=-1))
        model = RecurrentLM(RecurrentConfig(cell=kind, vocab_size=7, n_embd=3, hidden_size=4))
        *_, found = model(torch.zeros(1, 4, dtype=torch.long), return_internals=True)
        assert set(found) == {"layers"} and set(found["layers"][0]) == {"h", "c", "gates"}
