"""`arena sandbox doctor`: which backends work on this machine, and how to fix the others."""

from __future__ import annotations

import shutil

from pydantic import BaseModel, Field

from posttrain_arena.sandbox.base import PrerequisiteError


class BackendStatus(BaseModel):
    """One backend's health on this machine."""

    name: str = Field(description="Backend name, as given to --backend")
    works: bool = Field(description="Whether sessions can be started with it here")
    detail: str = Field(description="What was found, or how to fix it")


class BaseImageStatus(BaseModel):
    """Whether one base image of `arena images bootstrap` is present in the engine."""

    name: str = Field(description="Image name as task Dockerfiles write it in FROM")
    present: bool = Field(description="Whether the Docker engine has it")
    image_id: str = Field(default="", description="Image id when present")


class DoctorReport(BaseModel):
    """The result of `arena sandbox doctor`."""

    backends: list[BackendStatus] = Field(description="Each backend's status")
    auto: str | None = Field(description="The backend `--backend auto` picks, if any works")
    base_images: list[BaseImageStatus] = Field(
        default_factory=list, description="Base images (docker only)"
    )
    hints: list[str] = Field(default_factory=list, description="What to do next")

    @property
    def ok(self) -> bool:
        """At least one backend works."""
        return any(b.works for b in self.backends)


def _docker_status() -> tuple[BackendStatus, list[BaseImageStatus]]:
    from posttrain_arena.sandbox.docker import DockerBackend
    from posttrain_arena.sandbox.images import BASE_IMAGES

    backend = DockerBackend()
    try:
        works, detail = backend.available()
    except PrerequisiteError as exc:
        works, detail = False, str(exc)
    if not works and shutil.which("dockerd") is None and "docker.io" not in detail:
        detail += "; fix: apt-get install docker.io, then start dockerd"
    images: list[BaseImageStatus] = []
    if works:
        import docker.errors

        for image in BASE_IMAGES:
            try:
                found = backend.client.images.get(image.name)
                images.append(BaseImageStatus(name=image.name, present=True, image_id=found.id))
            except docker.errors.ImageNotFound:
                images.append(BaseImageStatus(name=image.name, present=False))
    return BackendStatus(name="docker", works=works, detail=detail), images


def _local_status() -> BackendStatus:
    from posttrain_arena.sandbox.local_backend import LocalBackend

    works, detail = LocalBackend().available()
    return BackendStatus(name="local", works=works, detail=detail)


def diagnose() -> DoctorReport:
    """Probe every backend (starting nothing that outlives the call)."""
    docker_status, images = _docker_status()
    local_status = _local_status()
    hints: list[str] = []
    if docker_status.works and not all(i.present for i in images):
        missing = ", ".join(i.name for i in images if not i.present)
        hints.append(f"base images missing ({missing}): run `arena images bootstrap`")
    if docker_status.works and shutil.which("debootstrap") is None:
        hints.append("`arena images bootstrap` needs debootstrap: apt-get install debootstrap")
    for status in (docker_status, local_status):
        if status.works and "UNBOUNDED" in status.detail:
            hints.append(f"{status.name}: a session's disk is bounded per file only, not in "
                         "total (agent code can fill this host's disk); run as root with "
                         "loop devices and mkfs.ext4 (apt-get install e2fsprogs)")
    auto = "docker" if docker_status.works else ("local" if local_status.works else None)
    if auto is None:
        hints.append("no backend works: install docker.io (and start dockerd) or bubblewrap")
    return DoctorReport(
        backends=[docker_status, local_status], auto=auto, base_images=images, hints=hints
    )
