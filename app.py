"""NLP Playground: one sentence, from tokens to GPT and BERT.

`python app.py` serves the app on http://127.0.0.1:7860 with the checkpoints shipped in models/.
The UI lives in playground/ui/ (one module per tab); the models, analysis, figures and training in playground/.
"""

from playground.ui import patches

patches.before_gradio()  # before gradio is imported: no telemetry, no hub, a faster import

from playground.ui.demo import LONG_RUNNING, build_demo, launch_settings, preload  # noqa: E402
from playground.ui.fastpath import prewarm  # noqa: E402

demo = build_demo()


def serve(**launch) -> None:
    """Serve the app: the models compute in a process of their own beside the server's (playground/ui/compute.py),
    and the answers to the page's initial values are computed in the background first thing, so the first visitors
    (a lecture hall opening the link at once) are served from the caches."""
    demo.answers.compute.start(preload)  # first: it forks, which copies only the calling thread
    prewarm(demo, skip=frozenset(LONG_RUNNING))
    demo.launch(**launch_settings(**launch))


if __name__ == "__main__":
    serve()
