"""NLP Playground: one sentence, from tokens to GPT and BERT.

`python app.py` serves the app on http://127.0.0.1:7860 with the checkpoints shipped in models/.
The UI lives in playground/ui/ (one module per tab); the models, analysis, figures and training in playground/.
"""

from playground.ui import patches

patches.before_gradio()  # before gradio is imported: no telemetry, no hub, a faster import

from concurrent.futures import Future  # noqa: E402

from playground.ui import demo as page  # noqa: E402
from playground.ui.demo import NOT_AT_START, build_demo, preload  # noqa: E402
from playground.ui.fastpath import prewarm  # noqa: E402

demo = build_demo()


def launch_settings(**overrides) -> dict:
    """gradio's launch() keywords for this app's demo: its middleware, handed the demo's Serving (ui/demo.py)."""
    return page.launch_settings(demo, **overrides)


def serve(**launch) -> None:
    """Serve the app: the models compute in a process of their own beside the server's (playground/ui/compute.py),
    and the answers to the page's initial values are computed in the background first thing, so the first visitors
    (a lecture hall opening the link at once) are served from the caches."""
    demo.serving.answers.compute.start(preload)  # first: it forks, which copies only the calling thread
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
