"""A Llama saved by transformers loads into our Llama (nets/hf.load_llama_dir, nets/smollm2.load_folder), and
playground/tools/quant_gap.py measures two models' difference on a text: tested on local folders made here (no hub)."""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.nn.functional as F

from playground.nets.hf import llama_config_from_hf
from playground.nets.llama import Llama, LlamaConfig
from playground.nets.smollm2 import load_folder
from playground.tools import quant_gap

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TINY = LlamaConfig(vocab_size=64, n_positions=64, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, n_inner=48,
                   tie_word_embeddings=True)
TEXT = "the ship is sound and the stars are steady . the robot dreams of stars and circuits ."
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"


def save_tiny(folder, seed: int, dtype=torch.bfloat16):
    """A tiny LlamaForCausalLM with weights far from init, saved in `dtype` as transformers saves it, with a
    word-level tokenizer and a chat template; returns the reference model in fp32 (the saved values)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig as HFConfig
    from transformers import LlamaForCausalLM

    hf = HFConfig(vocab_size=TINY.vocab_size, hidden_size=TINY.n_embd, intermediate_size=TINY.n_inner,
                  num_hidden_layers=TINY.n_layer, num_attention_heads=TINY.n_head,
                  num_key_value_heads=TINY.n_kv_head, max_position_embeddings=TINY.n_positions,
                  rms_norm_eps=TINY.rms_norm_eps, rope_theta=TINY.rope_theta, tie_word_embeddings=True,
                  attn_implementation="eager")
    ref = LlamaForCausalLM(hf).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    ref = ref.to(dtype)
    ref.save_pretrained(folder)
    words = ["[UNK]", "<|im_start|>", "<|im_end|>", *dict.fromkeys(TEXT.split())]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": TEMPLATE, "eos_token": "<|im_end|>", "bos_token": "<|im_start|>"}))
    return ref.float()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    a, b = tmp_path_factory.mktemp("original"), tmp_path_factory.mktemp("other")
    return (a, save_tiny(a, seed=1)), (b, save_tiny(b, seed=1, dtype=torch.float16))


def test_a_bf16_folder_loads_into_our_llama_with_the_same_logits(folders):
    (folder, ref), _ = folders
    lm = load_folder(folder)
    idx = torch.tensor([lm.tokenizer.encode(TEXT).ids])
    with torch.no_grad():
        ours, _ = lm.model(idx)
        theirs = ref(idx).logits
    assert lm.model.config == TINY
    assert torch.allclose(ours, theirs, atol=1e-4)
    assert lm.eos == "<|im_end|>" and lm.eos_id == 2
    assert lm.chat_prompt([{"role": "user", "content": "hi"}]) == "<|im_start|>user\nhi<|im_end|>\n"


def test_a_config_our_llama_does_not_compute_is_refused_by_name():
    base = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 64,
            "max_position_embeddings": 64, "intermediate_size": 48}
    assert llama_config_from_hf(base).n_kv_head == 4
    for key, value in [("rope_scaling", {"type": "linear", "factor": 2.0}), ("attention_bias", True),
                       ("hidden_act", "gelu"), ("head_dim", 16)]:
        with pytest.raises(ValueError, match=key):
            llama_config_from_hf(base | {key: value})


def test_a_model_against_itself_differs_by_nothing(folders):
    (folder, _), _ = folders
    lm = load_folder(folder)
    ids = lm.tokenizer.encode(TEXT).ids * 3
    result = quant_gap.gap(lm.model, lm.model, ids, block=8)
    assert result["kl"] == 0 and result["top1_agreement"] == 1 and result["max_logit_diff"] == 0
    assert result["loss_original"] == result["loss_other"] > 0
    assert result["tokens"] == len(ids) - result["windows"]          # every window predicts all but its first token


def test_the_gap_equals_a_hand_computation(folders):
    (folder_a, _), (folder_b, _) = folders
    a, b = load_folder(folder_a).model, load_folder(folder_b).model    # the same weights, rounded to bf16 and fp16
    ids = load_folder(folder_a).tokenizer.encode(TEXT).ids
    result = quant_gap.gap(a, b, ids, block=len(ids))
    x, y = torch.tensor([ids[:-1]]), torch.tensor(ids[1:])
    with torch.no_grad():
        la, lb = a(x)[0][0], b(x)[0][0]
    kl = F.kl_div(F.log_softmax(lb, -1), F.log_softmax(la, -1), log_target=True, reduction="batchmean")
    assert result["kl"] == pytest.approx(float(kl), rel=1e-3) and result["kl"] > 0
    assert result["loss_original"] == pytest.approx(float(F.cross_entropy(la, y)), abs=1e-4)
    assert result["loss_other"] == pytest.approx(float(F.cross_entropy(lb, y)), abs=1e-4)
    assert result["max_logit_diff"] == pytest.approx(float((la - lb).abs().max()), abs=1e-4)


def test_the_command_compares_two_folders_on_a_text(folders, tmp_path, capsys):
    (folder_a, _), (folder_b, _) = folders
    text = tmp_path / "held_out.txt"
    text.write_text(TEXT * 4)
    result = quant_gap.main([str(folder_a), "--against", str(folder_b), "--text", str(text), "--block", "16"])
    assert json.loads(capsys.readouterr().out) == result
    assert result["windows"] == -(-len(TEXT.split()) * 4 // 16) and result["protocol"] == quant_gap.PROTOCOL


def test_models_with_other_vocabularies_are_refused():
    small = Llama(TINY)
    other = Llama(LlamaConfig(**{**TINY.__dict__, "vocab_size": 65}))
    with pytest.raises(AssertionError, match="vocabularies differ"):
        quant_gap.gap(small, other, [1, 2, 3])
