"""Pydantic models at the API boundary: request bodies and responses.

The OpenAPI schema (`/openapi.json`) and the CLI's JSON output come from these.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from posttrain_arena.service.models import USER_NAME_MAX
from posttrain_arena.service.reasons import RunReason, public_text


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class UserOut(_Out):
    id: int = Field(description="User id")
    name: str = Field(description="Unique user name")
    role: str = Field(description="participant, editor or admin")
    approved: bool = Field(
        default=True, description="May launch runs (external sign-ins wait for an admin)")
    team: str | None = Field(default=None, description="Team, for team budget quotas")


class UserUpdate(BaseModel):
    approved: bool | None = Field(default=None, description="Allow (or stop) launching runs")
    team: str | None = Field(default=None, max_length=100,
                             description="Team name ('' removes it)")
    role: str | None = Field(default=None, description="participant, editor or admin")


class TokenOut(_Out):
    prefix: str = Field(description="The token's public prefix (arena_PREFIX_...)")
    created_at: datetime = Field(description="UTC creation time")
    expires_at: datetime | None = Field(description="UTC expiry (null: never)")
    revoked: bool = Field(description="Revoked: refused from then on")


class TokenCreate(BaseModel):
    expires_in_days: float | None = Field(
        default=90, gt=0, le=3650, description="Days until it expires (null: never)")


class TokenCreated(TokenOut):
    token: str = Field(description="The token, shown only this once")


class UserCreate(BaseModel):
    name: str = Field(min_length=1, max_length=USER_NAME_MAX, description="Unique user name")
    role: str = Field(default="participant", description="participant, editor or admin")
    expires_in_days: float | None = Field(
        default=None, gt=0, le=3650, description="Days until its token expires (null: never)")


class UserCreated(BaseModel):
    user: UserOut = Field(description="The new user")
    token: str = Field(description="The user's API token, shown only this once")


class Health(StrEnum):
    OPEN = "open"
    PAUSED = "paused"


class ChallengeCreate(BaseModel):
    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,99}$", description="URL-safe id")
    title: str = Field(min_length=1, max_length=200, description="Display title")
    description: str = Field(default="", description="Markdown description")
    base_model: str = Field(description="Base model id or path")
    base_model_revision: str = Field(description="Pinned revision of the base model")
    recipe: str = Field(description="Recipe name or server path to its TOML")
    recipe_hash: str | None = Field(
        default=None, description="sha256 of the recipe; computed when `recipe` is a file"
    )
    suite_path: str | None = Field(
        default=None, description="Server path to the sealed held-out suite (never shown)"
    )
    suite_hash: str | None = Field(default=None, description="Suite hash; computed from the path")
    suite_size: int | None = Field(default=None, ge=1, description="Tasks in the suite")
    suite_domain_counts: dict[str, int] | None = Field(
        default=None, description="Tasks per domain in the suite"
    )
    public_sample: list[str] = Field(
        default_factory=list, description="Task names of the suite that may be shown"
    )
    price_per_hour: float = Field(default=1.0, gt=0, description="Compute units per run-hour")
    timeout_sec: int = Field(default=3600, gt=0, description="Longest a run may take")
    cooldown_sec: int = Field(
        default=0, ge=0, description="Wait after a collection's last counted run"
    )
    pipeline_version: str | None = Field(
        default=None, description="Pinned pipeline version; default: this package's version"
    )


class ChallengeOut(_Out):
    id: int = Field(description="Numeric id")
    slug: str = Field(description="URL-safe id")
    title: str = Field(description="Display title")
    description: str = Field(description="Markdown description")
    base_model: str = Field(description="Base model")
    base_model_revision: str = Field(description="Pinned base model revision")
    recipe: str = Field(description="Recipe")
    recipe_hash: str = Field(description="Recipe hash")
    suite_hash: str = Field(description="Held-out suite hash")
    suite_size: int = Field(description="Tasks in the held-out suite")
    suite_domain_counts: dict[str, int] = Field(description="Held-out tasks per domain")
    public_sample: list[str] = Field(description="Public sample of the suite")
    price_per_hour: float = Field(description="Compute units per run-hour")
    timeout_sec: int = Field(description="Longest a run may take")
    allowance: float = Field(description="Compute reserved per run (price x timeout)")
    cooldown_sec: int = Field(description="Wait after a collection's last counted run")
    pipeline_version: str = Field(description="Pinned pipeline version")
    health: Health = Field(description="open, or paused")
    health_reason: str | None = Field(description="Why the challenge is paused")
    created_at: datetime = Field(description="UTC creation time")


class HealthUpdate(BaseModel):
    health: Health = Field(description="open or paused")
    reason: str | None = Field(default=None, description="Why (required when paused)")


class SourceKind(StrEnum):
    GIT = "git"
    HF = "hf"
    ARCHIVE = "archive"
    PATH = "path"


class GitSource(BaseModel):
    url: str = Field(description="git URL: https:// (file:// and server paths for editors)")
    ref: str = Field(default="HEAD", description="Branch, tag or commit; resolved to a commit")
    name: str | None = Field(default=None, description="Display name; default from the URL")


class HfSource(BaseModel):
    url: str = Field(description="hf://datasets/ORG/NAME@REVISION, or .../NAME@REVISION/FOLDER "
                     "for a collection in a folder of a public, ungated dataset")
    name: str | None = Field(default=None, description="Display name; default the dataset's")


class PathSource(BaseModel):
    path: str = Field(description="Directory on the server")
    name: str | None = Field(default=None, description="Display name; default the folder name")


class CollectionOut(_Out):
    id: int = Field(description="Collection id")
    name: str = Field(description="Display name")
    owner_id: int = Field(description="The collection author's user id")
    source_kind: SourceKind = Field(description="git, hf, archive or path")
    source_url: str | None = Field(description="git URL, hf:// dataset URL or server path")
    source_ref: str | None = Field(description="Requested git ref")
    commit: str | None = Field(description="Pinned git commit")
    content_hash: str = Field(description="Content hash of the registered tree")
    family_id: int | None = Field(
        description="The first collection of the family whose launch limits this one "
        "shares: the family of the collection it near-duplicates when the same owner or "
        "team holds that family, its own id otherwise")
    near_duplicate_of: int | None = Field(
        description="The earlier collection this one's packages mostly copy, if any (with "
        "family_id equal to id: another account's, and it cannot launch until an editor "
        "clears it)")
    similarity: float | None = Field(
        description="Share of this collection's packages with a near-copy in that one "
        "(this and near_duplicate_of: for its owner and editors; null for others)")
    duplicate_cleared_at: datetime | None = Field(
        description="When an editor let this near-duplicate of another account's "
        "collection launch as a family of its own (UTC); null while it waits, or when "
        "nothing needs clearing")
    task_count: int = Field(description="Task packages found")
    eligible_count: int = Field(description="Tasks that passed the structural checks")
    domain_counts: dict[str, int] = Field(description="Eligible tasks per domain")
    error_count: int = Field(description="Blocking findings")
    warning_count: int = Field(description="Warnings")
    created_at: datetime = Field(description="UTC registration time")


class DuplicateState(StrEnum):
    """Where a near-duplicate stands (families.py)."""

    JOINED = "joined"  # shares the family of its own side's earlier collection
    HELD = "held"  # its family starts with a copy of another account's: cannot launch
    CLEARED = "cleared"  # such a family, cleared by an editor: launches with its own limits


class DuplicateOut(BaseModel):
    """A near-duplicate collection's standing, for its owner and for editors."""

    state: DuplicateState = Field(description="joined, held or cleared")
    near_duplicate_of: int = Field(description="The earlier collection it matched")
    similarity: float = Field(
        description="Share of its packages with a near-copy in the matched collection")
    family_id: int = Field(description="The first collection of its family")
    family_matches: int | None = Field(
        description="When the family's first collection is another one: the collection "
        "that one matched")
    reason: str = Field(description="The `near_duplicate` launch check's text")
    clear_command: str | None = Field(
        description="What an editor runs to let a held family launch (null unless held)")


class CollectionDetail(CollectionOut):
    findings: list[dict[str, Any]] = Field(description="Structural findings (rendered)")
    duplicate: DuplicateOut | None = Field(
        default=None, description="Whether it is held as a near-duplicate, and which "
        "collection it matched: shown to its owner and to editors only (null for others, "
        "and when it copies nothing)")


class HeldFamilyOut(BaseModel):
    """A family held as another account's near-duplicate, as organizers list them."""

    id: int = Field(description="The family's first collection (the one to clear)")
    name: str = Field(description="Its name")
    owner: str = Field(description="Its owner's name")
    near_duplicate_of: int = Field(description="The other account's collection it matched")
    matched_name: str = Field(description="That collection's name")
    matched_owner: str = Field(description="That collection's owner's name")
    similarity: float = Field(description="Share of its packages with a near-copy there")
    members: int = Field(description="Collections in the family (all held with it)")
    created_at: datetime = Field(description="UTC registration time of the first")
    clear_command: str = Field(description="What releases it")


class TaskEvidenceOut(_Out):
    """One task's organizer-gate evidence, as the per-task table shows it."""

    task: str = Field(description="Task directory name")
    task_checksum: str = Field(description="Content hash of the package measured")
    run_id: int | None = Field(description="The run whose gate stage measured it")
    harness_version: str = Field(description="posttrain-arena version + gate protocol")
    eligible: bool = Field(description="Passed every gate the challenge's policy requires")
    learnable: str = Field(description="Learnable gate: pass, fail, error or skipped")
    flake_rate: float | None = Field(description="Share of oracle reruns not scoring 1.0")
    probe_failures: int = Field(description="Known-bad probes the verifier accepted")
    base_pass_rate: float | None = Field(description="Base model pass rate over its k samples")
    reasons: list[str] = Field(description="Why it is not eligible, one line per gate")
    created_at: datetime = Field(description="When the record was stored (UTC)")


class TaskEvidenceDetail(TaskEvidenceOut):
    record: dict[str, Any] = Field(description="The whole TaskEvidence record (gates.evidence)")


class CheckStatus(StrEnum):
    OK = "ok"
    FAIL = "FAIL"
    SKIP = "skip"


class PreflightCheck(BaseModel):
    name: str = Field(description="Check id")
    status: CheckStatus = Field(description="ok, FAIL or skip")
    reason: str = Field(description="Why")


class RunRequest(BaseModel):
    challenge: str = Field(description="Challenge slug or id")
    collection_id: int = Field(description="Collection id")
    request_id: str | None = Field(
        default=None, max_length=100,
        description="Client id making launch idempotent: a retry returns the same run",
    )


class Preflight(BaseModel):
    ok: bool = Field(description="Whether every check passed")
    checks: list[PreflightCheck] = Field(description="Each check with its status and reason")
    reservation: float | None = Field(description="Compute a launch would reserve")


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SCORED = "scored"
    FAILED = "failed"
    CANCELED = "canceled"


ACTIVE_STATES = (RunState.QUEUED.value, RunState.RUNNING.value)


class RunOut(_Out):
    id: int = Field(description="Run id")
    challenge_id: int = Field(description="Challenge id")
    collection_id: int = Field(description="Collection id")
    created_by: int = Field(description="Who launched it")
    request_id: str = Field(description="Client request id")
    state: RunState = Field(description="queued, running, scored, failed or canceled")
    stage: str | None = Field(description="Current or last stage")
    stages_done: list[str] = Field(description="Stages finished, in order")
    reason_class: RunReason | None = Field(
        description="Why it failed, was canceled or was requeued, as a class: "
        + ", ".join(r.value for r in RunReason))
    reserved: float = Field(description="Compute reserved at launch")
    cost: float | None = Field(description="Actual compute, once reconciled")
    attempts: int = Field(description="Worker attempts so far")
    heartbeat_at: datetime | None = Field(description="Last worker heartbeat (UTC)")
    score: dict[str, Any] | None = Field(
        description="Aggregate score, shown once the run is scored (its result is stored "
        "in the same step, so no score is seen before it counts)")
    created_at: datetime = Field(description="UTC launch time")
    started_at: datetime | None = Field(description="UTC time a worker first took it")
    finished_at: datetime | None = Field(description="UTC end time")

    @computed_field(description="The reason class's fixed public text (the full message "
                    "is for editors: GET /api/runs/{id}/failure)")
    def reason(self) -> str | None:
        return public_text(self.reason_class)

    @model_validator(mode="after")
    def _score_only_when_scored(self) -> RunOut:
        if self.state is not RunState.SCORED:
            self.score = None
        return self


class RunFailure(BaseModel):
    """A run's reason in full (editors): the class everyone sees and the message behind it."""

    run_id: int = Field(description="Run id")
    reason_class: RunReason | None = Field(description="The published class")
    reason: str | None = Field(description="The class's public text")
    detail: str | None = Field(description="The full message (may name the suite's tasks "
                               "and server paths: never published)")


class RunList(BaseModel):
    items: list[RunOut] = Field(description="Runs, newest first")
    total: int = Field(description="Runs matching the filter")


class Decision(StrEnum):
    ACCEPT = "accept"
    REJECT = "reject"


class ReviewIn(BaseModel):
    decision: Decision = Field(description="accept or reject")
    note: str = Field(default="", max_length=5000, description="The editor's note")


class ResultOut(_Out):
    id: int = Field(description="Result id")
    run_id: int = Field(description="Run id")
    challenge_id: int = Field(description="Challenge id")
    collection_id: int = Field(description="Collection id")
    base_pass_rate: float = Field(description="Held-out pass rate before training")
    final_pass_rate: float = Field(description="Held-out pass rate after training")
    change_pp: float = Field(description="Change in percentage points")
    ci_low: float | None = Field(description="Paired 95% interval, low (pp)")
    ci_high: float | None = Field(description="Paired 95% interval, high (pp)")
    per_domain: dict[str, Any] = Field(description="Per-domain pass rates")
    n_tasks: int = Field(description="Held-out tasks scored")
    suite_size: int = Field(description="Tasks in the suite")
    status: str = Field(default="pending", description="pending, accepted or rejected")
    review_note: str | None = Field(default=None, description="The editor's note")
    created_at: datetime = Field(description="UTC collection time")


class LeaderboardEntry(BaseModel):
    rank: int | None = Field(description="1 = best; None for unranked (rejected) entries")
    collection_id: int = Field(description="Collection id")
    collection_name: str = Field(description="Collection name")
    mean_change_pp: float = Field(description="Mean change over accepted runs (pp)")
    n: int = Field(description="Accepted runs")
    ci_low: float | None = Field(description="95% interval of the mean, low")
    ci_high: float | None = Field(description="95% interval of the mean, high")
    tier: int | None = Field(default=None, description="1 = top; entries whose intervals "
                             "overlap the tier's first entry share its tier (not "
                             "distinguishable from it)")


class RejectedEntry(BaseModel):
    result_id: int = Field(description="Result id")
    run_id: int = Field(description="Run id")
    collection_id: int = Field(description="Collection id")
    collection_name: str = Field(description="Collection name")
    change_pp: float = Field(description="Change (pp)")
    note: str = Field(description="The editor's note")


class Leaderboard(BaseModel):
    challenge: str = Field(description="Challenge slug")
    ranked: list[LeaderboardEntry] = Field(
        description="Ranked by mean change, best first: the page asked for (limit, offset)")
    ranked_total: int = Field(description="Ranked collections in all, over every page")
    rejected: list[RejectedEntry] = Field(
        description="Rejected results, newest first (at most 200): visible, unranked")
    pending: int = Field(description="Results waiting for review")


class QuotaOut(BaseModel):
    kind: str = Field(description="user or team")
    name: str = Field(description="The user's or the team's name")
    cap: float = Field(description="Most its runs may hold and spend, in all")
    used: float = Field(description="Reserved by its active runs plus spent by its others")
    left: float = Field(description="cap - used")


class UsageOut(BaseModel):
    """The signed-in caller's own use of the budget, whether or not a quota caps it."""

    user: str = Field(description="Your user name")
    used: float = Field(description="Reserved by your active runs plus spent by your others")
    team: str | None = Field(description="Your team (quotas may cap it), if any")
    team_used: float | None = Field(description="Your team's members' use together")


class QuotaUpdate(BaseModel):
    kind: str = Field(description="user or team")
    name: str = Field(min_length=1, max_length=USER_NAME_MAX, description="User or team name")
    cap: float | None = Field(ge=0, description="The cap; null removes the quota")


class BudgetOut(_Out):
    cap: float = Field(description="Global compute cap")
    reserved: float = Field(description="Held by queued and running runs")
    spent: float = Field(description="Used by finished runs")
    left: float = Field(description="cap - reserved - spent")
    quotas: list[QuotaOut] = Field(
        default_factory=list,
        description="Per-user and per-team caps on top of the global one, with their use, "
        "as far as the caller may see them: every one for editors and admins, the caller's "
        "own and their team's for a participant, none for anonymous readers")
    you: UsageOut | None = Field(
        default=None, description="The signed-in caller's use (null when anonymous)")


class BudgetUpdate(BaseModel):
    cap: float = Field(ge=0, description="New global cap")


class ThreadCreate(BaseModel):
    title: str = Field(min_length=1, max_length=200, description="Thread title")
    body: str = Field(min_length=1, max_length=10_000, description="First message")


class MessageCreate(BaseModel):
    body: str = Field(min_length=1, max_length=10_000, description="Message text")


class MessageOut(_Out):
    id: int = Field(description="Message id")
    thread_id: int = Field(description="Thread id")
    author_id: int = Field(description="Author's user id")
    author: str = Field(default="", description="Author's name")
    body: str = Field(description="Text")
    created_at: datetime = Field(description="UTC time")


class ThreadOut(_Out):
    id: int = Field(description="Thread id")
    title: str = Field(description="Title")
    author_id: int = Field(description="Author's user id")
    created_at: datetime = Field(description="UTC time")
    last_post_at: datetime = Field(description="UTC time of the newest message")


class ThreadDetail(ThreadOut):
    messages: list[MessageOut] = Field(description="Messages, oldest first")
