"""The toolchain that verifiers fetch from the network, served offline by the harness.

82 of Terminal-Bench 2's 89 verifiers (`tests/test.sh`) install uv at verification time
(`curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh`, `source $HOME/.local/bin/env`)
and run `uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 [-w numpy==...] pytest
--ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA`. The verifier has no network,
by design, so the install fails; the harness puts its own `uvx` and `uv` on the
verifier's PATH (after the image's own: an image that ships uv keeps it), and the script
runs as published:

* `uvx [-p V] [-w SPEC]... pytest ARGS` and `uv run [--with SPEC]... pytest ARGS` run
  the harness's pytest (the one every verifier here gets, with its `--ctrf FILE` plugin)
  under the image's python3, with the image's site-packages.
* pytest and pytest-json-ctrf are served whatever version is pinned (the harness's
  pytest answers; the pin is printed beside the version served).
* Any other `-w`/`--with` package (numpy, pandas, torch, ...) is served only when the
  image's Python has it installed (any version; a different one is printed). One it
  lacks is refused before pytest starts, naming the package and the fix (install it in
  environment/Dockerfile), exit status 3: the verifier then writes reward 0 and the
  reason is in its output, never a silent pass.
* `-p VERSION` is not honoured: the image's python3 runs (uv would download another
  interpreter, which needs the network); the version used is printed.
* Refused with a clear message, exit status 3: an image without python3 (no interpreter
  can be served offline), a command other than pytest, `uv venv`, and `uv pip install`
  of a package the image's Python lacks (`uv pip install` of what it has is a no-op).
"""

from __future__ import annotations

SHIM_NAMES = ("uvx", "uv")
"""The programs the harness serves, in the bundle's bin/ (on the verifier's PATH)."""

SHIM = r"""#!/bin/sh
# uvx / uv served offline by the PostTrain Arena harness (see trial/toolchain.py).
me="arena-harness $(basename "$0")"
here=$(cd "$(dirname "$0")" && pwd)
refuse() { echo "$me: $*" >&2; exit 3; }
command -v python3 >/dev/null 2>&1 || refuse "the task image has no python3, and no \
interpreter can be served offline; install python3 (>= 3.10) in environment/Dockerfile"
mode=run
case "$(basename "$0")" in
  uv)
    case "$1" in
      run) shift ;;
      pip) [ "$2" = install ] || refuse "only 'uv pip install' is served, not 'uv pip $2'"
           shift 2; mode=install ;;
      *) refuse "'uv $1' is not served offline (only 'uv run pytest', 'uv pip install' of \
packages the image has, and uvx pytest); the verifier has no network" ;;
    esac ;;
esac
specs=""
while [ $# -gt 0 ]; do
  case "$1" in
    -w|--with|--from) specs="$specs $2"; shift 2 ;;
    --with=*|--from=*) specs="$specs ${1#*=}"; shift ;;
    -p|--python) echo "$me: -p $2 asked; the image's $(python3 -V 2>&1) runs (no \
interpreter is downloaded offline)" >&2; shift 2 ;;
    --python=*) shift ;;
    -q|--quiet|-v|--verbose|--offline|--no-cache|--isolated|--active|--no-project|\
--frozen|--locked|--system|--break-system-packages) shift ;;
    --index-url|--extra-index-url|--default-index|--index|--cache-dir|--directory|\
--project) shift 2 ;;
    -*) [ "$mode" = install ] || break; shift ;;
    *) [ "$mode" = install ] && { specs="$specs $1"; shift; continue; }; break ;;
  esac
done
python3 - $specs <<'PYEOF' || exit 3
import re, sys
from importlib import metadata
served = {"pytest", "pytest-json-ctrf"}
missing = []
for spec in sys.argv[1:]:
    name = re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].strip()
    key = name.lower().replace("_", "-")
    if not name or key in served:
        continue
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        missing.append(spec)
        continue
    if "==" in spec and spec.split("==", 1)[1].strip() != have:
        print(f"arena-harness uvx: {spec} asked; the image has {name} {have}", file=sys.stderr)
if missing:
    print("arena-harness uvx: " + ", ".join(missing) + " not installed in the task image's "
          "Python, and the verifier has no network to fetch it; install it in "
          "environment/Dockerfile (RUN pip install ...)", file=sys.stderr)
    sys.exit(3)
PYEOF
[ "$mode" = install ] && exit 0
[ "$1" = pytest ] || refuse "'$1' is not served offline: only pytest (with the harness's \
--ctrf plugin) runs in place of what uvx would fetch"
shift
exec "$here/../pytest" "$@"
"""
