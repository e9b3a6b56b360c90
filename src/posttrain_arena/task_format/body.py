"""task.md's Markdown body: the prompt, optional scenes and roles.

The convention (documented in docs/task-format.md):

* `## prompt` holds the instruction the agent receives first.
* `## scene: NAME` sections, in order, are further instructions for multi-part tasks;
  a task with scenes and no `## prompt` starts with its first scene.
* `## role: NAME` sections describe a persona (for multi-agent or reviewer setups);
  `## user-persona` describes the simulated user.
* Any other `## ...` section (notes, background) is kept but not shown to the agent.
* With neither `## prompt` nor a scene, the body is the prompt (BenchFlow's schema
  1.3): everything but the role, scene and user-persona sections. Sidecar scenes then
  follow it; a body that is empty starts with the first sidecar scene.
* Sidecar files (schema 1.3) add sections: `prompts/scene.NAME.md` (after the body's
  scenes, by name), `prompts/role.NAME.md` and `prompts/user-persona.md`
  (`sidecar_sections` reads them; the loader adds them to the body).

Headings are matched case-insensitively and `role:reviewer` (no space) is accepted, as
existing packages write it. Level-1 headings and text before the first `##` are a title
and preamble.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

_HEADING = re.compile(r"^##(?!#)\s*(.+?)\s*#*\s*$")
_KINDED = re.compile(r"^(scene|role)\s*:\s*(.+)$", re.IGNORECASE)
_PERSONA = re.compile(r"^user[- _]?persona\s*:?\s*$", re.IGNORECASE)
_SIDECAR = re.compile(r"^(?:(scene|role)\.(.+)|(user-persona))\.md$")
#: Section kinds that are not the task's instruction when the body is the prompt.
_NOT_PROMPT = frozenset({"scene", "role", "persona"})
_FENCE = re.compile(r"^\s*(```|~~~)")


class Section(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str = Field(description="prompt, scene, role, persona or other")
    name: str = Field(description="scene or role name; heading text for other sections")
    text: str = Field(description="the section's Markdown, heading excluded")
    line: int = Field(description="1-based line of the heading within task.md (1 in a "
                      "sidecar)")
    path: str | None = Field(default=None, description="the sidecar file, relative to "
                             "the package, when the section comes from one")


class TaskBody(BaseModel):
    """The parsed body of task.md."""

    model_config = ConfigDict(frozen=True)

    sections: list[Section] = Field(default_factory=list)
    text: str = Field(default="", description="the body without its scene, role and "
                      "user-persona sections: the prompt when there is no `## prompt`")

    def _of(self, kind: str) -> list[Section]:
        return [s for s in self.sections if s.kind == kind]

    @property
    def prompt(self) -> str | None:
        """The first instruction: `## prompt`, else task.md's first `## scene:`, else the
        body itself, else the first sidecar scene."""
        prompts = self._of("prompt")
        if prompts:
            return prompts[0].text
        scenes = self._of("scene")
        own = [s for s in scenes if s.path is None]
        if own:
            return own[0].text
        if self.text:
            return self.text
        return scenes[0].text if scenes else None

    @property
    def prompt_from_body(self) -> bool:
        """Whether the prompt is the body itself (no `## prompt`, no scene in task.md)."""
        return bool(self.text) and not self._of("prompt") and not any(
            s.path is None for s in self._of("scene"))

    @property
    def scenes(self) -> list[Section]:
        return self._of("scene")

    @property
    def roles(self) -> list[Section]:
        return self._of("role")

    @property
    def persona(self) -> str | None:
        """The simulated user's description, if any."""
        found = self._of("persona")
        return found[0].text if found else None

    def with_sections(self, extra: list[Section]) -> TaskBody:
        """This body with `extra` sections (from sidecars) added after its own."""
        return TaskBody(sections=[*self.sections, *extra], text=self.text)


def parse_body(text: str, first_line: int = 1) -> TaskBody:
    """Split a Markdown body into `##` sections; `first_line` is the body's line in task.md."""
    sections: list[Section] = []
    current: tuple[str, str, int] | None = None
    buf: list[str] = []
    kept: list[str] = []  # the body as the prompt: lines outside scene/role/persona
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
            elif _PERSONA.match(heading):
                current = ("persona", "user-persona", first_line + offset)
            else:
                current = ("other", heading, first_line + offset)
        elif current is not None:
            buf.append(raw)
        if current is None or current[0] not in _NOT_PROMPT:
            kept.append(raw)
    flush()
    return TaskBody(sections=sections, text="\n".join(kept).strip())


def sidecar_kind(filename: str) -> tuple[str, str] | None:
    """(kind, name) of a `prompts/` sidecar file name, None when it is not one."""
    match = _SIDECAR.match(filename)
    if match is None:
        return None
    if match.group(3):
        return "persona", "user-persona"
    return match.group(1), match.group(2)


def sidecar_sections(files: dict[str, str]) -> list[Section]:
    """Sections from sidecar files {relative path: text}: scenes by name, then roles by
    name, then the user persona."""
    order = {"scene": 0, "role": 1, "persona": 2}
    found: list[tuple[int, str, Section]] = []
    for rel, text in files.items():
        kind = sidecar_kind(rel.rpartition("/")[2])
        if kind is None:
            continue
        found.append((order[kind[0]], kind[1], Section(kind=kind[0], name=kind[1],
                                                       text=text.strip(), line=1, path=rel)))
    return [s for _, _, s in sorted(found, key=lambda t: (t[0], t[1]))]
