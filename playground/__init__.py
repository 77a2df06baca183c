"""NLP Playground's backend: small PyTorch models written from the equations, their training,
introspection and figure builders. Never imports gradio (that is app.py's job)."""
