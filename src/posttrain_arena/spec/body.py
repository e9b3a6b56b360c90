"""task.md's Markdown body: the prompt, optional scenes and roles.

The convention (documented in docs/task-format.md):

* `## prompt` holds the instruction the agent receives first.
* `## scene: NAME` sections, in order, are further instructions for multi-part tasks;
  a task with scenes and no `## prompt` starts with its first scene.
* `## role: NAME` sections describe a persona (for multi-agent or reviewer setups).
* Any other `## ...` section (notes, background) is kept but not shown to the agent.

Headings are matched case-insensitively and `role:reviewer` (no space) is accepted, as
existing packages write it. Level-1 headings and text before the first `##` are a title
and preamble.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

_HEADING = re.compile(r"^##(?!#)\s*(.+?)\s*#*\s*$")
_KINDED = re.compile(r"^(scene|role)\s*:\s*(.+)$", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")


class Section(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str = Field(description="prompt, scene, role or other")
    name: str = Field(description="scene or role name; heading text for other sections")
    text: str = Field(description="the section's Markdown, heading excluded")
    line: int = Field(description="1-based line of the heading within task.md")


class TaskBody(BaseModel):
    """The parsed body of task.md."""

    model_config = ConfigDict(frozen=True)

    sections: list[Section] = Field(default_factory=list)

    def _of(self, kind: str) -> list[Section]:
        return [s for s in self.sections if s.kind == kind]

    @property
    def prompt(self) -> str | None:
        """The first instruction: `## prompt`, else the first scene."""
        prompts = self._of("prompt")
        if prompts:
            return prompts[0].text
        scenes = self._of("scene")
        return scenes[0].text if scenes else None

    @property
    def scenes(self) -> list[Section]:
        return self._of("scene")

    @property
    def roles(self) -> list[Section]:
        return self._of("role")


def parse_body(text: str, first_line: int = 1) -> TaskBody:
    """Split a Markdown body into `##` sections; `first_line` is the body's line in task.md."""
    sections: list[Section] = []
    current: tuple[str, str, int] | None = None
    buf: list[str] = []
    in_fence = False

    def flush() -> None:
        if current is not None:
            kind, name, line = current
            sections.append(Section(kind=kind, name=name, text="\n".join(buf).strip(), line=line))

    for offset, raw in enumerate(text.splitlines()):
        if _FENCE.match(raw):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(raw)
        if match:
            flush()
            buf = []
            heading = match.group(1).strip()
            kinded = _KINDED.match(heading)
            if heading.lower() == "prompt":
                current = ("prompt", "prompt", first_line + offset)
            elif kinded:
                current = (kinded.group(1).lower(), kinded.group(2).strip(), first_line + offset)
            else:
                current = ("other", heading, first_line + offset)
        elif current is not None:
            buf.append(raw)
    flush()
    return TaskBody(sections=sections)
