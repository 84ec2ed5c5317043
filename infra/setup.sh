#!/usr/bin/env bash
# Installs the local stack's Python tools (moto, cfn-lint, PyYAML, cargo-lambda) into
# .venv at the repo root, pinned by infra/requirements.txt. Idempotent: a stamp file
# keyed on the requirements' hash makes a second run a quick no-op.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
requirements="$root/infra/requirements.txt"
stamp="$venv/.degrau-requirements.sha256"

want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating $venv" >&2
  python3 -m venv "$venv"
fi
echo "setup: installing infra/requirements.txt into .venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
echo "$want" >"$stamp"
echo "setup: done" >&2
