"""The verifier's runtime that the harness brings: pytest, a CTRF plugin, launchers.

Verifiers must run offline and with files the agent could not have changed, so the
harness ships its own pytest (copied from the Python running the harness) into every
verifier session, next to two launchers:

* `pytest`: `python3 -I [-S] run_pytest.py ...`, pytest with the CTRF plugin loaded
  explicitly, third-party plugin autoloading off, conftest.py files above the verifier
  directory ignored, and no cache written;
* `run_python.py`: runs a script the same way the interpreter would, but (with `-S`)
  adds the image's site-packages without executing .pth files or sitecustomize;
* `bin/uvx`, `bin/uv`: what Terminal-Bench verifiers download at verification time,
  served offline (trial/toolchain.py says what is served and what is refused);
* `supervise`: the verifier's top process (trial/supervise.c), a static program the
  harness compiles from its own source with the host's C compiler (`cc -static`), so
  that verification asks the task's image for no interpreter, shell or tar.

The bundle is built once per host under the cache directory (paths.cache_home) and
mounted (or copied) into the session at `HARNESS_DIR`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from posttrain_arena import __version__
from posttrain_arena.paths import cache_home
from posttrain_arena.sandbox.base import PrerequisiteError
from posttrain_arena.trial.toolchain import SHIM, SHIM_NAMES

HARNESS_DIR = "/opt/arena-harness"
"""Where the bundle lives inside a verifier session (fresh mode)."""

SUPERVISOR = "supervise"
"""The supervisor's name in the bundle."""

RESTORE_FAILED = 86
"""The supervisor's exit status when it could not empty the roots or restore the state
(it then ran nothing and wrote no status; see supervise.c)."""

CC_FLAGS = ("-static", "-Os", "-s", "-Wall")


class HarnessBuildError(PrerequisiteError):
    """The harness runtime cannot be built on this host (the message has the fix)."""

# Pure-Python packages pytest needs at run time (Python >= 3.10).
_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py")

_SITE_SETUP = '''
import os, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _setup_path():
    """Harness packages first, then the image's site-packages (no .pth, no customize)."""
    sys.path[:0] = [HERE, os.path.join(HERE, "site")]
    if sys.flags.no_site:
        import site  # with -S this only computes paths; nothing is executed

        for path in site.getsitepackages():
            if os.path.isdir(path) and path not in sys.path:
                sys.path.append(path)
'''

RUN_PYTEST = _SITE_SETUP + '''

def main():
    _setup_path()
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    import pytest
    import arena_ctrf

    args = list(sys.argv[1:])
    vdir = os.environ.get("ARENA_VERIFIER_DIR")
    extra = ["-p", "no:cacheprovider"]
    if vdir:
        ini = next((os.path.join(vdir, n) for n in ("pytest.ini", "pyproject.toml", "tox.ini",
                    "setup.cfg") if os.path.isfile(os.path.join(vdir, n))), None)
        # conftest.py files and ini files outside the verifier directory are not ours.
        extra += ["--rootdir", vdir, "--confcutdir", vdir, "-c", ini or os.devnull]
    sys.exit(pytest.main(extra + args, plugins=[arena_ctrf]))


if __name__ == "__main__":
    main()
'''

RUN_PYTHON = _SITE_SETUP + '''

def main():
    import runpy

    _setup_path()
    sys.path.remove(HERE)
    sys.path.remove(os.path.join(HERE, "site"))
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
'''

PYTEST_LAUNCHER = """#!/bin/sh
# pytest from the arena harness; ARENA_PYFLAGS adds -S in shared-mode verification.
exec python3 -I -B $ARENA_PYFLAGS "$(dirname "$0")/run_pytest.py" "$@"
"""

_lock = threading.Lock()
_built: Path | None = None


def _bundle_key() -> str:
    h = hashlib.sha256(__version__.encode())
    for text in (RUN_PYTEST, RUN_PYTHON, PYTEST_LAUNCHER, SHIM, _plugin_path().read_text(),
                 _supervisor_path().read_text(), " ".join(CC_FLAGS)):
        h.update(text.encode())
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            h.update(f"{name}:{spec.origin}:{os.stat(spec.origin).st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _plugin_path() -> Path:
    """The sandbox's standalone CTRF plugin (`--ctrf FILE`), shipped as arena_ctrf.py."""
    import posttrain_arena.sandbox as sandbox_package

    return Path(sandbox_package.__file__).with_name("ctrf_plugin.py")


def _supervisor_path() -> Path:
    return Path(__file__).with_name("supervise.c")


def compile_supervisor(dest: Path) -> None:
    """Compile supervise.c into a static program at `dest` (HarnessBuildError with the
    fix when this host cannot)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise HarnessBuildError(
            "the harness compiles its verifier supervisor and no C compiler was found; "
            "fix: apt-get install gcc libc6-dev (or scripts/setup.sh --sandbox)")
    try:
        done = subprocess.run([cc, *CC_FLAGS, "-o", str(dest), str(_supervisor_path())],
                              capture_output=True, text=True, timeout=300, check=False)
    except OSError as exc:
        raise HarnessBuildError(f"cannot run the C compiler {cc}: {exc}; fix: apt-get "
                                "install gcc libc6-dev (or set CC)") from exc
    if done.returncode != 0:
        raise HarnessBuildError(
            f"cannot compile the verifier supervisor with {cc}: {done.stderr.strip()[-600:]}; "
            "fix: install the static C library (apt-get install libc6-dev)")


def harness_bundle(cache_root: Path | None = None) -> Path:
    """The host directory holding the harness runtime, built on first use."""
    global _built
    with _lock:
        if _built is not None and _built.is_dir():
            return _built
        root = cache_root or cache_home()
        target = root / "harness" / _bundle_key()
        if not (target / SUPERVISOR).is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
            try:
                _fill(tmp)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            try:
                tmp.rename(target)
            except OSError:  # another process won the race; theirs is identical
                shutil.rmtree(tmp, ignore_errors=True)
        _built = target
        return target


def _fill(dest: Path) -> None:
    site = dest / "site"
    site.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            if name == "py":
                continue
            raise RuntimeError(f"the harness needs {name!r} installed to run verifiers")
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            shutil.copytree(origin.parent, site / name, ignore=ignore)
        else:
            shutil.copy2(origin, site / origin.name)
    shutil.copy2(_plugin_path(), dest / "arena_ctrf.py")
    (dest / "run_pytest.py").write_text(RUN_PYTEST)
    (dest / "run_python.py").write_text(RUN_PYTHON)
    launcher = dest / "pytest"
    launcher.write_text(PYTEST_LAUNCHER)
    compile_supervisor(dest / SUPERVISOR)
    (dest / "bin").mkdir()
    shims = [dest / "bin" / name for name in SHIM_NAMES]
    for shim in shims:
        shim.write_text(SHIM)
    programs = (launcher, dest / SUPERVISOR, *shims)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or path in programs else 0o644)
