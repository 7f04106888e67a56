# shellcheck shell=bash
# The application itself, as a deployment runs it: the gateway
# (`bin/seckill api`) and the workers (`bin/seckill worker`) as two background
# processes on the stack, pids and logs in $STACK_DIR like every stack process
# (pids/api.pid, logs/api.log, pids/worker.pid, logs/worker.log). `make run`
# starts them after the stack; `scripts/stack.sh down` stops them first.
# Sourced by scripts/stack.sh after scripts/stack/lib.sh and prometheus.sh.
#
#   app_up      (re)start both from bin/seckill (build it first: make build),
#               wait until the gateway answers /healthz and the worker's
#               /metrics answers, then, when the stack's Prometheus runs, until
#               it scrapes both (its /api/v1/targets says up).
#   app_down    stop both (by pid file).
#   app_env     what to open: API, metrics, Temporal UI, Prometheus, logs.
#
# Addresses (the processes' defaults; SECKILL_APP_* move them):
#   SECKILL_APP_HTTP_ADDR           gateway API       127.0.0.1:8080
#   SECKILL_APP_API_METRICS_ADDR    gateway /metrics  127.0.0.1:9464
#   SECKILL_APP_WORKER_METRICS_ADDR worker /metrics   127.0.0.1:9465
# The stack's Prometheus scrapes 127.0.0.1:9464 and :9465 unless
# SECKILL_PROMETHEUS_TARGETS says otherwise (scripts/stack/prometheus.sh).
# The gateway runs with SECKILL_RATE_LIMIT_IP=0 unless that is set: every
# buyer of `make run`'s demo comes from 127.0.0.1, which the per-address limit
# (default 200/s) would turn away; the per-user limit stays on. Both run with
# SECKILL_CALLBACK_URL=http://$SECKILL_APP_HTTP_ADDR/v1/payments/callback
# unless that is set (where paysim sends its payment callbacks).

APP_BIN=${SECKILL_APP_BIN:-$ROOT/bin/seckill}
APP_HTTP_ADDR=${SECKILL_APP_HTTP_ADDR:-127.0.0.1:8080}
APP_API_METRICS=${SECKILL_APP_API_METRICS_ADDR:-127.0.0.1:9464}
APP_WORKER_METRICS=${SECKILL_APP_WORKER_METRICS_ADDR:-127.0.0.1:9465}
APP_WAIT=${SECKILL_APP_WAIT:-60}

# app_start NAME PORT_ADDR ARGS...: start bin/seckill ARGS as NAME after
# checking its listening address is free.
app_start() {
  local name=$1 addr=$2; shift 2
  port_open "${addr%:*}" "${addr#*:}" &&
    fail "$name" "$(logfile "$name")" "$addr is taken by another process (another bin/seckill? make down, or move it: SECKILL_APP_*_ADDR)"
  log "$name: starting $* (log $(logfile "$name"))"
  start_bg "$name" "$@"
}

app_up() {
  [ -x "$APP_BIN" ] || fail api "$(logfile api)" "$APP_BIN is missing: make build"
  # A rebuilt binary must replace the one running.
  app_down
  # The provider calls this gateway back, wherever it listens.
  export SECKILL_CALLBACK_URL=${SECKILL_CALLBACK_URL:-http://$APP_HTTP_ADDR/v1/payments/callback}
  port_open "${APP_API_METRICS%:*}" "${APP_API_METRICS#*:}" &&
    fail api "$(logfile api)" "$APP_API_METRICS (the gateway's /metrics) is taken by another process"
  SECKILL_HTTP_ADDR=$APP_HTTP_ADDR SECKILL_METRICS_ADDR=$APP_API_METRICS SECKILL_RATE_LIMIT_IP=${SECKILL_RATE_LIMIT_IP:-0} \
    app_start api "$APP_HTTP_ADDR" "$APP_BIN" api
  SECKILL_METRICS_ADDR=$APP_WORKER_METRICS app_start worker "$APP_WORKER_METRICS" "$APP_BIN" worker
  local start=$SECONDS
  wait_until api "$APP_WAIT" curl -fsS "http://$APP_HTTP_ADDR/healthz"
  wait_until worker "$APP_WAIT" curl -fsS -o /dev/null "http://$APP_WORKER_METRICS/metrics"
  log "api: healthy on http://$APP_HTTP_ADDR; worker: /metrics on http://$APP_WORKER_METRICS ($((SECONDS - start))s)"
  if running prometheus; then
    log "prometheus: waiting until it scrapes $APP_API_METRICS and $APP_WORKER_METRICS (scrape interval 15s)"
    wait_until prometheus "$APP_WAIT" prometheus_targets_up "$APP_API_METRICS" "$APP_WORKER_METRICS"
    log "prometheus: both targets up"
  fi
}

# prometheus_targets_up ADDR...: true when Prometheus's /api/v1/targets lists
# every ADDR as an active target whose last scrape succeeded (health up).
prometheus_targets_up() {
  curl -fsS "http://$PROMETHEUS_ADDR/api/v1/targets?state=active" | python3 -c '
import json, sys
want = set(sys.argv[1:])
up = {t["labels"].get("instance") for t in json.load(sys.stdin)["data"]["activeTargets"] if t.get("health") == "up"}
sys.exit(0 if want <= up else 1)' "$@"
}

app_down() {
  stop_pid worker 30
  stop_pid api 30
}

app_env() {
  local q='sum by (result) (rate(seckill_reserve_requests_total[1m]))'
  local enc
  enc=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$q")
  cat <<TXT
API          http://$APP_HTTP_ADDR (try: curl http://$APP_HTTP_ADDR/healthz; README: Using it)
Metrics      gateway http://$APP_API_METRICS/metrics, worker http://$APP_WORKER_METRICS/metrics
Temporal UI  http://127.0.0.1:$TEMPORAL_UI_PORT
TXT
  if running prometheus; then
    echo "Prometheus   http://$PROMETHEUS_ADDR/graph?g0.expr=$enc&g0.tab=0&g0.range_input=15m"
    echo "             (the sale's reservation requests by result: $q)"
  fi
  cat <<TXT
Logs         $(logfile api), $(logfile worker)
Stop         make down (stops the gateway and the workers, then the stack)
TXT
}
