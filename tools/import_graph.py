"""The import graph of townsquare, from the source alone (no imports are run).

    python tools/import_graph.py            # print docs/architecture.md's diagram
    python tools/import_graph.py --write    # rewrite the diagram in docs/architecture.md
    python tools/import_graph.py --check    # exit 1 on a forbidden import or an import cycle

Every ``import``/``from ... import`` of a townsquare module counts, at module level, inside a
function (a lazy import is still a dependency) or under ``if TYPE_CHECKING:`` (a type-only
import still couples the two modules, and a type-only cycle is still a cycle).
tests/tools/test_architecture.py runs the same checks and checks that the page is current.

The walls: the kernel (core/, ``townsquare.*``) imports no plugin, no command, no front end
(cli/, notebook/), not the testing kit and not its own facade (api/): it reaches them through
hooks only, so ``-p no:NAME`` really leaves NAME unloaded. The plugin API (api/,
``townsquare.api``) re-exports the kernel; its part for commands (api/commands/) also the CLI's
options and the commands' machinery. The CLI (cli/) imports the kernel only: its commands are plugins.
The built-in commands (commands/) import the kernel, the CLI's shared options and each other's
machinery, never a plugin. Plugins import ``townsquare.api`` (``townsquare.api.commands``
included), ``townsquare.testing`` and their own package.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: source folder -> the dotted package it installs as (pyproject's package-dir)
PACKAGE_DIRS = {"core": "townsquare", "api": "townsquare.api", "api/commands": "townsquare.api.commands",
                "cli": "townsquare.cli", "commands": "townsquare.commands", "launch": "townsquare.launch",
                "notebook": "townsquare.notebook",
                "scaleout": "townsquare.scaleout", "testing": "townsquare.testing",
                "plugins": "townsquare.plugins", "platforms": "townsquare.platforms", "recommenders": "townsquare.recommenders"}
#: what plugins may import of townsquare, besides their own package
PLUGIN_SURFACE = ("townsquare.api", "townsquare.testing")
PLUGIN_DIRS = ("plugins", "platforms", "recommenders")
#: (importer, imported) pairs allowed across plugin packages, each with the reason; to fold, not to grow
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()
#: the folders each part of the project may not import from (besides plugins, checked apart)
WALLS = {
    "core": ("townsquare.api", "townsquare.cli", "townsquare.commands", "townsquare.notebook", "townsquare.scaleout",
             "townsquare.testing"),
    "api": ("townsquare.api.commands", "townsquare.cli", "townsquare.commands", "townsquare.notebook", "townsquare.testing"),
    "api/commands": ("townsquare.notebook", "townsquare.testing"),
    "cli": ("townsquare.commands", "townsquare.api.commands", "townsquare.notebook", "townsquare.testing"),
    "commands": ("townsquare.notebook",),
    "scaleout": ("townsquare.cli", "townsquare.commands", "townsquare.notebook", "townsquare.testing"),
}
#: import cycles allowed for now, each with the reason; to fold, not to grow
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- import-graph:begin (tools/import_graph.py --write) -->", "<!-- import-graph:end -->"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    folder = source_folder(path)
    return ".".join([PACKAGE_DIRS[folder], *parts[len(Path(folder).parts):]])


def source_folder(path: Path) -> str:
    """The folder of :data:`PACKAGE_DIRS` that holds ``path`` (the innermost: api/commands, not api)."""
    parts = path.relative_to(ROOT).parts
    return max((f for f in PACKAGE_DIRS if parts[: len(Path(f).parts)] == Path(f).parts), key=len)


def modules() -> dict[str, Path]:
    found = {}
    for folder in PACKAGE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """The townsquare modules ``name`` imports, with line numbers (relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # ``from pkg import sub`` imports the submodule pkg.sub where there is one
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        else:
            continue
        found += [(t, node.lineno) for t in targets if t == "townsquare" or t.startswith("townsquare.")]
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for target, _ in imports_of(name, path, known):
            while target not in known and "." in target:  # a name inside a module
                target = target.rpartition(".")[0]
            if target in known and target != name:
                edges[name].add(target)
    return edges


def forbidden_imports() -> list[str]:
    """Imports that cross a wall (see the module docstring): a plugin, command or front end
    imported by the kernel; a command imported by the CLI; a plugin imported by anything but
    itself (through its own package) or another plugin of the same flat folder; and, in
    plugins/, platforms/, recommenders/, townsquare modules other than the declared API, the
    testing kit and the importing module's own top-level package."""
    known = modules()
    problems = []
    plugin_packages = tuple(f"{PACKAGE_DIRS[folder]}" for folder in PLUGIN_DIRS)

    def inside(target: str, packages: tuple[str, ...]) -> bool:
        return any(target == p or target.startswith(p + ".") for p in packages)

    for name, path in known.items():
        folder = source_folder(path)
        if folder not in PLUGIN_DIRS:
            for target, line in imports_of(name, path, known):
                if inside(target, plugin_packages):
                    problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target} (only plugins import plugins; "
                                    "add a hook and implement it in the plugin)")
                elif inside(target, WALLS.get(folder, ())):
                    problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target} ({folder}/ imports none of "
                                    f"{', '.join(WALLS[folder])}; reach it through a hook)")
            continue
        own = ".".join(name.split(".")[:3])  # e.g. townsquare.plugins.social_agent
        for target, line in imports_of(name, path, known):
            if inside(target, PLUGIN_SURFACE):
                continue
            if target == own or target.startswith(own + ".") or (name, target) in KNOWN_EXCEPTIONS:
                continue
            if len(name.split(".")) == 3 and target.rpartition(".")[0] == name.rpartition(".")[0]:
                continue  # a sibling module of a flat folder (recommenders/item_mf.py -> item_ranking.py)
            problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target} (plugins import townsquare.api, "
                            f"townsquare.testing and their own package only)")
    return problems


def unknown_cycles(edges: dict[str, set[str]] | None = None) -> list[list[str]]:
    """The import cycles not in :data:`KNOWN_CYCLES`."""
    return [c for c in cycles(edges) if tuple(c) not in KNOWN_CYCLES]


def cycles(edges: dict[str, set[str]] | None = None) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    edges = graph() if edges is None else edges
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def box(module: str) -> str:
    """The box of the drawing a module belongs to: the kernel, the API, the API for commands, the CLI, the built-in commands, the notebook API, the testing kit, or a plugin package (a folder under plugins/, platforms/, recommenders/)."""
    parts = module.split(".")
    if module == "townsquare.api.commands" or module.startswith("townsquare.api.commands."):
        return "townsquare.api.commands"
    if module == "townsquare.api" or module.startswith("townsquare.api."):
        return "townsquare.api"
    for package in ("townsquare.testing", "townsquare.cli", "townsquare.commands", "townsquare.notebook"):
        if module == package or module.startswith(package + "."):
            return package
    if len(parts) >= 2 and parts[1] in ("plugins", "platforms", "recommenders"):
        if len(parts) == 2:
            return module
        return ".".join(parts[:3]) if (ROOT / parts[1] / parts[2]).is_dir() else ".".join(parts[:2])
    return "kernel"


def mermaid() -> str:
    edges = graph()
    boxes = sorted({box(m) for m in edges})
    links = sorted({(box(a), box(b)) for a, targets in edges.items() for b in targets if box(a) != box(b)})
    ids = {b: b.replace("townsquare.", "").replace(".", "_") for b in boxes}
    lines = ["```mermaid", "flowchart LR"]
    for b in boxes:
        label = "kernel (townsquare.*)" if b == "kernel" else b.replace("townsquare.", "")
        lines.append(f'    {ids[b]}["{label}"]')
    for a, b in links:
        lines.append(f"    {ids[a]} --> {ids[b]}")
    lines.append("```")
    return "\n".join(lines)


def current_doc() -> str:
    text = DOC.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{mermaid()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    if "--write" in argv:
        DOC.write_text(current_doc())
        return 0
    if "--check" in argv:
        problems = forbidden_imports() + [f"import cycle: {' <-> '.join(c)}" for c in unknown_cycles()]
        if DOC.read_text() != current_doc():
            problems.append(f"{DOC.relative_to(ROOT)} is stale: run python tools/import_graph.py --write")
        print("\n".join(problems) or "imports ok")
        return 1 if problems else 0
    print(mermaid())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
