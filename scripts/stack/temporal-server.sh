# shellcheck shell=bash
# The real Temporal server (go.temporal.io/server, the version the Temporal CLI
# of the dev server is built on) on the stack's PostgreSQL, in place of the
# dev server: `SECKILL_TEMPORAL=server scripts/stack.sh up` (or make up).
# Sourced by scripts/stack.sh after scripts/stack/lib.sh; uses stack.sh's
# pg_psql, PG_PORT, TEMPORAL_BIN (the CLI: health checks, namespace, search
# attributes), TEMPORAL_PORT, TEMPORAL_UI_PORT, TEMPORAL_SEARCH_ATTRIBUTES,
# CODEC_ADDR (the UI's codec endpoint).
#
#   tserver_install  go install, into $STACK_DIR/bin with a version marker:
#                      temporal-server     go.temporal.io/server/cmd/server
#                      temporal-sql-tool   go.temporal.io/server/cmd/tools/sql
#                      temporal-ui-server  github.com/temporalio/ui-server/v2/cmd/server
#                    (the Web UI the dev server embeds, same version, run as
#                    its own process: the server itself has no UI)
#   tserver_schema   role temporal and databases temporal, temporal_visibility
#                    on the stack's PostgreSQL; temporal-sql-tool sets up and
#                    updates their schemas (postgres12 plugin, the versioned
#                    schemas postgresql/v12/{temporal,visibility} embedded in
#                    the tool, the same files as the module's schema/ dir)
#   tserver_up       write the server's config ($TSERVER_DIR/config), start
#                    all four services (frontend, history, matching, worker) in
#                    one process, wait for `temporal operator cluster health`,
#                    create namespace default and the search attributes if
#                    missing, then start the UI server
#   tserver_down     stop the UI server and the server (by pid file)
#
# Ports, all on 127.0.0.1, derived from the frontend's $TEMPORAL_PORT
# (SECKILL_TEMPORAL_PORT, default 7233) as in the server's sample configs:
# frontend gRPC P, HTTP P+10; history P+1, matching P+2, worker P+6; the
# membership (ringpop) ports P-300 + the same offsets. The UI on
# $TEMPORAL_UI_PORT (SECKILL_TEMPORAL_UI_PORT, default 8233).
#
# Data: the two PostgreSQL databases (not the project's seckill database) and
# the config in $TSERVER_DIR; the dev server's SQLite file is untouched. The
# number of history shards is fixed when the cluster is first created: to
# change TSERVER_SHARDS, drop the two databases (tserver_drop) first.

TSERVER_VERSION=v1.29.1   # go.temporal.io/server of CLI v1.5.1: go version -m .stack/bin/temporal
TSERVER_UI_VERSION=v2.42.1 # github.com/temporalio/ui-server/v2 of CLI v1.5.1
TSERVER_BIN=$STACK_DIR/bin/temporal-server
TSERVER_SQL_TOOL=$STACK_DIR/bin/temporal-sql-tool
TSERVER_UI_BIN=$STACK_DIR/bin/temporal-ui-server
TSERVER_DIR=$STACK_DIR/data/temporal-server
TSERVER_SHARDS=4
TSERVER_RETENTION=24h
TSERVER_DB=temporal
TSERVER_VIS_DB=temporal_visibility
TSERVER_DB_USER=temporal
TSERVER_DB_PASSWORD=temporal

# tserver_since T0: seconds since T0 (an $EPOCHREALTIME), to 0.1 s.
tserver_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# tserver_go_install NAME PKG@VERSION MARKER: go install PKG into a scratch
# GOBIN (both commands are named `server`), then move it to $STACK_DIR/bin/NAME.
tserver_go_install() {
  local name=$1 pkg=$2 marker=$3 bin=$STACK_DIR/bin/$1
  if [ -x "$bin" ] && [ "$(cat "$bin.version" 2>/dev/null)" = "$marker" ]; then return; fi
  local lf tmp start=$EPOCHREALTIME; lf=$(logfile "$name-install")
  tmp=$(mktemp -d "$STACK_DIR/bin/.install-XXXXXX")
  log "temporal-server: go install $pkg (first time: minutes)"
  GOBIN=$tmp go install "$pkg" >"$lf" 2>&1 || { rm -rf "$tmp"; fail "$name" "$lf" "go install $pkg failed"; }
  mv "$tmp/$(basename "${pkg%@*}")" "$bin"
  rm -rf "$tmp"
  echo "$marker" >"$bin.version"
  log "temporal-server: built $name in $(tserver_since "$start")s"
}

tserver_install() {
  tserver_go_install temporal-server "go.temporal.io/server/cmd/server@$TSERVER_VERSION" "$TSERVER_VERSION"
  tserver_go_install temporal-sql-tool "go.temporal.io/server/cmd/tools/sql@$TSERVER_VERSION" "$TSERVER_VERSION"
  tserver_go_install temporal-ui-server "github.com/temporalio/ui-server/v2/cmd/server@$TSERVER_UI_VERSION" "$TSERVER_UI_VERSION"
}

# tserver_sql DB ARGS...: temporal-sql-tool on database DB as the temporal role.
tserver_sql() {
  local db=$1; shift
  "$TSERVER_SQL_TOOL" --plugin postgres12 --endpoint 127.0.0.1 --port "$PG_PORT" \
    --user "$TSERVER_DB_USER" --password "$TSERVER_DB_PASSWORD" --database "$db" "$@"
}

tserver_schema() {
  local lf start=$EPOCHREALTIME db schema; lf=$(logfile temporal-server-schema)
  : >"$lf"
  pg_psql -d postgres >>"$lf" 2>&1 <<SQL || fail temporal-server "$lf" "creating role/databases failed"
SELECT 'CREATE ROLE $TSERVER_DB_USER LOGIN PASSWORD ''$TSERVER_DB_PASSWORD'''
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$TSERVER_DB_USER') \gexec
SELECT 'CREATE DATABASE $TSERVER_DB OWNER $TSERVER_DB_USER'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$TSERVER_DB') \gexec
SELECT 'CREATE DATABASE $TSERVER_VIS_DB OWNER $TSERVER_DB_USER'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$TSERVER_VIS_DB') \gexec
SQL
  for db in "$TSERVER_DB:temporal" "$TSERVER_VIS_DB:visibility"; do
    schema=${db#*:}; db=${db%%:*}
    # setup-schema -v 0.0 creates only the version tables; update-schema then
    # applies every versioned step past the recorded version (none when current).
    if [ -z "$(pg_psql -d "$db" -c "SELECT to_regclass('public.schema_version')")" ]; then
      tserver_sql "$db" setup-schema -v 0.0 >>"$lf" 2>&1 || fail temporal-server "$lf" "setup-schema of $db failed"
    fi
    tserver_sql "$db" update-schema --schema-name "postgresql/v12/$schema" >>"$lf" 2>&1 ||
      fail temporal-server "$lf" "update-schema of $db failed"
    log "temporal-server: database $db at schema $(pg_psql -d "$db" -c 'SELECT curr_version FROM schema_version')"
  done
  log "temporal-server: schemas ready in $(tserver_since "$start")s"
}

# tserver_drop: drop the two databases (a fresh cluster next time; the server must be stopped).
tserver_drop() {
  running temporal-server && { log "temporal-server: running; stop it first (scripts/stack.sh down)"; return 1; }
  pg_psql -d postgres -c "DROP DATABASE IF EXISTS $TSERVER_DB" -c "DROP DATABASE IF EXISTS $TSERVER_VIS_DB"
  log "temporal-server: dropped databases $TSERVER_DB and $TSERVER_VIS_DB"
}

# tserver_store_yaml DB MAXCONNS: a datastore of the server's config.
tserver_store_yaml() {
  cat <<YAML
      sql:
        pluginName: postgres12
        databaseName: $1
        connectAddr: "127.0.0.1:$PG_PORT"
        connectProtocol: tcp
        user: $TSERVER_DB_USER
        password: $TSERVER_DB_PASSWORD
        maxConns: $2
        maxIdleConns: $2
        maxConnLifetime: 1h
YAML
}

tserver_write_config() {
  local p=$TEMPORAL_PORT m=$((TEMPORAL_PORT - 300)) cfg=$TSERVER_DIR/config
  mkdir -p "$cfg" "$TSERVER_DIR/ui"
  {
    cat <<YAML
# Written by scripts/stack.sh (scripts/stack/temporal-server.sh) on every start.
log:
  stdout: true
  level: warn
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: $TSERVER_SHARDS
  datastores:
    postgres-default:
YAML
    tserver_store_yaml "$TSERVER_DB" 20
    echo "    postgres-visibility:"
    tserver_store_yaml "$TSERVER_VIS_DB" 10
    cat <<YAML
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
services:
  frontend:
    rpc: {grpcPort: $p, httpPort: $((p + 10)), membershipPort: $m, bindOnLocalHost: true}
  history:
    rpc: {grpcPort: $((p + 1)), membershipPort: $((m + 1)), bindOnLocalHost: true}
  matching:
    rpc: {grpcPort: $((p + 2)), membershipPort: $((m + 2)), bindOnLocalHost: true}
  worker:
    rpc: {grpcPort: $((p + 6)), membershipPort: $((m + 6)), bindOnLocalHost: true}
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:$p"
      httpAddress: "127.0.0.1:$((p + 10))"
dcRedirectionPolicy:
  policy: noop
archival:
  history: {state: disabled}
  visibility: {state: disabled}
namespaceDefaults:
  archival:
    history: {state: disabled}
    visibility: {state: disabled}
publicClient:
  hostPort: "127.0.0.1:$p"
dynamicConfigClient:
  filepath: $cfg/dynamicconfig.yaml
  pollInterval: 10s
YAML
  } >"$cfg/seckill.yaml"
  # What the dev server sets (scripts/stack.sh temporal_up and the CLI's
  # defaults), so both modes run the sagas under the same limits.
  cat >"$cfg/dynamicconfig.yaml" <<YAML
matching.numTaskqueueReadPartitions:
  - value: 1
matching.numTaskqueueWritePartitions:
  - value: 1
history.hostLevelCacheMaxSize:
  - value: 8096
frontend.namespaceRPS.visibility:
  - value: 100
limit.maxIDLength:
  - value: 255
YAML
  cat >"$TSERVER_DIR/ui/seckill.yaml" <<YAML
# Written by scripts/stack.sh (scripts/stack/temporal-server.sh) on every start.
temporalGrpcAddress: "127.0.0.1:$p"
host: 127.0.0.1
port: $TEMPORAL_UI_PORT
enableUi: true
defaultNamespace: default
hideLogs: true
cors:
  cookieInsecure: true
# The browser fetches decoded payloads here (scripts/stack.sh codec_up).
codec:
  endpoint: "http://$CODEC_ADDR"
YAML
}

tserver_healthy() {
  "$TEMPORAL_BIN" operator cluster health --address "127.0.0.1:$TEMPORAL_PORT" 2>/dev/null | grep -q SERVING
}

tserver_ui_healthy() { curl -fsS -o /dev/null "http://127.0.0.1:$TEMPORAL_UI_PORT/"; }

# tserver_search_attributes_ok: namespace default lists every search attribute.
tserver_search_attributes_ok() {
  local have sa; have=$("$TEMPORAL_BIN" operator search-attribute list --address "127.0.0.1:$TEMPORAL_PORT" -n default 2>/dev/null) || return 1
  for sa in "${TEMPORAL_SEARCH_ATTRIBUTES[@]}"; do
    grep -Eq "^ *${sa%=*} +${sa#*=}" <<<"$have" || return 1
  done
}

tserver_namespace() {
  local lf a=(--address "127.0.0.1:$TEMPORAL_PORT") sa; lf=$(logfile temporal-server-setup)
  : >"$lf"
  if ! "$TEMPORAL_BIN" operator namespace describe "${a[@]}" -n default >/dev/null 2>>"$lf"; then
    log "temporal-server: creating namespace default (retention $TSERVER_RETENTION)"
    "$TEMPORAL_BIN" operator namespace create "${a[@]}" -n default --retention "$TSERVER_RETENTION" >>"$lf" 2>&1 ||
      fail temporal-server "$lf" "creating namespace default failed"
  fi
  # A new namespace reaches the frontend's namespace cache within ~10 s;
  # until then calls on it fail with "Namespace default is not found".
  wait_until temporal-server 60 "$TEMPORAL_BIN" operator search-attribute list "${a[@]}" -n default
  if tserver_search_attributes_ok; then return; fi
  local have
  have=$("$TEMPORAL_BIN" operator search-attribute list "${a[@]}" -n default 2>>"$lf") ||
    fail temporal-server "$lf" "listing the search attributes of namespace default failed"
  for sa in "${TEMPORAL_SEARCH_ATTRIBUTES[@]}"; do
    grep -Eq "^ *${sa%=*} " <<<"$have" && continue
    log "temporal-server: creating search attribute ${sa%=*} (${sa#*=})"
    "$TEMPORAL_BIN" operator search-attribute create "${a[@]}" -n default --name "${sa%=*}" --type "${sa#*=}" >>"$lf" 2>&1 ||
      fail temporal-server "$lf" "creating search attribute $sa failed"
  done
  wait_until temporal-server 60 tserver_search_attributes_ok
}

# tserver_port_free NAME PORT: fail unless 127.0.0.1:PORT is free, naming the
# dev server when it is the one listening there (it is never stopped here).
tserver_port_free() {
  local name=$1 port=$2
  port_open 127.0.0.1 "$port" || return 0
  if running temporal && ss -ltnpH "sport = :$port" 2>/dev/null | grep -q "pid=$(cat "$(pidfile temporal)"),"; then
    fail "$name" "$(logfile temporal)" "port $port is the Temporal dev server's (pid $(cat "$(pidfile temporal)")):" \
      "stop the stack first (scripts/stack.sh down) to switch to the real server," \
      "or give it other ports (SECKILL_TEMPORAL_PORT, SECKILL_TEMPORAL_UI_PORT)"
  fi
  fail "$name" "$(logfile "$name")" "port $port is taken by another process (a server left running?)"
}

# tserver_ports: the frontend and UI ports the running server was started
# with ($TSERVER_DIR/ports), e.g. "7233 8233".
tserver_ports() { cat "$TSERVER_DIR/ports" 2>/dev/null; }

tserver_up() {
  local start
  tserver_install
  if running temporal-server && [ "$(tserver_ports)" != "$TEMPORAL_PORT $TEMPORAL_UI_PORT" ]; then
    fail temporal-server "$(logfile temporal-server)" "the real server (pid $(cat "$(pidfile temporal-server)")) runs with" \
      "frontend and UI ports $(tserver_ports), not $TEMPORAL_PORT $TEMPORAL_UI_PORT: stop it first (scripts/stack.sh temporal-server down)"
  fi
  if running temporal-server && tserver_healthy; then
    log "temporal-server: already running"
  else
    tserver_port_free temporal-server "$TEMPORAL_PORT"
    tserver_schema
    tserver_write_config
    start=$EPOCHREALTIME
    log "temporal-server: starting $TSERVER_VERSION on 127.0.0.1:$TEMPORAL_PORT ($TSERVER_SHARDS history shards, PostgreSQL $TSERVER_DB/$TSERVER_VIS_DB)"
    echo "$TEMPORAL_PORT $TEMPORAL_UI_PORT" >"$TSERVER_DIR/ports"
    start_bg temporal-server "$TSERVER_BIN" --root "$TSERVER_DIR" --config config --env seckill --allow-no-auth start
    wait_until temporal-server 120 tserver_healthy
    log "temporal-server: serving in $(tserver_since "$start")s"
  fi
  tserver_namespace
  if running temporal-ui && tserver_ui_healthy; then log "temporal-ui: already running"; return; fi
  tserver_port_free temporal-ui "$TEMPORAL_UI_PORT"
  log "temporal-ui: starting $TSERVER_UI_VERSION on http://127.0.0.1:$TEMPORAL_UI_PORT"
  start=$EPOCHREALTIME
  start_bg temporal-ui "$TSERVER_UI_BIN" --root "$TSERVER_DIR" --config ui --env seckill start
  wait_until temporal-ui 60 tserver_ui_healthy
  log "temporal-ui: serving in $(tserver_since "$start")s"
}

tserver_down() {
  stop_pid temporal-ui 10
  stop_pid temporal-server 30
  rm -f "$TSERVER_DIR/ports"
}
