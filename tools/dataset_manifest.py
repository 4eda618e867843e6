"""Print the per-file SHA-256 manifest of a folder, as the ``files`` lines of a dataset's entry
in ``plugins/data/catalogue/NAME.toml``.

    python tools/dataset_manifest.py FOLDER [--only GLOB ...] [--upstream PREFIX]

One line per file, sorted: ``{ path = "...", sha256 = "...", size = N }`` (with ``upstream =
"PREFIX/path"`` when the file sits elsewhere in its source repository). This is how the
catalogue's checksums were made from local copies whose bytes equal the published files
(docs/data.md says which copy and how that was checked).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path


def manifest(folder: Path, only: list[str], upstream: str | None) -> list[str]:
    lines = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if only and not any(Path(rel).match(pattern) for pattern in only):
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        extra = f", upstream = {json.dumps(upstream.rstrip('/') + '/' + rel, ensure_ascii=False)}" if upstream else ""
        lines.append(f"  {{ path = {json.dumps(rel, ensure_ascii=False)}, sha256 = \"{digest}\", size = {path.stat().st_size}{extra} }},")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--only", action="append", default=[], metavar="GLOB", help="only files matching GLOB (repeat)")
    parser.add_argument("--upstream", default=None, metavar="PREFIX", help="the files' folder in their source repository")
    args = parser.parse_args()
    print("\n".join(manifest(args.folder, args.only, args.upstream)))


if __name__ == "__main__":
    main()
