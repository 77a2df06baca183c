"""The models: one family per file, in paper order. torch only; no gradio, no plotly."""
