"""structlog set-up: readable key-value lines in a terminal, JSON lines with ``--log-json``.

Logs go to stderr so stdout stays clean for ``--json`` output.
"""

from __future__ import annotations

import logging
import sys

import structlog

from .secrets import is_secret_key, redact_text


def redact_secrets(_logger, _name, event_dict):
    """A log field named like a secret value (``api_key``, ``token``...) is never printed,
    whatever a component passes; a known secret value quoted in any text (an error message
    that echoes the key, a formatted traceback) is replaced by ``***``."""
    for field, value in list(event_dict.items()):
        if is_secret_key(field):
            event_dict[field] = "***"
        else:
            event_dict[field] = _redacted(value)
    return event_dict


def _redacted(value):
    """``value`` with known secrets scrubbed from its text, inside lists and dicts too."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, BaseException):
        return redact_text(f"{type(value).__name__}: {value}")
    if isinstance(value, (list, tuple)):
        return type(value)(_redacted(item) for item in value)
    if isinstance(value, dict):
        return {key: "***" if is_secret_key(key) else _redacted(item) for key, item in value.items()}
    return value


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
