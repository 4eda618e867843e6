"""The agent's tool-call loop: the LLM calls SoMe's tools until it answers.

SoMe gives the tools to models through their native function calling (MCP, Xue et al.,
"Agent Tools"). townsquare's LLM port carries text, so every model, the offline ones
included, uses one text protocol: the system prompt lists the tools as OpenAI function
schemas and each reply is one JSON object, ``{"tool": NAME, "arguments": {...}}`` to call a
tool or ``{"answer": TEXT}`` to finish. The request carries the JSON schema of exactly that
(:func:`step_schema`: one of the tools with its own parameters, or the answer), so an
OpenAI-compatible endpoint runs in JSON mode and the local model samples under the grammar
llama.cpp derives from the schema, which lets it name only real tools and real arguments. With ``constrained=False`` (the
harness's ``constrained_tool_calls``, ``townsquare eval some --free-tool-calls``) the schema is only
in the prompt: the model's own ability to write a call is measured, its errors included.

Replies are read leniently (:func:`parse_step`), the way real models go wrong (the paper's
fig. 5): code fences, a ``print(...)`` around the call, a Python-style call
``post_search(location="X", ...)`` or with positional arguments, OpenAI's own
``{"name": ..., "arguments": "<json string>"}``, single quotes, trailing commas, a reply cut
off before its closing braces. A reply with no call in it is the final answer, as in
SoMe's agent framework. A reply that tries to be a call but cannot be read gets one repair
request; a second unreadable reply ends the query unfinished (``status = "unparsable"``) and
is recorded as a ``parse_failure``.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from townsquare.api import LLMClient, LLMRequest, Message

from .tools import PARAMETERS, Toolbox, openai_tools

def step_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one reply: a call of one of ``tools`` (OpenAI function schemas) with
    its parameters, or the answer. A model sampled under it (the local model's grammar) can only
    name a real tool with the right argument names, as native function calling does."""
    calls = [{"type": "object", "additionalProperties": False, "required": ["tool", "arguments"],
              "properties": {"tool": {"const": t["function"]["name"]},
                             "arguments": {**t["function"]["parameters"], "additionalProperties": False}}} for t in tools]
    answer = {"type": "object", "additionalProperties": False, "required": ["answer"], "properties": {"answer": {"type": "string"}}}
    return {"oneOf": [answer, *calls]}


class Unreadable(ValueError):
    """A reply that tries to call a tool but cannot be read."""


@dataclass(frozen=True)
class Step:
    tool: str | None = None  # None: the final answer
    arguments: dict[str, Any] = field(default_factory=dict)
    answer: str = ""


@dataclass
class Transcript:
    """What happened on one query."""

    status: str = "answered"  # answered | max_steps | unparsable | llm_failure
    answer: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    repairs: int = 0
    error: str = ""

    @property
    def answered(self) -> bool:
        return self.status == "answered" and bool(self.answer.strip())


async def run_tools(llm: LLMClient, toolbox: Toolbox, system: str, query: str, *, max_steps: int, max_tokens: int,
                    temperature: float, purpose: str = "some.step", constrained: bool = True) -> Transcript:
    """Ask, call the tools the model asks for (those ``toolbox`` offers), until it answers or
    ``max_steps`` replies were spent; ``constrained``: the backend holds each reply to the
    step schema where it can (else the schema is asked for in the prompt only)."""
    mode = None if constrained else "prompt"
    schema = step_schema(openai_tools(toolbox.offered))
    messages = [Message("system", system), Message("user", query)]
    transcript = Transcript()
    for _ in range(max_steps):
        request = LLMRequest(messages=tuple(messages), json_schema=schema, max_tokens=max_tokens,
                             temperature=temperature, purpose=purpose, mode=mode)
        reply = (await llm.complete(request)).text
        try:
            step = parse_step(reply)
        except Unreadable as exc:
            transcript.repairs += 1
            repair = (*messages, Message("assistant", reply), Message("user", repair_prompt(str(exc))))
            reply = (await llm.complete(LLMRequest(messages=repair, json_schema=schema, max_tokens=max_tokens,
                                                   temperature=temperature, purpose=f"{purpose}.repair", mode=mode))).text
            try:
                step = parse_step(reply)
            except Unreadable as again:
                llm.report_parse_failure(purpose, reply)
                transcript.status, transcript.error = "unparsable", str(again)
                return transcript
        if step.tool is None:
            transcript.answer = step.answer
            return transcript
        result = await toolbox.call(step.tool, step.arguments)
        transcript.calls.append({"tool": step.tool, "arguments": step.arguments, "ok": not result.startswith("Error:"),
                                 "result": result[:300]})
        messages += [Message("assistant", json.dumps({"tool": step.tool, "arguments": step.arguments}, ensure_ascii=False)),
                     Message("user", f"Result of {step.tool}:\n{result}\n\nCall another tool or give your answer (one JSON object).")]
    transcript.status = "max_steps"
    return transcript


def protocol_text(tools: list[dict[str, Any]]) -> str:
    """The part of the system prompt that explains the protocol and lists the tools."""
    listed = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return ("You can use these tools (OpenAI function schemas):\n" + listed + "\n\n"
            "Reply with exactly one JSON object and nothing else. To call a tool: "
            '{"tool": "<tool name>", "arguments": {<argument>: <value>, ...}}. '
            'When you are done: {"answer": "<your answer>"}. A tool result comes back in the next message.')


def repair_prompt(problem: str) -> str:
    return (f"Your reply could not be read as a tool call ({problem}). Reply with one JSON object only: "
            '{"tool": "<tool name>", "arguments": {...}} or {"answer": "<your answer>"}.')


# --------------------------------------------------------------------------- reading a reply

_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_CALL = re.compile(r"\b(" + "|".join(PARAMETERS) + r")\s*\(", re.IGNORECASE)


def parse_step(reply: str) -> Step:
    """A tool call or the final answer from a reply (see the module docstring); :class:`Unreadable`."""
    text = _FENCE.sub("", (reply or "").strip()).strip()
    if not text:
        raise Unreadable("the reply is empty")
    start = text.find("{")
    if start >= 0 and not _CALL.match(text[:start].strip() + "("):
        value = _json_object(text[start:])
        if value is not None:
            return _step_from_object(value, text)
        if start == 0 or '"tool"' in text or '"answer"' in text:
            raise Unreadable("the JSON object is malformed")
    call = _CALL.search(text)
    if call is not None:
        return _python_call(text, call)
    return Step(answer=text)


def _json_object(text: str) -> Any:
    """The JSON object at the start of ``text``, mended if it has single quotes, trailing commas or misses closing braces."""
    end = _closing(text)
    candidates = [text[: end + 1]] if end is not None else [text + "}" * n for n in (1, 2, 3)]
    for candidate in candidates:
        for attempt in (candidate, re.sub(r",\s*([}\]])", r"\1", candidate)):
            try:
                return json.loads(attempt)
            except json.JSONDecodeError:
                pass
            try:
                value = ast.literal_eval(attempt)
                if isinstance(value, dict):
                    return value
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                pass
    return None


def _closing(text: str, opening: str = "{", closing: str = "}") -> int | None:
    """Where the bracket that opens ``text`` closes (quoted text skipped), or None."""
    depth, quote, escaped = 0, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return i
    return None


def _step_from_object(value: Any, text: str) -> Step:
    if not isinstance(value, dict):
        raise Unreadable("the reply is not a JSON object")
    if isinstance(value.get("function"), dict):  # {"function": {"name": ..., "arguments": ...}}
        value = value["function"]
    name = value.get("tool") or value.get("name") or value.get("tool_name")
    if name is None and value.get("action") not in (None, "answer", "final_answer"):
        name = value.get("action")
    if isinstance(name, str) and name.strip() and name.strip().lower() not in ("answer", "final_answer"):
        arguments = value.get("arguments", value.get("parameters", value.get("args", {})))
        if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
            parsed = _json_object(arguments.strip()) if arguments.strip().startswith("{") else None
            if parsed is None:
                raise Unreadable(f"the arguments of {name} are not a JSON object")
            arguments = parsed
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise Unreadable(f"the arguments of {name} are not an object")
        return Step(tool=name.strip(), arguments=arguments)
    for key in ("answer", "final_answer", "content", "response"):
        if isinstance(value.get(key), (str, int, float)):
            return Step(answer=str(value[key]).strip())
    raise Unreadable('the object has neither "tool" nor "answer"')


def _python_call(text: str, match: re.Match[str]) -> Step:
    """``tool(a, b=c)`` (inside a ``print(...)`` or not) with literal arguments."""
    name = match.group(1).lower()
    source = text[match.start():]
    end = _closing(source, "(", ")")
    if end is None:
        raise Unreadable(f"the call to {name} is not closed")
    try:
        node = ast.parse(name + source[len(match.group(1)): end + 1], mode="eval").body
    except SyntaxError:
        # bare times and words as arguments (fig. 5b: SearchPost(location='Jiangxi', 2025-06-02 19:00:00, ...))
        inner = source[source.index("(") + 1: end]
        parts = [p.strip().strip("'\"") for p in _split_arguments(inner)]
        return _assign(name, [p.split("=", 1)[1].strip().strip("'\"") if re.match(r"^\w+\s*=", p) else p for p in parts], {})
    if not isinstance(node, ast.Call):
        raise Unreadable(f"the call to {name} cannot be read")
    try:
        positional = [ast.literal_eval(a) for a in node.args]
        named = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    except ValueError:
        raise Unreadable(f"the arguments of {name} are not plain values") from None
    return _assign(name, positional, named)


def _assign(name: str, positional: list[Any], named: dict[str, Any]) -> Step:
    params = [p for p, _, _ in PARAMETERS[name]]
    free = [p for p in params if p not in named]
    arguments = dict(named)
    arguments.update(zip(free, positional))
    if len(positional) > len(free):
        raise Unreadable(f"{name} takes {len(params)} arguments, got more")
    return Step(tool=name, arguments=arguments)


def _split_arguments(inner: str) -> list[str]:
    parts, depth, quote, current = [], 0, "", ""
    for ch in inner:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += ch
    return [p for p in (*parts, current) if p.strip()]
