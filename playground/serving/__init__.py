"""What serves the views: the generation engine (engine.py) that batches a class's generations."""
