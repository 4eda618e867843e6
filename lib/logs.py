"""structlog set-up: readable key-value lines in a terminal, JSON lines with ``--log-json``.

Logs go to stderr so stdout stays clean for ``--json`` output.
"""

from __future__ import annotations

import logging
import sys

import structlog

from townsquare.secrets import is_secret_key, redact_value


def redact_secrets(_logger, _name, event_dict):
    """A log field named like a secret value (``api_key``, ``token``...) is never printed,
    whatever a component passes; a known secret value quoted in any text (an error message
    that echoes the key, a formatted traceback) is replaced by ``***``."""
    for field, value in list(event_dict.items()):
        if is_secret_key(field):
            event_dict[field] = "***"
        else:
            event_dict[field] = redact_value(value)
    return event_dict


class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written (a test runner or click's CliRunner may
    swap it and close the old one after the logger was configured)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(json_lines: bool = False, level: str = "info") -> None:
    renderer = structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,  # tracebacks as text, so they are redacted too
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),
        cache_logger_on_first_use=False,
    )
