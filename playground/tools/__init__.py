"""Tools on top of the package: the bench and the load test, a shipped model's held-out figures, the quantisation
gap, and the builder of a corpus file (WordNet's noun entries as sentences)."""
