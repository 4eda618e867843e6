"""The dashboard's web app (Starlette): server-rendered pages over one run directory.

Every page is plain HTML (readable without JavaScript); the package's own script polls
``/api/version`` and, when the run has changed (a round committed, a checkpoint, the status),
fetches the same page as a fragment and swaps the run bar and the content in place. The
interview box posts to ``/api/interview``, which runs :func:`townsquare.api.commands.interview`
(the ``townsquare interview`` command's code: the run's budget, a cache and a journal) in a
worker thread, one question at a time; at most :data:`MAX_WAITING` more wait their turn, the
others are told to ask again (429).

Requests pass :class:`~.guard.Guard` first (the Host and Origin checks); the interview takes
JSON only; every error the app shows has the known secrets scrubbed (the run's LLM endpoint
may echo its key in an error), as the logs have.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable

import structlog
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from townsquare.api import LLMFatal, RunStopped, UsageError, redact_text

from .agent_page import agent_page, interview_box
from .guard import Guard, allowed_hosts, wants_json
from .html_parts import NAV, Raw, cards, join, number, shell, tag
from .platform_pages import has_recsys, has_town, recsys_page, town_page
from .run_pages import graph_page, llm_page, metrics_page
from .run_reader import NoEvents, RunReader
from .timeline_page import agents_page, timeline_page

log = structlog.get_logger("townsquare.dashboard")

STATIC = Path(__file__).resolve().parent / "static"
#: how often an open page asks whether the run changed (milliseconds)
POLL_MS = 1500
#: the longest question the interview box passes on
MAX_QUESTION = 2000
#: interview requests that may wait while one is answered; more are refused (429)
MAX_WAITING = 4
#: the largest page offset (beyond it every page is empty anyway; SQLite takes 64-bit integers)
MAX_OFFSET = 2**62


def runbar(status: dict[str, Any]) -> Raw:
    last = status["last_round"]
    rounds = f"round {last + 1} of {status['rounds']}" if last is not None else f"0 of {status['rounds']} rounds"
    pill = tag("span", status["status"], class_=f"pill {'live' if status['live'] else status['manifest_status'] or ''}",
               id="run-status", data_status=status["status"])
    items = [tag("b", status["name"], class_="run-name"), pill, tag("span", rounds, id="run-round", data_round=last),
             tag("span", status["sim_time"] or "", class_="when")]
    stop = [tag("div", f"stopped: {status['stop_reason']}", class_="stop")] if status.get("stop_reason") else []
    counts = cards([("agents", number(status["agents"])), ("posts", number(status["posts"])), ("actions", number(status["actions"])),
                    ("LLM calls", number(status["llm_calls"]))])
    return join([tag("div", join(items), class_="runline"), *stop, counts])


def make_app(run_path: str | Path, poll_ms: int = POLL_MS, hosts: Any = None, max_waiting: int = MAX_WAITING) -> Starlette:
    """The app over ``run_path`` (a UsageError when it is not a run directory), answering to
    ``hosts`` (default: the loopback names, :func:`~.guard.allowed_hosts`)."""
    reader = RunReader(run_path)
    interview_lock = asyncio.Lock()
    waiting = [0]

    def nav(status: dict[str, Any]) -> list[str]:
        hidden = set()
        if not has_recsys(reader, status["platform"]):
            hidden.add("/recsys")
        if not has_town(reader, status["platform"]):
            hidden.add("/town")
        return [path for path, _ in NAV if path not in hidden]

    def render(request: Request, current: str, build: Callable[[], tuple[str, Raw] | None], aside: Any = "") -> Response:
        started = time.perf_counter()
        version = reader.version()
        status = reader.status()
        try:
            built = build()
        except NoEvents:
            built = ("Waiting", tag("p", "The run has not written its first rows yet; this page updates when it does.", class_="empty"))
        if built is None:
            return HTMLResponse(shell("Not found", status["name"], nav(status), current, runbar(status),
                                      tag("p", "No such page in this run.", class_="empty"), version), status_code=404)
        title, content = built
        log.debug("dashboard.page", path=request.url.path, ms=round((time.perf_counter() - started) * 1000, 1))
        if request.query_params.get("fragment"):
            return JSONResponse({"version": version, "title": title, "runbar": str(runbar(status)), "content": str(content)})
        page = shell(title, status["name"], nav(status), current, runbar(status), content, version, aside)
        return HTMLResponse(page.replace("<body ", f'<body data-poll-ms="{int(poll_ms)}" ', 1))

    def offset(request: Request) -> int:
        try:
            return min(MAX_OFFSET, max(0, int(request.query_params.get("offset", "0"))))
        except ValueError:
            return 0

    def page(current: str, build: Callable[[Request], tuple[str, Raw] | None]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            return render(request, current, lambda: build(request))
        return endpoint

    def agent(request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        return render(request, "/agents", lambda: agent_page(reader, agent_id), aside=interview_box(agent_id))

    def version(request: Request) -> Response:
        return JSONResponse({"version": reader.version()})

    async def interview(request: Request) -> Response:
        from townsquare.api.commands import interview as ask

        if not wants_json(request.headers.get("content-type")):
            return error("send JSON (Content-Type: application/json): {\"agent\": ..., \"question\": ...}", 415)
        try:
            data = await request.json()
        except ValueError:
            return error("send JSON: {\"agent\": ..., \"question\": ...}", 400)
        agent_id = str(data.get("agent") or "") if isinstance(data, dict) else ""
        question = str(data.get("question") or "").strip() if isinstance(data, dict) else ""
        if not agent_id or not question:
            return error("name an agent and ask a question", 400)
        if len(question) > MAX_QUESTION:
            return error(f"the question is longer than {MAX_QUESTION} characters", 400)
        if waiting[0] > max_waiting:
            return error(f"{waiting[0]} interviews are being answered or waiting; ask again in a moment", 429)
        waiting[0] += 1
        try:
            async with interview_lock:
                started = time.perf_counter()
                try:
                    [answer] = await run_in_threadpool(ask, reader.path, question, agents=[agent_id])
                except LLMFatal as exc:  # the run's LLM endpoint is down or refuses: not a spent budget
                    return error(exc.reason, 502)
                except RunStopped as exc:  # the run's LLM budget is spent
                    return error(exc.reason, 402)
                except UsageError as exc:
                    return error(str(exc), 400)
                except Exception as exc:  # an LLM outage or a broken plugin: said in the box, the server goes on
                    log.warning("dashboard.interview_failed", agent=agent_id, error=redact_text(repr(exc)))
                    return error(f"the interview failed: {type(exc).__name__}: {exc}", 500)
        finally:
            waiting[0] -= 1
        log.info("dashboard.interviewed", agent=agent_id, round=answer.round, seconds=round(time.perf_counter() - started, 2))
        return JSONResponse({"agent": answer.agent_id, "round": answer.round, "question": answer.question,
                             "answer": redact_text(answer.answer), "model": answer.model, "cached": answer.cached})

    routes = [
        Route("/", page("/", lambda r: timeline_page(reader, offset(r)))),
        Route("/agents", page("/agents", lambda r: agents_page(reader))),
        Route("/agents/{agent_id:str}", agent),
        Route("/graph", page("/graph", lambda r: graph_page(reader))),
        Route("/metrics", page("/metrics", lambda r: metrics_page(reader))),
        Route("/llm", page("/llm", lambda r: llm_page(reader, offset(r)))),
        Route("/recsys", page("/recsys", lambda r: recsys_page(reader))),
        Route("/town", page("/town", lambda r: town_page(reader))),
        Route("/api/version", version),
        Route("/api/interview", interview, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(Guard, hosts=allowed_hosts() if hosts is None else hosts)
    return app


def error(message: str, status: int) -> JSONResponse:
    """An error for the page to show: one line, known secrets scrubbed."""
    return JSONResponse({"error": redact_text(str(message))}, status_code=status)
