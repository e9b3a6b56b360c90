"""Findings: what a structural check reports, located as `file:line: field: message`."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


class Finding(BaseModel):
    """One problem found in a package or collection."""

    model_config = ConfigDict(frozen=True)

    severity: Severity = Field(description="error blocks use; warning does not")
    code: str = Field(description="stable machine-readable identifier, e.g. 'schema'")
    path: str = Field(description="file or directory the finding is about")
    line: int | None = Field(default=None, description="1-based line in `path`, if known")
    field: str | None = Field(default=None, description="dotted field name, if any")
    message: str = Field(description="what is wrong and what to do")

    def render(self) -> str:
        """`path:line: field: message`, the form editors and terminals link to."""
        loc = self.path if self.line is None else f"{self.path}:{self.line}"
        where = f"{self.field}: " if self.field else ""
        return f"{loc}: {self.severity.value}: {where}{self.message}"


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


class SpecError(Exception):
    """A package or manifest could not be loaded; carries the findings that say why."""

    def __init__(self, findings: list[Finding]):
        self.findings = findings
        super().__init__("\n".join(f.render() for f in findings))
