"""What both peers and Crux share in `bench_peers.py`: the model name every system sends."""

MODEL = "gpt-4.1-mini"
"""A 1M-token window in Crux's catalog, so 5,000 prior messages fit under exact history."""
