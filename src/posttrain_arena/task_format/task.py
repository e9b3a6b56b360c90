"""task.md frontmatter: the pydantic model of a task's metadata and limits.

Field descriptions here become the JSON Schema that authors see (`arena task schema`).
Unknown keys are kept (`extra="allow"`) and reported as warnings by the checks, so
packages written for a newer format still load.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from posttrain_arena.task_format.domains import Domain

DIFFICULTIES = ("easy", "medium", "hard")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_RESERVED = frozenset({"PATH", "HOME", "BASH_ENV", "ENV", "SHELL", "IFS", "CDPATH"})
_ENV_RESERVED_PREFIXES = ("LD_", "PYTHON", "BENCHFLOW_", "ARENA_", "PYTEST_")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")


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



def _words(value: Any) -> Any:
    """A list of words from the forms published packages use: one string, a
    comma-separated string, a list of scalars; anything else becomes its text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [w.strip() for w in value.split(",") if w.strip()]
    if isinstance(value, list | tuple):
        return [w if isinstance(w, str) else _text(w) for w in value]
    return [_text(value)]


def _text(value: Any) -> Any:
    """Text from any scalar (numbers and booleans as YAML wrote them), else its JSON."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


Words = Annotated[list[str], BeforeValidator(_words)]
"""A descriptive list field: never an error, whatever form it was written in."""
Text = Annotated[str | None, BeforeValidator(_text)]
"""A descriptive text field: never an error, whatever form it was written in."""


class Metadata(_Section):
    """Who wrote the task and what it is about.

    Only `category` is acted on (it places the task in a domain for suites, gates and
    per-domain rates), so only it is strict. Every other field is descriptive: it is
    accepted in any form published packages write it (a word where a number was
    expected, a string where a list was), and `descriptive_notes` says, as warnings,
    what looks off.
    """

    author_name: Text = Field(default=None, description="Author's name")
    author_email: Text = Field(default=None, description="Author's contact email")
    category: Domain = Field(description="One of the eight domains, by slug")
    difficulty: Text = Field(default=None, description="easy, medium or hard")
    tags: Words = Field(default_factory=list, description="Free-form keywords")
    license: Text = Field(default=None, description="SPDX license of the package")
    origin: Origin = Field(default_factory=Origin, description="original or adapted-from")
    subcategory: Text = Field(default=None, description="Finer topic within the domain")
    category_confidence: float | Text = Field(
        default=None,
        description="Confidence of an automatic categorisation: a number in [0, 1] or a "
        "word such as 'high'",
    )
    legacy_category: Text = Field(default=None, description="Category in the source benchmark")
    secondary_category: Text = Field(default=None, description="A second domain or topic")
    task_type: Words = Field(default_factory=list, description="e.g. debugging, analysis")
    modality: Words = Field(default_factory=list, description="e.g. text, tabular, image")
    interface: Words = Field(default_factory=list, description="e.g. terminal, files")
    skill_type: Words = Field(default_factory=list, description="Skills exercised")

    @field_validator("origin", mode="before")
    @classmethod
    def _origin_shorthand(cls, value: Any) -> Any:
        # `origin: original`, `origin: adapted-from: URL` and `origin: {adapted-from: URL}`
        # are the documented shorthands; any other text names the source it came from.
        if value is None:
            return {"kind": "original"}
        if isinstance(value, str):
            if value.strip() == "original":
                return {"kind": "original"}
            if value.startswith("adapted-from"):
                source = value.partition(":")[2].strip() or None
                return {"kind": "adapted-from", "source": source}
            return {"kind": "adapted-from", "source": value.strip() or None}
        if isinstance(value, dict):
            if "adapted-from" in value and "kind" not in value:
                return {"kind": "adapted-from", "source": _text(value["adapted-from"])}
            if value.get("kind", "original") in ("original", "adapted-from"):
                return {**value, "source": _text(value.get("source"))}
        return {"kind": "adapted-from", "source": _text(value)}

    @field_validator("category", mode="before")
    @classmethod
    def _category_slug(cls, value: Any) -> Any:
        # "Software Engineering" and "software_engineering" name the same domain.
        if isinstance(value, str):
            return re.sub(r"[\s_]+", "-", value.strip().lower())
        return value

    @field_validator("category_confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return _text(value)

    def descriptive_notes(self) -> list[tuple[str, str]]:
        """(field, message) for descriptive values that look off: warnings, never errors."""
        notes: list[tuple[str, str]] = []
        if not self.author_name:
            notes.append(("metadata.author_name", "no author name; say who wrote the task"))
        if not self.author_email:
            notes.append(("metadata.author_email", "no contact email for the task's author"))
        elif not _EMAIL.match(self.author_email):
            notes.append(("metadata.author_email",
                          f"{self.author_email!r} does not look like an email address"))
        if self.difficulty is not None and self.difficulty.lower() not in DIFFICULTIES:
            notes.append(("metadata.difficulty", f"{self.difficulty!r} is not one of "
                          f"{', '.join(DIFFICULTIES)}; kept as written"))
        if self.origin.kind == "adapted-from" and not self.origin.source:
            notes.append(("metadata.origin", "adapted-from without a source; name the URL "
                          "or citation it was adapted from"))
        conf = self.category_confidence
        if isinstance(conf, float) and not 0.0 <= conf <= 1.0:
            notes.append(("metadata.category_confidence",
                          f"{conf:g} is outside [0, 1]; kept as written"))
        return notes


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

    env: dict[str, str] = Field(
        default_factory=dict,
        description="Variables the verifier's commands get (Harbor's [verifier] env): "
        "constants only; host variables (${NAME}) and names the harness sets or that steer "
        "program lookup (PATH, HOME, LD_*, PYTHON*, BASH_ENV, ENV, BENCHFLOW_*, ARENA_*) "
        "are refused",
    )

    mount: str = Field(
        default="/verifier",
        description=(
            "Where verifier/ appears in the verifier's session (fresh isolation only): "
            "/verifier, or e.g. /tests for a test.sh that names that path, as Harbor's do"
        ),
    )

    @field_validator("mount")
    @classmethod
    def _mount_path(cls, value: str) -> str:
        if value == "/verifier":
            return value
        _absolute_not_system([value], "verifier mount")
        if value == "/logs" or value.startswith("/logs/") or value in ("/tmp", "/root"):
            raise ValueError(f"verifier mount {value!r} is a path the harness or the agent "
                             "uses; pick another, such as /tests")
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _env_constants(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = {}
        for name, raw in value.items():
            text = _text(raw) if not isinstance(raw, dict | list) else None
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name in _ENV_RESERVED or name.startswith(_ENV_RESERVED_PREFIXES):
                raise ValueError(f"{name} is set by the harness or steers what the verifier "
                                 "runs; it cannot be given to the verifier")
            if text is None:
                raise ValueError(f"{name}: the value must be text or a number")
            if "${" in text:
                raise ValueError(f"{name}={text!r} asks for a variable of the host, and "
                                 "nothing of the host is passed to verifiers (a secret "
                                 "would leak into the record); give a constant or drop it")
            out[name] = text
        return out

    @field_validator("state_paths")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        _absolute_not_system(value, "state path")
        return value


def _absolute_not_system(paths: list[str], what: str) -> None:
    forbidden = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev")
    for p in paths:
        if not p.startswith("/") or ".." in p.split("/"):
            raise ValueError(f"{what} {p!r} must be absolute, without '..'")
        if p == "/" or any(p == f or p.startswith(f + "/") for f in forbidden):
            raise ValueError(f"{what} {p!r} is a system path")


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
    docker_image: str | None = Field(
        default=None,
        description="A prebuilt image the task runs in when it has no environment/Dockerfile "
        "(Harbor's `docker_image`); beside a Dockerfile it is ignored and the Dockerfile built",
    )
    gpus: int = Field(
        default=0, json_schema_extra={"minimum": 0, "maximum": 0},
        description="GPUs for the task; only 0 is accepted (trials here get no GPU)",
    )

    @field_validator("gpus")
    @classmethod
    def _no_gpus(cls, value: int) -> int:
        if value != 0:
            raise ValueError(f"the task asks for {value} GPU(s) and trials here run without "
                             "GPUs; set gpus: 0 if it runs on CPU, else it cannot be "
                             "verified here")
        return value


SUPPORTED_VERSION = (1, 3)
"""The newest task.md schema this arena reads (BenchFlow's 1.3)."""


def version_tuple(text: str) -> tuple[int, ...] | None:
    """(1, 3) from "1.3"; None when it is not dotted numbers."""
    parts = text.strip().split(".")
    if not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


class TaskFrontmatter(_Section):
    """The YAML frontmatter of task.md.

    BenchFlow's schema 1.3 spellings are accepted as the same model:
    `schema_version` for `version` and `sandbox:` for `environment:` (see
    `normalize_spellings`, which runs before validation and locates conflicts).
    """

    version: str = Field(
        description='Format version ("schema_version" in schema 1.3): "1.0" up to "1.3"'
    )
    metadata: Metadata
    agent: AgentSection
    verifier: VerifierSection
    environment: EnvironmentSection = Field(
        default_factory=EnvironmentSection,
        description="The task's container (also spelled `sandbox:`, as schema 1.3 does)",
    )
    steps: list[dict[str, Any]] | None = Field(
        default=None,
        description="Multi-step tasks: [{name, agent: {timeout_sec}, verifier: "
        "{timeout_sec}}], each with steps/NAME/prompt.md, verifier/ and oracle/",
    )
    multi_step_reward_strategy: Literal["mean", "final"] = Field(
        default="mean", description="A multi-step trial's reward: the steps' mean or the last"
    )

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        # `version: 1.0` parses as a float in YAML; accept it as the string it means.
        return str(value) if isinstance(value, int | float) else value

    @model_validator(mode="after")
    def _mount_apart(self) -> TaskFrontmatter:
        mount = self.verifier.mount
        if mount == "/verifier":
            return self
        if self.verifier.isolation is not Isolation.FRESH:
            raise ValueError("verifier.mount other than /verifier needs verifier.isolation: "
                             "fresh (shared isolation copies verifier/ to a random path)")
        for root in [self.environment.workdir, *self.verifier.state_paths]:
            if mount == root or mount.startswith(root.rstrip("/") + "/") \
                    or root.startswith(mount.rstrip("/") + "/"):
                raise ValueError(f"verifier.mount {mount!r} overlaps the state path {root!r} "
                                 "that the agent's files travel in; keep them apart")
        return self

    @field_validator("version")
    @classmethod
    def _version_known(cls, value: str) -> str:
        parsed = version_tuple(value)
        newest = ".".join(map(str, SUPPORTED_VERSION))
        if parsed is None:
            raise ValueError(f'must be a version such as "1.0" or "{newest}"')
        if parsed[:2] > SUPPORTED_VERSION:
            raise ValueError(f"this arena reads task.md schemas up to {newest}; declare "
                             f'"{newest}" if the package uses nothing newer, or upgrade '
                             "posttrain-arena")
        return value


#: Other spellings of a top-level key, as BenchFlow's schema 1.3 writes them.
SPELLINGS = {"schema_version": "version", "sandbox": "environment"}


def normalize_spellings(data: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """`data` with 1.3 spellings renamed to this model's; (key, message) for conflicts.

    Both spellings of one key in one file is an error, whatever their values: which
    one the author meant cannot be known, and silently preferring one would run the
    task with limits its author did not see.
    """
    out = dict(data)
    problems: list[tuple[str, str]] = []
    for other, name in SPELLINGS.items():
        if other not in out:
            continue
        if name in out:
            problems.append((other, f"both `{other}:` and `{name}:` are given; they name "
                             f"the same section. Keep one (schema 1.3 writes `{other}:`)"))
            continue
        out[name] = out.pop(other)
    return out, problems


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
