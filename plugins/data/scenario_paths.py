"""``data:NAME/sub/path`` in scenarios: the ``data`` plugin resolves them for the kernel.

The kernel asks ``townsquare_resolve_data_references`` when it resolves a scenario; this
answer replaces every ``data:`` string by its path in the installed dataset
(:func:`townsquare.lib.data_paths.resolve_data_references`: datasets that are not installed are
one line naming ``townsquare data fetch``) and lists the datasets used, with what their
markers say, for the run's manifest. ``-p no:data`` leaves ``data:`` paths unresolved: a
scenario that names one is a one-line error.
"""

from __future__ import annotations

from typing import Any

from townsquare.api import hookimpl
from townsquare.lib.data_paths import datasets_in, resolve_data_references


@hookimpl
def townsquare_resolve_data_references(data: dict[str, Any], source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return resolve_data_references(data, source), datasets_in(data)
