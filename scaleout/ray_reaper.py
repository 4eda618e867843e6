"""Ending the Ray processes a run started, however the run ends.

``ray.init()`` without an address starts a local cluster as children of the calling process.
Ray has the kernel end its direct children with it (GCS, raylet, the dashboard, the monitors),
but not the raylet's own children: after a ``kill -9`` of the driver, ``ray::DashboardAgent``
and ``ray::RuntimeEnvAgent`` (and idle workers) go on for about a minute, until their checks
notice the raylet is gone and their last report to the dead GCS times out. The
:class:`Reaper` is a small process the driver starts beside the cluster: the driver tells it,
through a pipe, the processes it started (pid and start time, so a pid the system has given to
another process since is never hit); when the pipe closes, because the driver closed it or
because the driver is gone (a kill, a crash), it kills those still there and exits.

Linux only (it reads ``/proc``); elsewhere :meth:`Reaper.start` returns None and Ray's own
clean-up is all there is. Run as ``python -m townsquare.scaleout.ray_reaper`` (by :meth:`Reaper.start`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

PROC = Path("/proc")


def start_time(pid: int) -> str | None:
    """When process ``pid`` started (``/proc/PID/stat`` field 22, clock ticks since boot), or
    None when there is no such process."""
    try:
        stat = (PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def descendants(root: int) -> list[int]:
    """Every living descendant of process ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[-1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


class Reaper:
    """The driver's side: the reaper process and the pipe to it."""

    def __init__(self, process: subprocess.Popen):
        self.process = process
        self.watched: set[tuple[int, str]] = set()

    @classmethod
    def start(cls) -> "Reaper | None":
        """Start the reaper and tell it every process this one has started so far (call it right
        after ``ray.init``); None where there is no ``/proc``."""
        if not (PROC / "self" / "stat").exists():
            return None
        process = subprocess.Popen([sys.executable, "-m", "townsquare.scaleout.ray_reaper"], stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)  # a Ctrl-C to the terminal's job does not reach it
        reaper = cls(process)
        reaper.watch_descendants()
        return reaper

    def watch_descendants(self) -> None:
        """Add every process this one has started since (a Ray worker process started for an actor)."""
        lines = []
        for pid in descendants(os.getpid()):
            started = start_time(pid)
            if pid != self.process.pid and started is not None and (pid, started) not in self.watched:
                self.watched.add((pid, started))
                lines.append(f"{pid} {started}\n")
        if lines and self.process.stdin is not None:
            try:
                self.process.stdin.write("".join(lines).encode("ascii"))
                self.process.stdin.flush()
            except OSError:  # the reaper is gone: nothing to tell
                pass

    def close(self, timeout: float = 10.0) -> None:
        """Close the pipe: the reaper ends what is left of the watched processes and exits."""
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()


def reap(lines: IO[str]) -> int:
    """Read ``PID START`` lines until the pipe closes, then kill each such process that still
    has that start time; returns how many were killed."""
    watched = []
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            watched.append((int(parts[0]), parts[1]))
    killed = 0
    for pid, started in watched:
        if start_time(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reap(sys.stdin)


if __name__ == "__main__":
    main()
