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
# unless that is set (where paysim sends its payment callbacks), and log in
# to PostgreSQL as seckill_app, the application's role, unless SECKILL_PG_DSN
# is set.

APP_BIN=${SECKILL_APP_BIN:-$ROOT/bin/seckill}
APP_HTTP_ADDR=${SECKILL_APP_HTTP_ADDR:-127.0.0.1:8080}
APP_API_METRICS=${SECKILL_APP_API_METRICS_ADDR:-127.0.0.1:9464}
APP_WORKER_METRICS=${SECKILL_APP_WORKER_METRICS_ADDR:-127.0.0.1:9465}
APP_WAIT=${SECKILL_APP_WAIT:-60}

# app_free NAME ADDR WHAT: fail unless nothing listens on ADDR.
app_free() {
  port_open "${2%:*}" "${2#*:}" &&
    fail "$1" "$(logfile "$1")" "$2 ($3) is taken by another process (another bin/seckill api or worker?" \
      "make down, or move it: SECKILL_APP_HTTP_ADDR, SECKILL_APP_API_METRICS_ADDR, SECKILL_APP_WORKER_METRICS_ADDR)"
  return 0
}

app_up() {
  [ -x "$APP_BIN" ] || fail api "$(logfile api)" "$APP_BIN is missing: make build"
  # A rebuilt binary must replace the one running.
  app_down
  app_free api "$APP_HTTP_ADDR" "the gateway's API"
  app_free api "$APP_API_METRICS" "the gateway's /metrics"
  app_free worker "$APP_WORKER_METRICS" "the workers' /metrics"
  # As production runs them: logged in as the application's role, which may
  # read and write rows but not change the schema (docs/deploy.md#database-roles);
  # a SECKILL_PG_DSN of your own wins.
  export SECKILL_PG_DSN=${SECKILL_PG_DSN:-postgres://seckill_app:seckill@127.0.0.1:$PG_PORT/seckill?sslmode=disable}
  # The provider calls this gateway back, wherever it listens.
  export SECKILL_CALLBACK_URL=${SECKILL_CALLBACK_URL:-http://$APP_HTTP_ADDR/v1/payments/callback}
  log "api: starting $APP_BIN api on http://$APP_HTTP_ADDR (log $(logfile api))"
  SECKILL_HTTP_ADDR=$APP_HTTP_ADDR SECKILL_METRICS_ADDR=$APP_API_METRICS SECKILL_RATE_LIMIT_IP=${SECKILL_RATE_LIMIT_IP:-0} \
    start_bg api "$APP_BIN" api
  log "worker: starting $APP_BIN worker (log $(logfile worker))"
  SECKILL_METRICS_ADDR=$APP_WORKER_METRICS start_bg worker "$APP_BIN" worker
  local start=$SECONDS
  local started; started=$(date +%s)
  wait_until api "$APP_WAIT" curl -fsS "http://$APP_HTTP_ADDR/healthz"
  wait_until worker "$APP_WAIT" curl -fsS -o /dev/null "http://$APP_WORKER_METRICS/metrics"
  log "api: healthy on http://$APP_HTTP_ADDR; worker: /metrics on http://$APP_WORKER_METRICS ($((SECONDS - start))s)"
  if running prometheus; then
    log "prometheus: waiting until it scrapes $APP_API_METRICS and $APP_WORKER_METRICS (scrape interval 15s)"
    wait_until prometheus "$APP_WAIT" prometheus_targets_up "$started" "$APP_API_METRICS" "$APP_WORKER_METRICS"
    log "prometheus: both targets up"
  fi
}

# prometheus_targets_up SINCE ADDR...: true when Prometheus's /api/v1/targets
# lists every ADDR as an active target whose last scrape, at or after the Unix
# time SINCE (a scrape of the processes just started), succeeded (health up).
prometheus_targets_up() {
  curl -fsS "http://$PROMETHEUS_ADDR/api/v1/targets?state=active" | python3 -c '
import datetime, json, sys
since, want = float(sys.argv[1]), set(sys.argv[2:])
def at(t):
    return datetime.datetime.fromisoformat(t["lastScrape"][:19]).replace(tzinfo=datetime.timezone.utc).timestamp()
up = {t["labels"].get("instance") for t in json.load(sys.stdin)["data"]["activeTargets"]
      if t.get("health") == "up" and at(t) >= since}
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
