"""Tools that measure the whole app: the bench and the load test."""
