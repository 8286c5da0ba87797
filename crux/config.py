"""Public home of `Settings` (defined in `vocabulary.settings`)."""

from vocabulary.settings import Settings

__all__ = ["Settings"]
