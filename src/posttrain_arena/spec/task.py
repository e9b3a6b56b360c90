"""task.md frontmatter: the pydantic model of a task's metadata and limits.

Field descriptions here become the JSON Schema that authors see (`arena task schema`).
Unknown keys are kept (`extra="allow"`) and reported as warnings by the checks, so
packages written for a newer format still load.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from posttrain_arena.spec.domains import Domain


class Difficulty(StrEnum):
    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"


class Isolation(StrEnum):
    """Where the verifier runs; see the trial contract."""

    FRESH = "fresh"
    SHARED = "shared"


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Origin(_Section):
    """Where the task comes from."""

    kind: Literal["original", "adapted-from"] = Field(
        default="original", description="'original', or 'adapted-from' another source"
    )
    source: str | None = Field(
        default=None, description="URL or citation of the source, for adapted tasks"
    )

    @model_validator(mode="after")
    def _source_for_adapted(self) -> Origin:
        if self.kind == "adapted-from" and not self.source:
            raise ValueError("origin 'adapted-from' needs a source (URL or citation)")
        return self


class Metadata(_Section):
    """Who wrote the task and what it is about."""

    author_name: str = Field(min_length=1, description="Author's name")
    author_email: str = Field(
        min_length=3, pattern=r"^[^@\s]+@[^@\s]+$", description="Author's contact email"
    )
    category: Domain = Field(description="One of the eight domains, by slug")
    difficulty: Difficulty = Field(description="easy, medium or hard")
    tags: list[str] = Field(default_factory=list, description="Free-form keywords")
    license: str | None = Field(default=None, description="SPDX license of the package")
    origin: Origin = Field(default_factory=Origin, description="original or adapted-from")
    subcategory: str | None = Field(default=None, description="Finer topic within the domain")
    category_confidence: float | None = Field(
        default=None, ge=0, le=1, description="Confidence of an automatic categorisation"
    )
    task_type: list[str] = Field(default_factory=list, description="e.g. debugging, analysis")
    modality: list[str] = Field(default_factory=list, description="e.g. text, tabular, image")
    interface: list[str] = Field(default_factory=list, description="e.g. terminal, files")
    skill_type: list[str] = Field(default_factory=list, description="Skills exercised")

    @field_validator("origin", mode="before")
    @classmethod
    def _origin_shorthand(cls, value: Any) -> Any:
        # `origin: original` and `origin: {adapted-from: URL}` are accepted shorthands.
        if isinstance(value, str):
            if value == "original":
                return {"kind": "original"}
            if value.startswith("adapted-from"):
                source = value.partition(":")[2].strip() or None
                return {"kind": "adapted-from", "source": source}
            raise ValueError("origin must be 'original' or 'adapted-from: SOURCE'")
        if isinstance(value, dict) and "adapted-from" in value and "kind" not in value:
            return {"kind": "adapted-from", "source": value["adapted-from"]}
        return value

    @field_validator("tags", "task_type", "modality", "interface", "skill_type", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class AgentSection(_Section):
    """Limits of the agent phase."""

    timeout_sec: float = Field(gt=0, le=86_400, description="Wall-clock limit of the agent phase")


class VerifierSection(_Section):
    """How the final state is scored."""

    timeout_sec: float = Field(gt=0, le=86_400, description="Wall-clock limit of the verifier")
    isolation: Isolation = Field(
        default=Isolation.FRESH,
        description=(
            "fresh: verify in a new container from the pristine image, with only state "
            "paths copied over; shared: verify in the agent's container, hardened"
        ),
    )
    state_paths: list[str] = Field(
        default_factory=list,
        description=(
            "Absolute paths, besides the workdir, whose final state the verifier reads "
            "(copied into the fresh verifier container)"
        ),
    )

    @field_validator("state_paths")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        forbidden = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev")
        for p in value:
            if not p.startswith("/") or ".." in p.split("/"):
                raise ValueError(f"state path {p!r} must be absolute, without '..'")
            if p == "/" or any(p == f or p.startswith(f + "/") for f in forbidden):
                raise ValueError(f"state path {p!r} is a system path; verifiers never read it")
        return value


class EnvironmentSection(_Section):
    """The task's container: build and resource limits."""

    build_timeout_sec: float = Field(
        default=600, gt=0, le=86_400, description="Limit on building the image"
    )
    cpus: float = Field(default=1, gt=0, le=256, description="CPU cores available to the task")
    memory_mb: int = Field(default=2048, gt=0, le=1_048_576, description="Memory limit, MiB")
    storage_mb: int = Field(default=10_240, gt=0, description="Disk limit for the task, MiB")
    allow_internet: bool = Field(default=False, description="Give the task network access")
    pids_limit: int = Field(default=512, gt=0, description="Maximum number of processes")
    workdir: str = Field(
        default="/root",
        pattern=r"^/",
        description="Absolute path of the agent's workspace (BENCHFLOW_WORKSPACE)",
    )


class TaskFrontmatter(_Section):
    """The YAML frontmatter of task.md."""

    version: str = Field(description="Format version, e.g. \"1.0\"")
    metadata: Metadata
    agent: AgentSection
    verifier: VerifierSection
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        # `version: 1.0` parses as a float in YAML; accept it as the string it means.
        return str(value) if isinstance(value, int | float) else value


def unknown_keys(model: BaseModel, prefix: str = "") -> list[str]:
    """Dotted names of keys the model kept but does not know (for warnings)."""
    found: list[str] = []
    for key in (model.model_extra or {}):
        found.append(f"{prefix}{key}")
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            found.extend(unknown_keys(value, f"{prefix}{name}."))
    return found
