"""``townsquare data``: the datasets the paper set-ups need, fetched from pinned sources and verified.

::

    townsquare data list [--json]                     # every dataset: what, source, licence, size, installed?
    townsquare data fetch NAME... [--accept-terms]    # download the pinned release, verify, install
    townsquare data fetch NAME... --from PATH         # import a local copy (archive or folder), verified the same way
    townsquare data path NAME                         # where it is (for data:NAME/... in scenarios)
    townsquare data verify NAME                       # re-hash the installed files
    townsquare data remove NAME

Datasets are installed in the data home (``$TOWNSQUARE_DATA``, else platformdirs' user data
directory + ``/datasets``); a scenario refers to one as ``data:NAME/sub/path``
(:func:`townsquare.api.data_path`). Where a dataset's terms ask for something (GroupLens's
MovieLens licence), they are printed before the download and must be accepted (a prompt on a
terminal, ``--accept-terms`` otherwise); an import with ``--from`` prints them too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from townsquare.api import UsageError, hookimpl
from townsquare.lib.data_paths import data_home, dataset_folder, installed_dataset


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def _show_terms(entry) -> None:
    if entry.terms:
        click.echo(f"{entry.name}: terms of use ({entry.licence}, {entry.licence_url}):", err=True)
        click.echo(f"  {entry.terms}", err=True)


def _accept_terms(entry, accepted: bool) -> str:
    """The terms the user accepted ('' when the entry has none), asked for on a terminal."""
    if not entry.terms:
        return ""
    _show_terms(entry)
    if accepted:
        return entry.terms
    if sys.stdin.isatty():
        if click.confirm("Do you accept these terms?", default=False, err=True):
            return entry.terms
        raise UsageError(f"{entry.name}: not downloaded: its terms were not accepted")
    raise UsageError(f"{entry.name}: its terms (above) must be accepted before downloading: add --accept-terms")


def fetch(name: str, source: str | None, force: bool, accept_terms: bool) -> dict[str, Any]:
    from .catalogue import dataset
    from .fetch_release import fetch_release
    from .import_copy import check_source, import_copy
    from .installer import commit, staging

    entry = dataset(name)
    marker = installed_dataset(name)
    if marker is not None and not force:
        click.echo(f"{name} is already installed ({marker.get('version')}) in {dataset_folder(name)}; --force fetches it again", err=True)
        return marker
    if source is None:
        release = entry.download_release()
        if release is None:
            by_hand = next((r.download for r in entry.releases if r.download), None)
            if by_hand:
                _show_terms(entry)
                raise UsageError(f"{name}: download it yourself from {by_hand} (licence: {entry.licence}), then import it: "
                                 f"townsquare data fetch {name} --from PATH")
            raise UsageError(f"{name}: no release can be downloaded; import a copy with --from PATH")
        terms = _accept_terms(entry, accept_terms)
        click.echo(f"{name}: {release.version} ({_size(release.download_size())}) into {dataset_folder(name)}", err=True)
        with staging(name) as folder:
            with click.progressbar(length=release.download_size(), label=f"fetching {name}", file=sys.stderr) as bar:
                origin = fetch_release(entry, release, folder, bar.update)
            marker = commit(folder, entry, release, origin, replace=force, terms=terms)
        left_out = 0
    else:
        _show_terms(entry)
        path = Path(source).expanduser().resolve()
        check_source(path)  # before anything is made in the data home
        with staging(name) as folder:
            release, left_out = import_copy(entry, path, folder)
            marker = commit(folder, entry, release, str(path), replace=force)  # the terms were shown, not asked
    count = len(marker["files"])
    others = f" ({left_out} other file{'s' * (left_out != 1)} of the copy left out)" if left_out else ""
    click.echo(f"installed {name} ({marker['version']}): {count} file{'s' * (count != 1)}, {marker['verified']}{others}", err=True)
    click.echo(str(dataset_folder(name)))
    return marker


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.group("data")
    def data() -> None:
        """Datasets for the paper set-ups: list, fetch (pinned, verified), path, verify, remove."""

    @data.command("list")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    def list_command(as_json: bool, **_: Any) -> None:
        """Every known dataset: what it is, source, licence, size, and whether it is installed."""
        from .catalogue import catalogue

        rows = []
        for name, entry in catalogue().items():
            marker = installed_dataset(name)
            release = (entry.download_release() or entry.releases[0])
            rows.append({"name": name, "title": entry.title, "source": entry.source, "licence": entry.licence,
                         "terms": entry.terms or None, "size": release.size, "version": release.version,
                         "installed": marker is not None, "installed_version": marker.get("version") if marker else None,
                         "path": str(dataset_folder(name)) if marker else None})
        if as_json:
            click.echo(json.dumps({"data_home": str(data_home()), "datasets": rows}, indent=1))
            return
        click.echo(f"data home: {data_home()}  (set TOWNSQUARE_DATA to use another folder)")
        for row in rows:
            state = f"installed: {row['installed_version']}" if row["installed"] else "not installed"
            click.echo(f"{row['name']}  [{state}]")
            click.echo(f"    {row['title']}")
            click.echo(f"    source: {row['source']}  licence: {row['licence']}  size: {_size(row['size']) if row['size'] else 'unknown (import only)'}"
                       f"{'  (terms to accept: townsquare data fetch shows them)' if row['terms'] else ''}")

    @data.command("fetch")
    @click.argument("names", nargs=-1, required=True, metavar="NAME...")
    @click.option("--from", "source", metavar="PATH", default=None,
                  help="Import a local copy (the release's archive, a zip or tar of its files, or a folder) instead of downloading.")
    @click.option("--force", is_flag=True, help="Fetch again and replace the installed copy.")
    @click.option("--accept-terms", is_flag=True, help="Accept the dataset's terms of use (printed) without a prompt.")
    def fetch_command(names: tuple[str, ...], source: str | None, force: bool, accept_terms: bool, **_: Any) -> None:
        """Download each dataset NAME from its pinned source (or import --from PATH), verify it, install it."""
        for name in names:
            fetch(name, source, force, accept_terms)

    @data.command("path")
    @click.argument("name")
    def path_command(name: str, **_: Any) -> None:
        """Print where dataset NAME is installed (scenarios write data:NAME/...)."""
        from townsquare.lib.data_paths import data_path

        click.echo(str(data_path(f"data:{name}")))

    @data.command("verify")
    @click.argument("name")
    def verify_command(name: str, **_: Any) -> None:
        """Re-hash the installed files of NAME against what was verified when it was installed."""
        from townsquare.lib.data_paths import data_path

        from .checksums import DataError
        from .installer import file_sums

        folder = data_path(f"data:{name}")
        recorded = (installed_dataset(name) or {}).get("files", {})
        now = file_sums(folder)
        changed = sorted(p for p in recorded if now.get(p) != recorded[p])
        added = sorted(set(now) - set(recorded))
        if changed or added:
            first = changed[0] if changed else added[0]
            raise DataError(f"{name}: {len(changed)} files changed or missing, {len(added)} added since it was installed (first: {first}); "
                            f"`townsquare data fetch {name} --force` installs it again")
        click.echo(f"{name}: {len(now)} files as installed", err=True)

    @data.command("remove")
    @click.argument("name")
    def remove_command(name: str, **_: Any) -> None:
        """Delete installed dataset NAME (and its unfinished downloads)."""
        from .installer import remove

        removed = remove(name)
        if not removed:
            raise UsageError(f"dataset {name!r} is not installed (nothing in {dataset_folder(name)})")
        for line in removed:
            click.echo(f"removed {line}", err=True)
