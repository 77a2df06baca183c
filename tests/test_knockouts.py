"""Knockouts (issue #34): an LSTM's forget gate or a GRU's update gate held at 0 or 1 really holds, the equations
then give what they must (checked by hand from the weights), nothing changes when no gate is held, and uniform
attention gives the mean of the encoder's annotations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from playground.analysis import gradient_flow as flow
from playground.analysis import models
from playground.nets import recurrent, seq2seq as s2s
from playground.nets.seq2seq_decoding import greedy
from playground.training import memory as memory_task


def encoder(cell: str, H: int = 5) -> recurrent.RecurrentEncoder:
    torch.manual_seed(0)
    return recurrent.RecurrentEncoder(cell, 3, H).double()


def x_seq(T: int = 7) -> torch.Tensor:
    return torch.randn(2, T, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_a_clamped_forget_gate_holds_and_the_cell_follows_its_equation(value):
    enc = encoder("lstm")
    x = x_seq()
    _, _, internals = enc(x, return_internals=True, clamp={"f": value})
    layer = internals["layers"][0]
    assert torch.all(layer["gates"]["f"] == value)
    cell, H = enc.cells[0], enc.hidden_size
    h, c = torch.zeros(2, H, dtype=torch.float64), torch.zeros(2, H, dtype=torch.float64)
    for t in range(x.shape[1]):  # by hand: i, g, o from the weights; f held
        pre = x[:, t] @ cell.weight_ih.T + cell.bias_ih + h @ cell.weight_hh.T + cell.bias_hh
        i, _, g, o = pre.chunk(4, dim=1)
        c = value * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        torch.testing.assert_close(layer["c"][t], c)
        torch.testing.assert_close(layer["h"][t], h)


def test_a_clamped_update_gate_copies_the_state_or_drops_it():
    enc = encoder("gru")
    x = x_seq()
    h0 = torch.randn(1, 2, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    _, _, kept = enc(x, h0, return_internals=True, clamp={"z": 1.0})
    assert torch.all(kept["layers"][0]["gates"]["z"] == 1)
    for h_t in kept["layers"][0]["h"]:           # h_t = z h_{t-1} + (1 - z) n_t = h_{t-1}: the state copied forward
        torch.testing.assert_close(h_t, h0[0], rtol=0, atol=0)
    _, _, dropped = enc(x, h0, return_internals=True, clamp={"z": 0.0})
    layer = dropped["layers"][0]
    for h_t, n_t in zip(layer["h"], layer["gates"]["n"].unbind(1)):   # h_t = n_t
        torch.testing.assert_close(h_t, n_t)


def test_no_clamp_changes_nothing_and_keeps_the_fused_kernel():
    enc = encoder("lstm")
    x = x_seq()
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    out, _ = enc(x)
    fused, _ = enc(x, fused=True)
    assert torch.equal(out, fused)                       # clamp=None: the same fused path as before
    enc(x, clamp={"f": 0.0})
    assert all(torch.equal(before[k], v) for k, v in enc.state_dict().items())   # the weights untouched
    with pytest.raises(AssertionError, match="fused kernel"):
        enc(x, fused=True, clamp={"f": 1.0})
    with pytest.raises(AssertionError, match="can clamp i, f, o, not z"):
        enc(x, clamp={"z": 1.0})
    with pytest.raises(AssertionError, match="no gate"):
        encoder("rnn")(x_seq(), clamp={"f": 1.0})


def test_named_knockouts_apply_to_their_cell_only():
    assert recurrent.knockout("forget-1", "lstm") == {"f": 1.0}
    assert recurrent.knockout("forget-1", "gru") is None and recurrent.knockout("none", "lstm") is None
    assert recurrent.knockout("update-0", "gru") == {"z": 0.0}


@pytest.mark.skipif(models.resolve("gru-shakespeare") is None or models.resolve("lstm-shakespeare") is None,
                    reason="the shipped recurrent LMs are needed")
def test_the_gradient_flow_responds_to_each_knockout():
    lms = {key: models.get(f"{key}-shakespeare") for key in ("lstm", "gru")}
    text = "The quick brown fox jumps over the lazy dog."

    def run(knockout):
        data, _ = flow.compare({k: m.model for k, m in lms.items()}, lms["lstm"].tokenizer, text, 40,
                               knockout=knockout)
        return data["cells"]

    plain, forget_1, forget_0, update_1 = run("none"), run("forget-1"), run("forget-0"), run("update-1")
    assert forget_1["gru"] == plain["gru"]                                  # another cell's knockout: untouched
    assert np.all(np.array(forget_1["lstm"]["gates"]["f"]) == 1.0)
    first = {name: cells["lstm"]["grad_norms"][0] for name, cells in
             (("plain", plain), ("f=1", forget_1), ("f=0", forget_0))}
    assert first["f=0"] < first["plain"] < first["f=1"]                     # the carousel cut, and made perfect
    norms = np.array(update_1["gru"]["grad_norms"])
    np.testing.assert_allclose(norms, norms[-1], rtol=1e-9)   # h_t = h_{t-1}: the same gradient at every step
    assert forget_0["lstm"]["status"] == "vanishing"


def test_the_memory_task_trains_with_a_gate_held():
    cfg = memory_task.MemoryConfig(max_k=3, n_distances=2, steps=3, hidden_size=4, cells="lstm,gru",
                                   knockout="forget-0", eval_per_k=4, device="cpu")
    result = memory_task.run(cfg)
    assert result["config"]["knockout"] == "forget-0" and set(result["cells"]) == {"lstm", "gru"}
    with pytest.raises(AssertionError, match="knockout"):
        memory_task.MemoryConfig(knockout="everything")


# ---------------------------------------------------------------------------------------------
# Uniform attention in the encoder-decoders


def tiny_seq2seq(variant: str) -> s2s.RNNSeq2Seq:
    torch.manual_seed(0)
    return s2s.build_model(s2s.Seq2SeqConfig(variant=variant, src_vocab_size=11, tgt_vocab_size=9, n_embd=6,
                                             hidden_size=5, attn_size=4)).eval()


@pytest.mark.parametrize("variant", ["bahdanau", "dot", "general"])
def test_uniform_attention_gives_the_mean_of_the_annotations(variant):
    model = tiny_seq2seq(variant)
    src = torch.tensor([[3, 4, 5, 6, 7, 8], [8, 7, 6, 5, 4, 3]])
    with torch.no_grad():
        memory = model.encode(src)
        uniform = s2s.uniform_attention(memory)
        assert "uniform" not in memory                                     # the model's own memory untouched
        s = torch.randn(2, 10, generator=torch.Generator().manual_seed(3))
        scores, alpha, c = model._attend(s, uniform)
        torch.testing.assert_close(alpha, torch.full((2, 6), 1 / 6))
        torch.testing.assert_close(c, memory["h"].mean(dim=1))
        own_c = model._attend(s, memory)[2]
        torch.testing.assert_close(scores, model._attend(s, memory)[0])     # the scores are still the model's
        assert not torch.allclose(own_c, c)
        _, _, step_alpha = model.step(torch.tensor([1, 1]), model.start(memory), uniform)
        torch.testing.assert_close(step_alpha, torch.full((2, 6), 1 / 6))
        ids, alphas = greedy(model, src, 5, uniform=True)
        assert all(torch.allclose(a, torch.full((2, 6), 1 / 6)) for a in alphas)
