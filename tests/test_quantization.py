"""The Quantization view (analysis/quantization.py) against independent computations: each format's weight error
recomputed in numpy from gguf's own dequantisation, the bytes from the file's tensors, the streamed fp32 pass against
the whole fp32 model, the exact checks (fp32 against itself, Q4_1's blocks), and one block of the file."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf.quants import dequantize

from playground.analysis import quant_formats as qf
from playground.analysis import quantization as quant
from playground.nets.int8 import Int8Linear
from tests.smollm2_reference import require_smollm2

TEXT = "The bank raised its interest rates again this spring."
LAYERS = (0, 17, 29)


def bf16(w: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 -> fp32 in numpy: the top 16 bits, rounded to nearest, ties to even."""
    bits = w.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def int8(w: np.ndarray) -> np.ndarray:
    """round(w / s) s with s = max |w_row| / 127 per row (ties to even, as torch.round)."""
    scale = np.maximum(np.abs(w).max(axis=1, keepdims=True), np.float32(1e-30)) / np.float32(127)
    return np.round(w / scale) * scale


NUMPY = {"fp16": lambda w: w.astype(np.float16).astype(np.float32), "bf16": bf16, "int8": int8}


def errors(exact: list[np.ndarray], f: str) -> tuple[float, float]:
    """(‖Ŵ − W‖_F / ‖W‖_F over the matrices together, max |Ŵ − W|), in float64."""
    deltas = [NUMPY[f](w).astype(np.float64) - w for w in exact]
    relative = np.sqrt(sum((d ** 2).sum() for d in deltas) / sum((w.astype(np.float64) ** 2).sum() for w in exact))
    return relative, max(np.abs(d).max() for d in deltas)


@pytest.fixture(scope="module")
def measured():
    """One measurement of a short text, the text-independent figures measured with it; the fp32 logits the streamed
    pass compared every format with, kept for the test against the whole model."""
    require_smollm2()
    kept = []
    distance = quant.Run._distance

    def keep(self, reference, other):
        kept.append(reference[0].clone())
        return distance(self, reference, other)

    quant.forget()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(quant.Run, "_distance", keep)
        data = quant.measure(TEXT)
    return data, kept[0]


@pytest.fixture(scope="module")
def tensors():
    from playground.nets import gguf_file, smollm2

    return {t.name: t for t in gguf_file.read(smollm2.gguf_path()).tensors}


def test_each_formats_weight_error_equals_numpys(measured, tensors):
    data, _ = measured
    for i in LAYERS:
        exact = [dequantize(tensors[f"blk.{i}.{name}.weight"].data, qf.gb.Q4_1) for name in qf.MATRICES.values()]
        for f in ("fp16", "bf16", "int8"):
            relative, largest = errors(exact, f)
            got = data["weight_error"][f]
            assert got["relative"][i] == pytest.approx(relative, rel=2e-3), (f, i)
            assert got["max_abs"][i] == pytest.approx(largest, rel=1e-3), (f, i)
    table = [dequantize(tensors["token_embd.weight"].data, qf.gb.Q8_0)]
    for f in ("fp16", "bf16", "int8"):
        relative, largest = errors(table, f)
        assert data["weight_error"][f]["embedding_relative"] == pytest.approx(relative, rel=2e-3), f
        assert data["weight_error"][f]["embedding_max_abs"] == pytest.approx(largest, rel=1e-3), f
    for f in ("fp32", "q4_1"):
        assert not any(data["weight_error"][f]["relative"]) and data["weight_error"][f]["embedding_relative"] == 0


def test_the_exact_checks_fp32_is_lossless_and_q4_1_is_fp32s_numbers(measured):
    data, _ = measured
    for f in ("fp32", "q4_1"):
        assert data["kl"][f] == 0 and data["max_logit_diff"][f] == 0 and data["top1"][f] == 1.0, f
        assert not any(data["kl_per_token"][f])
    assert data["perplexity"]["q4_1"] == data["perplexity"]["fp32"]
    assert 0 < data["kl"]["fp16"] < data["kl"]["int8"] and data["kl"]["bf16"] < data["kl"]["int8"]
    assert len(data["kl_per_token"]["int8"]) == len(data["tokens"]) == len(data["ids"])


def test_the_bytes_are_the_files_tensors(measured, tensors):
    """Q4_1's row is the file's own bytes; the others from each tensor's size: matrices and the embedding in the
    format (int8 with an fp32 scale per row), the norms in fp32."""
    data, _ = measured
    matrices = [t for name, t in tensors.items() if name.startswith("blk.") and t.tensor_type == qf.gb.Q4_1]
    table = tensors["token_embd.weight"]
    norms = [t for t in tensors.values() if t.tensor_type == 0]
    n_matrix = sum(int(np.prod(t.shape)) for t in matrices) + int(np.prod(table.shape))
    n_norm = sum(int(np.prod(t.shape)) for t in norms)
    rows = sum(int(t.shape[1]) for t in matrices) + int(table.shape[1])
    assert data["memory_bytes"]["q4_1"] == sum(t.data.nbytes for t in tensors.values())
    assert data["memory_bytes"]["fp32"] == 4 * (n_matrix + n_norm)
    assert data["memory_bytes"]["fp16"] == data["memory_bytes"]["bf16"] == 2 * n_matrix + 4 * n_norm
    assert data["memory_bytes"]["int8"] == n_matrix + 4 * rows + 4 * n_norm


def test_the_streamed_fp32_pass_is_the_whole_fp32_models(measured):
    """Five layers at a time, each built from the file, give the logits of SmolLM2 loaded whole in fp32."""
    from playground.nets import smollm2

    data, streamed = measured
    whole = smollm2.load(half=False).model
    with torch.inference_mode():
        logits, _ = whole(torch.tensor([data["ids"]]))
    assert torch.allclose(streamed, logits[0], atol=1e-4, rtol=0)


def test_int8s_product_is_the_rounded_weights_product():
    """Int8Linear (one plane) multiplies by exactly the weights qf.int8_weights says it keeps, up to its 14-bit
    activations."""
    w, x = torch.randn(96, 64) * 0.05, torch.randn(5, 64)
    exact = x @ qf.int8_weights(w).T
    assert torch.allclose(Int8Linear(w, planes=1)(x), exact, atol=2e-3 * exact.abs().max().item())
    assert torch.equal(qf.int8_weights(w), torch.from_numpy(int8(w.numpy())))


def test_a_block_of_the_file_and_refusals():
    require_smollm2()
    block = quant.q4_block(3, "mlp.down_proj", 10, 47)
    assert block["gguf_equal"] and block["requantized_equal"] and block["blocks_per_row"] == 48
    assert len(block["w"]) == 32 and all(0 <= q <= 15 for q in block["q"])
    assert block["w"] == pytest.approx([block["d"] * q + block["m"] for q in block["q"]], rel=1e-6, abs=1e-7)
    assert min(block["w"]) >= block["levels"][0] and max(block["w"]) <= block["levels"][-1]
    assert quant.matrix_shape("self_attn.k_proj") == (192, 18)
    with pytest.raises(quant.QuantizationError, match="row 0 to 191"):
        quant.q4_block(0, "self_attn.k_proj", 192, 0)
    with pytest.raises(quant.QuantizationError, match="Type a text"):
        quant.measure("")


def test_the_endpoints_answer_their_json_and_refuse_what_they_cannot_measure(client):
    """Through gradio_client: /quantization's figures, its table and the JSON last; /q4_block's drawing; an empty
    text and an unknown matrix refused with a message."""
    require_smollm2()
    from gradio_client.exceptions import AppError

    *_, table, _, data = client.predict(TEXT, api_name="/quantization")
    assert data["formats"][0] == "fp32" and set(data["kl"]) == set(data["formats"]) == set(data["memory_bytes"])
    assert data["kl"]["fp32"] == 0 and len(data["weight_error"]["int8"]["relative"]) == 30
    assert "| Q4_1 |" in table and "Checks" in table
    *_, text, block = client.predict(2, "mlp.up_proj", 7, 3, api_name="/q4_block")
    assert block["tensor"] == "blk.2.ffn_up.weight" and block["gguf_equal"] and "w_j = d q_j + m" in text
    with pytest.raises(AppError, match="Type a text"):
        client.predict("  ", api_name="/quantization")
    with pytest.raises(AppError, match="not in the list of choices"):
        client.predict(0, "lm_head", 0, 0, api_name="/q4_block")


def test_from_the_original_q4_1_is_made_here_and_bf16_is_exact(tmp_path):
    """Where SmolLM2 comes from the Hub (a Space), fp32 is the original's bf16 weights (here the Hub stand-in's
    folder, the file's weights saved as bf16): bf16 is then exact, and Q4_1 a real rounding made with llama.cpp's
    rule, of the same bytes as the file's layout; one block of it is drawn with both checks."""
    require_smollm2()
    from playground.analysis import quant_sources as qs
    from playground.tools.hub_standin import original_from_gguf

    folder = original_from_gguf(tmp_path / "original")
    quant.forget()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(qs, "open_source", lambda: qs.Folder(folder))
            data = quant.measure(TEXT)
            block = quant.q4_block(5, "self_attn.o_proj", 3, 2)
    finally:
        quant.forget()
    assert data["source"] == "hub" and "llama.cpp's rule" in data["source_about"]
    assert not any(data["weight_error"]["bf16"]["relative"]) and data["weight_error"]["bf16"]["embedding_relative"] == 0
    assert all(v > 0 for v in data["weight_error"]["q4_1"]["relative"])
    assert data["kl"]["fp32"] == 0 and data["kl"]["bf16"] == 0 and data["kl"]["q4_1"] > 0
    assert data["memory_bytes"]["q4_1"] < data["memory_bytes"]["int8"] < data["memory_bytes"]["fp16"]
    assert block["source"] == "hub" and block["tensor"] == "model.layers.5.self_attn.o_proj.weight"
    assert block["gguf_equal"] and block["requantized_equal"]
