"""LangChain's constraint mode (``with_structured_output``) against the fault server at 20 %
faults: a chat model class that talks to the server over HTTP as a real one does (status errors
raised, resets, hangs, garbage and HTML bodies passed on to the parser) runs Zhou et al.'s agent
to the end, every structured answer in mode ``structured_output``, every fault a row."""

from __future__ import annotations

import json
import sqlite3
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from test_fault_server_structured_e2e import POPULATIONS
from townsquare.testing.fault_server import FaultServer

pytest.importorskip("langchain_core", reason="needs the [langchain] extra (langchain-core)")
httpx = pytest.importorskip("httpx")

from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402

#: 20 % faults, as tests/testing/test_fault_server_structured_e2e.py serves them
FAULTS = dict(seed=5, rate_429=0.03, rate_500=0.03, rate_hang=0.02, rate_garbage=0.06, rate_truncated=0.03,
              rate_empty_choices=0.02, rate_200_html=0.01, retry_after_s=0, hang_s=2)
ROLES = {"system": "system", "human": "user", "ai": "assistant"}


class FaultServerChat(BaseChatModel):
    """A chat model on an OpenAI-style endpoint, written the way SDK-backed models behave: an
    HTTP error status raises (with ``status_code``), a body that is not JSON raises, a reply
    without choices raises; ``with_structured_output`` sends the schema as ``response_format``
    and hands back ``{"raw", "parsed", "parsing_error"}``."""

    base_url: str
    timeout_s: float = 0.5

    @property
    def _llm_type(self) -> str:
        return "fault-server-chat"

    def _post(self, messages: list[Any], **extra: Any) -> AIMessage:
        body = {"model": "m", "messages": [{"role": ROLES.get(m.type, "user"), "content": m.content} for m in messages], **extra}
        response = httpx.post(f"{self.base_url}/chat/completions", json=body, timeout=self.timeout_s)
        response.raise_for_status()
        data = response.json()
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        return AIMessage(content=choice["message"]["content"] or "", usage_metadata={
            "input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0),
            "total_tokens": usage.get("total_tokens", 0)})

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._post(messages))])

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Any:
        def call(messages: Any) -> dict[str, Any]:
            raw = self._post(list(messages), response_format={"type": "json_schema", "json_schema": {
                "name": "answer", "strict": True, "schema": schema}})
            try:
                return {"raw": raw, "parsed": json.loads(raw.content), "parsing_error": None}
            except json.JSONDecodeError as exc:
                return {"raw": raw, "parsed": None, "parsing_error": exc}

        return RunnableLambda(call)


SCENARIO = """
name = "langchain-faults"
seed = 3
rounds = 4
[clock]
start = 2024-01-01T06:00:00
minutes_per_round = 360
[recommender]
name = "chronological"
[llm]
name = "langchain"
class_path = "fault_server_chat:FaultServerChat"
kwargs = {{ base_url = "{base_url}" }}
model = "fault-server"
[plugins.llm_retry]
base_delay_s = 0.01
attempts = 10
[plugins.social_agent]
feed_size = 3

""" + POPULATIONS


def test_a_langchain_fault_run_finishes_with_structured_output(monkeypatch, write_scenario, run_scenario):
    module = types.ModuleType("fault_server_chat")
    module.FaultServerChat = FaultServerChat
    monkeypatch.setitem(sys.modules, "fault_server_chat", module)
    with FaultServer(latency_ms=1, **FAULTS) as server:
        run_dir, summary = run_scenario(write_scenario(SCENARIO.format(base_url=server.base_url)))
        faults = sum(n for kind, n in server.counts.items() if kind not in ("ok", "requests") and not kind.startswith("embeddings."))
    assert summary.stopped is None and summary.rounds_completed == 4
    db = sqlite3.connect(Path(run_dir.path) / "events.sqlite")
    errors = db.execute("SELECT COUNT(*) FROM llm_calls WHERE status = 'error'").fetchone()[0]
    assert faults > 0 and errors > 0
    modes = dict(db.execute("SELECT purpose, GROUP_CONCAT(DISTINCT mode) FROM llm_calls WHERE status = 'ok' "
                            "AND purpose IN ('like', 'reblog', 'plan', 'topics') GROUP BY purpose"))
    assert modes and set(modes.values()) == {"structured_output"}, modes
    assert {"like", "plan"} <= set(modes)
    answers = run_dir.read_manifest()["structured_answers"]
    assert sum(answers[p]["constrained"] for p in ("like", "plan")) > 0
