#!/usr/bin/env bash
# Installs the Python tools into virtual environments at the repo root, pinned:
#   bash infra/setup.sh       the local stack's tools (moto, cfn-lint, PyYAML,
#                             cargo-lambda, zig) into .venv, from infra/requirements.txt
#   bash infra/setup.sh sam   the AWS SAM CLI into .venv-sam, from
#                             infra/requirements-sam.txt (its pins would move moto's)
# Idempotent: a stamp file keyed on the requirements' hash makes a second run a
# quick no-op.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
case "${1:-}" in
  "")
    venv="$root/.venv"
    requirements="$root/infra/requirements.txt"
    ;;
  sam)
    venv="$root/.venv-sam"
    requirements="$root/infra/requirements-sam.txt"
    ;;
  *)
    echo "usage: bash infra/setup.sh [sam]" >&2
    exit 2
    ;;
esac
stamp="$venv/.degrau-requirements.sha256"
name="$(basename "$venv")"

want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating $venv" >&2
  python3 -m venv "$venv"
fi
echo "setup: installing ${requirements#"$root/"} into $name (pinned wheels from PyPI; a first install takes a minute or two)" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
echo "$want" >"$stamp"
echo "setup: done" >&2
