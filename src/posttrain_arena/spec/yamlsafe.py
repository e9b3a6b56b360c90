"""Bounded, alias-free YAML loading that remembers where each key was written.

Manifests come from strangers. Aliases are refused outright (they are the lever of
"billion laughs" bombs and no real manifest needs them), documents are size-bounded
before parsing, and every mapping key's line is recorded so errors can say
`task.md:12: environment.memory_mb: ...`.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_YAML_BYTES = 256 * 1024
MAX_DEPTH = 32


class YamlProblem(ValueError):
    """The YAML text cannot be used; `line` is 1-based within the text, if known."""

    def __init__(self, message: str, line: int | None = None):
        self.line = line
        super().__init__(message)


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise YamlProblem(
                "YAML aliases (*name) are not allowed in manifests; write the value out",
                event.start_mark.line + 1,
            )
        return super().compose_node(parent, index)


def _to_python(node: yaml.Node, prefix: str, lines: dict[str, int], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise YamlProblem(f"nesting deeper than {MAX_DEPTH} levels", node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _to_python(key_node, prefix, lines, depth + 1)
            if not isinstance(key, str):
                key = str(key)
            dotted = f"{prefix}.{key}" if prefix else key
            if key in out:
                raise YamlProblem(f"duplicate key {dotted!r}", key_node.start_mark.line + 1)
            lines[dotted] = key_node.start_mark.line + 1
            out[key] = _to_python(value_node, dotted, lines, depth + 1)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, child in enumerate(node.value):
            dotted = f"{prefix}.{i}"
            lines[dotted] = child.start_mark.line + 1
            items.append(_to_python(child, dotted, lines, depth + 1))
        return items
    loader = yaml.SafeLoader("")
    return loader.construct_object(node, deep=True)  # type: ignore[no-untyped-call]


def load_yaml(text: str) -> tuple[Any, dict[str, int]]:
    """Parse one YAML document; return (data, {dotted.key: line}).

    Raises YamlProblem with a line number on syntax errors, aliases, duplicate keys,
    excessive depth or size.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES:
        raise YamlProblem(f"YAML block larger than {MAX_YAML_BYTES // 1024} KiB")
    try:
        loader = _NoAliasLoader(text)
        try:
            node = loader.get_single_node()  # type: ignore[no-untyped-call]
        finally:
            loader.dispose()  # type: ignore[no-untyped-call]
    except YamlProblem:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlProblem(f"malformed YAML: {exc.problem or exc}", line) from None
    except yaml.YAMLError as exc:
        raise YamlProblem(f"malformed YAML: {exc}") from None
    if node is None:
        return None, {}
    lines: dict[str, int] = {}
    try:
        data = _to_python(node, "", lines, 0)
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        raise YamlProblem(
            f"unsupported YAML value: {exc.problem}", mark.line + 1 if mark else None
        ) from None
    return data, lines
