"""What the app changes in its process, in two explicit calls. Importing this module changes nothing, and neither does
building the page (ui/demo.build_demo).

- `before_gradio()`: app.py's first line, as it must precede gradio's first import: environment variables (no
  telemetry, no Hub unless the app may use it, a Space's persistent storage), a folder of this process's own for
  Gradio's files, and the import hook that skips Gradio's stub rewrite (ui/patches.py).
- `configure()`: whatever serves the app calls it before it launches (app.serve(); the tests' served app, the
  benches): Gradio patched, each patch checked first (ui/patches.apply: one that no longer applies stops the app with
  a PatchError), glibc's malloc arenas, Python's switch interval, torch's threads, the generation engine. Idempotent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DATA = Path("/data")  # where a Hugging Face Space mounts its persistent storage, when it has some
SWITCH_INTERVAL = 0.0002  # seconds a thread holding Python's lock keeps it when another asks (Python's default: 0.005)


def before_gradio() -> None:
    """A Space's persistent storage used, no telemetry, no hub call unless the app may use the Hub (a Space, or
    PLAYGROUND_HUB=1: SmolLM2's original is downloaded there, playground/hub.py), and a faster gradio import. Only
    takes full effect before gradio (and huggingface_hub, which reads HF_HOME and HF_HUB_OFFLINE once, at its
    import) is imported; afterwards the stub patch is skipped."""
    from playground import hub
    from playground.ui import patches

    persistent_storage()
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    if not hub.enabled():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _files_of_this_process()
    if "gradio" not in sys.modules:
        patches.skip_gradio_stub_rewrite()


def configure() -> None:
    """Everything serving the app changes in its process; a second call changes nothing more:
    - Gradio patched (ui/patches.apply), each patch checked first: one that no longer applies is a PatchError here,
      before anything is served (docs/upstream.md);
    - glibc's malloc: two arenas (`_share_malloc_arenas`);
    - Python's lock handed over within 0.2 ms (`_hand_the_lock_over_sooner`);
    - torch: each computation at once its share of the cores as threads (ui/workers.share_cores);
    - a class's generations of SmolLM2 batched by the generation engine (serving/engine.install).
    app.serve() calls it before it forks the compute processes, which inherit all of it."""
    from playground.serving import engine
    from playground.ui import demo, patches, workers

    patches.apply()
    _share_malloc_arenas()
    _hand_the_lock_over_sooner()
    workers.share_cores(sum(demo.WORKERS))
    engine.install()


def persistent_storage() -> None:
    """On a Space with persistent storage, the Hub's cache and the class's rooms are kept in it: a Space's own disk
    is emptied at each restart, which downloaded SmolLM2's original again (270 MB) and lost every open room. A
    variable set in the Space's settings wins, and a PostgreSQL DATABASE_URL keeps the rooms where it says. Before
    huggingface_hub is imported: it reads HF_HOME once, at its import."""
    if not os.environ.get("SPACE_ID") or not (DATA.is_dir() and os.access(DATA, os.W_OK)):
        return
    os.environ.setdefault("HF_HOME", str(DATA / ".huggingface"))
    if not os.environ.get("DATABASE_URL"):
        os.environ.setdefault("POLLS_DB", str(DATA / "polls.sqlite3"))


def _files_of_this_process() -> None:
    """Gradio writes a view's files (a CSV, a PNG) into one folder shared by every app on the machine, each named by
    a hash of its content, and an app deletes the files it made when it stops (ui/demo.py: delete_cache). Copies of
    this app on one machine (docs/deploying.md: several behind nginx) make the same files under the same names, so a
    copy that stopped deleted the files the others' kept answers still named: their downloads were gone. Each process
    gets a folder of its own in Gradio's, removed when it exits, unless GRADIO_TEMP_DIR says where
    (docs/upstream/shared-cache-folder.md)."""
    import atexit
    import shutil
    import tempfile

    if "GRADIO_TEMP_DIR" in os.environ:
        return
    shared = Path(tempfile.gettempdir()) / "gradio"
    shared.mkdir(exist_ok=True)
    own = tempfile.mkdtemp(prefix=f"nlp-playground-{os.getpid()}-", dir=shared)
    os.environ["GRADIO_TEMP_DIR"] = own
    pid = os.getpid()
    atexit.register(lambda: shutil.rmtree(own, ignore_errors=True) if os.getpid() == pid else None)


def _share_malloc_arenas(arenas: int = 2) -> None:
    """glibc's malloc gives each thread that allocates its own arena, up to 8 per core. Gradio runs the
    handlers on a pool of up to 40 threads, and memory freed in one arena does not serve another thread,
    so the server's resident memory kept growing with the requests it served: over 2,400 requests from 96
    sessions, +20% with glibc's default and +8% with two arenas (what remains is the sessions' own state,
    capped at ui.demo.SESSIONS). Two arenas serve the two queue workers; this is MALLOC_ARENA_MAX, set from inside,
    for the arenas made from now on. Not glibc (macOS, Windows, musl): nothing to do."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    M_ARENA_MAX = -8  # malloc.h
    mallopt(M_ARENA_MAX, arenas)


def _hand_the_lock_over_sooner() -> None:
    """A model's step is ~50 torch operations; each lets go of Python's lock (the GIL) while it computes and must
    take it back before the next, and a thread that asks for the lock waits until its holder has had it for the
    switch interval. So a generation beside a busy thread (the server's event loop giving out kept answers, another
    worker drawing a figure) waits up to 5 ms about 10,000 times: measured on the 2-core VM, a new prompt's 200 tokens
    took 0.62 s alone and 110 s beside a thread running Python, 5.3 s with 0.2 ms. Threads running Python then
    switch more often (a few microseconds each time)."""
    sys.setswitchinterval(SWITCH_INTERVAL)
