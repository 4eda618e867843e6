"""This process's resident memory (Linux ``/proc/self/status``) and CPU time.

A run records, per process (the driver and each Ray shard), its resident set before its agents
were built, its peak (``VmHWM``: the kernel's high-water mark, no sampling) and the CPU time it
used, in the run's manifest (``processes``), so the memory each process needed, how much of it
the agents took, and where the work went can be read after the run. Elsewhere than Linux the
memory values are None.
"""

from __future__ import annotations

import os
import resource
import socket
from typing import Any


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def rss_bytes() -> int | None:
    """The resident set size now."""
    return _status_kib("VmRSS:")


def peak_rss_bytes() -> int | None:
    """The largest resident set size this process has had."""
    return _status_kib("VmHWM:")


def process_usage(role: str, before_build: int | None) -> dict[str, Any]:
    """One ``processes`` entry of a manifest: ``role`` ("run", "driver", "shard 0", ...), pid
    and host, the resident set before the agents were built, its peak and the growth, and the
    CPU seconds (user and system) the process has used."""
    peak = peak_rss_bytes()
    growth = peak - before_build if peak is not None and before_build is not None else None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"role": role, "pid": os.getpid(), "host": socket.gethostname(), "rss_before_build_bytes": before_build,
            "rss_peak_bytes": peak, "rss_growth_bytes": growth, "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3)}
