"""Structured, content-free logging, configured once per process.

JSON lines in production, a readable console renderer in a terminal. Log events carry ids,
counts and sizes only; never message, summary or completion text.
"""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure_logging(*, log_format: str = "auto", level: str = "info") -> None:
    """Route structlog and stdlib logging (Temporal's included) through one renderer.

    Args:
        log_format: `json`, `console`, or `auto` (console when stderr is a terminal).
        level: Minimum level name.
    """
    numeric = _LEVELS.get(level.lower(), logging.INFO)
    use_console = log_format == "console" or (log_format == "auto" and sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        # The plain formatter: structlog's default (rich, when installed) prints every
        # frame's local variables, and a frame's locals can hold message or tool text.
        structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
        if use_console
        else structlog.processors.JSONRenderer(sort_keys=True)
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                # JSON gets the traceback as a string here, outside any workflow sandbox
                # (the renderer's own fallback imports, which a sandboxed logger refuses).
                *([] if use_console else [structlog.processors.format_exc_info]),
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger for `name`."""
    return structlog.stdlib.get_logger(name)
