"""Writes ``docs/reference.md`` from the docstrings: hooks, slot protocols, records, contexts.

    python tools/reference_docs.py            # rewrite docs/reference.md
    python tools/reference_docs.py --check    # exit 1 when the page is stale

The page is generated, never edited by hand; ``tests/tools/test_reference.py`` fails when it is
stale or when a hook in ``townsquare.hookspecs`` is missing from it. What it documents is the
stable surface that ``townsquare.api`` re-exports.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"

HEADER = """# Reference

Generated from the docstrings by `python tools/reference_docs.py`; do not edit by hand
(`tests/tools/test_reference.py` fails when this page is stale). Plugins import every name below
from `townsquare.api`. The guide is [plugins.md](plugins.md); the hooks with their tests are
also in [hooks.md](hooks.md).
"""


def _doc(obj: Any) -> str:
    raw = vars(obj).get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)  # never inherited
    text = _md(inspect.cleandoc(raw or ""))
    # reST literals and "::" blocks read fine in Markdown once the blocks are fenced
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            out.append(line.rstrip()[:-1] if not line.rstrip().endswith(" ::") else line.rstrip()[:-3])
            i += 1
            block = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```python", textwrap.dedent("\n".join(block)).strip("\n"), "```", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out).strip()


def _md(text: str) -> str:
    """reST inline markup as Markdown: ``x`` and :role:`x` -> `x`."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _signature(func: Any, name: str | None = None) -> str:
    prefix = "async " if inspect.iscoroutinefunction(func) else ""
    try:
        sig = str(inspect.signature(func)).replace("'", "").replace('"', "")
    except (TypeError, ValueError):
        sig = "(...)"
    return f"{prefix}{name or func.__name__}{sig}"


def _field_comments(cls: type) -> dict[str, str]:
    """``#:`` comments written above dataclass fields."""
    try:
        source = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    comments: dict[str, str] = {}
    pending: list[str] = []
    for line in source:
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        match = re.match(r"(\w+)\s*:", stripped)
        if match and pending:
            comments[match.group(1)] = _md(" ".join(pending))
        pending = []
    return comments


def _members(protocol: type) -> list[tuple[str, Any]]:
    from townsquare.slots import protocol_members

    return [(name, inspect.getattr_static(protocol, name, None)) for name in protocol_members(protocol)]


def _protocol(protocol: type) -> list[str]:
    lines = [f"### {protocol.__name__}", "", f"`{protocol.__module__.replace('core', 'townsquare')}.{protocol.__name__}`", ""]
    doc = _doc(protocol)
    if doc:
        lines += [doc, ""]
    for name, member in _members(protocol):
        if isinstance(member, property):
            lines.append(f"- `{name}` (property)")
            func = member.fget
        elif inspect.isfunction(member):
            lines.append(f"- `{_signature(member)}`")
            func = member
        else:
            lines.append(f"- `{name}` (attribute)")
            func = None
        first = _doc(func).replace("\n", " ") if func is not None else ""
        if first:
            lines[-1] += f": {first}"
    return lines + [""]


def _record(cls: type) -> list[str]:
    lines = [f"### {cls.__name__}", ""]
    doc = _doc(cls)
    if doc and not doc.startswith(f"{cls.__name__}("):
        lines += [doc, ""]
    if dataclasses.is_dataclass(cls):
        comments = _field_comments(cls)
        for klass in cls.__mro__[1:]:
            if dataclasses.is_dataclass(klass):
                comments = {**_field_comments(klass), **comments}
        base = next((k for k in cls.__mro__[1:] if dataclasses.is_dataclass(k)), None)
        inherited = {f.name for f in dataclasses.fields(base)} if base is not None else set()
        if inherited:
            lines += [f"The fields of [{base.__name__}](#{base.__name__.lower()}), and:", ""]
        own = [f for f in dataclasses.fields(cls) if f.name not in inherited]
        if own:
            lines += ["| field | type | default | meaning |", "|---|---|---|---|"]
        for f in own:
            default = "required"
            if f.default is not dataclasses.MISSING:
                default = f"`{f.default!r}`"
            elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                default = f"`{f.default_factory()!r}`"  # type: ignore[misc]
            kind = str(f.type).replace("'", "").replace("|", "\\|")
            lines.append(f"| `{f.name}` | `{kind}` | {default} | {comments.get(f.name, '')} |")
        if own:
            lines.append("")
    methods = [(n, m) for n, m in vars(cls).items() if not n.startswith("_") and (inspect.isfunction(m) or isinstance(m, property))]
    for name, member in methods:
        func = member.fget if isinstance(member, property) else member
        label = f"`{name}` (property)" if isinstance(member, property) else f"`{_signature(func)}`"
        first = _doc(func).replace("\n", " ")
        lines.append(f"- {label}{': ' + first if first else ''}")
    if methods:
        lines.append("")
    return lines


def _hooks() -> list[str]:
    from townsquare import hookspecs

    source = inspect.getsource(hookspecs).splitlines()
    lines = ["## Hooks", "", "Every hook in `townsquare.hookspecs`, in its sections. `register` hooks collect typed records,",
             "`on` hooks notify observers; none stops at the first result unless it says so.", ""]
    section = None
    for i, line in enumerate(source):
        if line.startswith("# ") and i > 0 and source[i - 1].startswith("# ---") and section != line[2:]:
            section = line[2:].strip()
            lines += [f"### {section[0].upper()}{section[1:]} hooks", ""]
        match = re.match(r"def (townsquare_\w+)\(", line)
        if match:
            func = getattr(hookspecs, match.group(1))
            opts = getattr(func, "townsquare_spec", {}) or {}
            stops = " (firstresult: stops at the first non-None result)" if opts.get("firstresult") else ""
            lines += [f"#### {func.__name__}", "", f"`{_signature(func)}`{stops}", "", _doc(func), ""]
    return lines


def render() -> str:
    from townsquare import actions, components, lifecycle, memory, metrics, persona, platform, specs, turns
    from townsquare.slots import SLOT_PROTOCOLS

    registered_by = {spec.kind: hook for hook, spec in specs.REGISTRATION_HOOKS.items()}
    lines = [HEADER, "## Slots and their protocols", "",
             "Every component is checked against its slot's protocol when the run is built: a missing",
             "method stops the run with one line naming the component, its plugin, the slot and the method.",
             "", "| slot | protocol | registered by |", "|---|---|---|"]
    for slot, protocol in SLOT_PROTOCOLS.items():
        kind = slot.split(".")[0]
        lines.append(f"| `{slot}` | [{protocol.__name__}](#{protocol.__name__.lower()}) | `{registered_by.get(kind, '')}` |")
    lines.append("")
    protocols = list(dict.fromkeys([
        components.Component, *SLOT_PROTOCOLS.values(), memory.Memory,
        components.ObservesResults, components.ObservesRounds, turns.Turns, turns.TurnsBackend,
    ]))
    for protocol in protocols:
        lines += _protocol(protocol)
    lines += ["## Records a plugin registers", "", _doc(specs), ""]
    for cls in (specs.ComponentSpec, *dict.fromkeys(specs.REGISTRATION_HOOKS.values())):
        lines += _record(cls)
    lines += ["## What components receive", ""]
    for cls in (components.BuildContext, components.StepContext, components.Services, components.Agent,
                platform.PostView, platform.AccountView, metrics.RoundView, actions.Action, actions.ActionResult,
                memory.MemoryRecord, persona.Persona, lifecycle.RunInfo, lifecycle.RunSummary):
        lines += _record(cls)
    lines += _hooks()
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in argv:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            sys.stderr.write(f"{PAGE} is stale: run python tools/reference_docs.py\n")
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {PAGE}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
