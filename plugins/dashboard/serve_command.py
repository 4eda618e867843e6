"""``townsquare serve RUN [--port 8000] [--host 127.0.0.1] [--allow-host NAME]``: the dashboard of
a run, in a browser.

It reads the run's own files only (``events.sqlite`` read-only; the writer's lock is never
taken), so it runs beside ``townsquare run`` and shows each round as it is committed; the
interview box writes to ``RUN/interviews.jsonl`` and ``RUN/interviews/``. It answers only to
the host names it is served under (:mod:`~.guard`). Needs the ``dashboard`` extra (Starlette
and uvicorn); without it, a one-line install hint.
"""

from __future__ import annotations

import errno
import importlib.util
import socket
from typing import Any

import click

from townsquare.api import UsageError, hookimpl

#: the packages the dashboard needs, by import name
NEEDS = ("starlette", "uvicorn")
INSTALL_HINT = "townsquare serve needs the dashboard extra: pip install 'townsquare[dashboard]' (starlette and uvicorn)"


def missing_packages() -> list[str]:
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one); a one-line UsageError when
    the port is taken or the address is not this machine's."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: cannot resolve it ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        reason = "in use (another server listens there; pick another with --port)" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise UsageError(f"--port {port} on {host}: {reason}") from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options

    @cli.command("serve")
    @click.argument("run_dir", metavar="RUN")
    @click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port to listen on (0: any free one).")
    @click.option("--host", default="127.0.0.1", show_default=True,
                  help="Address to listen on; the default is this machine only (0.0.0.0 shows the run to your network).")
    @click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
                  help="Also answer requests for host NAME (a DNS name or proxy the dashboard is reached by).")
    @common_options
    def serve(run_dir: str, port: int, host: str, allow_hosts: tuple[str, ...], **_: Any) -> None:
        """Show the run in directory RUN in a browser: timeline, agents, follower graph, metrics,
        LLM calls, interviews; live while the run goes on."""
        missing = missing_packages()
        if missing:
            raise UsageError(f"{INSTALL_HINT}; missing: {', '.join(missing)}")
        import uvicorn

        from .app import make_app
        from .guard import allowed_hosts

        # a one-line error when RUN is not a run directory, before the port is taken
        app = make_app(run_dir, hosts=allowed_hosts(host, allow_hosts))
        sock = bind(host, port)
        click.echo(f"dashboard of {run_dir}: {url_of(sock)}  (Ctrl-C to stop)", err=True)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
