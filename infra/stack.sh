#!/usr/bin/env bash
# The local stack: moto (DynamoDB + SQS + SSM), the table and queues provisioned from
# template.yaml, the offline model stand-in (unless ANTHROPIC_API_KEY is set; with
# MODEL_PROVIDER=bedrock, reached as Bedrock Runtime's InvokeModel), the
# example tool server (infra/toolserver.py) the demo tenant's webhook tools call,
# the functions under `cargo lambda watch` with the API Gateway paths, and the
# bridges (degrau-bridge) that feed the jobs queue to the compactor, the WhatsApp
# queue to the WhatsApp worker and the events queue to events-out the way the SQS
# event source mapping does in AWS.
# The stand-in also plays the Graph API for the WhatsApp worker (always, even with
# an ANTHROPIC_API_KEY); `python3 infra/whatsapp.py send` posts signed deliveries.
#   infra/stack.sh start   start everything in the background; prints the API URL
#   infra/stack.sh stop    stop what start started
# State (pids, logs, env) lives in .local/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
state="$root/.local"
mkdir -p "$state"
api_port="${DEGRAU_API_PORT:-9000}"
standin_port="${DEGRAU_STANDIN_PORT:-4010}"
toolserver_port="${DEGRAU_TOOLSERVER_PORT:-4020}"
# The local WhatsApp secrets (infra/whatsapp.py uses the same defaults).
whatsapp_app_secret="${WHATSAPP_APP_SECRET:-degrau-local-app-secret}"
whatsapp_verify_token="${WHATSAPP_VERIFY_TOKEN:-degrau-local-verify-token}"

stop_pid() {
  local file="$state/$1.pid"
  if [[ -f "$file" ]]; then
    local pid
    pid="$(cat "$file")"
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    rm -f "$file"
  fi
}

# shellcheck source=infra/progress.sh
source "$root/infra/progress.sh"
target="${CARGO_TARGET_DIR:-$root/target}"

start() {
  say "starting the local stack (logs in .local/)"
  bash infra/setup.sh
  # shellcheck disable=SC1091
  source .venv/bin/activate
  bash infra/moto.sh start
  local endpoint
  endpoint="$(bash infra/moto.sh url)"
  say "creating the table and queues from template.yaml"
  python3 infra/provision.py --endpoint "$endpoint" > "$state/provision.env"
  # shellcheck disable=SC1091
  source "$state/provision.env"

  # The stand-in: the model when there is no key, and the Graph API always.
  cargo_build "the functions, the model stand-in and the bridge" \
    -p degrau-standin -p ask -p compactor -p whatsapp-webhook -p whatsapp-worker -p events-out -p degrau-bridge
  stop_pid standin
  say "starting the model stand-in on port $standin_port"
  setsid "$target/debug/degrau-standin" --port "$standin_port" > "$state/standin.log" 2>&1 &
  echo $! > "$state/standin.pid"
  wait_for "http://127.0.0.1:$standin_port/stand-in/requests" "the stand-in" "$state/standin.log"
  # The demo barbershop's own tools: the example tool server, a fresh signing
  # secret (in its environment and in moto's SSM, never on a command line) and the
  # tenant's CONFIG naming the webhooks (http to loopback: AUTH_MODE=dev only).
  stop_pid toolserver
  say "starting the example tool server on port $toolserver_port"
  local tool_secret
  tool_secret="$(python3 -c 'import secrets; print("whsec_" + secrets.token_hex(24))')"
  DEGRAU_TOOLSERVER_SECRET="$tool_secret" setsid python3 infra/toolserver.py \
    --port "$toolserver_port" --tenant demo-barbershop > "$state/toolserver.log" 2>&1 &
  echo $! > "$state/toolserver.pid"
  wait_for "http://127.0.0.1:$toolserver_port/health" "the tool server" "$state/toolserver.log"
  echo "http://127.0.0.1:$toolserver_port" > "$state/toolserver.url"
  DEGRAU_TOOLSERVER_SECRET="$tool_secret" python3 infra/demo_tenant.py --endpoint "$endpoint" \
    --table "$TABLE_NAME" --tools-url "http://127.0.0.1:$toolserver_port/"
  echo "degrau: the demo tenant's tools are webhooks to the example tool server (log: .local/toolserver.log)"

  local model_env=()
  if [[ "${MODEL_PROVIDER:-anthropic}" == "bedrock" ]]; then
    # Claude through Bedrock Runtime's InvokeModel, signed with the stack's dummy
    # AWS credentials: the stand-in's /model/{modelId}/invoke unless overridden.
    local bedrock_url="${AWS_ENDPOINT_URL_BEDROCK_RUNTIME:-http://127.0.0.1:$standin_port}"
    echo "degrau: MODEL_PROVIDER=bedrock: Bedrock Runtime at $bedrock_url (no API key)."
    model_env=(--env-var "MODEL_PROVIDER=bedrock"
               --env-var "AWS_ENDPOINT_URL_BEDROCK_RUNTIME=$bedrock_url")
  elif [[ -n "${ANTHROPIC_API_KEY:-}" ]]; then
    echo "degrau: ANTHROPIC_API_KEY is set: the local stack talks to Claude (${ANTHROPIC_BASE_URL:-https://api.anthropic.com})."
    model_env=(--env-var "ANTHROPIC_API_KEY=$ANTHROPIC_API_KEY")
    [[ -n "${ANTHROPIC_BASE_URL:-}" ]] && model_env+=(--env-var "ANTHROPIC_BASE_URL=$ANTHROPIC_BASE_URL")
  else
    echo "degrau: no ANTHROPIC_API_KEY: using the offline stand-in at http://127.0.0.1:$standin_port (not Claude)."
    model_env=(--env-var "ANTHROPIC_API_KEY=offline-stand-in"
               --env-var "ANTHROPIC_BASE_URL=${ANTHROPIC_BASE_URL:-http://127.0.0.1:$standin_port}")
  fi

  stop_pid watch
  say "starting the functions under cargo lambda watch on port $api_port"
  setsid cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$api_port" --ignore-changes \
    --env-var "TABLE_NAME=$TABLE_NAME" \
    --env-var "JOBS_QUEUE_URL=$JOBS_QUEUE_URL" \
    --env-var "EVENTS_QUEUE_URL=$EVENTS_QUEUE_URL" \
    --env-var "AWS_ENDPOINT_URL=$endpoint" \
    --env-var "AWS_REGION=us-east-1" \
    --env-var "AWS_ACCESS_KEY_ID=local" \
    --env-var "AWS_SECRET_ACCESS_KEY=local" \
    --env-var "AUTH_MODE=dev" \
    --env-var "WEBHOOK_SECRETS_PATH=/degrau/local/webhooks/" \
    --env-var "PSEUDONYM_KEY_PARAMETER=/degrau/local/pseudonym-key" \
    --env-var "RUST_LOG=info" \
    --env-var "WHATSAPP_QUEUE_URL=$WHATSAPP_QUEUE_URL" \
    --env-var "WHATSAPP_APP_SECRET=$whatsapp_app_secret" \
    --env-var "WHATSAPP_VERIFY_TOKEN=$whatsapp_verify_token" \
    --env-var "WHATSAPP_ACCESS_TOKEN=degrau-local-access-token" \
    --env-var "GRAPH_API_BASE_URL=http://127.0.0.1:$standin_port" \
    --env-var "SPEECH_TO_TEXT=standin" \
    --env-var "SPEECH_TO_TEXT_URL=http://127.0.0.1:$standin_port" \
    "${model_env[@]}" > "$state/watch.log" 2>&1 &
  echo $! > "$state/watch.pid"
  # The first request starts the function (watch checks the build first): wait
  # for its answer.
  wait_for "http://127.0.0.1:$api_port/v1/contacts/probe/memory" "cargo lambda watch (the ask function)" "$state/watch.log" 600
  echo "http://127.0.0.1:$api_port" > "$state/api.url"

  # The event source mapping's stand-in: polls the jobs queue and invokes the
  # compactor through watch's invoke endpoint (which compiles it on first use).
  # Failed jobs come back after 5 s instead of the queue's 720 s (local only).
  stop_pid bridge
  setsid env AWS_ENDPOINT_URL="$endpoint" AWS_REGION=us-east-1 \
    AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \
    "$target/debug/degrau-bridge" \
    --queue-url "$JOBS_QUEUE_URL" \
    --invoke-url "http://127.0.0.1:$api_port" --function compactor \
    --retry-visibility 5 > "$state/bridge.log" 2>&1 &
  echo $! > "$state/bridge.pid"
  echo "degrau: bridge feeding the jobs queue to the compactor (log: .local/bridge.log)"
  stop_pid bridge-whatsapp
  setsid env AWS_ENDPOINT_URL="$endpoint" AWS_REGION=us-east-1 \
    AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \
    "$target/debug/degrau-bridge" \
    --queue-url "$WHATSAPP_QUEUE_URL" \
    --invoke-url "http://127.0.0.1:$api_port" --function whatsapp-worker \
    --retry-visibility 5 > "$state/bridge-whatsapp.log" 2>&1 &
  echo $! > "$state/bridge-whatsapp.pid"
  echo "degrau: bridge feeding the WhatsApp queue to the WhatsApp worker (log: .local/bridge-whatsapp.log)"
  # A tenant's events (docs/events.md) to its events webhook, from the events queue.
  stop_pid bridge-events
  setsid env AWS_ENDPOINT_URL="$endpoint" AWS_REGION=us-east-1 \
    AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \
    "$target/debug/degrau-bridge" \
    --queue-url "$EVENTS_QUEUE_URL" \
    --invoke-url "http://127.0.0.1:$api_port" --function events-out \
    --retry-visibility 5 > "$state/bridge-events.log" 2>&1 &
  echo $! > "$state/bridge-events.pid"
  echo "degrau: bridge feeding the events queue to events-out (log: .local/bridge-events.log)"
  echo "degrau: WhatsApp webhook at http://127.0.0.1:$api_port/whatsapp/webhook (python3 infra/whatsapp.py --help)"
  echo "degrau: local API at http://127.0.0.1:$api_port (AUTH_MODE=dev: send X-Tenant-Id)"
}

stop() {
  stop_pid toolserver
  stop_pid bridge-events
  stop_pid bridge-whatsapp
  stop_pid bridge
  stop_pid watch
  stop_pid standin
  bash infra/moto.sh stop
  rm -f "$state/api.url" "$state/toolserver.url"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: infra/stack.sh start|stop" >&2; exit 2 ;;
esac
