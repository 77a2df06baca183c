"""Repro: every `import gradio` regenerates the .pyi stub of every component class, parsing its source with `ast`.

gradio/component_meta.py: `ComponentMeta.__new__` calls `create_or_modify_pyi(...)` for each component class it
makes; that function reads the class's source file, parses it with `ast`, renders the stub and compares it with the
.pyi on disk, at every import of gradio, in every process, for files only type checkers read.

    python docs/upstream/pyi_at_import.py

Prints how often it ran during `import gradio` and its share of the import's time (on the 2-core VM: about 2.5 s of
CPU of a 6 s import). Expected: no work at import (the stubs are generated when the package is built).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import time


def import_gradio_timed() -> tuple[int, float, float]:
    """Import gradio (not imported yet) with create_or_modify_pyi timed: its calls, their seconds, the import's."""
    assert "gradio" not in sys.modules, "run this in a fresh process"
    spent = {"calls": 0, "seconds": 0.0}

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "gradio.component_meta":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            exec_module = spec.loader.exec_module

            def exec_and_time(module):
                exec_module(module)
                rewrite = module.create_or_modify_pyi

                def timed(*args, **kwargs):
                    started = time.perf_counter()
                    try:
                        return rewrite(*args, **kwargs)
                    finally:
                        spent["calls"] += 1
                        spent["seconds"] += time.perf_counter() - started

                module.create_or_modify_pyi = timed

            spec.loader.exec_module = exec_and_time
            return spec

    sys.meta_path.insert(0, Finder())
    started = time.perf_counter()
    import gradio  # noqa: F401

    return spent["calls"], spent["seconds"], time.perf_counter() - started


def calls_per_component_class() -> int:
    """How often making one new component class calls create_or_modify_pyi (gradio imported already)."""
    import gradio as gr
    from gradio import component_meta

    calls = []
    rewrite = component_meta.create_or_modify_pyi
    component_meta.create_or_modify_pyi = lambda *args, **kwargs: calls.append(args[1])
    try:
        type("ProbeTextbox", (gr.Textbox,), {"__module__": __name__})
    finally:
        component_meta.create_or_modify_pyi = rewrite
    return len(calls)


def main() -> int:
    calls, seconds, total = import_gradio_timed()
    import gradio

    print(f"Gradio {gradio.__version__}: import took {total:.2f} s; create_or_modify_pyi ran {calls} times, "
          f"{seconds:.2f} s of it ({seconds / total:.0%})")
    print("FAULT PRESENT: stubs rewritten at import" if calls else "Not reproduced: no stub work at import")
    return 0 if calls else 1


if __name__ == "__main__":
    sys.exit(main())
