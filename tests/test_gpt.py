"""The GPT's invariants: shapes and the contract, loss at init, causality, the written-out attention
against PyTorch's SDPA, the KV cache, and a checkpoint round trip."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from playground import checkpoints
from playground.nets import gpt
from playground.nets.gpt import GPT, GPTConfig

CONFIG = GPTConfig(vocab_size=23, n_positions=16, n_layer=2, n_head=4, n_embd=32)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(CONFIG).eval()


def tokens(B=2, T=12, seed=1):
    return torch.randint(0, CONFIG.vocab_size, (B, T), generator=torch.Generator().manual_seed(seed))


def test_contract_shapes_and_loss_at_init(model):
    idx = tokens()
    logits, loss = model(idx)
    assert logits.shape == (2, 12, CONFIG.vocab_size) and loss is None
    _, loss = model(idx, tokens(seed=2))
    assert abs(loss.item() - math.log(CONFIG.vocab_size)) < 0.1  # small init: nearly uniform predictions


def test_config_invariants_have_messages():
    with pytest.raises(AssertionError, match="must divide"):
        GPTConfig(n_embd=30, n_head=4)


def test_causality_changing_a_later_token_leaves_earlier_logits(model):
    idx = tokens(B=1)
    t = 6
    changed = idx.clone()
    changed[0, t + 1] = (idx[0, t + 1] + 1) % CONFIG.vocab_size
    a, _ = model(idx)
    b, _ = model(changed)
    assert torch.equal(a[:, : t + 1], b[:, : t + 1])
    assert not torch.allclose(a[:, t + 1], b[:, t + 1])
    # and the written-out path is causal too
    a, _, _ = model(idx, return_internals=True)
    b, _, _ = model(changed, return_internals=True)
    assert torch.allclose(a[:, : t + 1], b[:, : t + 1], atol=1e-6)


def test_written_out_attention_equals_sdpa(model):
    idx = tokens()
    fast, _ = model(idx)
    slow, _, internals = model(idx, return_internals=True)
    torch.testing.assert_close(slow, fast, atol=1e-5, rtol=1e-5)
    assert set(internals) == {"layers", "hidden"} and len(internals["layers"]) == CONFIG.n_layer
    assert len(internals["hidden"]) == CONFIG.n_layer + 1  # after the embedding and after each block
    torch.testing.assert_close(model.unembed(internals["hidden"][-1]), slow)  # the logit lens's last layer
    for layer in internals["layers"]:
        assert set(layer) == {"q", "k", "v", "scores", "attn"}
        att, q, k, v, scores = layer["attn"], layer["q"], layer["k"], layer["v"], layer["scores"]
        assert att.shape == (2, CONFIG.n_head, 12, 12)
        torch.testing.assert_close(att.sum(-1), torch.ones(2, CONFIG.n_head, 12))  # rows sum to 1
        assert (att.triu(diagonal=1) == 0).all()                                 # masked entries exactly 0
        torch.testing.assert_close(scores, q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))
        torch.testing.assert_close(att @ v, F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                   atol=1e-6, rtol=1e-5)


def test_a_generation_steps_attention_is_the_same_whatever_the_thread_count():
    """One query position against many keys (a generation step): the same numbers with 1 thread and with 2, bit for
    bit (the CPU kernel of F.scaled_dot_product_attention splits the keys among its threads there), and those of
    F.scaled_dot_product_attention within rounding."""
    torch.manual_seed(0)
    q, kv = torch.randn(1, 9, 1, 64), torch.randn(1, 9, 300, 64)
    allowed = torch.ones(1, 300, dtype=torch.bool)
    before = torch.get_num_threads()
    try:
        answers = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            answers.append(gpt.attend(q, kv, kv, allowed))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(*answers)
    torch.testing.assert_close(answers[0], F.scaled_dot_product_attention(q, kv, kv, attn_mask=allowed))


def test_bf16_autocast_keeps_attention_in_fp32_and_the_logits_close(model):
    """Mixed-precision training (LMTrainConfig.dtype="bfloat16"): attention runs in fp32 on a CPU,
    the projections in bf16, so the logits stay within bf16's rounding of the fp32 ones."""
    idx = tokens()
    full, _ = model(idx)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed, _ = model(idx)
        q = torch.randn(2, 4, 12, 8).bfloat16()
        assert gpt.attend(q, q, q, None, 0.0).dtype == torch.float32  # the fp32 path, not bf16's slow one
    assert mixed.dtype == torch.bfloat16
    torch.testing.assert_close(mixed.float(), full, atol=0.05, rtol=0.05)


def test_step_with_kv_cache_equals_the_full_forward(model):
    idx = tokens(T=CONFIG.n_positions)
    full, _ = model(idx)
    logits, cache = model.step(idx[:, :5])             # a prompt of 5 tokens at once
    pieces = [logits]
    for t in range(5, CONFIG.n_positions, 3):           # then 3 tokens at a time
        logits, cache = model.step(idx[:, t:t + 3], cache)
        pieces.append(logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache["kv"][0][0].shape == (2, CONFIG.n_head, CONFIG.n_positions, CONFIG.n_embd // CONFIG.n_head)


def test_step_past_the_context_slides_the_window(model):
    idx = tokens(B=1, T=CONFIG.n_positions + 4)
    _, cache = model.step(idx[:, : CONFIG.n_positions])
    for t in range(CONFIG.n_positions, idx.size(1)):
        logits, cache = model.step(idx[:, t:t + 1], cache)
        window = idx[:, t + 1 - CONFIG.n_positions: t + 1]
        torch.testing.assert_close(logits[:, -1], model(window)[0][:, -1], atol=1e-5, rtol=1e-5)
    assert cache["idx"].size(1) == CONFIG.n_positions


def test_overfits_one_batch():
    torch.manual_seed(0)
    model = GPT(CONFIG)
    idx = tokens(B=4, T=16)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(150):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1


def test_checkpoint_round_trip(tmp_path, model):
    from tokenizers import Tokenizer, models

    tok = Tokenizer(models.WordLevel({chr(97 + i): i for i in range(CONFIG.vocab_size)}, unk_token="a"))
    checkpoints.save(tmp_path / "gpt", kind="gpt", config=CONFIG, card={"note": "test"}, model=model, tokenizer=tok)
    loaded = checkpoints.load(tmp_path / "gpt")
    assert loaded.kind == "gpt" and loaded.config == CONFIG
    idx = tokens()
    torch.testing.assert_close(loaded.model(idx)[0], model(idx)[0])


def test_the_shipped_model_is_the_one_its_card_describes():
    """models/gpt-shakespeare: the card names the command and a validation loss within the aim (≤ 1.55
    nats/char), and the weights predict Shakespeare's verse far better than chance (ln 66 ≈ 4.19)."""
    shipped = checkpoints.load("gpt-shakespeare")
    card = shipped.card
    assert card["command"].startswith("python -m playground.train gpt ") and card["corpus"][0]["sha256"]
    assert card["val_loss"] <= 1.55 and card["history"][-1]["val"] == pytest.approx(card["val_loss"], abs=1e-3)
    verse = "KING RICHARD II:\nNow is the time to speak, and I will tell thee\nWhat thou hast done against the crown.\n"
    idx = torch.tensor([shipped.tokenizer.encode(verse).ids])
    with torch.inference_mode():
        _, loss = shipped.model(idx[:, :-1], idx[:, 1:])  # loaded in eval mode
    assert loss.item() < 2.0


def test_without_biases_is_nanogpts_model():
    """bias=False (nanoGPT's default): no bias in any Linear or LayerNorm, the same contract, and no
    GPT-2 export (GPT-2 has biases)."""
    from playground.nets import hf

    config = GPTConfig(vocab_size=23, n_positions=16, n_layer=2, n_head=4, n_embd=32, bias=False)
    torch.manual_seed(0)
    model = GPT(config)
    names = [name for name, _ in model.named_parameters()]
    assert not [n for n in names if n.endswith(".bias")]
    with_bias = GPT(CONFIG).num_params()
    C, L = 32, 2
    assert with_bias - model.num_params() == L * (3 * C + C + 4 * C + C + 2 * C) + C  # every bias vector, ln_f's too
    _, loss = model(tokens(), tokens(seed=2))
    assert abs(loss.item() - math.log(config.vocab_size)) < 0.1
    with pytest.raises(ValueError, match="biases"):
        hf.gpt_to_gpt2(model)


def test_the_logit_lens_ends_where_the_model_ends(model):
    """nostalgebraist 2020: the last layer's lens is the model's own prediction; every layer gives a distribution."""
    from playground.analysis import generation

    class Chars:  # a tokenizer as the analysis reads it
        def id_to_token(self, i):
            return chr(65 + i % 26)

        pre_tokenizer = None

    ids = tokens()[0].tolist()
    data = generation.logit_lens(model, Chars(), ids, [])
    assert data["layers"] == ["embedding"] + [f"block {i}" for i in range(1, CONFIG.n_layer + 1)]
    with torch.no_grad():
        final = model(torch.tensor([ids]))[0][0].argmax(-1).tolist()
    assert data["top_token"][-1] == [Chars().id_to_token(i) for i in final] == data["final_token"]
    assert data["top_prob"][-1] == data["final_token_prob"][-1]
    assert all(0 < p <= 1 for row in data["top_prob"] for p in row)
