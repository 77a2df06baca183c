"""Training: one loop and one module per kind; `python -m playground.train <kind>` is the CLI."""
