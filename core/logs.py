"""structlog set-up: readable key-value lines in a terminal, JSON lines with ``--log-json``.

Logs go to stderr so stdout stays clean for ``--json`` output.
"""

from __future__ import annotations

import logging
import sys

import structlog

SECRET_WORDS = ("key", "token", "secret", "password", "authorization")


def redact_secrets(_logger, _name, event_dict):
    """Never let a secret reach a log line, whatever a component passes."""
    for field in list(event_dict):
        if any(word in field.lower() for word in SECRET_WORDS) and field != "event":
            event_dict[field] = "***"
    return event_dict


def configure(json_lines: bool = False, level: str = "info") -> None:
    renderer = structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
