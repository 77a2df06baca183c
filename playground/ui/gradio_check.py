"""Each change the app makes to Gradio checks first that Gradio still has what it changes, or stops the app.

The app patches Gradio 6.31 (ui/patches.py: replacements in its frontend's minified files, replaced methods, an
import hook) and writes into its private structures (ui/queuepath.py, ui/fastpath.py). A Gradio without the piece
a patch replaces used to serve its unfixed page silently, and a copy of an older Gradio's method would drop what a
newer one added. Now each patch, before it applies, checks its target: the text it replaces is found exactly as
often as expected, a replaced method has the expected parameters (a copied one: the very source it was copied
from), a private structure has the expected fields. When one does not hold, the app does not start: a PatchError
names the patch, the Gradio installed and what to do. docs/upstream.md lists every patch, the fault of Gradio's it
works around, its check, its test and its upstream report.
"""

from __future__ import annotations

import hashlib
import inspect

TESTED = "6.31.0"  # the Gradio every patch was made and measured against (requirements.txt pins it)

# Every patch, by the name its checks and docs/upstream.md use: what it changes
PATCHES = {
    "always-last-alone": "frontend: a listener triggered while it ran runs again alone, not the whole event",
    "changed-status-only": "frontend: a component is handed its loading status only when it changed",
    "event-args-first": "frontend: set_event_args returns before its tree walk when there are no event arguments",
    "attached-events-index": "frontend: the dependencies' targets indexed once per tree, not scanned per node",
    "kept-paths": "frontend: a component found by its kept path in the tree, not by a walk per lookup",
    "pyi-at-import": "gradio.component_meta.create_or_modify_pyi a no-op (import hook)",
    "session-config-copies": "SessionState keeps no config copy of every component for deep links",
    "seated-eviction": "StateHolder.update evicts sessions that hold no seat in a room first",
    "skip-without-rebuild": "Blocks.postprocess_data passes a bare gr.skip() and plain values through cheaply",
    "signature-once": "gradio.component_meta reads each constructor's signature once",
    "close-in-loop": "Blocks.close sets the stop event in the server's own loop",
    "queue-streams": "ui/queuepath.py writes kept answers into a session's stream and state",
    "call-streams": "ui/fastpath.py and ui/pagecache.py read the /call stream and the root URL as Gradio writes them",
}


class PatchError(RuntimeError):
    """A patch of the app's that no longer applies to the installed Gradio (its name: `patch`)."""

    def __init__(self, patch: str, problem: str):
        assert patch in PATCHES, f"{patch!r} is not in gradio_check.PATCHES (and docs/upstream.md)"
        self.patch = patch
        super().__init__(
            f"The app's patch {patch!r} ({PATCHES[patch]}) no longer applies to Gradio {installed()}: {problem}. "
            f"The app is made for Gradio {TESTED} (requirements.txt pins it): install that (pip install "
            f"gradio=={TESTED}), or see whether this Gradio fixed the fault (docs/upstream.md, row {patch!r}), then "
            f"update the patch and its check or drop both.")


def installed() -> str:
    """The version of the Gradio installed."""
    import gradio

    return gradio.__version__


def count(patch: str, text: bytes, piece: bytes, expected: int, where: str) -> None:
    """`piece`, the text a patch replaces, is in `text` (`where` names it) exactly `expected` times."""
    found = text.count(piece)
    if found != expected:
        raise PatchError(patch, f"{where} has the text it replaces {found} times, not {expected} "
                                f"({piece[:60].decode(errors='replace')}...)")


def original(owner, name: str):
    """Gradio's own `owner.name`, also once the app has replaced it (a replacement keeps it as `.gradio`); None when
    Gradio has no such attribute."""
    attribute = inspect.getattr_static(owner, name, None)
    return getattr(attribute, "gradio", attribute)


def signature(patch: str, owner, name: str, parameters: tuple[str, ...]):
    """Gradio's own `owner.name` (see `original`), which must take exactly `parameters`; returned."""
    where = f"{getattr(owner, '__name__', owner)}.{name}"
    function = original(owner, name)
    if function is None:
        raise PatchError(patch, f"{where} is gone")
    try:
        found = tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError) as err:
        raise PatchError(patch, f"{where}'s signature cannot be read ({err})") from err
    if found != parameters:
        raise PatchError(patch, f"{where} takes ({', '.join(found)}), not ({', '.join(parameters)})")
    return function


def fingerprint(function) -> str:
    """The first 12 hex digits of the sha256 of a function's source, as `inspect.getsource` reads it."""
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:12]


def source(patch: str, owner, name: str, digest: str) -> None:
    """A method the app copies (changed a little) instead of wrapping: Gradio's own is still the one the copy was
    made from, byte for byte (`digest`: its fingerprint). Any change of Gradio's may need the copy changed too."""
    where = f"{getattr(owner, '__name__', owner)}.{name}"
    function = original(owner, name)
    if function is None:
        raise PatchError(patch, f"{where} is gone")
    try:
        found = fingerprint(function)
    except (OSError, TypeError) as err:
        raise PatchError(patch, f"the source of {where} cannot be read to compare it with the app's copy ({err})") \
            from err
    if found != digest:
        raise PatchError(patch, f"{where} is not the one the app's copy was made from (source fingerprint {found}, "
                                f"the copy's {digest}): compare the two")


def fields(patch: str, thing, names: tuple[str, ...], where: str = "") -> None:
    """`thing` has every attribute in `names` (a private structure the app reads or writes)."""
    missing = [name for name in names if not hasattr(thing, name)]
    if missing:
        raise PatchError(patch, f"{where or type(thing).__name__} has no {', '.join(missing)}")


def mentions(patch: str, function, piece: str, where: str) -> None:
    """Gradio's `function` still does what a patch relies on: its source contains `piece` (once at least)."""
    try:
        text = inspect.getsource(function)
    except (OSError, TypeError) as err:
        raise PatchError(patch, f"the source of {where} cannot be read ({err})") from err
    if piece not in text:
        raise PatchError(patch, f"{where} no longer does {piece!r}")
