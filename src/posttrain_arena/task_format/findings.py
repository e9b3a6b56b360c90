"""Findings: what a structural check reports, located as `file:line: field: message`."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


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


def validation_findings(
    exc: ValidationError, where: str, lines: dict[str, int], code: str = "schema"
) -> list[Finding]:
    """Turn pydantic errors into `file:line: field: what (got ...)` findings."""
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        dotted = ".".join(loc)
        line = None
        for n in range(len(loc), 0, -1):
            line = lines.get(".".join(loc[:n]))
            if line is not None:
                break
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "is required"
        elif "input" in err and not isinstance(err["input"], dict | list):
            msg = f"{msg} (got {_short(err['input'])})"
        out.append(Finding(severity=Severity.ERROR, code=code, path=where, line=line,
                           field=dotted or None, message=msg))
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
