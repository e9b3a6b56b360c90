"""The OpenEnv server of one task package: openenv-core's FastAPI app over our trials.

openenv-core provides the protocol (HTTP `/reset`, `/step`, `/state`, `/schema`,
`/health` and the `/ws` WebSocket sessions); `ArenaEnvironment` provides the episodes.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from openenv.core.env_server.http_server import create_fastapi_app

from posttrain_arena.serve_env.environment import ArenaEnvironment, BashAction, BashObservation
from posttrain_arena.task_format.package import TaskPackage, load_task
from posttrain_arena.trial.runner import TrialRunner


def task_app(task: TaskPackage, runner: TrialRunner, *, max_sessions: int = 4) -> FastAPI:
    """The app: one ArenaEnvironment (one trial, one sandbox) per session."""
    return create_fastapi_app(lambda: ArenaEnvironment(task, runner), BashAction,
                              BashObservation, max_concurrent_envs=max_sessions)


def serve(path: Path, *, host: str, port: int, backend: str, max_sessions: int) -> None:
    """Load the package and serve it until interrupted (SpecError when it does not load)."""
    import uvicorn

    task = load_task(path)
    with TrialRunner(backend, warm_pool=False) as runner:
        uvicorn.run(task_app(task, runner, max_sessions=max_sessions), host=host, port=port,
                    log_level="warning")
