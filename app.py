"""NLP Playground: one sentence, from tokens to GPT and BERT.

`python app.py` serves the app on http://127.0.0.1:7860 with the checkpoints shipped in models/.
The UI lives in playground/ui/ (one module per tab); the models, analysis, figures and training in playground/.

Importing this module builds the page (`demo`) after `process.before_gradio()`, which must precede gradio's import
(environment variables, a folder of this process's own for Gradio's files, an import hook: ui/process.py). It patches
nothing else: serving does, through `configure_process()` (Gradio's patches, each checked first; malloc arenas,
Python's switch interval, torch's threads, the generation engine), which serve() calls and whatever else launches
`demo` must call first (docs/architecture.md).
"""

from playground.ui import process

process.before_gradio()  # before gradio is imported: no telemetry, no hub, a faster import

from concurrent.futures import Future  # noqa: E402

from playground.ui import demo as page  # noqa: E402
from playground.ui.demo import NOT_AT_START, build_demo, preload  # noqa: E402
from playground.ui.fastpath import prewarm  # noqa: E402

demo = build_demo()
configure_process = process.configure  # the process-wide settings of a process that serves `demo` (idempotent)


def launch_settings(**overrides) -> dict:
    """gradio's launch() keywords for this app's demo: its middleware, handed the demo's Serving (ui/demo.py)."""
    return page.launch_settings(demo, **overrides)


def serve(**launch) -> None:
    """Serve the app: the process configured for it (configure_process), the models computing in a process of their
    own beside the server's (playground/ui/compute.py), and the answers to the page's initial values computed in the
    background first thing, so the first visitors (a lecture hall opening the link at once) are served from the
    caches."""
    configure_process()  # first: a patch that no longer applies stops here, and the compute processes inherit it
    demo.serving.answers.compute.start(preload)  # then: it forks, which copies only the calling thread
    served_at = Future()  # the server's address, once it answers: the prewarm's calls through HTTP wait for it
    prewarm(demo, demo.serving, served_at, skip=frozenset(NOT_AT_START))
    # launch() returns only once its server answers (it calls the server's own startup route), so the address is
    # set here rather than found by polling demo.local_url; a lifespan hook would run before uvicorn binds the port
    demo.launch(**launch_settings(**{**launch, "prevent_thread_lock": True}))
    served_at.set_result(demo.local_url)
    if not launch.get("prevent_thread_lock"):
        demo.block_thread()  # as launch() would have: serve until interrupted


if __name__ == "__main__":
    serve()
