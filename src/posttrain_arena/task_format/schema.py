"""JSON Schema for task.md frontmatter and submission.yaml, generated from the models.

The models are the single source: these functions only add the `$schema`, `$id` and
title that editors and validators expect.
"""

from __future__ import annotations

from typing import Any

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_BASE_ID = "urn:posttrain-arena:schema"


def task_schema() -> dict[str, Any]:
    """JSON Schema of task.md's YAML frontmatter."""
    from posttrain_arena.task_format.task import TaskFrontmatter

    schema = TaskFrontmatter.model_json_schema(mode="validation")
    return _wrap(schema, "task.md frontmatter", "task-frontmatter.json")


def submission_schema() -> dict[str, Any]:
    """JSON Schema of a collection's submission.yaml."""
    from posttrain_arena.task_format.collection import Submission

    schema = Submission.model_json_schema(mode="validation")
    return _wrap(schema, "submission.yaml", "submission.json")


def _wrap(schema: dict[str, Any], title: str, name: str) -> dict[str, Any]:
    return {"$schema": SCHEMA_DIALECT, "$id": f"{_BASE_ID}:{name}", **schema, "title": title}
