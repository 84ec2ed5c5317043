# What the local stack's scripts say while they work (sourced by dev.sh,
# infra/stack.sh and infra/moto.sh; not run on its own):
#   say TEXT...                      one line on stderr, "degrau: TEXT"
#   run_logged LOG WHAT COMMAND...   runs COMMAND with its output shown as it comes
#                                    and kept in LOG; says how long it took; on a
#                                    failure, the log's last lines and where it is
#   cargo_build WHAT CARGO-ARGS...   `cargo build` through run_logged into
#                                    .local/logs/build.log, saying first when this
#                                    is the first build (it takes minutes)
#   log_tail LOG [LINES]             the last lines of LOG and where the whole log is
#   wait_for URL WHAT LOG [SECONDS]  polls URL until it answers (any HTTP status),
#                                    saying every 15 s that it still waits; after
#                                    SECONDS (300), the log's last lines and exit 1
# Each failure exits the calling script with the command's status.

say() {
  echo "degrau: $*" >&2
}

log_tail() { # log, lines
  local log="$1" lines="${2:-30}"
  echo "degrau: ---- last $lines lines of $log ----" >&2
  tail -n "$lines" "$log" >&2 || true
  echo "degrau: ---- the whole log: $log ----" >&2
}

run_logged() { # log, what, command...
  local log="$1" what="$2"
  shift 2
  mkdir -p "$(dirname "$log")"
  local started=$SECONDS status=0
  # tee keeps the log and shows each line as it comes; PIPESTATUS holds the
  # command's own status.
  set +e
  "$@" 2>&1 | tee "$log" >&2
  status=${PIPESTATUS[0]}
  set -e
  if [[ "$status" -ne 0 ]]; then
    say "$what failed (exit $status, after $((SECONDS - started)) s)"
    log_tail "$log" 30
    exit "$status"
  fi
  say "$what: done in $((SECONDS - started)) s"
}

cargo_build() { # what, cargo build arguments...
  local what="$1"
  shift
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  local target="${CARGO_TARGET_DIR:-$root/target}"
  if [[ ! -d "$target/debug" ]]; then
    say "compiling $what: this is the first build, which compiles every dependency" \
      "(several minutes on a 2-core machine; later runs take seconds)"
  else
    say "compiling $what"
  fi
  # Cargo's progress bar, also through the pipe, when a person is watching.
  local progress=()
  if [[ -t 2 ]]; then
    progress=(CARGO_TERM_PROGRESS_WHEN=always "CARGO_TERM_PROGRESS_WIDTH=${COLUMNS:-80}")
  fi
  run_logged "$root/.local/logs/build.log" "compiling $what" env "${progress[@]}" cargo build "$@"
}

wait_for() { # url, what, log, [seconds]
  local limit="${4:-300}" started=$SECONDS next=15
  while (( SECONDS - started < limit )); do
    if python3 -c "import sys,urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError:
    pass
except Exception:
    sys.exit(1)" "$1" 2>/dev/null; then
      say "$2 ready ($((SECONDS - started)) s)"
      return 0
    fi
    if (( SECONDS - started >= next )); then
      say "still waiting for $2 ($((SECONDS - started)) s of at most $limit; log: $3)"
      next=$((next + 15))
    fi
    sleep 0.5
  done
  say "$2 did not come up within $limit s"
  log_tail "$3" 30
  exit 1
}
