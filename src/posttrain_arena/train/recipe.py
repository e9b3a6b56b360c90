"""Recipe: everything a post-training run needs, read from one TOML file.

`load_recipe(path)` validates the file on construction (pydantic, with help text on
every field, so `arena train validate` and the JSON Schema say the same thing).
Relative paths in the file are resolved against the file's directory. `recipe_hash()`
is the content address of what the recipe *does*: the output location is not part of it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from posttrain_arena.evaluate.coverage import Completeness
from posttrain_arena.gates.evidence import GateName
from posttrain_arena.gates.policy import GatePolicy

_SHA_RE = re.compile(r"^[0-9a-f]{7,64}$")
_CONTENT_HASH_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


class RecipeError(Exception):
    """The recipe file cannot be used; the message says where and what to do."""


def is_remote(location: str) -> bool:
    """True for git URLs (https://, ssh://, git@host:...), False for local paths."""
    return bool(re.match(r"^(https?|ssh|git|file)://", location)) or location.startswith("git@")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LoraSpec(_Section):
    """A LoRA adapter's shape."""

    r: int = Field(default=16, ge=1, le=1024, description="LoRA rank")
    alpha: int = Field(default=32, ge=1, description="LoRA alpha (scale = alpha / r)")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Dropout on the LoRA path")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        description="Module names that get adapters, e.g. q_proj, v_proj, or 'all-linear'",
    )
    modules_to_save: list[str] = Field(
        default_factory=list,
        description="Modules trained in full beside the adapter (e.g. embed_tokens, lm_head)",
    )


class ModelSection(_Section):
    """The base model that is post-trained."""

    id: str = Field(min_length=1, description="Hugging Face hub id or a local directory path")
    revision: str | None = Field(
        default=None,
        description=(
            "Immutable commit sha of the hub model. Required to launch a scored run from a "
            "hub id; a local directory is pinned by its content hash at snapshot"
        ),
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="Weights dtype for training and local inference"
    )
    trust_remote_code: bool = Field(default=False, description="Allow model code from the hub")

    @model_validator(mode="after")
    def _revision_form(self) -> ModelSection:
        if self.revision is not None and not _SHA_RE.match(self.revision):
            raise ValueError(
                f"revision must be a commit sha (hex), not a branch or tag (got {self.revision!r})"
            )
        return self


class TrainSection(_Section):
    """The training collection."""

    collection: str = Field(
        min_length=1, description="Collection directory, or git URL (then `commit` is required)"
    )
    commit: str | None = Field(default=None, description="Git commit the collection is pinned to")
    max_tasks: int | None = Field(
        default=None, ge=1, description="Use at most this many training tasks (sorted by name)"
    )
    leakage_threshold: float = Field(
        default=0.8, gt=0, le=1.0,
        description="Exclude training tasks whose prompt+verifier shingle Jaccard similarity "
        "to a held-out task is at least this",
    )

    @model_validator(mode="after")
    def _pinned(self) -> TrainSection:
        if is_remote(self.collection) and not self.commit:
            raise ValueError("a git collection needs `commit` (the sha it is pinned to)")
        return self


class EvalSection(_Section):
    """The sealed held-out suite."""

    suite: str = Field(min_length=1, description="Suite directory, or git URL (with `commit`)")
    commit: str | None = Field(default=None, description="Git commit the suite is pinned to")
    sha256: str | None = Field(
        default=None,
        description=(
            "Sealed content hash of the suite ('sha256:HEX'); the run refuses a suite whose "
            "hash differs. Required for scored runs"
        ),
    )
    completeness: Completeness = Field(
        default_factory=Completeness,
        description="How much of each evaluation (baseline, after SFT, final) must be scored "
        "for the run to compute a score, overall and per task; short of it the run is "
        "'incomplete' and states the counts instead of a number")

    @model_validator(mode="after")
    def _sealed(self) -> EvalSection:
        if self.sha256 is not None and not _CONTENT_HASH_RE.match(self.sha256):
            raise ValueError(f"sha256 must look like 'sha256:<64 hex>' (got {self.sha256!r})")
        if is_remote(self.suite) and not self.commit:
            raise ValueError("a git suite needs `commit` (the sha it is pinned to)")
        return self


class TeacherSection(_Section):
    """Where SFT trajectories come from."""

    kind: Literal["oracle", "endpoint"] = Field(
        default="oracle",
        description="oracle: each task's verified oracle run as a trajectory; endpoint: a model",
    )
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint (kind = endpoint)"
    )
    model: str | None = Field(default=None, description="Teacher model name at the endpoint")
    api_key_env: str = Field(
        default="OPENAI_API_KEY", description="Environment variable that holds the API key"
    )
    attempts: int = Field(default=1, ge=1, le=64, description="Teacher attempts per task")
    accept_threshold: float = Field(
        default=1.0, ge=0.0, le=1.0, description="Keep a trajectory only at reward >= this"
    )
    temperature: float = Field(default=0.7, ge=0.0, le=2.0, description="Teacher sampling")
    max_per_task: int = Field(
        default=1, ge=1, description="Keep at most this many accepted trajectories per task"
    )

    @model_validator(mode="after")
    def _endpoint(self) -> TeacherSection:
        if self.kind == "endpoint" and not (self.base_url and self.model):
            raise ValueError("teacher kind 'endpoint' needs `base_url` and `model`")
        return self


class SftSection(_Section):
    """Supervised fine-tuning on teacher trajectories (TRL SFTTrainer + PEFT LoRA)."""

    enabled: bool = Field(default=True, description="Run SFT at all")
    method: Literal["lora", "full"] = Field(
        default="lora", description="lora: train an adapter (merged afterwards); full: all weights"
    )
    lora: LoraSpec = Field(default_factory=LoraSpec, description="Adapter shape")
    learning_rate: float = Field(default=2e-4, gt=0, description="Peak learning rate")
    epochs: float = Field(default=1.0, gt=0, description="Passes over the trajectories")
    max_steps: int | None = Field(default=None, ge=1, description="Overrides epochs when set")
    per_device_batch_size: int = Field(default=1, ge=1, description="Sequences per device step")
    gradient_accumulation_steps: int = Field(default=8, ge=1, description="Steps per update")
    max_length: int = Field(default=8192, ge=16, description="Truncate trajectories (tokens)")
    warmup_ratio: float = Field(default=0.03, ge=0, lt=1, description="Warm-up share of steps")
    save_steps: int = Field(default=50, ge=1, description="Checkpoint every N steps (resume)")


class GateSection(_Section):
    """Quick check after SFT: did it make things worse on training tasks?"""

    enabled: bool = Field(default=True, description="Run the gate")
    tasks: int = Field(default=16, ge=1, description="Training tasks sampled for the check")
    samples: int = Field(default=1, ge=1, description="Attempts per sampled task")
    max_drop_pp: float = Field(
        default=0.0, ge=0, description="Tolerated drop of the SFT model vs base, in points"
    )
    on_fail: Literal["skip_grpo", "fail", "continue"] = Field(
        default="skip_grpo", description="What a failed gate does"
    )


class TaskGatesSection(_Section):
    """The organizer gates on the training collection (see posttrain_arena.gates): when
    enabled, only tasks eligible under `policy` are trained on; score.json lists the
    others and why."""

    enabled: bool = Field(default=False, description="Gate the training tasks before the "
                          "teacher; off trains on every task the leakage gate kept")
    reruns: int = Field(default=2, ge=1, le=32, description="Oracle reruns per task (flake "
                        "rate)")
    k: int = Field(default=4, ge=1, le=64, description="Base model samples per task (pass@k; "
                   "at least 2 when the learnable gate is required)")
    policy: GatePolicy = Field(
        default_factory=lambda: GatePolicy(
            gates=[g for g in GateName if g is not GateName.LEARNABLE]),
        description="[task_gates.policy]: required gates and thresholds; by default every "
        "gate but learnable (a small base model solving nothing is what SFT is for)")

    @model_validator(mode="after")
    def _k_for_learnable(self) -> TaskGatesSection:
        if self.enabled and self.k < 2 and GateName.LEARNABLE in self.policy.gates:
            raise ValueError("k must be at least 2 when the learnable gate is required")
        return self


class GrpoSection(_Section):
    """GRPO against the tasks' verifiers (TRL GRPOTrainer + LoRA, our agent's rollouts)."""

    enabled: bool = Field(default=True, description="Run GRPO at all")
    method: Literal["lora", "full"] = Field(
        default="lora", description="lora: train an adapter (merged afterwards); full: all weights"
    )
    lora: LoraSpec = Field(default_factory=LoraSpec, description="Adapter shape")
    learning_rate: float = Field(default=1e-5, gt=0, description="Learning rate")
    num_generations: int = Field(default=8, ge=2, description="Rollouts per task (group size)")
    max_completion_length: int = Field(
        default=4096, ge=8, description="Token cap of one episode's completion (all turns)"
    )
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo"] = Field(
        default="dapo", description="TRL loss aggregation"
    )
    beta: float = Field(default=0.0, ge=0, description="KL coefficient (0: no reference model)")
    steps: int | None = Field(default=None, ge=1, description="Optimizer steps (overrides epochs)")
    epochs: float = Field(default=1.0, gt=0, description="Passes over the training tasks")
    tasks_per_step: int = Field(default=4, ge=1, description="Task groups per optimizer step")
    resample_flat_groups: int = Field(
        default=0, ge=0,
        description="Flat groups (every reward equal: no signal) replaced per step by a group "
        "on another training task (DAPO's dynamic sampling); costs up to this many groups' "
        "rollouts more per step. 0: flat groups are only dropped",
    )
    per_device_batch_size: int = Field(
        default=0, ge=0, description="Episodes per forward pass; 0 means one whole group"
    )
    temperature: float = Field(default=1.0, gt=0, le=2.0, description="Rollout sampling")
    save_steps: int = Field(default=10, ge=1, description="Checkpoint every N steps (resume)")
    policy_endpoint: str | None = Field(
        default=None,
        description="vLLM server (TRL `vllm serve`) that generates rollouts; unset: in-process",
    )
    gate: GateSection = Field(default_factory=GateSection, description="Check before GRPO")

    @model_validator(mode="after")
    def _batches(self) -> GrpoSection:
        problem = self.batch_problem()
        if problem:
            raise ValueError(problem)
        return self

    @property
    def episodes_per_pass(self) -> int:
        """Episodes in one forward pass: `per_device_batch_size`, else one whole group."""
        return self.per_device_batch_size or self.num_generations

    @property
    def episodes_per_step(self) -> int:
        """Episodes one optimizer step is generated from (one generation per step)."""
        return self.tasks_per_step * self.num_generations

    def batch_problem(self) -> str | None:
        """Why the batch sizes do not fit together, or None."""
        if self.episodes_per_step % self.episodes_per_pass:
            return (f"tasks_per_step * num_generations ({self.episodes_per_step}) must be a "
                    f"multiple of per_device_batch_size ({self.episodes_per_pass})")
        return None

    def total_steps(self, n_tasks: int) -> int:
        """Optimizer steps on `n_tasks` training tasks: `steps`, else `epochs` over the
        tasks at `tasks_per_step`."""
        if self.steps is not None:
            return self.steps
        return max(1, math.ceil(n_tasks * self.epochs / self.tasks_per_step))


class AgentSection(_Section):
    """The model agent's loop during evaluation and rollouts."""

    max_turns: int = Field(default=8, ge=1, description="Assistant turns per episode")
    max_new_tokens: int = Field(default=512, ge=1, description="Tokens per assistant turn")
    temperature: float = Field(default=0.7, ge=0, le=2.0, description="Evaluation sampling")
    timeout_sec: float | None = Field(
        default=None, gt=0, description="Override task.md's agent timeout (seconds)"
    )


class RuntimeSection(_Section):
    """Where and how wide things run."""

    sandbox: Literal["auto", "local", "docker"] = Field(
        default="auto", description="Sandbox backend; auto picks docker when an engine answers"
    )
    concurrency: int = Field(default=4, ge=1, le=4096, description="Trials in flight at once")
    allow_internet: bool = Field(
        default=False,
        description="Let tasks that ask for it (allow_internet: true) have network in their "
                    "agent phase; without it they are refused")
    k: int = Field(default=1, ge=1, le=64, description="Samples per held-out task per eval")
    seed: int = Field(default=0, description="Seed of every random choice in the run")
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", description="Torch device")
    torch_threads: int = Field(
        default=0, ge=0,
        description="CPU threads torch may use; 0 = 1 on CPU (small models on shared cores "
        "run far faster single-threaded), torch's default on GPU hosts",
    )
    train_threads: int = Field(
        default=0, ge=0,
        description="CPU threads torch may use for SFT, which runs no trial beside it; "
        "0 = every core this process may use (CPU only)",
    )
    policy_endpoint: str | None = Field(
        default=None,
        description="OpenAI-compatible server (vLLM) that serves the policy for evaluation. "
        "Each evaluation checks that it serves that stage's weights (their fingerprinted "
        "name, models/vllm_server.served_name) and refuses to run otherwise",
    )
    serve_policy: bool = Field(
        default=False,
        description="Start vLLM on each evaluation's weights on this machine (vLLM's "
        "environment from scripts/vllm-env.sh) and stop it after: the pipeline serves "
        "every stage's model itself. Not with policy_endpoint",
    )

    @model_validator(mode="after")
    def _one_server(self) -> RuntimeSection:
        if self.serve_policy and self.policy_endpoint:
            raise ValueError("give policy_endpoint (a server you run) or serve_policy (the "
                             "pipeline runs one per evaluation), not both")
        return self


class OutputSection(_Section):
    """Where runs are written."""

    dir: str = Field(default="runs", description="Runs directory; each run gets a subfolder")


class Recipe(BaseModel):
    """A post-training recipe (see recipes/README.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="recipe", description="Short name, used for run folders")
    description: str = Field(default="", description="What this recipe is for")
    model: ModelSection = Field(description="[model]: the base model")
    train: TrainSection = Field(description="[train]: the training collection")
    eval: EvalSection = Field(description="[eval]: the sealed held-out suite")
    teacher: TeacherSection = Field(default_factory=TeacherSection, description="[teacher]")
    sft: SftSection = Field(default_factory=SftSection, description="[sft]")
    grpo: GrpoSection = Field(default_factory=GrpoSection, description="[grpo]")
    task_gates: TaskGatesSection = Field(default_factory=TaskGatesSection,
                                         description="[task_gates]")
    agent: AgentSection = Field(default_factory=AgentSection, description="[agent]")
    runtime: RuntimeSection = Field(default_factory=RuntimeSection, description="[runtime]")
    output: OutputSection = Field(default_factory=OutputSection, description="[output]")
    base_dir: str = Field(
        default=".", description="Directory relative paths resolve against (the file's folder)"
    )

    def resolve(self, location: str) -> str:
        """A local location made absolute against the recipe's folder; URLs unchanged."""
        if is_remote(location):
            return location
        path = Path(location).expanduser()
        return str(path if path.is_absolute() else (Path(self.base_dir) / path).resolve())

    def model_location(self) -> str:
        """The model as an absolute local path when it is one (an existing folder, or an
        id written as a path), else the hub id."""
        local = Path(self.resolve(self.model.id))
        if local.exists() or self.model.id.startswith((".", "/", "~")):
            return str(local)
        return self.model.id

    def model_is_local(self) -> bool:
        return Path(self.model_location()).exists()

    def warnings(self) -> list[str]:
        """What stops a *scored* run, though the recipe is valid for planning."""
        out: list[str] = []
        if not self.model_is_local() and not self.model.revision:
            out.append("[model] revision is unset: pin the hub model to a commit sha")
        if not self.eval.sha256:
            out.append("[eval] sha256 is unset: seal the held-out suite with its content hash")
        return out

    def section_hash(self, *names: str) -> str:
        """Content hash of some sections (what a stage depends on)."""
        data = self.model_dump(mode="json", include=set(names))
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()

    def recipe_hash(self) -> str:
        """Hash of everything that changes results (not the output folder or the name)."""
        sections = ["model", "train", "eval", "teacher", "sft", "grpo", "agent", "runtime"]
        if self.task_gates.enabled:  # disabled gates change nothing (and old hashes hold)
            sections.append("task_gates")
        return self.section_hash(*sections)


def parse_recipe(data: dict[str, object], *, base_dir: Path, where: str = "recipe") -> Recipe:
    """Validate a recipe mapping; RecipeError lists `where: field: problem` lines."""
    payload = dict(data)
    payload["base_dir"] = str(base_dir.resolve())
    try:
        return Recipe.model_validate(payload)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            dotted = ".".join(str(p) for p in err["loc"]) or "(top level)"
            msg = "is required" if err["type"] == "missing" else err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "is not a recipe field (check the spelling; see recipes/README.md)"
            lines.append(f"{where}: {dotted}: {msg}")
        raise RecipeError("\n".join(lines)) from None


def load_recipe(path: Path | str) -> Recipe:
    """Read and validate a recipe TOML file."""
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"{path}: no such recipe file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise RecipeError(f"{path}: not UTF-8 text") from None
    return parse_recipe(data, base_dir=path.parent, where=str(path))


def recipe_json_schema() -> dict[str, object]:
    """The JSON Schema of recipe files, generated from the model."""
    return Recipe.model_json_schema()
