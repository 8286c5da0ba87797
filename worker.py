"""A Crux worker: `python worker.py` (reads TEMPORAL_ADDRESS, CRUX_DATABASE_URL, ...).

Register your prompts, tools and step hooks here; `crux worker --app worker:worker` and
`crux dev --app worker:worker` serve the same object.
"""

from __future__ import annotations

import crux

worker = crux.Worker(
    # prompts=[...], tools=[...], hooks=[...]: what your generations name.
)

if __name__ == "__main__":
    # Runs until SIGINT or SIGTERM; a failed start-up check exits 1 with one line.
    worker.serve()
