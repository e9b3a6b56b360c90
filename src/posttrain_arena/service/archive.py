"""Safe unpacking of uploaded collection archives (tar, tar.gz, zip).

Nothing in an archive is trusted: absolute paths, `..` components, links, devices and
oversized or overlong contents are refused with a message naming the member, before any
byte lands outside the destination folder. Directories count against the file limit
like files (a directory costs an inode as a file does), whether the archive lists them
or only implies them by a member's path. Members are written one by one (never
`extractall`), and the sizes actually read are counted, so a lying header cannot smuggle
in more than the bound.
"""

from __future__ import annotations

import shutil
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import IO

from posttrain_arena.service.errors import BadRequest, TooLarge

_CHUNK = 1 << 16


class _Budget:
    def __init__(self, max_bytes: int, max_files: int):
        self.max_bytes, self.max_files = max_bytes, max_files
        self.bytes = 0
        self.files = 0
        self.dirs: set[PurePosixPath] = set()

    def add_file(self, name: str) -> None:
        self.files += 1
        if self.files > self.max_files:
            raise TooLarge(f"the archive holds more than {self.max_files} files and "
                           f"folders (at {name!r}); split the collection or remove generated "
                           "files")

    def make_dirs(self, dest: Path, rel: PurePosixPath) -> None:
        """Create `rel` and its parents under `dest`, counting each new one as a file."""
        for n in range(1, len(rel.parts) + 1):
            sub = PurePosixPath(*rel.parts[:n])
            if sub not in self.dirs:
                self.add_file(str(sub) + "/")
                self.dirs.add(sub)
        dest.joinpath(*rel.parts).mkdir(parents=True, exist_ok=True)

    def add_bytes(self, n: int, name: str) -> None:
        self.bytes += n
        if self.bytes > self.max_bytes:
            raise TooLarge(f"the archive unpacks to more than {self.max_bytes} bytes "
                           f"(at {name!r}); remove large files")


def safe_member_path(name: str) -> PurePosixPath | None:
    """The relative path for an archive member name; BadRequest if it could escape."""
    clean = name.replace("\\", "/")
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":"):
        raise BadRequest(f"archive member {name!r} has an absolute path; use relative paths")
    parts = [p for p in PurePosixPath(clean).parts if p not in ("", ".")]
    if ".." in parts:
        raise BadRequest(f"archive member {name!r} points outside the archive ('..')")
    return PurePosixPath(*parts) if parts else None


def _write(dest: Path, rel: PurePosixPath, src: IO[bytes], budget: _Budget) -> None:
    target = dest.joinpath(*rel.parts)
    budget.make_dirs(dest, rel.parent)
    with target.open("wb") as out:
        while chunk := src.read(_CHUNK):
            budget.add_bytes(len(chunk), str(rel))
            out.write(chunk)


def _extract_tar(path: Path, dest: Path, budget: _Budget) -> None:
    with tarfile.open(path, mode="r:*") as tar:
        for member in tar:
            rel = safe_member_path(member.name)
            if member.issym() or member.islnk():
                raise BadRequest(f"archive member {member.name!r} is a link; links are not "
                                 "allowed in collections (copy the file instead)")
            if rel is None:
                continue
            if member.isdir():
                budget.make_dirs(dest, rel)
                continue
            if not member.isfile():
                raise BadRequest(f"archive member {member.name!r} is not a regular file "
                                 "or folder (device, fifo...)")
            budget.add_file(member.name)
            src = tar.extractfile(member)
            assert src is not None
            _write(dest, rel, src, budget)


def _extract_zip(path: Path, dest: Path, budget: _Budget) -> None:
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            rel = safe_member_path(info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise BadRequest(f"archive member {info.filename!r} is a link; links are not "
                                 "allowed in collections (copy the file instead)")
            if rel is None:
                continue
            if info.is_dir():
                budget.make_dirs(dest, rel)
                continue
            budget.add_file(info.filename)
            with zf.open(info) as src:
                _write(dest, rel, src, budget)


def extract_archive(path: Path, dest: Path, max_bytes: int, max_files: int) -> Path:
    """Unpack a tar(.gz) or zip archive into `dest`; returns the collection root inside.

    The root is `dest` itself, or its single top-level folder when the archive wraps
    everything in one (as `tar czf x.tgz mycollection/` does).
    """
    dest.mkdir(parents=True, exist_ok=True)
    budget = _Budget(max_bytes, max_files)
    with path.open("rb") as fh:
        head = fh.read(4)
    try:
        if head.startswith(b"PK"):
            _extract_zip(path, dest, budget)
        else:
            _extract_tar(path, dest, budget)
    except (BadRequest, TooLarge):
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError,
            UnicodeError, ValueError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise BadRequest(f"the archive is malformed or not a tar.gz/zip file ({exc}); "
                         "create it with `tar czf collection.tar.gz DIR`") from None
    entries = [p for p in dest.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir() and not (dest / "submission.yaml").exists():
        return entries[0]
    return dest
