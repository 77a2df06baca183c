"""Ready for a Hugging Face Space: the README's front matter, the optional `@spaces.GPU`, checkpoint sizes,
and no network call from the server by default."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import gradio
import pytest

from playground.ui import gpu as gpu_module

ROOT = Path(__file__).resolve().parent.parent


def front_matter() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n"), "the README must open with the Space's YAML front matter"
    block = text[4:text.index("\n---\n", 4)]
    pairs = (line.split(":", 1) for line in block.splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip().strip('"') for key, value in pairs}


def test_front_matter_describes_a_gradio_space():
    meta = front_matter()
    assert meta["sdk"] == "gradio"
    assert meta["sdk_version"] == gradio.__version__, "the Space must run the gradio version the app is built for"
    assert f"gradio=={meta['sdk_version']}" in (ROOT / "requirements.txt").read_text(encoding="utf-8")
    assert meta["python_version"] == "3.12"
    assert (ROOT / meta["app_file"]).is_file()


def test_gpu_is_the_identity_without_the_spaces_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "spaces", None)  # import spaces -> ImportError

    def handler(x):
        return x + 1

    assert gpu_module.gpu(duration=30)(handler) is handler


def test_gpu_is_spaces_gpu_on_a_space(monkeypatch):
    calls = []

    def fake_gpu(duration):
        calls.append(duration)
        return lambda fn: ("on a GPU", fn)

    monkeypatch.setitem(sys.modules, "spaces", types.SimpleNamespace(GPU=fake_gpu))

    def handler():
        return None

    assert gpu_module.gpu(duration=120)(handler) == ("on a GPU", handler)
    assert calls == [120]


def test_every_checkpoint_file_fits_a_space():
    files = [p for p in (ROOT / "models").rglob("*") if p.is_file()]
    assert files
    too_big = [f"{p.relative_to(ROOT)}: {p.stat().st_size / 1e6:.1f} MB" for p in files if p.stat().st_size > 10 * 2**20]
    assert not too_big, f"files over 10 MB need a Space's large-file storage: {too_big}"
    assert sum(p.stat().st_size for p in files) <= 60 * 2**20


GUARD = textwrap.dedent("""
    import socket, sys
    attempts = []
    LOCAL = ("127.", "::1", "localhost", "0.0.0.0")

    def local(host):
        return isinstance(host, str) and host.startswith(LOCAL)

    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not local(address[0]):
            attempts.append(address)
            raise OSError("network call blocked by the test")
        return real_connect(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if host is not None and not local(host if isinstance(host, str) else host.decode()):
            attempts.append(host)
            raise socket.gaierror("name lookup blocked by the test")
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo

    import app
    from playground.tools.client import session

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app.demo.launch(**app.launch_settings(), server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    client = session(app.demo.local_url, timeout=None)
    client.predict(text="Hello, world.", api_name="/tokenize")
    client.predict(text="The cat sat on the [MASK].", api_name="/fill_mask")
    app.demo.close()
    print("ATTEMPTS", attempts)
    sys.exit(1 if attempts else 0)
""")


@pytest.mark.timeout(240)
def test_the_server_makes_no_network_call():
    """Start the app, serve two requests through gradio_client, with every non-local connection and name
    lookup blocked and recorded: none may be attempted (no analytics, no version check, no hub)."""
    done = subprocess.run([sys.executable, "-c", GUARD], cwd=ROOT, capture_output=True, text=True, timeout=220,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
