"""Plotly figures and HTML from plain data, one module per tab. No torch, no gradio."""
