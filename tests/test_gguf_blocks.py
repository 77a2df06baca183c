"""GGUF's Q4_1 and Q8_0 blocks as nets/gguf_blocks.py reads, writes and multiplies them: bit for bit what the `gguf`
package computes, on made-up blocks and on SmolLM2's own file."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gguf.constants import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

from playground.nets import gguf_blocks as gb
from tests.smollm2_reference import require_smollm2


def test_a_hand_made_block_reads_as_its_layout_says():
    """d = 0.5 and m = -1 (fp16), weight j's q = j % 16 in byte j % 16's low (j < 16) or high nibble: w = d q + m."""
    q = np.arange(32) % 16
    nibbles = (q[:16] | (q[16:] << 4)).astype(np.uint8)
    raw = np.concatenate([np.array([0.5], np.float16).view(np.uint8), np.array([-1.0], np.float16).view(np.uint8),
                          nibbles])
    d, m, got = gb.unpack_q4_1(raw)
    assert (d[0], m[0]) == (0.5, -1.0) and got[0].tolist() == q.tolist()
    assert gb.dequantize_q4_1(raw).tolist() == (0.5 * q - 1.0).tolist()


def test_quantize_and_dequantize_match_gguf_on_random_and_odd_blocks():
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.05, (64, 96)).astype(np.float32)
    w[0, :32] = 0.25                 # a constant block: d = 0
    w[1, 32:64] = np.linspace(-1, 1, 32)
    ours = gb.quantize_q4_1(w)
    theirs = quantize(w, Q.Q4_1).reshape(-1, 20)
    assert np.array_equal(ours, theirs)
    assert np.array_equal(gb.dequantize_q4_1(ours, w.shape), dequantize(theirs.reshape(64, -1), Q.Q4_1))
    q8 = quantize(w, Q.Q8_0)
    assert np.array_equal(gb.dequantize_q8_0(q8, w.shape), dequantize(q8, Q.Q8_0))


@pytest.mark.parametrize("kind", [gb.Q4_1, gb.Q8_0])
def test_a_block_linear_multiplies_the_dequantised_matrix_bit_for_bit(kind, monkeypatch):
    """Whole, and cut into slices of rows (the output layer's way): the same numbers as F.linear on the matrix."""
    rng = np.random.default_rng(1)
    w = rng.normal(0, 0.1, (40, 64)).astype(np.float32)
    blocks = (gb.quantize_q4_1(w) if kind == gb.Q4_1 else quantize(w, Q.Q8_0)).reshape(40, -1)
    exact = torch.from_numpy((gb.dequantize_q4_1 if kind == gb.Q4_1 else gb.dequantize_q8_0)(blocks, w.shape))
    x = torch.randn(3, 5, 64)
    layer = gb.BlockLinear(blocks, kind, 40, 64)
    assert layer.nbytes == 40 * 2 * gb.BYTES[kind]
    assert torch.equal(layer(x), F.linear(x, exact))
    monkeypatch.setattr(gb.BlockLinear, "SLICE", 16)
    assert torch.equal(layer(x), torch.cat([F.linear(x, exact[i:i + 16]) for i in range(0, 40, 16)], dim=-1))


def test_smollm2s_blocks_read_as_gguf_reads_them_and_requantise_to_the_same_bytes():
    """Every kind of matrix of three layers and the Q8_0 embedding: our dequantisation is gguf.quants.dequantize's,
    bit for bit, and llama.cpp's rule applied to the dequantised weights gives the file's bytes back."""
    require_smollm2()
    from playground.nets import gguf_file, smollm2

    tensors = {t.name: t for t in gguf_file.read(smollm2.gguf_path()).tensors}
    names = [f"blk.{i}.{kind}.weight" for i in (0, 14, 29)
             for kind in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")]
    for name in names:
        t = tensors[name]
        assert t.tensor_type == gb.Q4_1, name
        theirs = dequantize(t.data, t.tensor_type)
        ours = gb.dequantize_q4_1(t.data, theirs.shape)
        assert np.array_equal(ours, theirs), name
        assert np.array_equal(gb.quantize_q4_1(ours), np.asarray(t.data).reshape(-1, 20)), name
    embedding = tensors["token_embd.weight"]
    assert embedding.tensor_type == gb.Q8_0
    rows = np.asarray(embedding.data)[:4096]
    assert np.array_equal(gb.dequantize_q8_0(rows, (4096, embedding.shape[0])), dequantize(rows, gb.Q8_0))
