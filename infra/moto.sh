#!/usr/bin/env bash
# The local stand-in for DynamoDB and SQS: moto's server mode on loopback.
#   infra/moto.sh start [port]   start in the background (no-op when already running)
#   infra/moto.sh stop           stop it
#   infra/moto.sh url            print the endpoint
# Pid, port and log live under .local/ at the repo root. Port 5005 by default
# (DEGRAU_MOTO_PORT overrides), away from LocalStack's 4566 and moto's own 5000.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
state="$root/.local"
pidfile="$state/moto.pid"
portfile="$state/moto.port"
logfile="$state/moto.log"
default_port="${DEGRAU_MOTO_PORT:-5005}"

port() {
  if [[ -f "$portfile" ]]; then cat "$portfile"; else echo "$default_port"; fi
}

url() {
  echo "http://127.0.0.1:$(port)"
}

running() {
  [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

answers() {
  python3 - "$1" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=1)
except Exception:
    sys.exit(1)
PY
}

wait_until_up() {
  for _ in $(seq 1 100); do
    if answers "$(url)"; then
      return 0
    fi
    if ! running; then
      echo "moto: failed to start; last lines of $logfile:" >&2
      tail -n 20 "$logfile" >&2
      echo "moto: the whole log: $logfile" >&2
      rm -f "$pidfile"
      exit 1
    fi
    sleep 0.1
  done
  echo "moto: no answer at $(url) after 10 s; last lines of $logfile:" >&2
  tail -n 20 "$logfile" >&2
  echo "moto: the whole log: $logfile" >&2
  exit 1
}

start() {
  local want="${1:-$default_port}"
  if running; then
    if [[ "$(port)" != "$want" ]]; then
      echo "moto: already running on port $(port), not $want; run '$0 stop' first" >&2
      exit 1
    fi
    wait_until_up
    echo "moto: already running at $(url)" >&2
    return
  fi
  if [[ ! -x "$root/.venv/bin/moto_server" ]]; then
    echo "moto: .venv/bin/moto_server is missing; run 'bash infra/setup.sh' first" >&2
    exit 1
  fi
  mkdir -p "$state"
  echo "moto: starting DynamoDB, SQS and SSM on 127.0.0.1:$want" >&2
  echo "$want" >"$portfile"
  # setsid: the server outlives the calling shell and its job control.
  # infra/moto_server.py is moto's server without its instance tracker, which
  # otherwise keeps a copy of every item every query and transaction touched.
  setsid "$root/.venv/bin/python" "$root/infra/moto_server.py" -H 127.0.0.1 -p "$want" \
    >"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
  wait_until_up
  echo "moto: running at $(url) (log: .local/moto.log)" >&2
}

stop() {
  if running; then
    kill "$(cat "$pidfile")"
    for _ in $(seq 1 50); do
      running || break
      sleep 0.1
    done
    echo "moto: stopped" >&2
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop ;;
  url) url ;;
  *)
    echo "usage: $0 start [port] | stop | url" >&2
    exit 2
    ;;
esac
