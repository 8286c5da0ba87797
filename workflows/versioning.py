"""The command version of the workflows, and how their runs are pinned to it.

This is the first release line. A change that alters the command sequence a workflow
produces for a given history (a new activity call, a different order, a renamed activity or
child workflow) ships as a new worker deployment version: bump `COMMAND_VERSION`, record the
histories of the new version (`tests/replay/histories/v<N>/`), and deploy the new workers
under the new build id. A versioned worker (`CRUX_DEPLOYMENT_NAME`) runs every workflow
`PINNED`, so a run finishes on the build that started it while new runs go to the
deployment's current version. `workflow.patched` is for
hot fixes only, each followed by `workflow.deprecate_patch` and its removal in a later release.
"""

from __future__ import annotations

from temporalio.common import VersioningBehavior

COMMAND_VERSION = 5
"""Bumped by every change to the workflows' command sequence (see the module docstring)."""

VERSIONING_BEHAVIOR = VersioningBehavior.PINNED
"""Runs stay on the worker deployment version that started them."""

DEFAULT_DEPLOYMENT_NAME = "crux"
"""The worker deployment name when a worker uses worker versioning."""


def default_build_id() -> str:
    """The build id of workers of this command version (`crux-v<N>`)."""
    return f"crux-v{COMMAND_VERSION}"
