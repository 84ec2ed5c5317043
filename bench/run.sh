#!/usr/bin/env bash
# degrau's benchmarks on the local stack (what `./dev.sh bench` runs).
#   bash bench/run.sh            20- and 200-turn conversations
#   bash bench/run.sh --long     also the 1,000-turn one (tens of minutes on 2 cores)
# Installs the local tools (infra/setup.sh), starts moto unless it already runs
# (and stops it at the end if it started it), builds the function binaries, then
# runs the `strategies` benchmark and, when it exists, the `footprint` one, both
# with the same arguments. Tables go to stdout; files to results/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

bash infra/setup.sh
if [[ -f .local/moto.pid ]] && kill -0 "$(cat .local/moto.pid)" 2>/dev/null; then
  bash infra/moto.sh start
else
  bash infra/moto.sh start
  trap 'bash infra/moto.sh stop' EXIT
fi
# The benchmarks run the real function binaries and the stand-in (debug builds).
cargo build --workspace --bins
DEGRAU_TEST_AWS_ENDPOINT="$(bash infra/moto.sh url)"
export DEGRAU_TEST_AWS_ENDPOINT

cargo run -q -p degrau-bench --bin strategies -- "$@"
if [[ -f bench/src/bin/footprint.rs || -f bench/src/bin/footprint/main.rs ]]; then
  cargo run -q -p degrau-bench --bin footprint -- "$@"
fi
