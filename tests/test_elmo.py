"""ELMo's biLM (Peters et al. 2018): the two LMs' contract, causality each way, parity with torch.nn.LSTM, eq. 1's
mix, the stream of layers (`hidden`), the residual, training, the whole held-out split, the checkpoint and the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open

from playground import checkpoints, train
from playground.nets.elmo import ELMo, ELMoConfig, mix
from playground.training import elmo as elmo_training

V, C, L = 37, 12, 2


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: one thread (the CPU is shared; two threads on a busy machine are slower than one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(residual: bool = True, seed: int = 0, **kw) -> ELMo:
    model = ELMo(ELMoConfig(vocab_size=V, n_embd=C, n_layer=L, residual=residual, **kw))
    model.reset_parameters(torch.Generator().manual_seed(seed))
    return model.eval()


def _ids(B: int = 3, T: int = 9, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def _hidden(model: ELMo, idx: torch.Tensor) -> torch.Tensor:
    """The h_{k,j} of §3.2 from the contract's internals["hidden"], stacked: (L+1, B, T, 2C)."""
    return torch.stack(model(idx, return_internals=True)[2]["hidden"])


def test_loss_at_init_is_about_ln_vocab():
    model = ELMo(ELMoConfig(vocab_size=500, n_embd=16))
    model.reset_parameters(torch.Generator().manual_seed(0))
    idx = torch.randint(0, 500, (4, 20), generator=torch.Generator().manual_seed(0))
    _, loss, internals = model(idx[:, :-1], idx[:, 1:], return_internals=True)
    for part in (loss, internals["loss_fwd"], internals["loss_bwd"]):
        assert abs(part.item() - math.log(500)) < 0.05, part.item()


def test_forward_lm_is_causal_and_backward_lm_anti_causal():
    model, idx = _model(), _ids(B=2, T=10)
    (f0, b0), _ = model(idx)
    k = 4
    later, earlier = idx.clone(), idx.clone()
    later[:, k + 1:] = (later[:, k + 1:] + 1) % V             # change tokens k+1 ..
    earlier[:, :k] = (earlier[:, :k] + 1) % V                 # change tokens .. k-1
    (f1, b1), _ = model(later)
    (f2, b2), _ = model(earlier)
    torch.testing.assert_close(f1[:, :k + 1], f0[:, :k + 1], rtol=0, atol=0)   # forward logits ≤ k unchanged
    assert not torch.allclose(f1[:, k + 1:], f0[:, k + 1:])                      # ... and later ones do move
    torch.testing.assert_close(b2[:, k:], b0[:, k:], rtol=0, atol=0)           # backward logits ≥ k unchanged
    assert not torch.allclose(b2[:, :k], b0[:, :k])


def _torch_lstms(model: ELMo, direction: str) -> list[torch.nn.LSTM]:
    """torch.nn.LSTM per layer, loaded with the weights of our cells for that direction."""
    out = []
    for enc in getattr(model, direction):
        lstm = torch.nn.LSTM(C, C, batch_first=True)
        lstm.load_state_dict(enc.torch_state_dict())
        out.append(lstm)
    return out


def _reference_stack(lstms, x, residual=True):
    outs, h = [], x
    for j, lstm in enumerate(lstms):
        y, _ = lstm(h)
        h = y + h if residual and j > 0 else y
        outs.append(h)
    return outs


@pytest.mark.parametrize("residual", [True, False])
def test_each_direction_scores_the_right_tokens_as_torch_nn_lstm_does(residual):
    model, window = _model(residual), _ids(B=3, T=8)
    idx, targets = window[:, :-1], window[:, 1:]              # w_0 .. w_{T-1} and w_1 .. w_T
    (lf, lb), loss, internals = model(idx, targets, return_internals=True)
    E, b = model.wte.weight, model.b_s
    with torch.no_grad():
        h_f = _reference_stack(_torch_lstms(model, "fwd"), E[idx], residual)[-1]           # read w_0 .. w_{T-1}
        h_b = _reference_stack(_torch_lstms(model, "bwd"), E[targets].flip(1), residual)[-1].flip(1)   # w_T .. w_1
        ref_f, ref_b = h_f @ E.T + b, h_b @ E.T + b
        nll_f = F.cross_entropy(ref_f.flatten(0, 1), targets.flatten())    # predicts w_{k+1}
        nll_b = F.cross_entropy(ref_b.flatten(0, 1), idx.flatten())        # predicts w_k from w_{k+1} .. w_T
    tol = dict(atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lf, ref_f, **tol)
    torch.testing.assert_close(lb, ref_b, **tol)
    torch.testing.assert_close(internals["loss_fwd"], nll_f, **tol)
    torch.testing.assert_close(internals["loss_bwd"], nll_b, **tol)
    torch.testing.assert_close(loss, (nll_f + nll_b) / 2, **tol)
    # without targets the backward LM reads idx itself: logits_bwd[:, k] has read t_k .. t_{T-1}
    (_, lb_alone), none = model(idx)
    with torch.no_grad():
        h = _reference_stack(_torch_lstms(model, "bwd"), E[idx].flip(1), residual)[-1].flip(1)
    assert none is None
    torch.testing.assert_close(lb_alone, h @ E.T + b, **tol)


def test_mix_is_equation_1():
    g = torch.Generator().manual_seed(3)
    layers = torch.randn(L + 1, 2, 5, 2 * C, generator=g)
    s, gamma = torch.tensor([0.5, -1.0, 2.0]), 0.7
    e = torch.exp(s)
    by_hand = gamma * sum((e[j] / e.sum()) * layers[j] for j in range(L + 1))
    torch.testing.assert_close(mix(layers, s, gamma), by_hand, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(mix(layers, torch.zeros(L + 1), 1.0), layers.mean(0), atol=1e-6, rtol=1e-6)
    with pytest.raises(AssertionError, match="weights for 3 layers"):
        mix(layers, torch.zeros(2), 1.0)


def test_hidden_has_l_plus_1_layers_and_layer_0_is_x_x():
    model, idx = _model(), _ids(B=2, T=6)
    reps = _hidden(model, idx)
    assert reps.shape == (L + 1, 2, 6, 2 * C)
    x = model.wte(idx).detach()
    torch.testing.assert_close(reps[0], torch.cat([x, x], -1), rtol=0, atol=0)
    with torch.no_grad():
        logits_f, logits_b = model(idx)[0]                        # torch's fused kernel, without internals
    # the top layer, read by our cells, is what the shared softmax reads: fused == our cells
    torch.testing.assert_close(model._softmax_logits(reps[-1][..., :C]), logits_f, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(model._softmax_logits(reps[-1][..., C:]), logits_b, atol=1e-6, rtol=1e-6)


def test_internals_follow_the_contract_in_the_tokens_order():
    model, idx = _model(), _ids(B=2, T=6)
    _, _, internals = model(idx, _ids(B=2, T=6, seed=2), return_internals=True)
    layers = internals["layers"]
    assert len(layers) == 2 * L                                  # (layer 1 fwd, layer 1 bwd, layer 2 fwd, ...)
    for layer in layers:
        assert set(layer) == {"h", "c", "gates"}
        assert len(layer["h"]) == len(layer["c"]) == 6 and layer["h"][0].shape == (2, C)
        assert set(layer["gates"]) == {"i", "f", "g", "o"} and layer["gates"]["f"].shape == (2, 6, C)
    reps = internals["hidden"]                                   # of idx read both ways, even with targets
    torch.testing.assert_close(torch.stack(layers[0]["h"], 1), reps[1][..., :C], atol=1e-6, rtol=1e-6)  # →h_{k,1}
    torch.testing.assert_close(torch.stack(layers[1]["h"], 1), reps[1][..., C:], atol=1e-6, rtol=1e-6)  # ←h_{k,1}
    # the backward LM's first step reads the last token: its cell state at the last position is i_T * g_T
    gates = layers[1]["gates"]
    torch.testing.assert_close(layers[1]["c"][-1], gates["i"][:, -1] * gates["g"][:, -1], atol=1e-6, rtol=1e-6)


def test_the_residual_connection_adds_layer_1_to_layer_2():
    idx = _ids(B=2, T=7)
    with_res, without = _model(residual=True), _model(residual=False)
    r1, r0 = _hidden(with_res, idx), _hidden(without, idx)
    torch.testing.assert_close(r1[:2], r0[:2], rtol=0, atol=0)   # same weights: layers 0 and 1 agree
    assert not torch.allclose(r1[2], r0[2])                        # layer 2 differs ...
    torch.testing.assert_close(r1[2], r0[2] + r0[1], atol=1e-6, rtol=1e-6)   # ... by exactly layer 1


def test_overfitting_one_batch_drives_the_loss_down():
    torch.manual_seed(0)
    model, window = _model().train(), _ids(B=4, T=13)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(200):
        _, loss = model(window[:, :-1], window[:, 1:])
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first > 3.0 and loss.item() < 0.3, (first, loss.item())   # from ln V = 3.6 to near memorised


@pytest.mark.parametrize("n_words,block_size", [(50, 7), (50, 49), (51, 10), (2, 8)])
def test_held_out_scores_the_whole_split(n_words, block_size):
    model, ids = _model(), torch.randint(1, V, (n_words,), generator=torch.Generator().manual_seed(4))
    ids[::5] = 0                                                   # some [UNK]
    out = elmo_training.held_out(model, ids, block_size, windows_per_forward=2)
    windows = elmo_training.held_out_windows(n_words, block_size)
    assert out["windows"] == len(windows) == math.ceil((n_words - 1) / block_size)
    assert out["tokens_per_direction"] == n_words - 1 and out["words"] == n_words
    assert out["unk_share"] == round(float((ids == 0).float().mean()), 4)
    # the same NLL as scoring every word by hand: forward p(w_{i+1} | window so far), backward p(w_i | rest of window)
    nll_f = nll_b = 0.0
    with torch.no_grad():
        for start, T in windows:
            w = ids[start:start + T + 1][None]
            (lf, lb), _ = model(w[:, :-1], w[:, 1:])
            nll_f += F.cross_entropy(lf[0], w[0, 1:], reduction="sum").item()
            nll_b += F.cross_entropy(lb[0], w[0, :-1], reduction="sum").item()
    assert out["loss_forward"] == pytest.approx(nll_f / (n_words - 1), abs=1e-4)
    assert out["loss_backward"] == pytest.approx(nll_b / (n_words - 1), abs=1e-4)
    assert out["perplexity_mean"] == pytest.approx(math.exp((nll_f + nll_b) / 2 / (n_words - 1)), rel=1e-3)
    assert "whole held-out split" in out["protocol"]


def test_checkpoint_round_trip_in_fp16(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    model = _model(seed=5)
    tok = Tokenizer(WordLevel({"[UNK]": 0, **{f"w{i}": i for i in range(1, V)}}, unk_token="[UNK]"))
    checkpoints.save(tmp_path / "e", kind="elmo", config=model.config, card={"kind": "elmo"},
                     model=elmo_training.fp16_copy(model), tokenizer=tok)
    with safe_open(str(tmp_path / "e" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}   # half the bytes on disk
    loaded = checkpoints.load(tmp_path / "e")
    assert loaded.kind == "elmo" and loaded.config == model.config
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())  # back in float32 to compute
    for (name, p), q in zip(model.state_dict().items(), loaded.model.state_dict().values()):
        torch.testing.assert_close(q, p.half().float(), rtol=0, atol=0, msg=name)
    idx = _ids()
    torch.testing.assert_close(_hidden(loaded.model, idx), _hidden(model, idx), atol=2e-3, rtol=2e-3)


@pytest.fixture
def toy_corpus(tmp_path):
    g = torch.Generator().manual_seed(0)
    words = TOY_WORDS
    lines = [" ".join(words[i] for i in torch.randint(0, len(words), (12,), generator=g)) for _ in range(300)]
    path = tmp_path / "toy.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


TOY_WORDS = "the bank of the river was green and money in a bank is safe when water runs by".split()
ARGS = ["--n_embd=8", "--batch_size=4", "--block_size=8", "--min_count=1", "--max_iters=30", "--eval_interval=10",
        "--eval_iters=2", "--warmup_iters=5", "--threads=1"]


def test_the_cli_trains_end_to_end_and_writes_a_card(toy_corpus, tmp_path):
    result = train.main(["elmo", "--corpus", toy_corpus, "--out", str(tmp_path), "--name", "e", *ARGS])
    ckpt = checkpoints.load(tmp_path / "e")
    card = ckpt.card
    assert ckpt.kind == "elmo" and card["steps"] == result["steps"] == 30
    assert ckpt.config.vocab_size == ckpt.tokenizer.get_vocab_size() == card["vocab_size"] == len(set(TOY_WORDS)) + 1
    assert ckpt.tokenizer.token_to_id("[UNK]") == 0
    assert card["history"][-1]["val"] < card["history"][0]["val"]
    held = card["held_out"]
    assert held == result["held_out"] and held["words"] == card["words"]["held_out"] == 360
    assert held["tokens_per_direction"] == 359 and held["windows"] == 45
    assert card["mix"]["s"] == [0.0] * 3 and card["mix"]["gamma"] == 1.0
    assert card["command"].startswith("python -m playground.train elmo --corpus")
    assert not (tmp_path / ".e.resume").exists()


def test_resume_continues_exactly(toy_corpus, tmp_path, monkeypatch):
    args = ["elmo", "--corpus", toy_corpus, "--out", str(tmp_path), *ARGS]
    train.main(args + ["--name", "whole"])
    calls, real_batch = {"n": 0}, elmo_training.get_batch

    def interrupted(*a):
        calls["n"] += 1
        if calls["n"] > 25:  # after the checkpoint at step 20, before step 30
            raise KeyboardInterrupt
        return real_batch(*a)

    monkeypatch.setattr(elmo_training, "get_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train.main(args + ["--name", "cut"])
    monkeypatch.setattr(elmo_training, "get_batch", real_batch)
    train.main(args + ["--name", "cut", "--resume"])
    whole, cut = checkpoints.load(tmp_path / "whole"), checkpoints.load(tmp_path / "cut")
    for (name, p), q in zip(whole.model.state_dict().items(), cut.model.state_dict().values()):
        assert torch.equal(p, q), f"resuming is exact: {name} differs"
    histories = [[{k: v for k, v in h.items() if k != "seconds"} for h in c.card["history"]] for c in (whole, cut)]
    assert histories[0] == histories[1] and cut.card["held_out"] == whole.card["held_out"]
    assert json.loads((tmp_path / "cut" / "card.json").read_text())["steps"] == 30
