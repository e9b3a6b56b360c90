"""What a fresh verifier may trust: the state roots, and what must lie outside them.

Fresh verification copies only the *state roots* (the workdir and `verifier.state_paths`)
from the agent's session into a pristine one. Everything else the verifier runs comes
from the pristine image, so nothing the agent wrote can stand in for a program, an
interpreter or a library, unless the image itself resolves one of those *inside* a
state root: `ENV PATH=/root/.local/bin:$PATH`, a virtualenv in the workdir, a
`PYTHONPATH` or `LD_LIBRARY_PATH` there. Such a task cannot be verified soundly; the
harness refuses it at run time and `arena task check` reports it, with the fix.

This module is the single list of those facts, used by both.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping

SYSTEM_PREFIXES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/proc",
                   "/sys", "/dev", "/boot", "/run", "/var/lib/dpkg", "/var/lib/apt")
"""Never state: the image's system paths."""

RESOLVING_VARIABLES = ("PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "VIRTUAL_ENV",
                       "CONDA_PREFIX", "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT",
                       "PERL5LIB", "RUBYLIB", "GEM_HOME", "GEM_PATH", "NODE_PATH")
"""Environment variables whose entries say where programs and libraries are loaded
from (colon- or space-separated paths)."""

FIX = ("fix: install interpreters, tools and virtualenvs outside the agent's state (e.g. "
       "a venv in /opt/venv, `pip install` without --user), and keep such paths out of "
       "PATH, PYTHONPATH and LD_* in the Dockerfile, or use `isolation: shared`")

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def state_roots(workdir: str, state_paths: list[str]) -> list[str]:
    """The normalized state roots, system paths and duplicates removed, outermost first."""
    roots: list[str] = []
    for raw in [workdir, *state_paths]:
        path = posixpath.normpath(raw)
        if path == "/" or any(_inside(path, p) for p in SYSTEM_PREFIXES):
            continue
        if any(_inside(path, r) for r in roots):
            continue
        roots = [r for r in roots if not r.startswith(path + "/")]
        roots.append(path)
    return sorted(roots)


def root_of(path: str, roots: list[str]) -> str | None:
    """The state root that `path` (absolute) lies in, or None."""
    norm = posixpath.normpath(path)
    return next((r for r in roots if _inside(norm, r)), None)


def untrusted_entries(env: Mapping[str, str], roots: list[str]) -> list[str]:
    """One line per entry of a resolving variable that lies inside a state root (or is
    relative, so resolves against the workdir)."""
    out: list[str] = []
    for name in RESOLVING_VARIABLES:
        value = env.get(name)
        if not value:
            continue
        for entry in re.split(r"[:\s]+", value):
            if not entry:
                continue
            if not entry.startswith("/"):
                out.append(f"{name} entry {entry!r} is relative (it resolves in the workdir)")
                continue
            root = root_of(entry, roots)
            if root is not None:
                out.append(f"{name} entry {entry} lies inside the state root {root}")
    return out


def dockerfile_env(instructions: list[tuple[str, str, int]]) -> dict[str, tuple[str, int]]:
    """The final value (and line) of each ENV variable of a Dockerfile, expanding $VAR
    and ${VAR} against earlier values (PATH starts as the usual default). Given
    (keyword, args, line) triples of its instructions."""
    env: dict[str, tuple[str, int]] = {"PATH": (DEFAULT_PATH, 0)}
    for keyword, args, line in instructions:
        if keyword == "FROM":  # a new stage starts from its base's defaults
            env = {"PATH": (DEFAULT_PATH, 0)}
        if keyword != "ENV":
            continue
        try:
            words = shlex.split(args)
        except ValueError:
            continue
        if len(words) >= 2 and "=" not in words[0]:
            pairs = [(words[0], args.split(None, 1)[1])]
        else:
            pairs = [tuple(w.split("=", 1)) for w in words if "=" in w]  # type: ignore[misc]
        current = {k: v for k, (v, _) in env.items()}
        for name, value in pairs:
            env[name] = (_expand(value, current), line)
    return env


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def _expand(text: str, env: Mapping[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        value = env.get(m.group(1) or m.group(3), "")
        return value if value or m.group(2) is None else m.group(2)

    return _VAR.sub(repl, text)
