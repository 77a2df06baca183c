"""Ready for a Hugging Face Space: the README's front matter, the optional `@spaces.GPU`, checkpoint sizes, the
files a Space receives (binary ones over 1 MB in its large-file storage), the documented deploy, the persistent
storage, and no network call from the server by default."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import gradio
import pytest

from playground.ui import gpu as gpu_module
from playground.ui import process

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
    assert sum(p.stat().st_size for p in files) <= 80 * 2**20  # all of models/: DESIGN.md's budget


MB = 2**20


def space_files() -> list[str]:
    """What a Space receives: the repository's files (committed or about to be: tracked, or new and not ignored)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the files a Space receives are the repository's")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return [name for name in listed if name and (ROOT / name).is_file()]


def is_binary(path: Path) -> bool:
    """Git's own test (a NUL byte in the first 8000 bytes), which the Hub's refusal of binary files follows."""
    with path.open("rb") as f:
        return b"\0" in f.read(8000)


def test_every_binary_file_over_1_mb_goes_to_the_large_file_storage_and_no_text_file_is_over_10_mb():
    """The Hub refuses a binary file over 1 MB outside its large-file storage (Xet/LFS) and a text file over 10 MB:
    .gitattributes must send each such binary file there (`git check-attr filter` says lfs)."""
    files = space_files()
    big_binaries = [name for name in files if (ROOT / name).stat().st_size > MB and is_binary(ROOT / name)]
    assert len(big_binaries) >= 13          # the checkpoints over 1 MB at least (models/*/model.safetensors)
    attributes = subprocess.run(["git", "check-attr", "-z", "filter", "--", *big_binaries], cwd=ROOT,
                                capture_output=True, check=True).stdout.decode().split("\0")
    filters = dict(zip(attributes[0::3], attributes[2::3]))
    outside = [name for name in big_binaries if filters.get(name) != "lfs"]
    assert not outside, f"binary files over 1 MB that .gitattributes leaves out of the large-file storage: {outside}"
    big_texts = [name for name in files if (ROOT / name).stat().st_size > 10 * MB and not is_binary(ROOT / name)]
    assert not big_texts, f"text files over 10 MB, which the Hub refuses: {big_texts}"


def documented_deploy() -> str:
    text = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    return re.search(r"<!-- space-deploy:.*?-->\s*```sh\n(.*?)```", text, re.S)[1]


@pytest.mark.process  # the README's bash
def test_the_documented_deploy_uploads_the_repositorys_files_with_the_cpu_wheel(tmp_path):
    """docs/deploying.md's deploy lines as written, in bash, with `hf` and `pip` replaced by a recorder of their
    arguments (the Hub cannot be reached here) and the snapshot's folder moved into the test's: the Space is
    created, then given exactly the committed files, its requirements.txt asking for PyTorch's CPU index first."""
    space_files()                                               # a git checkout, or skipped
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("hf", "pip"):
        (tools / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{tmp_path}/calls"\n')
        (tools / tool).chmod(0o755)
    snapshot = tmp_path / "snapshot"
    script = documented_deploy().replace("/tmp/nlp-playground-space", str(snapshot))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [call.split()[:3] for call in calls] == [["pip", "install", "-U"], ["hf", "auth", "login"],
                                                    ["hf", "repos", "create"], ["hf", "upload", "your-name/nlp-playground"]]
    assert "--type space --sdk gradio" in calls[2] and f"{snapshot} . --type space --delete *" in calls[3]
    committed = subprocess.run(["git", "ls-tree", "-r", "--name-only", "-z", "HEAD"], cwd=ROOT, capture_output=True,
                               check=True).stdout.decode().split("\0")
    uploaded = sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file() or p.is_symlink())
    assert uploaded == sorted(name for name in committed if name)
    requirements = (snapshot / "requirements.txt").read_text().splitlines()
    assert requirements[0] == "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert requirements[1:] == (ROOT / "requirements.txt").read_text().splitlines()


@pytest.mark.parametrize("space, settings, expected", [
    ("someone/nlp-playground", {}, {"HF_HOME": "DATA/.huggingface", "POLLS_DB": "DATA/polls.sqlite3"}),
    ("someone/nlp-playground", {"HF_HOME": "/elsewhere", "POLLS_DB": "/x.db"}, {"HF_HOME": "/elsewhere",
                                                                               "POLLS_DB": "/x.db"}),
    ("someone/nlp-playground", {"DATABASE_URL": "postgresql://db/class"}, {"HF_HOME": "DATA/.huggingface",
                                                                          "POLLS_DB": None}),
    ("", {}, {"HF_HOME": None, "POLLS_DB": None}),              # not a Space: /data is someone else's
])
def test_a_space_with_persistent_storage_keeps_the_hub_cache_and_the_rooms_there(space, settings, expected,
                                                                                 tmp_path, monkeypatch):
    monkeypatch.setattr(process, "DATA", tmp_path)
    for name in ("SPACE_ID", "HF_HOME", "POLLS_DB", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"SPACE_ID": space, **settings}.items():
        monkeypatch.setenv(name, value)
    process.persistent_storage()
    assert {name: os.environ.get(name) for name in expected} == {
        name: value and value.replace("DATA", str(tmp_path)) for name, value in expected.items()}


def test_a_space_without_persistent_storage_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "DATA", tmp_path / "absent")
    monkeypatch.setenv("SPACE_ID", "someone/nlp-playground")
    for name in ("HF_HOME", "POLLS_DB", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    process.persistent_storage()
    assert "HF_HOME" not in os.environ and "POLLS_DB" not in os.environ


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
    app.configure_process()
    app.demo.launch(**app.launch_settings(), server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    client = session(app.demo.local_url, timeout=None)
    client.predict(text="Hello, world.", api_name="/tokenize")
    client.predict(text="The cat sat on the [MASK].", api_name="/fill_mask")
    app.demo.close()
    print("ATTEMPTS", attempts)
    sys.exit(1 if attempts else 0)
""")


@pytest.mark.process  # the app's own process
@pytest.mark.timeout(240)
def test_the_server_makes_no_network_call():
    """Start the app, serve two requests through gradio_client, with every non-local connection and name
    lookup blocked and recorded: none may be attempted (no analytics, no version check, no hub)."""
    done = subprocess.run([sys.executable, "-c", GUARD], cwd=ROOT, capture_output=True, text=True, timeout=220,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
