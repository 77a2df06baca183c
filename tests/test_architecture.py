"""The package's architecture, checked from its source: layers as folders, imports that point down only,
no import circle, short functions, files and lines (docs/architecture.md describes the layers).

Every `import` counts, at module level or inside a function: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "playground"

# What each layer may import (besides itself). Base: checkpoints (with cards, its cards' schema), text, polls, heap
# and lru, and the rooms package
# (the class's database: base code that knows nothing of models or pages). The figure builders read
# plain data and know nothing of torch or of the analysis that made it; the CLI and the tools sit on top.
ALLOWED = {
    "base": set(),
    "nets": {"base"},
    "training": {"base", "nets"},
    "analysis": {"base", "nets", "training"},
    "figures": {"base"},
    "serving": {"base", "nets", "analysis"},
    "ui": {"base", "training", "analysis", "figures", "serving"},
    "cli": {"base", "nets", "training"},
    "tools": {"base", "nets", "training", "analysis", "figures", "serving", "ui", "cli"},
}
TOP_LEVEL = {
    "checkpoints": "base", "cards": "base", "text": "base", "polls": "base", "heap": "base", "lru": "base", "hub": "base",
    "train": "cli", "bench": "tools",
}
BASE_PACKAGES = {"rooms"}   # folders of base modules (not a layer of their own)
# The house's sizes (issue #33): a file is read in one sitting, a function on one screen, a line without scrolling
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 500
MAX_LINE_CHARS = 120
APP = PACKAGE.parent / "app.py"
# Third-party libraries that belong to one layer only
ONLY_IN = {"gradio": {"ui"}, "plotly": {"figures", "ui"}}
NEVER_IN = {"torch": {"figures", "ui"}}  # ui: a handler calls analysis, which runs the nets
# ui/workers.py sets torch's thread count for each computation's share of the cores (use_threads); it computes nothing
EXEMPT = {("playground.ui.workers", "torch")}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "package"
    if len(parts) == 2 and parts[1] in TOP_LEVEL:
        return TOP_LEVEL[parts[1]]
    if parts[1] in BASE_PACKAGES:
        return "base"
    assert parts[1] in ALLOWED, f"{module}: a module outside the layer folders ({', '.join(ALLOWED)})"
    return parts[1]


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of this package and the third-party top-level packages that `module` imports."""
    found = set()
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = modules()
    edges = defaultdict(set)
    for module, path in known.items():
        for target in imports(module, path, known):
            edges[module].add(target)
    return edges


def test_the_package_is_layer_folders_with_a_handful_of_modules_on_top():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert set(top) <= set(TOP_LEVEL), f"modules directly in playground/ that belong in a layer folder: {top}"
    for folder in ("nets", "training", "analysis", "figures", "ui", "tools"):
        assert (PACKAGE / folder / "__init__.py").is_file(), f"playground/{folder}/ is missing"


def test_imports_point_down_only(graph):
    wrong = []
    for module, targets in graph.items():
        source = layer(module)
        for target in targets:
            if not target.startswith("playground.") or target not in modules():
                continue
            dest = layer(target)
            if source == "package" or dest in ("package", source):
                continue
            if dest not in ALLOWED[source]:
                wrong.append(f"{module} ({source}) imports {target} ({dest})")
    assert not wrong, "imports that point up or across:\n" + "\n".join(sorted(wrong))


def test_libraries_stay_in_their_layer(graph):
    wrong = []
    for module, targets in graph.items():
        roots = {t.split(".")[0] for t in targets}
        for library, layers in ONLY_IN.items():
            if library in roots and layer(module) not in layers | {"tools"}:
                wrong.append(f"{module} imports {library}")
        for library, layers in NEVER_IN.items():
            if library in roots and layer(module) in layers and (module, library) not in EXEMPT:
                wrong.append(f"{module} imports {library}")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_circle(graph):
    internal = {m: {t for t in ts if t in graph or t.startswith("playground.")} for m, ts in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(internal.get(module, ())):
            if target == module or layer(target) == "package":
                continue
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [target] if target in path else [module, target]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if state.get(target) is None:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(internal):
        if state.get(module) is None:
            visit(module, [module])


def test_no_function_is_longer_than_80_lines():
    long = []
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{module}.{node.name}: {lines} lines")
    assert not long, "\n".join(long)


def sources() -> list[Path]:
    """Every Python file the house's sizes apply to: the package's and app.py."""
    return sorted(PACKAGE.rglob("*.py")) + [APP]


def test_no_file_is_longer_than_500_lines():
    long = []
    for path in sources():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_FILE_LINES:
            long.append(f"{path.relative_to(PACKAGE.parent)}: {lines} lines")
    assert not long, f"files over {MAX_FILE_LINES} lines (split them along their jobs):\n" + "\n".join(long)


def test_no_line_is_longer_than_120_characters():
    long = []
    for path in sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if len(line) > MAX_LINE_CHARS:
                long.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {len(line)} characters")
    assert not long, f"lines over {MAX_LINE_CHARS} characters:\n" + "\n".join(long)


def test_checkpoint_kinds_name_model_modules_only():
    from playground import checkpoints

    for kind, (module, _, _) in checkpoints.KINDS.items():
        assert layer(module) in ("nets", "base"), f"checkpoint kind {kind!r} loads from {module}, not from nets/"


def test_no_event_names_a_concurrency_limit_that_does_nothing():
    """ui/demo.set_queues gives every queued event its own concurrency id and no limit: the model workers
    (ui/workers.py) are what limit computations, so a `concurrency_limit=` on an event would read as a limit it is not
    (the Fine-tuning tab's `concurrency_limit=1` was really the training pool's one worker)."""
    named = [f"{path.relative_to(PACKAGE.parent)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "concurrency_limit=" in line]
    assert not named, f"set_queues overrides these: {named}"
