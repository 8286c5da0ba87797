"""Public home of logging configuration (defined in `telemetry.logs`)."""

from telemetry.logs import configure_logging, get_logger

__all__ = ["configure_logging", "get_logger"]
