"""The import graph of townsquare, from the source alone (no imports are run).

    python tools/import_graph.py            # print docs/architecture.md's diagram
    python tools/import_graph.py --write    # rewrite the diagram in docs/architecture.md
    python tools/import_graph.py --check    # exit 1 on a forbidden import or an import cycle

Every ``import``/``from ... import`` of a townsquare module counts, at module level, inside a
function (a lazy import is still a dependency) or under ``if TYPE_CHECKING:`` (a type-only
import still couples the two modules, and a type-only cycle is still a cycle).
tests/tools/test_architecture.py runs the same checks and checks that the page is current.

The walls: the kernel (core/, ``townsquare.*``) imports no plugin, no command, no front end
(cli/, notebook/, launch/), not the shared helpers (lib/), not the testing kit and not its own
facade (api/): it reaches them through hooks only, so ``-p no:NAME`` really leaves NAME
unloaded. The plugin API (api/, ``townsquare.api``) re-exports the kernel's names and
protocols; its part for commands (api/commands/) also the CLI's options, the launch glue and
the commands' machinery. Both only declare: a module there holds imports, ``__all__`` and
protocols, never a helper (:func:`api_declarations`). The shared helpers (lib/,
``townsquare.lib``) import the kernel only, and each is used by more than one package (one
user: it lives with that user; :func:`single_user_helpers`). The launch glue (launch/) imports
the kernel and lib/. The CLI (cli/) imports the kernel only: its commands are plugins. The
built-in commands (commands/) import the kernel, the CLI's shared options, the launch glue and
each other's machinery, never a plugin. Plugins, and the built-in Ray backend (scaleout/),
import ``townsquare.api`` (``townsquare.api.commands`` included), ``townsquare.lib``,
``townsquare.testing`` and their own package; nothing but the commands and the notebook API
imports a built-in command's plugin module, so ``-p no:interview`` leaves the interview command
unimported (:func:`command_plugins`). Outside the plugins, one module name is one thing
(:func:`repeated_names`: no two ``progress`` modules), and a townsquare module is imported under
its own name (:func:`renamed_imports`: no ``state as state_codec``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: source folder -> the dotted package it installs as (pyproject's package-dir)
PACKAGE_DIRS = {"core": "townsquare", "api": "townsquare.api", "api/commands": "townsquare.api.commands",
                "cli": "townsquare.cli", "commands": "townsquare.commands", "launch": "townsquare.launch", "lib": "townsquare.lib",
                "notebook": "townsquare.notebook",
                "scaleout": "townsquare.scaleout", "testing": "townsquare.testing",
                "plugins": "townsquare.plugins", "platforms": "townsquare.platforms", "recommenders": "townsquare.recommenders"}
#: what plugins (and scaleout/) may import of townsquare, besides their own package
PLUGIN_SURFACE = ("townsquare.api", "townsquare.lib", "townsquare.testing")
PLUGIN_DIRS = ("plugins", "platforms", "recommenders")
#: built-in plugins outside the plugin folders that import only the plugin surface
SURFACE_ONLY = ("scaleout",)
#: folders that may import a built-in command's plugin module (the commands themselves, the
#: notebook API, which offers a run's branch and export in Python)
FRONT_ENDS = ("commands", "notebook")
#: folders whose modules only declare (re-exports, ``__all__``, protocols)
DECLARING = ("api", "api/commands")
#: lib/ modules that are a hook's contract: the records a plugin of that hook writes against
#: (``townsquare_register_validation_dimensions``: a dimension measures a ``Trace`` into a
#: ``Measurement``). Third-party plugins are their other users, so one user here is enough.
CONTRACTS = ("townsquare.lib.validation",)
#: (importer, imported) pairs allowed across plugin packages, each with the reason; to fold, not to grow
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()
#: the folders each part of the project may not import from (besides plugins, checked apart)
WALLS = {
    "core": ("townsquare.api", "townsquare.cli", "townsquare.commands", "townsquare.launch", "townsquare.lib", "townsquare.notebook",
             "townsquare.scaleout", "townsquare.testing"),
    "api": ("townsquare.api.commands", "townsquare.cli", "townsquare.commands", "townsquare.launch", "townsquare.lib",
            "townsquare.notebook", "townsquare.testing"),
    "api/commands": ("townsquare.notebook", "townsquare.testing"),
    "lib": ("townsquare.api", "townsquare.cli", "townsquare.commands", "townsquare.launch", "townsquare.notebook",
            "townsquare.scaleout", "townsquare.testing"),
    "launch": ("townsquare.api", "townsquare.cli", "townsquare.commands", "townsquare.notebook", "townsquare.scaleout",
               "townsquare.testing"),
    "cli": ("townsquare.commands", "townsquare.api.commands", "townsquare.launch", "townsquare.notebook", "townsquare.testing"),
    "commands": ("townsquare.notebook",),
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

    commands = command_plugins()
    for name, path in known.items():
        folder = source_folder(path)
        if folder not in FRONT_ENDS:
            for target, line in imports_of(name, path, known):
                if target in commands:
                    problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target} (a built-in command's plugin module: "
                                    "-p no:NAME must leave it unimported; import the machinery it uses from where it lives)")
        if folder not in PLUGIN_DIRS and folder not in SURFACE_ONLY:
            for target, line in imports_of(name, path, known):
                if inside(target, plugin_packages):
                    problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target} (only plugins import plugins; "
                                    "add a hook and implement it in the plugin)")
                elif inside(target, WALLS.get(folder, ())):
                    problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target} ({folder}/ imports none of "
                                    f"{', '.join(WALLS[folder])}; reach it through a hook)")
            continue
        own = ".".join(name.split(".")[:3 if folder in PLUGIN_DIRS else 2])  # e.g. townsquare.plugins.social_agent
        for target, line in imports_of(name, path, known):
            if inside(target, PLUGIN_SURFACE):
                continue
            if target == own or target.startswith(own + ".") or (name, target) in KNOWN_EXCEPTIONS:
                continue
            if folder in PLUGIN_DIRS and len(name.split(".")) == 3 and target.rpartition(".")[0] == name.rpartition(".")[0]:
                continue  # a sibling module of a flat folder (recommenders/item_mf.py -> item_ranking.py)
            problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target} (plugins import townsquare.api, "
                            f"townsquare.lib, townsquare.testing and their own package only)")
    return problems


def command_plugins() -> set[str]:
    """The built-in commands' plugin modules (``townsquare.commands.*`` in the kernel's
    ``DEFAULT_PLUGINS``), read from the source."""
    tree = ast.parse((ROOT / "core" / "plugin_manager.py").read_text()) if (ROOT / "core" / "plugin_manager.py").is_file() else None
    found: set[str] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("townsquare.commands."):
            found.add(node.value)
    return found


def api_declarations() -> list[str]:
    """Statements in api/ that do more than declare: anything but the docstring, imports,
    ``__all__`` and classes that are protocols (a helper function, a constant, a class that
    works belongs with its user or in lib/)."""
    problems = []
    for name, path in modules().items():
        if source_folder(path) not in DECLARING:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                continue  # the docstring
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
                continue
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", getattr(b, "attr", None)) == "Protocol" for b in node.bases):
                continue
            what = getattr(node, "name", type(node).__name__)
            problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {what} is not a declaration (the API re-exports and "
                            "declares protocols; a helper lives with its user or in lib/)")
    return problems


def single_user_helpers(edges: dict[str, set[str]] | None = None) -> list[str]:
    """lib/ modules used by one package only (or by none): they belong with that user. A
    package is a plugin package, a source folder's package otherwise; lib/ itself does not count,
    nor does a hook's contract (:data:`CONTRACTS`)."""
    edges = graph() if edges is None else edges
    users: dict[str, set[str]] = {}
    for importer, targets in edges.items():
        for target in targets:
            if target.startswith("townsquare.lib.") and not importer.startswith("townsquare.lib"):
                users.setdefault(target, set()).add(box(importer))
    return [f"{target}: used by {', '.join(sorted(users.get(target, set()))) or 'nothing'} only; move it next to its user"
            for target in sorted(t for t in edges if t.startswith("townsquare.lib.") and t not in CONTRACTS)
            if len(users.get(target, set())) < 2]


def repeated_names() -> list[str]:
    """Module names used twice outside the plugin folders (``core/progress.py`` and
    ``cli/progress.py`` were two things under one name)."""
    seen: dict[str, list[str]] = {}
    for name, path in modules().items():
        if source_folder(path) in PLUGIN_DIRS or path.name == "__init__.py":
            continue
        seen.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
    return [f"{' and '.join(paths)}: one module name, two modules" for stem, paths in sorted(seen.items()) if len(paths) > 1]


def renamed_imports() -> list[str]:
    """A townsquare module imported under another name outside the plugins and the tests (``from
    . import state as state_codec``): one thing, one name."""
    known = modules()
    problems = []
    for name, path in known.items():
        if source_folder(path) in PLUGIN_DIRS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            module = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else (node.module or "")
            for alias in node.names:
                if alias.asname and alias.asname != alias.name and f"{module}.{alias.name}" in known:
                    problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports module {module}.{alias.name} as "
                                    f"{alias.asname} (import a module under its own name)")
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
    """The box of the drawing a module belongs to: the kernel, or the source folder's package
    around it (the API, the API for commands, the CLI, the built-in commands, the launch glue,
    the shared helpers, the notebook API, the Ray backend, the testing kit), or a plugin package
    (a folder under plugins/, platforms/, recommenders/)."""
    parts = module.split(".")
    for package in sorted(set(PACKAGE_DIRS.values()) - {"townsquare", "townsquare.plugins", "townsquare.platforms",
                                                        "townsquare.recommenders"}, key=len, reverse=True):
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
        problems += api_declarations() + single_user_helpers() + repeated_names() + renamed_imports()
        if DOC.read_text() != current_doc():
            problems.append(f"{DOC.relative_to(ROOT)} is stale: run python tools/import_graph.py --write")
        print("\n".join(problems) or "imports ok")
        return 1 if problems else 0
    print(mermaid())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
