#!/usr/bin/env bash
# The project's local stack of real services, all on 127.0.0.1:
#   PostgreSQL 15  :15432   (Debian package, own data dir, database/role seckill)
#   Redis 7        :16379   (Debian package, AOF everysec, requirepass: the
#                            development SECKILL_REDIS_PASSWORD)
#   RocketMQ 5.x   :9876 name server, :10911 broker (Maven artifacts, Java 17)
#   Temporal dev   :7233 frontend, :8233 Web UI (Temporal CLI, SQLite file), or with
#                  SECKILL_TEMPORAL=server the real Temporal server on PostgreSQL
#                  (same ports; see scripts/stack/temporal-server.sh)
#   paysim         :18090 payment provider simulator (this project's `seckill-dev paysim`)
#   codec server   :8234 `seckill codec-server`: decrypts Temporal payloads for the Web UI
#                  (its codec endpoint) and `temporal ... --codec-endpoint`
#   Redis Cluster  :17001-17003 only with SECKILL_REDIS=cluster: three masters beside
#                  the single Redis (see scripts/stack/redis-cluster.sh)
#   Prometheus     :19090 only with SECKILL_PROMETHEUS=1 (Debian package; loads
#                  deploy/prometheus/alerts.yml; see scripts/stack/prometheus.sh)
#   the app        only with `app up` (make run): bin/seckill api :8080 (/metrics
#                  :9464) and bin/seckill worker (/metrics :9465); scripts/stack/app.sh
# and the test tools: Chromium (Temporal UI screenshots), Schemathesis in
# .stack/venv (API contract test), promtool (`make lint`: alert rules).
# Usage: scripts/stack.sh up|down|status|env
#        scripts/stack.sh prometheus up|down   (Prometheus alone, stack left as is)
#        scripts/stack.sh app up|down|env      (the gateway and the workers on the stack)
#        scripts/stack.sh install-promtool     (what `make lint` runs without promtool)
#        scripts/stack.sh temporal-server up|down|drop  (the real Temporal server alone)
#        scripts/stack.sh redis-cluster up|down|status|drop  (the Redis Cluster alone)
#        scripts/stack.sh pg-ha up|down|status|drop|dsn  (PostgreSQL with Patroni alone)
# SECKILL_TEMPORAL=dev (default) or server picks the Temporal of `up`;
# SECKILL_TEMPORAL_PORT / SECKILL_TEMPORAL_UI_PORT move it (default 7233 / 8233).
# SECKILL_TEMPORAL_DEV_CONFIG="KEY=VALUE ..." adds dynamic config values to the
# dev server's (read at its start; docs/benchmarks.md has the ones tried);
# SECKILL_TEMPORAL_GOGC (default 400) is the dev server's GOGC.
# Every default port lies below Linux's ephemeral range (32768-60999): a
# process the chaos tests kill comes back on a port no client socket holds.
# Data, pids and logs live in .stack/ (ignored by git). `down` stops exactly
# what `up` started, by pid. `up` is idempotent and installs what is missing.
set -euo pipefail
# The stack's processes (paysim) run with the development secrets.
export SECKILL_ENV=${SECKILL_ENV:-development}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ROOT
# shellcheck source=scripts/stack/lib.sh
source "$ROOT/scripts/stack/lib.sh"
# shellcheck source=scripts/stack/rocketmq.sh
source "$ROOT/scripts/stack/rocketmq.sh"
source "$ROOT/scripts/stack/chromium.sh"
source "$ROOT/scripts/stack/schemathesis.sh"
source "$ROOT/scripts/stack/prometheus.sh"
source "$ROOT/scripts/stack/temporal-server.sh"
source "$ROOT/scripts/stack/redis-cluster.sh"
source "$ROOT/scripts/stack/pg-ha.sh"
source "$ROOT/scripts/stack/app.sh"

PG_BIN=/usr/lib/postgresql/15/bin
PG_PORT=${SECKILL_PG_PORT:-15432}
PG_DATA=$STACK_DIR/data/postgres
PG_SOCK=$STACK_DIR/run/postgres
REDIS_PORT=${SECKILL_REDIS_PORT:-16379}
# Every Redis of the stack asks for this password (requirepass), the
# development default of SECKILL_REDIS_PASSWORD (internal/platform/config);
# redis-cli reads it from REDISCLI_AUTH.
REDIS_PASSWORD=${SECKILL_REDIS_PASSWORD:-dev-redis-password-change-me}
export REDISCLI_AUTH=$REDIS_PASSWORD
TEMPORAL_VERSION=v1.5.1
TEMPORAL_BIN=$STACK_DIR/bin/temporal
TEMPORAL_PORT=${SECKILL_TEMPORAL_PORT:-7233}
TEMPORAL_UI_PORT=${SECKILL_TEMPORAL_UI_PORT:-8233}
TEMPORAL_MODE=${SECKILL_TEMPORAL:-dev}
CODEC_ADDR=${SECKILL_CODEC_ADDR:-127.0.0.1:8234}
case "$TEMPORAL_MODE" in
dev | server) ;;
*) echo "SECKILL_TEMPORAL=$TEMPORAL_MODE: want dev (the dev server, default) or server (the real server)" >&2; exit 2 ;;
esac
case "${SECKILL_REDIS:-single}" in
single | cluster) ;;
*) echo "SECKILL_REDIS=$SECKILL_REDIS: want single (default) or cluster (also the Redis Cluster)" >&2; exit 2 ;;
esac
# Custom search attributes of the ReservationSaga (see workflows/names.go).
TEMPORAL_SEARCH_ATTRIBUTES=(ReservationStatus=Keyword ActivityId=Int SkuId=Int)

apt_updated=0
apt_install() {
  local logf; logf=$(logfile apt)
  if [ "$apt_updated" = 0 ]; then
    log "apt-get update"
    apt-get update >>"$logf" 2>&1 || fail apt "$logf" "apt-get update failed"
    apt_updated=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >>"$logf" 2>&1 ||
    fail apt "$logf" "apt-get install $* failed"
}

ensure_packages() {
  local want=()
  [ -x "$PG_BIN/postgres" ] || want+=(postgresql-15 postgresql-client-15)
  command -v redis-server >/dev/null || want+=(redis-server)
  command -v redis-cli >/dev/null || want+=(redis-tools)
  command -v java >/dev/null || want+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null || want+=(maven)
  command -v curl >/dev/null || want+=(curl)
  command -v wrk >/dev/null || want+=(wrk) # the bench's HTTP load generator (tools/bench/wrk.go)
  if [ ${#want[@]} -gt 0 ]; then apt_install "${want[@]}"; fi
  chromium_install
  schemathesis_install
  prometheus_install
  # apt may have started distribution services on the default ports; ours use
  # their own ports and data, so they do not conflict.
}

# ---------- PostgreSQL ----------
pg_psql() { runuser -u postgres -- "$PG_BIN/psql" -h "$PG_SOCK" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }

# project_roles_sql: the project's roles and database (idempotent SQL for psql
# as a superuser), the same on the single PostgreSQL and the Patroni pair.
project_roles_sql() {
  cat <<'SQL'
SELECT 'CREATE ROLE seckill LOGIN CREATEDB PASSWORD ''seckill'''
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'seckill') \gexec
ALTER ROLE seckill CREATEDB;
SELECT 'CREATE DATABASE seckill OWNER seckill'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'seckill') \gexec
-- The application's role (migrations grant it the rows, not the schema):
-- make run's api and worker, and the chaos and e2e processes, log in as it.
SELECT 'CREATE ROLE seckill_app'
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'seckill_app') \gexec
ALTER ROLE seckill_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD 'seckill';
SQL
}

postgres_up() {
  local lf; lf=$(logfile postgres)
  # 0700: the socket trusts local logins, so only postgres (and root) may reach it.
  mkdir -p "$PG_SOCK"; chown postgres:postgres "$PG_SOCK"; chmod 700 "$PG_SOCK"
  if [ ! -s "$PG_DATA/PG_VERSION" ]; then
    log "postgres: initdb $PG_DATA"
    mkdir -p "$PG_DATA"; chown postgres:postgres "$PG_DATA"; chmod 700 "$PG_DATA"
    runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth-local=trust \
      --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$lf" 2>&1 || fail postgres "$lf" "initdb failed"
  fi
  chown postgres:postgres "$lf"
  if running postgres && runuser -u postgres -- "$PG_BIN/pg_isready" -q -h "$PG_SOCK" -p "$PG_PORT"; then
    log "postgres: already running"
  else
    if running postgres; then
      # e.g. an older checkout's on another port: stopped before a server on
      # $PG_PORT opens the same data directory
      log "postgres: running but not answering on :$PG_PORT: restarting it"
      postgres_down
    fi
    port_open 127.0.0.1 "$PG_PORT" && fail postgres "$lf" "port $PG_PORT is taken by another process"
    warn_ephemeral postgres "$PG_PORT"
    log "postgres: starting on 127.0.0.1:$PG_PORT"
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$lf" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_SOCK -c max_connections=300 -c shared_buffers=512MB -c log_min_messages=warning" \
      start >/dev/null || fail postgres "$lf" "pg_ctl start failed"
    head -n1 "$PG_DATA/postmaster.pid" >"$(pidfile postgres)"
  fi
  wait_until postgres 60 runuser -u postgres -- "$PG_BIN/pg_isready" -q -h "$PG_SOCK" -p "$PG_PORT"
  # Project role and database (idempotent).
  project_roles_sql | pg_psql -d postgres || fail postgres "$lf" "creating role/database failed"
}

postgres_down() {
  if running postgres; then
    log "stopping postgres (pid $(cat "$(pidfile postgres)"))"
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null 2>&1 || stop_pid postgres
  fi
  rm -f "$(pidfile postgres)"
}

# ---------- Redis ----------
# redis_auth_conf: the path of a config file (mode 0600) that sets the
# stack's password for clients and, in a cluster, for replication, so the
# password is not on any command line.
redis_auth_conf() {
  local f="$STACK_DIR/run/redis-auth.conf"
  mkdir -p "$STACK_DIR/run"
  (umask 077; printf 'requirepass "%s"\nmasterauth "%s"\n' "$REDIS_PASSWORD" "$REDIS_PASSWORD" >"$f")
  echo "$f"
}

redis_up() {
  # A Redis of an older checkout (without the password, or on another port)
  # is restarted on this one's settings; two on one data directory never run.
  if running redis; then
    if [ "$(env -u REDISCLI_AUTH redis-cli -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; then
      log "redis: running without the stack's password: restarting it"
    elif redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; then
      log "redis: already running"; return
    else
      log "redis: running but not answering on :$REDIS_PORT with the stack's password: restarting it"
    fi
    stop_pid redis 30
  fi
  port_open 127.0.0.1 "$REDIS_PORT" && fail redis "$(logfile redis)" "port $REDIS_PORT is taken by another process"
  mkdir -p "$STACK_DIR/data/redis"
  warn_ephemeral redis "$REDIS_PORT"
  log "redis: starting on 127.0.0.1:$REDIS_PORT"
  start_bg redis redis-server "$(redis_auth_conf)" --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$STACK_DIR/data/redis" \
    --daemonize no --appendonly yes --appendfsync everysec --save "" --maxmemory-policy noeviction
  wait_until redis 30 sh -c "redis-cli -p $REDIS_PORT ping | grep -q PONG"
}

# ---------- Temporal ----------
temporal_install() {
  # `temporal --version` of a go-installed CLI says 0.0.0-DEV, so a marker file
  # records which version we built.
  if [ -x "$TEMPORAL_BIN" ] && [ "$(cat "$TEMPORAL_BIN.version" 2>/dev/null)" = "$TEMPORAL_VERSION" ]; then return; fi
  local lf; lf=$(logfile temporal-install)
  log "temporal: go install github.com/temporalio/cli/cmd/temporal@$TEMPORAL_VERSION (first time ~2 min)"
  GOBIN="$STACK_DIR/bin" go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_VERSION" >"$lf" 2>&1 ||
    fail temporal "$lf" "go install of the Temporal CLI failed"
  echo "$TEMPORAL_VERSION" >"$TEMPORAL_BIN.version"
}

temporal_healthy() {
  "$TEMPORAL_BIN" operator cluster health --address "127.0.0.1:$TEMPORAL_PORT" 2>/dev/null | grep -q SERVING &&
    port_open 127.0.0.1 "$TEMPORAL_UI_PORT"
}

temporal_up() {
  temporal_install
  if running temporal && temporal_healthy; then log "temporal: already running"; return; fi
  if running temporal; then
    fail temporal "$(logfile temporal)" "the dev server (pid $(cat "$(pidfile temporal)")) runs but does not serve on" \
      "127.0.0.1:$TEMPORAL_PORT with its UI on :$TEMPORAL_UI_PORT (other ports? still starting?): stop it first (scripts/stack.sh down)"
  fi
  if running temporal-server && port_open 127.0.0.1 "$TEMPORAL_PORT"; then
    fail temporal "$(logfile temporal-server)" "the real Temporal server (pid $(cat "$(pidfile temporal-server)")) runs;" \
      "stop the stack first (scripts/stack.sh down) to switch to the dev server, or keep it: SECKILL_TEMPORAL=server"
  fi
  port_open 127.0.0.1 "$TEMPORAL_PORT" && fail temporal "$(logfile temporal)" "port $TEMPORAL_PORT is taken by another process (a server left running?)"
  mkdir -p "$STACK_DIR/data/temporal"
  local args=(server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --ui-port "$TEMPORAL_UI_PORT"
    --namespace default --db-filename "$STACK_DIR/data/temporal/temporal.db"
    --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal
    --dynamic-config-value matching.numTaskqueueReadPartitions=1
    --dynamic-config-value matching.numTaskqueueWritePartitions=1
    --ui-codec-endpoint "http://$CODEC_ADDR" --log-level warn)
  local sa dc
  for sa in "${TEMPORAL_SEARCH_ATTRIBUTES[@]}"; do args+=(--search-attribute "$sa"); done
  for dc in ${SECKILL_TEMPORAL_DEV_CONFIG:-}; do args+=(--dynamic-config-value "$dc"); done
  log "temporal: starting dev server on 127.0.0.1:$TEMPORAL_PORT (UI :$TEMPORAL_UI_PORT)"
  # GOGC 400: the dev server spends about a tenth less CPU per saga for about
  # 0.5 GB more memory (docs/benchmarks.md#settings-tried-on-the-server-and-the-worker).
  GOGC=${SECKILL_TEMPORAL_GOGC:-400} start_bg temporal "$TEMPORAL_BIN" "${args[@]}"
  wait_until temporal 120 temporal_healthy
}

# ---------- Payment provider simulator (the project's own `seckill-dev paysim`) ----------
PAYSIM_ADDR=${SECKILL_PAYSIM_ADDR:-127.0.0.1:18090}
paysim_up() {
  if running paysim && curl -fsS "http://$PAYSIM_ADDR/healthz" >/dev/null 2>&1; then log "paysim: already running"; return; fi
  port_open "${PAYSIM_ADDR%:*}" "${PAYSIM_ADDR#*:}" && fail paysim "$(logfile paysim)" "port ${PAYSIM_ADDR#*:} is taken by another process"
  local lf; lf=$(logfile paysim-build)
  log "paysim: building bin/seckill-dev"
  (cd "$ROOT" && go build -o "$STACK_DIR/bin/seckill-paysim" ./cmd/seckill-dev) >"$lf" 2>&1 || fail paysim "$lf" "go build failed"
  log "paysim: starting payment provider simulator on $PAYSIM_ADDR"
  SECKILL_PAYSIM_ADDR=$PAYSIM_ADDR start_bg paysim "$STACK_DIR/bin/seckill-paysim" paysim
  wait_until paysim 30 curl -fsS "http://$PAYSIM_ADDR/healthz"
}

# ---------- Codec server (`seckill codec-server`: the Web UI's codec endpoint) ----------
codec_up() {
  if running codec && codec_healthy; then log "codec: already running"; return; fi
  port_open "${CODEC_ADDR%:*}" "${CODEC_ADDR#*:}" && fail codec "$(logfile codec)" "port ${CODEC_ADDR#*:} is taken by another process"
  local lf; lf=$(logfile codec-build)
  log "codec: building bin/seckill"
  (cd "$ROOT" && go build -o "$STACK_DIR/bin/seckill-codec" ./cmd/seckill) >"$lf" 2>&1 || fail codec "$lf" "go build failed"
  log "codec: starting the payload codec server on http://$CODEC_ADDR"
  start_bg codec "$STACK_DIR/bin/seckill-codec" codec-server --addr "$CODEC_ADDR" \
    --origin "http://127.0.0.1:$TEMPORAL_UI_PORT" --origin "http://localhost:$TEMPORAL_UI_PORT"
  wait_until codec 30 codec_healthy
}

# codec_healthy: /decode answers an empty batch.
codec_healthy() { curl -fsS -o /dev/null -X POST -d '{"payloads":[]}' "http://$CODEC_ADDR/decode"; }

print_addresses() {
  cat <<TXT
PostgreSQL   postgres://seckill:seckill@127.0.0.1:$PG_PORT/seckill?sslmode=disable
Redis        redis://127.0.0.1:$REDIS_PORT (password: SECKILL_REDIS_PASSWORD's development default; redis-cli: export REDISCLI_AUTH=$REDIS_PASSWORD)
RocketMQ     name server 127.0.0.1:9876, broker 127.0.0.1:10911
Temporal     127.0.0.1:$TEMPORAL_PORT (namespace default; $(temporal_what))
Temporal UI  http://127.0.0.1:$TEMPORAL_UI_PORT
Paysim       http://$PAYSIM_ADDR (payment provider simulator)
Codec server http://$CODEC_ADDR (Temporal payloads, for the UI and --codec-endpoint)
TXT
  if running "redis-cluster-${REDIS_CLUSTER_PORTS%% *}"; then echo "Redis Cluster SECKILL_REDIS_CLUSTER_ADDRS=$(redis_cluster_seeds)"; fi
  if running prometheus; then echo "Prometheus   http://$PROMETHEUS_ADDR (targets: http://$PROMETHEUS_ADDR/targets, alerts: /alerts)"; fi
}

# temporal_what: which Temporal runs (or would run).
temporal_what() {
  if running temporal-server; then echo "real server $TSERVER_VERSION on PostgreSQL"
  elif running temporal || [ "$TEMPORAL_MODE" = dev ]; then echo "dev server, SQLite"
  else echo "real server $TSERVER_VERSION on PostgreSQL"; fi
}

status() {
  local n
  for n in postgres redis temporal paysim codec api worker; do
    if running "$n"; then echo "$n running (pid $(cat "$(pidfile "$n")"))"
    elif [ "$n" = temporal ] && running temporal-server; then echo "temporal (dev server) stopped"
    else echo "$n stopped"; fi
  done
  if running temporal-server; then
    read -r n _ <<<"$(tserver_ports)"
    echo "temporal-server running (pid $(cat "$(pidfile temporal-server)"), 127.0.0.1:$n)"
  fi
  if running temporal-ui; then
    read -r _ n <<<"$(tserver_ports)"
    echo "temporal-ui running (pid $(cat "$(pidfile temporal-ui)"), http://127.0.0.1:$n)"
  fi
  if ! running temporal-server; then echo "temporal-server stopped (optional: SECKILL_TEMPORAL=server make up)"; fi
  rocketmq_status
  redis_cluster_status
  pg_ha_status
  if running prometheus; then echo "prometheus running (pid $(cat "$(pidfile prometheus)"), http://$PROMETHEUS_ADDR)"
  else echo "prometheus stopped (optional: SECKILL_PROMETHEUS=1 make up)"; fi
}

cmd=${1:-up}
case "$cmd" in
up)
  start=$SECONDS
  ensure_packages
  postgres_up
  redis_up
  if [ "${SECKILL_REDIS:-single}" = cluster ]; then redis_cluster_up; fi
  if [ "${SECKILL_PG:-single}" = ha ]; then pg_ha_up; fi
  rocketmq_up
  if [ "$TEMPORAL_MODE" = server ]; then tserver_up; else temporal_up; fi
  paysim_up
  codec_up
  if [ "${SECKILL_PROMETHEUS:-0}" = 1 ]; then prometheus_up; fi
  log "stack up in $((SECONDS - start))s"
  print_addresses
  ;;
down)
  app_down
  prometheus_down
  stop_pid paysim 10
  stop_pid codec 10
  stop_pid temporal 30
  tserver_down
  rocketmq_down
  redis_cluster_down
  pg_ha_down
  stop_pid redis 30
  postgres_down
  ;;
status) status ;;
env) print_addresses ;;
prometheus)
  case "${2:-}" in
  up) prometheus_up; print_addresses | tail -n1 ;;
  down) prometheus_down ;;
  *) echo "usage: $0 prometheus up|down" >&2; exit 2 ;;
  esac
  ;;
app)
  case "${2:-}" in
  up) app_up ;;
  down) app_down ;;
  env) app_env ;;
  *) echo "usage: $0 app up|down|env" >&2; exit 2 ;;
  esac
  ;;
install-promtool) prometheus_install; "$PROMTOOL_BIN" --version 2>&1 | head -n1 ;;
temporal-server)
  case "${2:-}" in
  up) temporal_install; postgres_up; tserver_up; print_addresses | grep '^Temporal' ;;
  down) tserver_down ;;
  drop) tserver_drop ;;
  *) echo "usage: $0 temporal-server up|down|drop" >&2; exit 2 ;;
  esac
  ;;
redis-cluster)
  case "${2:-}" in
  up) redis_cluster_up; echo "SECKILL_REDIS_CLUSTER_ADDRS=$(redis_cluster_seeds)" ;;
  down) redis_cluster_down ;;
  status) redis_cluster_status ;;
  drop) redis_cluster_drop ;;
  *) echo "usage: $0 redis-cluster up|down|status|drop" >&2; exit 2 ;;
  esac
  ;;
pg-ha)
  case "${2:-}" in
  up) pg_ha_up; echo "SECKILL_PG_DSN=$(pg_ha_dsn)" ;;
  down) pg_ha_down ;;
  status) pg_ha_status ;;
  drop) pg_ha_down; log "pg-ha: deleting $PGHA_DIR"; rm -rf "$PGHA_DIR" ;;
  dsn) pg_ha_dsn ;;
  *) echo "usage: $0 pg-ha up|down|status|drop|dsn" >&2; exit 2 ;;
  esac
  ;;
*) echo "usage: $0 up|down|status|env|install-promtool|app up|down|env|prometheus up|down|temporal-server up|down|drop|redis-cluster up|down|status|drop|pg-ha up|down|status|drop|dsn" >&2; exit 2 ;;
esac
