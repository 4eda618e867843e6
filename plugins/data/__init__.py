"""The ``data`` plugin: ``townsquare data list | fetch | path | verify | remove``.

The datasets the paper set-ups need (Smallville's seed bases, RecAgent's profiles, MovieLens,
HotpotQA, PersonaGym, SoMe, Synthetic-Persona-Chat), each pinned to a release with its
SHA-256s in ``catalogue/NAME.toml``, downloaded resumably or imported from a local copy,
verified and installed in one rename into the data home. Scenarios name them as
``data:NAME/sub/path`` (:func:`townsquare.api.data_path`), which :mod:`.scenario_paths`
resolves for the kernel. ``-p no:data`` removes the command, and a scenario that names a
``data:`` path is a one-line error (a plugin's own options still resolve them through
:func:`townsquare.api.data_path`). The pieces: :mod:`.catalogue` (the
entries), :mod:`.http_download` (one resumable download), :mod:`.archives` (safe unpacking),
:mod:`.derive` (files made from published inputs), :mod:`.fetch_release` and
:mod:`.import_copy` (a release from the network or a local copy), :mod:`.installer` (staging,
marker, the rename), :mod:`.data_command` (the CLI). docs/data.md lists every pinned URL and
checksum.
"""

from .data_command import townsquare_register_commands
from .scenario_paths import townsquare_resolve_data_references

__all__ = ["townsquare_register_commands", "townsquare_resolve_data_references"]
