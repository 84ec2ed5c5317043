#!/usr/bin/env bash
# degrau's developer entry point.
#   ./dev.sh up     set up and run the local stack
#   ./dev.sh test   run every test
set -euo pipefail
cd "$(dirname "$0")"

case "${1:-}" in
  up)
    cargo build --workspace
    echo "degrau: built ask and compactor (the local stack arrives with the ask function)."
    ;;
  test)
    cargo test --workspace --all-targets
    ;;
  *)
    echo "usage: ./dev.sh up|test" >&2
    exit 2
    ;;
esac
