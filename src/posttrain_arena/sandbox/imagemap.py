"""Base images on a machine that may have no registry: the image map, and the way forward.

Published task Dockerfiles start FROM images that must be pulled (python:3.x-slim,
ubuntu:24.04, their own prebuilt images). Before the docker backend builds, each FROM
image is resolved here:

1. The image map, when one is configured, renames it: a TOML file of
   `"ubuntu:24.04" = "posttrain-arena/python:bookworm"` lines, named by
   `$ARENA_IMAGE_MAP` (or `arena task run --image-map FILE`, which sets it), else
   `~/.config/posttrain-arena/image-map.toml` when that exists. An air-gapped site keeps
   one file that sends every public name to an image it has loaded or built.
2. An image the engine has is used as it is. One it lacks is pulled (an engine with a
   registry, or a mirror configured in its daemon.json, serves it); when the pull fails,
   the build stops before it starts with `MissingBaseImage`, which names the image, the
   Dockerfile line and every way forward. Without a registry the engine refuses the pull
   at once (no such host), so the user hears within a second, not after a build.

A task with only a prebuilt image (Harbor's `docker_image`, no Dockerfile) is built
from a one-line context, `FROM <image>` (`build_context`), so it goes through the same
resolution: used where the engine has it, pulled where it can be, else the message.

The local backend needs none of this: there the host's own system is the base.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from posttrain_arena.paths import cache_home
from posttrain_arena.sandbox.base import BuildError
from posttrain_arena.task_format.dockerfile import LOCAL_BASE_IMAGES, base_images, parse_dockerfile

IMAGE_MAP_ENV = "ARENA_IMAGE_MAP"
DEFAULT_IMAGE_MAP = Path("~/.config/posttrain-arena/image-map.toml")
_FROM = re.compile(r"^(?P<head>\s*FROM\s+(?:--\S+\s+)*)(?P<image>\S+)(?P<tail>.*)$",
                   re.IGNORECASE)


class MissingBaseImage(BuildError):
    """A FROM image is neither on this machine nor pullable; the message says what to do."""


def image_map_path() -> Path | None:
    """The image map in force: $ARENA_IMAGE_MAP, else the default file if it exists."""
    named = os.environ.get(IMAGE_MAP_ENV)
    if named:
        return Path(named).expanduser()
    default = DEFAULT_IMAGE_MAP.expanduser()
    return default if default.is_file() else None


def load_image_map(path: Path | None = None) -> dict[str, str]:
    """The image map's `from = to` names (empty when none is configured). A map that is
    named but unreadable is an error: silently building from the public name instead
    would send an air-gapped build to a registry it cannot reach."""
    path = path or image_map_path()
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(f"{path}: the image map ({IMAGE_MAP_ENV}) cannot be read: {exc}. "
                         'Write one `"public/name:tag" = "local/name:tag"` line per '
                         "image") from None
    bad = [k for k, v in data.items() if not isinstance(v, str) or not v.strip()]
    if bad:
        raise BuildError(f"{path}: image map entries must map a name to a name (string); "
                         f"fix {', '.join(bad[:3])}")
    return {k: v.strip() for k, v in data.items()}


def apply_image_map(text: str, mapping: dict[str, str]) -> str:
    """The Dockerfile text with each mapped FROM image renamed (nothing else changed)."""
    if not mapping:
        return text
    out = []
    for line in text.splitlines(keepends=True):
        match = _FROM.match(line.rstrip("\r\n"))
        if match and match.group("image") in mapping:
            end = line[len(line.rstrip("\r\n")):]
            line = (match.group("head") + mapping[match.group("image")]
                    + match.group("tail") + end)
        out.append(line)
    return "".join(out)


def ensure_base_images(text: str, where: str, have: Callable[[str], bool],
                       pull: Callable[[str], str | None]) -> None:
    """Check every FROM image of a (mapped) Dockerfile: present, or pulled now.
    `have(image)`: whether the engine has it; `pull(image)`: None on success, else the
    engine's reason. Raises MissingBaseImage for the first image neither gives."""
    for base in base_images(parse_dockerfile(text)):
        if have(base.image):
            continue
        why = pull(base.image)
        if why is None:
            continue
        raise MissingBaseImage(missing_message(base.image, f"{where}:{base.line}", why))


class EngineImages:
    """The Docker engine's images, as `ensure_base_images` and the build's cache key ask."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def has(self, name: str) -> bool:
        import docker.errors

        try:
            self.client.api.inspect_image(name)
        except docker.errors.ImageNotFound:
            return False
        return True

    def pull(self, name: str) -> str | None:
        """Pull `name`; None when it arrived, else the engine's reason."""
        import docker.errors

        try:
            self.client.api.pull(name)  # docker-py splits name:tag and name@digest
        except docker.errors.APIError as exc:
            return str(exc.explanation or exc)
        return None if self.has(name) else "the pull reported success but no image"

    def base_ids(self, text: str) -> str:
        """Ids of the images the Dockerfile starts FROM, so that a re-bootstrapped or
        re-mapped base gives a new build key instead of stale reuse."""
        import docker.errors

        ids = []
        for base in base_images(parse_dockerfile(text)):
            try:
                ids.append(str(self.client.api.inspect_image(base.image)["Id"]))
            except docker.errors.APIError:
                ids.append(base.image)  # not here (yet): the name stands in
        return "|".join(ids)


def missing_message(image: str, where: str, why: str) -> str:
    """What a user without the image reads: the image, where, why, and every way forward."""
    path = image_map_path()
    map_file = str(path) if path is not None else f"${IMAGE_MAP_ENV} or {DEFAULT_IMAGE_MAP}"
    bootstrap = (f"   - or `arena images bootstrap`: it builds {', '.join(LOCAL_BASE_IMAGES)} "
                 "from the host's Debian mirror, without a registry\n")
    return (
        f"{where}: FROM {image}: the image is not on this machine and the engine could not "
        f"pull it ({why.strip().splitlines()[-1][:300] if why.strip() else 'no reason'}).\n"
        "Ways forward:\n"
        f"   - pull it on a connected machine: `docker pull {image}` and `docker save "
        f"{image} -o image.tar`; here: `docker load -i image.tar`\n"
        "   - or a registry mirror the engine can reach (\"registry-mirrors\" in "
        "/etc/docker/daemon.json)\n"
        f"   - or map it to an image this machine has: a line `\"{image}\" = "
        f"\"{LOCAL_BASE_IMAGES[1]}\"` in the image map ({map_file}; "
        "`arena task run --image-map FILE` names one for a run)\n" + bootstrap
    )


def map_status(have: Callable[[str], bool]) -> tuple[Path | None, list[tuple[str, str, bool]]]:
    """The image map in force and, per entry, (name, mapped to, whether the engine has
    the target): what an air-gapped operator checks before a run."""
    path = image_map_path()
    return path, [(k, v, have(v)) for k, v in sorted(load_image_map(path).items())]


def build_context(environment_dir: Path, prebuilt: str | None) -> Path:
    """The folder to build a task's image from: its environment/, or for a task that
    names only a prebuilt image, a cached folder whose Dockerfile is `FROM <image>`."""
    if prebuilt is None:
        return environment_dir
    text = f"FROM {prebuilt}\n"
    folder = cache_home() / "prebuilt" / hashlib.sha256(text.encode()).hexdigest()[:16]
    dockerfile = folder / "Dockerfile"
    if not dockerfile.is_file() or dockerfile.read_text() != text:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".Dockerfile.{os.getpid()}"
        tmp.write_text(text)
        tmp.replace(dockerfile)
    return folder
