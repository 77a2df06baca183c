"""NLP Playground: one sentence, from tokens to GPT and BERT.

`python app.py` serves the app on http://127.0.0.1:7860 with the checkpoints shipped in models/.
The UI lives in playground/ui/ (one module per tab); the models, analysis, figures and training in playground/.
"""

from playground.ui import patches

patches.before_gradio()  # before gradio is imported: no telemetry, no hub, a faster import

from playground.ui.demo import LAUNCH, build_demo  # noqa: E402

demo = build_demo()

if __name__ == "__main__":
    demo.launch(**LAUNCH)
