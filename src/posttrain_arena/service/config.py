"""Service settings: one `BaseSettings` object, read from `ARENA_*` environment variables.

The data directory holds everything the service owns on disk: the SQLite database (when
no database URL is given), registered collections and run directories.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """How the Arena service runs. Every field can be set as `ARENA_<FIELD>`."""

    model_config = SettingsConfigDict(env_prefix="ARENA_", extra="ignore")

    data_dir: Path = Field(
        default=Path("arena-data"),
        description="Directory for the SQLite database, collections and run directories",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db; "
        "default: SQLite (WAL mode) at DATA_DIR/arena.db",
    )
    budget_cap: float = Field(
        default=1000.0, ge=0, description="Global compute cap (units), set on first start"
    )
    heartbeat_interval_sec: float = Field(
        default=10.0, gt=0, description="How often a worker reports that a run is alive"
    )
    heartbeat_timeout_sec: float = Field(
        default=120.0, gt=0, description="A running run without a heartbeat this long is stuck"
    )
    max_attempts: int = Field(
        default=3, ge=1, description="Worker attempts per run before a stuck run is failed"
    )
    watchdog_interval_sec: float = Field(
        default=30.0, ge=0,
        description="How often the server itself runs the stuck-run watchdog (0: only workers)",
    )
    poll_interval_sec: float = Field(
        default=2.0, gt=0, description="How often an idle worker looks for queued runs"
    )
    ray_address: str | None = Field(
        default=None,
        description="Ray cluster a worker fans each run's trials out over (host:port or "
        "ray://...); unset: trials run in the worker's own process (docs/cluster.md)",
    )
    runs_per_family: int = Field(
        default=0, ge=0,
        description="Most runs (queued, running or scored: those that can show a score) of "
        "one collection family on one challenge; a family is a collection and its "
        "near-duplicates (0: no limit)",
    )
    external_allowlist: list[str] = Field(
        default_factory=list,
        description="External sign-in names (e.g. 'hf:alice', or 'hf:team-*' patterns) "
        "whose accounts may launch runs at once; other external accounts wait for an "
        "admin's `arena admin set-user NAME --approve`",
    )
    external_auth_rate: float = Field(
        default=5.0, gt=0,
        description="New external tokens checked with the identity provider per second, "
        "at most (a burst of 4x that); more answer 429 instead of waiting",
    )
    external_auth_timeout_sec: float = Field(
        default=5.0, gt=0, description="Limit on one identity-provider check")
    session_ttl_sec: float = Field(
        default=7 * 24 * 3600.0, gt=0,
        description="How long a web sign-in lasts (signing out ends it at once)")
    session_secret: str | None = Field(
        default=None,
        description="Key that signs web session cookies; default: a random key kept in "
        "DATA_DIR/session.key (every server process on the data directory shares it)")
    upload_max_bytes: int = Field(
        default=50 * 1024 * 1024, gt=0, description="Largest accepted collection archive"
    )
    unpacked_max_bytes: int = Field(
        default=200 * 1024 * 1024, gt=0, description="Largest unpacked collection"
    )
    max_files: int = Field(default=20_000, gt=0, description="Most files in one collection")
    git_timeout_sec: float = Field(
        default=120.0, gt=0, description="Limit on one git fetch, all its commands together")
    git_https_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts (HOST or HOST:PORT) participants may fetch collections from "
        "over https; empty: any host whose addresses are all public. Listed hosts may be "
        "private (an in-house git server)",
    )
    git_http_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts (HOST or HOST:PORT) participants may fetch from over plain "
        "http:// (e.g. a git server on loopback); none by default",
    )
    hf_endpoint: str = Field(
        default="https://huggingface.co",
        description="Hugging Face hub for hf://datasets/ORG/NAME@REVISION sources: its API "
        "resolves the revision, its git server serves the files",
    )
    path_roots: list[Path] = Field(
        default_factory=list,
        description="Server folders participants may register collections from "
        "(editors and admins may use any path)",
    )
    board_rate_limit: int = Field(
        default=20, ge=1, description="Board posts (threads + messages) per user per window"
    )
    board_rate_window_sec: float = Field(
        default=60.0, gt=0, description="Length of the board rate-limit window"
    )
    external_auth: str | None = Field(
        default=None,
        description="External token checker: None (off) or 'huggingface' (whoami call)",
    )
    external_auth_cache_sec: float = Field(
        default=60.0, ge=0,
        description="How long an external whoami answer is reused for the same token",
    )
    body_max_bytes: int = Field(
        default=1024 * 1024, gt=0,
        description="Largest request body other than an archive upload (JSON, forms)",
    )
    external_auth_url: str = Field(
        default="https://huggingface.co/api/whoami-v2",
        description="Whoami endpoint used when external_auth is 'huggingface'",
    )

    @property
    def resolved_database_url(self) -> str:
        """The database URL in use: the configured one, or SQLite in the data directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'arena.db').resolve()}"

    @property
    def collections_dir(self) -> Path:
        """Where registered collections are unpacked, one folder per collection id."""
        return self.data_dir / "collections"

    @property
    def runs_dir(self) -> Path:
        """Where each run keeps its stage outputs, one folder per run id."""
        return self.data_dir / "runs"

    def ensure_dirs(self) -> None:
        """Create the data directory tree."""
        for d in (self.data_dir, self.collections_dir, self.runs_dir):
            d.mkdir(parents=True, exist_ok=True)
