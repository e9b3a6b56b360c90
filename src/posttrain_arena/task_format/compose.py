"""A task's compose file: one container's settings, several containers, or only input.

Harbor and BenchFlow read exactly one compose file, `environment/docker-compose.yaml`
(BenchFlow's sandbox/docker.py names that path; Harbor's docker environment does the
same), merged over their own base file whose one service is `main`. So:

- `environment/docker-compose.yaml` whose services are only `main`: settings of the one
  container (SkillsBench passes API keys and `working_dir` this way). This arena builds
  environment/Dockerfile alone; a warning says the file's settings are not applied.
- `environment/docker-compose.yaml` with other services: several containers, which
  trials here cannot run: an error naming the services and the fix.
- Any other compose file (`docker-compose.yml`, `compose.yaml`, one in a subfolder) is
  not read by either harness: it is a file of the build context, task input like any
  other (SkillsBench's react-performance-debugging ships a `docker-compose.yml` whose
  services the Dockerfile copies into its one image). Nothing is said about it.
"""

from __future__ import annotations

from pathlib import Path

from posttrain_arena.task_format.files import err, read_text_file
from posttrain_arena.task_format.findings import Finding, Severity, SpecError
from posttrain_arena.task_format.yamlsafe import YamlProblem, load_yaml

COMPOSE_FILE = "environment/docker-compose.yaml"
"""The one compose file Harbor and BenchFlow read."""
MAIN_SERVICE = "main"
_MAX_BYTES = 64 * 1024


def compose_findings(root: Path, cached: bytes | None = None) -> list[Finding]:
    """What the task's compose file means here (see the module docstring)."""
    path = root / COMPOSE_FILE
    if not path.is_file():
        return []
    where = str(path)
    try:
        data, lines = load_yaml(read_text_file(path, _MAX_BYTES, COMPOSE_FILE, cached))
    except (SpecError, YamlProblem) as exc:
        return [_warn(where, f"cannot read it ({exc}); only environment/Dockerfile is "
                      "built here, so its settings are not applied")]
    found = data.get("services") if isinstance(data, dict) else None
    services: dict[str, object] = found if isinstance(found, dict) else {}
    names = sorted(str(k) for k in services)
    others = [n for n in names if n != MAIN_SERVICE]
    if others:
        return [err("compose-multi-container", where,
                    f"services {', '.join(others)} besides `{MAIN_SERVICE}`: a "
                    "multi-container environment, and trials here run one container. "
                    "Start what those services run inside the one image (from the "
                    "Dockerfile's CMD or the task's start script), then remove them",
                    line=lines.get(f"services.{others[0]}"))]
    main = services.get(MAIN_SERVICE)
    settings = sorted(str(k) for k in main) if isinstance(main, dict) else []
    shown = ", ".join(settings) if settings else "nothing"
    return [_warn(where, f"it sets {shown} for the one container; only "
                  "environment/Dockerfile is built here, so these settings are not "
                  "applied (write ENV and WORKDIR in the Dockerfile if the task needs them)")]


def _warn(where: str, message: str) -> Finding:
    return Finding(severity=Severity.WARNING, code="compose", path=where, message=message)
