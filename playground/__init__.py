"""NLP Playground's backend: small PyTorch models written from the equations (nets/), their training
(training/), what each tab shows as plain data (analysis/), the figures drawn from it (figures/), and the
Gradio UI (ui/), the only layer that imports gradio. docs/architecture.md describes the layers."""
