"""Scale-out: an agents' turns backend on Ray (``[engine] backend = "ray"``).

A built-in plugin (name ``scaleout``): it offers the ``ray`` backend through
``townsquare_engine_backend``. Ray is imported only when a run asks for that backend.

- :mod:`townsquare.scaleout.ray_backend`: the driver's side (starting the shards, handing
  actions to the platform in the one-process order, budget and journal across shards);
- :mod:`townsquare.scaleout.ray_shard`: a shard actor, holding the agents it owns;
- :mod:`townsquare.scaleout.ray_reaper`: the process that ends a local cluster when the driver
  dies without cleaning up.
"""

from __future__ import annotations

from townsquare.api import TurnsBackend, hookimpl


@hookimpl
def townsquare_engine_backend(name: str) -> TurnsBackend | None:
    if name != "ray":
        return None
    from .ray_backend import RayBackend  # imports ray: only for the runs that use it

    return RayBackend
