#!/usr/bin/env bash
# The Python client as people install it, checked without the local stack:
#   1. builds the sdist and the wheel (python -m build, into a temporary folder);
#   2. installs the wheel, with its extras, into a clean temporary venv (deps from
#      PyPI at the versions infra/requirements.txt pins) and prints its __version__;
#   3. runs the offline tests (every test not marked `stack`) in that venv, against
#      the installed wheel: src/ is not on the path;
#   4. mypy --strict on the package, ruff check and ruff format --check on the client.
# Needs the repo's .venv (bash infra/setup.sh). Run from anywhere; leaves nothing behind.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
client="$root/clients/python"
py="$root/.venv/bin/python"
if [[ ! -x "$py" ]]; then
  echo "check: no $py: run bash infra/setup.sh first" >&2
  exit 2
fi

tmp="$(mktemp -d)"
cleanup() {
  rm -rf "$tmp"
  # setuptools writes these beside the sources while it builds the sdist.
  rm -rf "$client/build" "$client/src/degrau_client.egg-info"
}
trap cleanup EXIT
say() { echo "check: $*" >&2; }

say "building the sdist and the wheel"
"$py" -m build --outdir "$tmp/dist" "$client" >"$tmp/build.log" 2>&1 || {
  cat "$tmp/build.log" >&2
  exit 1
}
wheel="$(echo "$tmp"/dist/degrau_client-*.whl)"
sdist="$(echo "$tmp"/dist/degrau_client-*.tar.gz)"
[[ -f "$wheel" && -f "$sdist" ]] || {
  say "the build made no wheel or no sdist"
  exit 1
}
say "built $(basename "$wheel") and $(basename "$sdist")"
# The wheel must ship the typing marker (PEP 561).
"$py" - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert "degrau_client/py.typed" in names, "py.typed is not in the wheel"
EOF

say "installing the wheel into a clean venv"
python3 -m venv "$tmp/venv"
# The test tools at the versions the repo pins (extras are not allowed in a constraints file);
# jsonschema: the offline tests' mock API holds the client's requests to docs/openapi.json.
grep -E '^(httpx|anthropic|langchain|langchain-core|langchain-anthropic|langgraph|pytest|jsonschema)==' "$root/infra/requirements.txt" >"$tmp/constraints.txt"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --constraint "$tmp/constraints.txt" "$wheel[langchain,agents,examples]" pytest jsonschema

cd "$tmp"
want="$("$py" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$client/pyproject.toml")"
env -u PYTHONPATH "$tmp/venv/bin/python" - "$tmp/venv" "$want" <<'EOF'
import sys
from pathlib import Path

import degrau_client

venv, want = Path(sys.argv[1]).resolve(), sys.argv[2]
where = Path(degrau_client.__file__).resolve()
assert venv in where.parents, f"degrau_client imported from {where}, not the installed wheel"
assert degrau_client.__version__ == want, f"__version__ {degrau_client.__version__} is not pyproject's {want}"
print(f"degrau-client {degrau_client.__version__} installed at {where.parent}")
EOF

say "offline tests against the installed wheel"
env -u PYTHONPATH "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider -m "not stack" \
  -c "$client/pyproject.toml" --rootdir "$client" "$client/tests"

cd "$client"
say "mypy --strict"
"$py" -m mypy --strict --cache-dir "$tmp/mypy-cache" src/degrau_client
say "ruff check and ruff format --check"
"$py" -m ruff check --no-cache .
"$py" -m ruff format --no-cache --check .
say "all clean"
