"""Base images for hosts that cannot pull from a registry (`arena images bootstrap`).

Task Dockerfiles start `FROM debian:bookworm-slim` or `FROM posttrain-arena/python:bookworm`
(Debian's python3 and python3-pytest, plus a pytest plugin giving `--ctrf FILE`). Where
those cannot be pulled, they are built here: `debootstrap --variant=minbase bookworm` from
the apt mirror the host already uses, packed as a tarball (cached under
/var/cache/posttrain-arena, so a second bootstrap only re-imports), then `docker import`.
Tags that already exist are skipped unless `force`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from posttrain_arena.sandbox.base import PrerequisiteError, SandboxError
from posttrain_arena.sandbox.engine import LABEL, docker_client
from posttrain_arena.task_format.dockerfile import LOCAL_BASE_IMAGES

DEFAULT_MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
BASE_LABELS = {LABEL: "1", f"{LABEL}.base": "1"}


@dataclass(frozen=True)
class BaseImage:
    """One image `arena images bootstrap` provides."""

    name: str  # repository:tag, as task Dockerfiles write it in FROM
    rootfs: str  # name of the cached rootfs tarball (without .tar)
    packages: tuple[str, ...] = ()
    ctrf_plugin: bool = False


BASE_IMAGES: tuple[BaseImage, ...] = (
    BaseImage(name=LOCAL_BASE_IMAGES[0], rootfs="bookworm-minbase"),
    BaseImage(
        name=LOCAL_BASE_IMAGES[1],
        rootfs="bookworm-python",
        packages=("python3", "python3-pytest"),
        ctrf_plugin=True,
    ),
)

_IMPORT_CHANGES = [
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["bash"]',
]


@dataclass(frozen=True)
class BootstrapResult:
    """What happened to one base image."""

    name: str
    action: str  # "skipped" (tag existed), "imported" (cached tarball), "built" (debootstrap)
    image_id: str
    seconds: float


def cache_dir() -> Path:
    """Where rootfs tarballs are kept ($ARENA_IMAGE_CACHE, default /var/cache/posttrain-arena)."""
    return Path(os.environ.get("ARENA_IMAGE_CACHE", "/var/cache/posttrain-arena"))


def host_mirror() -> str:
    """The Debian mirror the host's apt already uses (so it works through its proxy)."""
    candidates: list[str] = []
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        text = path.read_text(errors="replace")
        for stanza in re.split(r"\n\s*\n", text):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and SUITE in suites.group(1).split():
                candidates.append(uris.group(1))
    lists = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*.list")]
    for path in lists:
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                m = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line.strip())
                if m and m.group(2) == SUITE:
                    candidates.append(m.group(1))
    for uri in candidates:
        if "security" not in uri and "debian" in uri:
            return uri.rstrip("/")
    return DEFAULT_MIRROR


def _docker_client():  # type: ignore[no-untyped-def]
    return docker_client()


def bootstrap_base_images(
    force: bool = False,
    *,
    on_progress: Callable[[str], None] | None = None,
    images: tuple[BaseImage, ...] = BASE_IMAGES,
) -> list[BootstrapResult]:
    """Build and `docker import` every base image whose tag is missing (all of them if
    `force`, which also rebuilds the cached rootfs tarballs)."""
    say = on_progress or (lambda _msg: None)
    client = _docker_client()
    results: list[BootstrapResult] = []
    for image in images:
        t0 = time.monotonic()
        if not force:
            existing = _existing_id(client, image.name)
            if existing:
                say(f"{image.name}: present ({existing[:19]}), skipped")
                results.append(BootstrapResult(image.name, "skipped", existing, 0.0))
                continue
        tarball = cache_dir() / f"{image.rootfs}.tar"
        action = "imported"
        if force or not tarball.is_file():
            _check_build_prerequisites()
            say(f"{image.name}: debootstrap {SUITE} ({', '.join(image.packages) or 'minbase'})")
            build_rootfs_tarball(image, tarball)
            action = "built"
        say(f"{image.name}: docker import {tarball}")
        repo, _, tag = image.name.rpartition(":")
        client.api.import_image_from_file(
            str(tarball), repository=repo, tag=tag, changes=_IMPORT_CHANGES
        )
        image_id = _existing_id(client, image.name)
        if not image_id:
            raise SandboxError(f"docker import of {image.name} reported success but no image")
        results.append(BootstrapResult(image.name, action, image_id, time.monotonic() - t0))
        say(f"{image.name}: {action} in {time.monotonic() - t0:.1f} s")
    return results


def _existing_id(client, name: str) -> str:  # type: ignore[no-untyped-def]
    import docker.errors

    try:
        return str(client.images.get(name).id)
    except docker.errors.ImageNotFound:
        return ""


def _check_build_prerequisites() -> None:
    if shutil.which("debootstrap") is None:
        raise PrerequisiteError(
            "debootstrap is not installed; fix: apt-get install debootstrap "
            "(or load the images from another machine with `docker load`)"
        )
    if os.geteuid() != 0:
        raise PrerequisiteError("building base images runs debootstrap, which needs root")


def build_rootfs_tarball(image: BaseImage, tarball: Path) -> None:
    """debootstrap a minimal bookworm root with `image.packages` into `tarball`."""
    tarball.parent.mkdir(parents=True, exist_ok=True)
    debs = tarball.parent / "debs"
    debs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{image.rootfs}.", dir=tarball.parent) as tmp:
        root = Path(tmp) / "rootfs"
        cmd = ["debootstrap", "--variant=minbase", f"--cache-dir={debs}"]
        if image.packages:
            cmd.append("--include=" + ",".join(image.packages))
        cmd += [SUITE, str(root), host_mirror()]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            log = (proc.stdout + proc.stderr)[-3000:]
            raise SandboxError(f"debootstrap failed for {image.name}:\n{log}")
        _slim(root)
        if image.ctrf_plugin:
            install_ctrf_plugin(root)
        partial = tarball.with_suffix(".tar.partial")
        subprocess.run(
            ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(partial), "."],
            check=True,
        )
        partial.replace(tarball)


def _slim(root: Path) -> None:
    """Drop what a -slim image does not carry: downloaded .debs, apt lists, docs."""
    for rel in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
        target = root / rel
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    if child.name != "partial":
                        shutil.rmtree(child)
                else:
                    child.unlink()


def install_ctrf_plugin(root: Path) -> None:
    """Install ctrf_plugin.py as `pytest_arena_ctrf` with a pytest11 entry point, so
    `pytest --ctrf FILE` works in the image without anything downloaded."""
    site = root / "usr/lib/python3/dist-packages"
    site.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).with_name("ctrf_plugin.py"), site / "pytest_arena_ctrf.py")
    info = site / "pytest_arena_ctrf-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pytest-arena-ctrf\nVersion: 0.1\n"
        "Summary: --ctrf FILE: CTRF JSON reports (PostTrain Arena)\n"
    )
    (info / "entry_points.txt").write_text("[pytest11]\nctrf = pytest_arena_ctrf\n")
    (info / "top_level.txt").write_text("pytest_arena_ctrf\n")
    (info / "RECORD").write_text("")
