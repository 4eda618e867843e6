"""Smallville's environment tree (Park et al. §5.1 "Environment"): world -> sectors -> arenas ->
objects, each object with a state.

An address names a node by its path, joined with ``:`` as the paper's seed files write it:
``the Ville:Hobbs Cafe:cafe:piano`` (world, sector, arena, object). A :class:`Tree` is a nested
``{world: {sector: {arena: [object, ...]}}}`` mapping, the shape of ``spatial_memory.json``: the
town is one tree, and each agent's spatial memory is another, a subtree of the town that grows
as the agent sees new arenas (§4.3, "the agent's environment tree"). Object states are the
town's alone: an object is ``idle`` until someone uses it ("being used to brew coffee").
"""

from __future__ import annotations

from typing import Any, Iterable

SEP = ":"
IDLE = "idle"

Tree = dict[str, dict[str, dict[str, list[str]]]]


def split(address: str) -> list[str]:
    return [part.strip() for part in address.split(SEP)]


def join(*parts: str) -> str:
    return SEP.join(parts)


def read_tree(data: Any, where: str) -> Tree:
    """A tree from JSON data (``spatial_memory.json``); raises ValueError naming ``where``."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object {{world: {{sector: {{arena: [objects]}}}}}}")
    tree: Tree = {}
    for world, sectors in data.items():
        if not isinstance(sectors, dict):
            raise ValueError(f"{where}: world {world!r} is not an object of sectors")
        for sector, arenas in sectors.items():
            if not isinstance(arenas, dict):
                raise ValueError(f"{where}: sector {world}:{sector} is not an object of arenas")
            for arena, objects in arenas.items():
                if not isinstance(objects, list) or not all(isinstance(o, str) for o in objects):
                    raise ValueError(f"{where}: arena {world}:{sector}:{arena} is not a list of object names")
                merge_arena(tree, world, sector, arena, objects)
    return tree


def merge_arena(tree: Tree, world: str, sector: str, arena: str, objects: Iterable[str]) -> bool:
    """Add an arena (and its objects) to ``tree``; True when anything was new."""
    arenas_here = tree.setdefault(world, {}).setdefault(sector, {})
    fresh = arena not in arenas_here
    known = arenas_here.setdefault(arena, [])
    new = [o for o in objects if o not in known]
    known.extend(new)
    return fresh or bool(new)


def merge(into: Tree, other: Tree) -> Tree:
    for world, sectors in other.items():
        for sector, arenas in sectors.items():
            for arena, objects in arenas.items():
                merge_arena(into, world, sector, arena, objects)
    return into


def copy_tree(tree: Tree) -> Tree:
    return {w: {s: {a: list(o) for a, o in arenas.items()} for s, arenas in sectors.items()} for w, sectors in tree.items()}


def arenas(tree: Tree) -> list[str]:
    """Every arena address ``world:sector:arena`` of ``tree``, in tree order."""
    return [join(w, s, a) for w, sectors in tree.items() for s, ars in sectors.items() for a in ars]


def sectors_of(tree: Tree, world: str) -> list[str]:
    return list(tree.get(world, {}))


def arenas_of(tree: Tree, world: str, sector: str) -> list[str]:
    return list(tree.get(world, {}).get(sector, {}))


def objects_of(tree: Tree, arena_address: str) -> list[str]:
    parts = split(arena_address)
    if len(parts) != 3:
        return []
    w, s, a = parts
    return list(tree.get(w, {}).get(s, {}).get(a, []))


def has_arena(tree: Tree, arena_address: str) -> bool:
    parts = split(arena_address)
    return len(parts) == 3 and parts[2] in tree.get(parts[0], {}).get(parts[1], {})


def arena_of(address: str) -> str:
    """The arena part (``world:sector:arena``) of an arena or object address."""
    return join(*split(address)[:3])


class World:
    """The town: its tree and every object's state (``object address -> state``)."""

    def __init__(self, tree: Tree):
        if not arenas(tree):
            raise ValueError("the town has no arena")
        self.tree = tree
        self.states: dict[str, str] = {}

    def state(self, object_address: str) -> str:
        return self.states.get(object_address, IDLE)

    def set_state(self, object_address: str, state: str) -> None:
        if state == IDLE:
            self.states.pop(object_address, None)
        else:
            self.states[object_address] = state

    def objects(self, arena_address: str) -> list[str]:
        return objects_of(self.tree, arena_address)

    def describe_object(self, object_address: str) -> str:
        """``the piano is idle`` / ``the coffee machine is being used to brew coffee``."""
        name = split(object_address)[-1]
        return f"the {name} is {self.state(object_address)}"

    def get_state(self) -> dict[str, Any]:
        return {"states": dict(self.states)}

    def set_state_all(self, state: dict[str, Any]) -> None:
        self.states = dict(state.get("states", {}))
