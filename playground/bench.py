"""`python -m playground.bench`: the bench's command (the bench itself is playground/tools/bench.py)."""

from playground.tools.bench import main

if __name__ == "__main__":
    main()
