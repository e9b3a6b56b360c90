"""AgentSpec: an agent described as data, so it can travel to another machine.

A Ray executor cannot ship a live agent (a loaded model, an open client) to a node; it
ships this small frozen description and the node builds the agent for each task there.
The in-process executor builds from the same spec, so both run exactly the same agent.

    spec = AgentSpec(kind="model", model="hf:/models/tiny", name="policy:base")
    agent = spec.build(task)     # a ModelAgent with the task's own limits

The agent's *name* is part of the trial identity (task checksum + agent + seed), so
`agent_name()` is computed from the spec alone: a driver knows every trial id, and so
what its journal already holds, before anything is sent anywhere.

Model clients are loaded once per process and reused by every agent built from specs
that name the same model (`hf:` weights are read once per node worker, not per trial).
Secrets never travel in a spec: an `openai:` model reads its key from the environment
variable `api_key_env` on the node that runs it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from posttrain_arena.agents.base import Agent
from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.model import AgentSettings, ModelAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.script import ScriptAgent
from posttrain_arena.agents.teacher import OracleTeacherAgent
from posttrain_arena.models.base import ChatModel
from posttrain_arena.models.spec import load_model
from posttrain_arena.task_format.package import TaskPackage

AgentKind = Literal["oracle", "empty", "script", "oracle-teacher", "model"]


class AgentSpec(BaseModel):
    """How to build the agent of a trial, on whichever machine runs it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: AgentKind = Field(description="oracle, empty, script (a shell script as the "
                            "agent), oracle-teacher (solve.sh recorded as a bash call) "
                            "or model (the model agent)")
    name: str | None = Field(default=None, description="Agent name in trial ids; default: "
                             "the built agent's own name")
    script: str | None = Field(default=None, description="kind=script: path of the script "
                               "(it must exist at this path where the trial runs)")
    model: str | None = Field(default=None, description="kind=model: openai:MODEL, hf:PATH "
                              "or scripted:FILE (paths must exist where the trial runs)")
    base_url: str | None = Field(default=None, description="openai: endpoint override")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="openai: environment "
                             "variable holding the key on the node")
    device: str | None = Field(default=None, description="hf: cpu, cuda, cuda:1")
    settings: AgentSettings = Field(default_factory=AgentSettings,
                                    description="Model agent / teacher limits and sampling")
    per_task_limits: bool = Field(default=True, description="Tighten settings by each "
                                  "task.md's agent section")

    @model_validator(mode="after")
    def _fields_for_kind(self) -> AgentSpec:
        if self.kind == "model" and not self.model:
            raise ValueError("an agent spec of kind 'model' needs `model` "
                             "(openai:MODEL, hf:PATH or scripted:FILE)")
        if self.kind == "script" and not self.script:
            raise ValueError("an agent spec of kind 'script' needs `script` (a path)")
        return self

    def agent_name(self) -> str:
        """The name the built agent carries (and trial ids use)."""
        if self.name:
            return self.name
        if self.kind == "script":
            return ScriptAgent(Path(self.script or "")).name
        if self.kind == "model":
            return f"model:{self.model}"
        return {"oracle": OracleAgent.name, "empty": EmptyAgent.name,
                "oracle-teacher": OracleTeacherAgent.name}[self.kind]

    def build(self, task: TaskPackage) -> Agent:
        """The agent for one task (built where the trial runs)."""
        agent: Agent
        if self.kind == "oracle":
            agent = OracleAgent()
        elif self.kind == "empty":
            agent = EmptyAgent()
        elif self.kind == "script":
            agent = ScriptAgent(Path(self.script or ""))
        elif self.kind == "oracle-teacher":
            solve = task.oracle_dir / "solve.sh"
            text = solve.read_text(errors="replace") if solve.is_file() else None
            agent = OracleTeacherAgent(text, self.settings)
        else:
            settings = (self.settings.for_task(task.frontmatter.agent)
                        if self.per_task_limits else self.settings)
            agent = ModelAgent(self.chat_model(), settings, name=self.agent_name())
        if self.name and agent.name != self.name:
            agent.name = self.name
        return agent

    def chat_model(self) -> ChatModel:
        """The chat client this spec names (one per process, shared by its agents)."""
        key = (self.model, self.base_url, self.api_key_env, self.device)
        with _models_lock:
            model = _models.get(key)
            if model is None:
                model = load_model(self.model or "", base_url=self.base_url,
                                   api_key=os.environ.get(self.api_key_env),
                                   device=self.device)
                _models[key] = model
            return model


_models: dict[tuple[str | None, str | None, str, str | None], ChatModel] = {}
_models_lock = threading.Lock()
