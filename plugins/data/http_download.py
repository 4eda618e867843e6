"""Downloading one file: resumable (HTTP Range), checked (size, SHA-256), patient with flaky servers.

The bytes go to ``PART`` (``<data home>/.partial/<dataset>/<sha256>.part``) and what the server
said about the file (ETag or Last-Modified) to ``PART.json``. A download cut off halfway (a
reset, a timeout, a body shorter than promised, Ctrl-C) leaves ``PART``; the next attempt, in
this fetch or a later one, asks for the rest with ``Range: bytes=N-`` and ``If-Range``, so a
file that changed on the server meanwhile is sent whole again (200) instead of being spliced.
A 206 whose ``Content-Range`` does not start where ``PART`` ends, or a 200 to a range request,
starts over. 429 and 5xx are retried after ``Retry-After`` (capped) or a backoff. An HTML page
where a data file was expected (a login or error page served with 200) is refused. When the
size is reached the SHA-256 decides: a mismatch deletes ``PART`` and fails; nothing else is
ever deleted by a failure, so a rerun resumes.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from .checksums import CHUNK, DataError, sha256_of

#: attempts that made no progress before giving up (cuts that brought bytes do not count)
ATTEMPTS = 5
#: longest wait between attempts, whatever Retry-After says
MAX_WAIT_S = 30.0
TIMEOUT_S = 60.0
RETRY_STATUSES = {408, 425, 429, 500, 502, 503, 504}
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)", re.IGNORECASE)


class _Restart(Exception):
    """The server's answer does not continue PART: throw PART away and ask again."""


def _user_agent() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"townsquare/{version('townsquare')} (data fetch)"
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "townsquare (data fetch)"


def _unreachable(url: str, reason: object) -> DataError:
    host = urlsplit(url).netloc
    return DataError(f"cannot reach {host} ({reason}): no network? On a machine without internet, download "
                     f"{url} elsewhere and import it with --from PATH")


def _wait_s(error: urllib.error.HTTPError, attempt: int) -> float:
    after = error.headers.get("Retry-After") if error.headers else None
    try:
        return min(MAX_WAIT_S, max(0.0, float(after))) if after is not None else min(MAX_WAIT_S, 2.0 ** attempt)
    except ValueError:  # an HTTP date: honour it roughly
        return min(MAX_WAIT_S, 2.0 ** attempt)


def download(url: str, part: Path, sha256: str, size: int | None, progress: Callable[[int], None] = lambda n: None,
             *, attempts: int = ATTEMPTS, timeout: float = TIMEOUT_S) -> Path:
    """Fetch ``url`` into ``part`` (resuming what is there) and check it; returns ``part``.
    ``progress(n)`` is told of every ``n`` bytes gained (negative when a restart drops some)."""
    part.parent.mkdir(parents=True, exist_ok=True)
    meta_path = part.with_name(part.name + ".json")
    failures = 0
    progress(_size(part))
    while True:
        have = _size(part)
        if size is not None and have > size:
            progress(-have)
            _discard(part, meta_path)
            have = 0
        if size is not None and have == size:
            break
        problem = ""
        try:
            if _attempt(url, part, meta_path, have, size, progress, timeout):
                break
        except _Restart:
            progress(-_size(part))
            _discard(part, meta_path)
            have, problem = -1, "a range the server would not continue"
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # nothing after `have`: PART may be whole already
                break
            if exc.code not in RETRY_STATUSES:
                raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from None
            problem = f"HTTP {exc.code} {exc.reason}"
            time.sleep(_wait_s(exc, failures + 1))
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (socket.gaierror, ConnectionRefusedError)) or getattr(reason, "errno", None) in (101, 113):
                raise _unreachable(url, reason) from None
            if failures:  # a second connection failure in a row (a timeout, a reset before any answer)
                raise _unreachable(url, reason) from None
            problem = str(reason)
        except (OSError, http.client.HTTPException) as exc:  # a reset, a timeout, a body cut short
            problem = f"{type(exc).__name__} {exc}".strip()
        if _size(part) <= have:  # cuts that brought bytes are not failures
            failures += 1
        if failures >= attempts:
            raise DataError(f"{url}: {problem or 'the body keeps breaking off'} ({failures} attempts without progress, "
                            f"{_size(part):,} bytes kept); run the same command again to resume")
    return _checked(url, part, meta_path, sha256, size)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _attempt(url: str, part: Path, meta_path: Path, have: int, size: int | None, progress: Callable[[int], None],
             timeout: float) -> bool:
    """One request; True when the body arrived whole (as far as the server said)."""
    headers = {"User-Agent": _user_agent(), "Accept-Encoding": "identity"}
    validator = _validator(meta_path) if have else None
    if have:
        headers["Range"] = f"bytes={have}-"
        if validator:
            headers["If-Range"] = validator
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as response:
        kind = (response.headers.get("Content-Type") or "").lower()
        if kind.startswith("text/html") and not url.lower().endswith((".html", ".htm")):
            raise DataError(f"{url}: the server sent an HTML page, not the file (a login, error or captive-portal page?)")
        if response.status == 206:
            match = _CONTENT_RANGE.match(response.headers.get("Content-Range") or "")
            if not match or int(match.group(1)) != have:
                raise _Restart()
            mode = "ab"
        else:  # 200: the whole file (the server ignored Range, or the file changed)
            if have:
                progress(-have)
            mode, have = "wb", 0
        _save_validator(meta_path, response.headers)
        expected = response.headers.get("Content-Length")
        received = 0
        with open(part, mode) as handle:
            while chunk := response.read(CHUNK):
                handle.write(chunk)
                received += len(chunk)
                progress(len(chunk))
        if expected is not None and expected.isdigit() and received < int(expected):
            return False
        return size is None or have + received >= size


def _validator(meta_path: Path) -> str | None:
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta.get("etag") or meta.get("last_modified")


def _save_validator(meta_path: Path, headers) -> None:
    etag = headers.get("ETag")
    meta = {"etag": etag if etag and not etag.startswith("W/") else None, "last_modified": headers.get("Last-Modified")}
    meta_path.write_text(json.dumps(meta), encoding="utf-8")


def _discard(part: Path, meta_path: Path) -> None:
    part.unlink(missing_ok=True)
    meta_path.unlink(missing_ok=True)


def _checked(url: str, part: Path, meta_path: Path, sha256: str, size: int | None) -> Path:
    have_size = part.stat().st_size if part.exists() else 0
    digest = sha256_of(part) if part.exists() else ""
    if digest != sha256 or (size is not None and have_size != size):
        _discard(part, meta_path)
        raise DataError(f"checksum mismatch: {url} gave {have_size:,} bytes with SHA-256 {digest or '-'}, the recorded "
                        f"release is {f'{size:,}' if size is not None else '?'} bytes with {sha256}; the download was deleted, nothing was installed")
    meta_path.unlink(missing_ok=True)
    return part
