"""The structural check of a registered collection, summarized for storage.

Runs the spec layer's `check_collection` (no code from the collection runs) and keeps
what the service stores: the content hash, the eligible tasks (packages without errors,
in a collection whose own manifest and layout are sound), domain counts and findings.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrain_arena.task_format.collection import check_collection
from posttrain_arena.task_format.findings import Finding, Severity
from posttrain_arena.task_format.hashing import tree_hash


@dataclass
class CollectionSummary:
    """What the service stores about a checked collection."""

    content_hash: str
    task_count: int = 0
    eligible: list[str] = field(default_factory=list)
    domain_counts: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity is Severity.ERROR)

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.severity is Severity.WARNING)

    def findings_json(self, relative_to: Path | None = None) -> list[dict[str, Any]]:
        """Findings as plain dicts with their rendered line (paths relative to the root)."""
        out = []
        for f in self.findings:
            if relative_to is not None and f.path.startswith(str(relative_to)):
                rel = f.path[len(str(relative_to)):].lstrip("/") or "."
                f = f.model_copy(update={"path": rel})
            out.append({**f.model_dump(mode="json"), "rendered": f.render()})
        return out


def check_collection_dir(root: Path) -> CollectionSummary:
    """Check the collection at `root` and summarize it."""
    report = check_collection(root)
    collection_errors = any(f.severity is Severity.ERROR for f in report.findings)
    eligible = [] if collection_errors else [t for t in report.tasks if t.ok]
    counts = Counter(t.domain for t in eligible if t.domain)
    findings = list(report.findings) + [f for t in report.tasks for f in t.findings]
    return CollectionSummary(
        content_hash=report.content_hash or tree_hash(root),
        task_count=len(report.tasks),
        eligible=[t.name for t in eligible],
        domain_counts=dict(sorted(counts.items())),
        findings=findings,
    )
