#!/usr/bin/env bash
# degrau's developer entry point.
#   ./dev.sh up      set up and run the local stack, then chat with it (Ctrl-D to stop)
#   ./dev.sh start   the same stack, detached: prints the API base URL
#   ./dev.sh stop    stop the detached stack
#   ./dev.sh test    run every test (installs what it needs, starts moto itself),
#                    the Python client's against the local stack
#   ./dev.sh bench   run the benchmarks; prints the tables, writes results/
#   ./dev.sh simulate  the seeded simulation's long run (release build): 1,000 seeds
#                    unless --seeds N; --replay FILE plays a failing plan again
#   ./dev.sh release `sam build`: both functions for arm64 with cargo-lambda (slow:
#                    not part of .ci/run), into .aws-sam/build
set -euo pipefail
cd "$(dirname "$0")"

case "${1:-}" in
  up)
    trap 'bash infra/stack.sh stop' EXIT
    bash infra/stack.sh start
    python3 infra/chat.py --api "$(cat .local/api.url)"
    ;;
  start)
    bash infra/stack.sh start
    ;;
  stop)
    bash infra/stack.sh stop
    ;;
  test)
    bash infra/setup.sh
    bash infra/moto.sh start
    trap 'bash infra/moto.sh stop' EXIT
    # The end-to-end tests run the real function binaries and the stand-in.
    cargo build --workspace --bins
    DEGRAU_TEST_AWS_ENDPOINT="$(bash infra/moto.sh url)" cargo test --workspace --all-targets
    # The main ask and compaction end-to-end tests again, with Claude through
    # Bedrock (MODEL_PROVIDER=bedrock against the stand-in's InvokeModel route).
    DEGRAU_TEST_MODEL_PROVIDER=bedrock DEGRAU_TEST_AWS_ENDPOINT="$(bash infra/moto.sh url)" \
      cargo test -p degrau-tests --test e2e -- ask_api:: compaction:: bedrock::the_stacks_of_this_run
    # The Python client's tests: they start the local stack (infra/stack.sh, on
    # DEGRAU_API_PORT / DEGRAU_STANDIN_PORT) and stop it after.
    PYTHONPATH="$PWD/clients/python/src" .venv/bin/python -m pytest -q -p no:cacheprovider clients/python/tests
    # The simulation's long run: generated histories beyond `cargo test`'s budget.
    cargo run --release -q -p degrau-sim --bin simulate -- --seeds 300
    ;;
  simulate)
    if [ $# -gt 1 ]; then set -- "${@:2}"; else set -- --seeds 1000; fi
    cargo run --release -q -p degrau-sim --bin simulate -- "$@"
    ;;
  bench)
    bash bench/run.sh "${@:2}"
    ;;
  release)
    # cargo-lambda and zig come from .venv, the SAM CLI from .venv-sam; SAM's
    # cargo-lambda builder is still flagged beta.
    bash infra/setup.sh
    bash infra/setup.sh sam
    rustup target add aarch64-unknown-linux-gnu
    PATH="$PWD/.venv/bin:$PATH" SAM_CLI_BETA_RUST_CARGO_LAMBDA=1 SAM_CLI_TELEMETRY=0 \
      .venv-sam/bin/sam build --template template.yaml "${@:2}"
    ;;
  *)
    echo "usage: ./dev.sh up|start|stop|test|bench|simulate|release" >&2
    exit 2
    ;;
esac
