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

_ALIAS_MESSAGE = "YAML aliases (*name) are not allowed in manifests; write the value out"


class YamlProblem(ValueError):
    """The YAML text cannot be used; `line` is 1-based within the text, if known."""

    def __init__(self, message: str, line: int | None = None):
        self.line = line
        super().__init__(message)


class _NoAliasLoader(yaml.SafeLoader):
    """Pure-Python fallback: refuses an alias at the event that introduces it."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise YamlProblem(_ALIAS_MESSAGE, event.start_mark.line + 1)
        return super().compose_node(parent, index)


# libyaml composes about ten times faster than the pure-Python parser. It resolves
# aliases to shared nodes, so there an alias shows up as a node met twice while
# converting (see _Converter), which also catches recursive anchors. The composed graph
# is linear in the size of the text, so no bomb expands before it is refused.
_C_LOADER: Any = getattr(yaml, "CSafeLoader", None)
_STR_TAG = "tag:yaml.org,2002:str"


def _cached_resolver(base: Any) -> Any:
    """`base` with scalar tag resolution memoised: the same keys recur in every manifest."""

    class Loader(base):  # type: ignore[misc,valid-type]
        _resolved: dict[tuple[str, bool], str] = {}

        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
            if kind is yaml.ScalarNode and implicit[0] and len(value) < 64:
                key = (value, bool(implicit[1]))
                tag = self._resolved.get(key)
                if tag is None:
                    tag = super().resolve(kind, value, implicit)
                    if len(self._resolved) < 4096:
                        self._resolved[key] = tag
                return tag
            return super().resolve(kind, value, implicit)

    return Loader


_FAST_LOADER: Any = _cached_resolver(_C_LOADER) if _C_LOADER is not None else None


class _Converter:
    """Node graph -> plain Python, recording each key's line, refusing shared nodes."""

    def __init__(self) -> None:
        self.lines: dict[str, int] = {}
        self._seen: set[int] = set()
        self._constructor = yaml.constructor.SafeConstructor()

    def convert(self, node: yaml.Node, prefix: str, depth: int, line: int | None) -> Any:
        if depth > MAX_DEPTH:
            raise YamlProblem(f"nesting deeper than {MAX_DEPTH} levels", node.start_mark.line + 1)
        if id(node) in self._seen:
            raise YamlProblem(_ALIAS_MESSAGE, line)
        self._seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise YamlProblem("YAML merge keys (<<) are not allowed", key_line)
                key = self.convert(key_node, prefix, depth + 1, key_line)
                if not isinstance(key, str):
                    key = str(key)
                dotted = f"{prefix}.{key}" if prefix else key
                if key in out:
                    raise YamlProblem(f"duplicate key {dotted!r}", key_line)
                self.lines[dotted] = key_line
                out[key] = self.convert(value_node, dotted, depth + 1, key_line)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for i, child in enumerate(node.value):
                dotted = f"{prefix}.{i}"
                child_line = child.start_mark.line + 1
                self.lines[dotted] = child_line
                items.append(self.convert(child, dotted, depth + 1, child_line))
            return items
        if node.tag == _STR_TAG and isinstance(node.value, str):
            return node.value
        return self._constructor.construct_object(node, deep=True)  # type: ignore[no-untyped-call]


def load_yaml(text: str) -> tuple[Any, dict[str, int]]:
    """Parse one YAML document; return (data, {dotted.key: line}).

    Raises YamlProblem with a line number on syntax errors, aliases, duplicate keys,
    merge keys, excessive depth or size, and values YAML cannot represent safely.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES:
        raise YamlProblem(f"YAML block larger than {MAX_YAML_BYTES // 1024} KiB")
    try:
        loader = (_FAST_LOADER or _NoAliasLoader)(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except YamlProblem:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlProblem(f"malformed YAML: {exc.problem or exc}", line) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise YamlProblem(f"malformed YAML: {exc}") from None
    if node is None:
        return None, {}
    converter = _Converter()
    try:
        data = converter.convert(node, "", 0, None)
    except YamlProblem:
        raise
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        raise YamlProblem(
            f"unsupported YAML value: {exc.problem}", mark.line + 1 if mark else None
        ) from None
    except (ValueError, OverflowError, TypeError, RecursionError) as exc:
        raise YamlProblem(f"unsupported YAML value: {exc}") from None
    return data, converter.lines
