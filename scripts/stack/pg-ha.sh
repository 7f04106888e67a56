# shellcheck shell=bash
# PostgreSQL with a synchronous standby and automatic failover for the local
# stack, beside its single PostgreSQL (SECKILL_PG=ha make up, or
# scripts/stack.sh pg-ha up): Debian's Patroni manages two PostgreSQL 15
# servers, its leader lock and configuration in a one-member etcd (Debian's
# etcd-server). Sourced by scripts/stack.sh after scripts/stack/lib.sh.
#
#   pg_ha_up      install patroni and etcd-server if missing; start etcd on
#                 127.0.0.1:12379 (peer 12380), then one Patroni per node
#                 (pg1, pg2: PostgreSQL on 15441/15442, Patroni's REST API on
#                 18441/18442), data in .stack/data/pg-ha; wait for a leader
#                 and a synchronous standby (synchronous_mode: a commit is
#                 acknowledged once the standby has it, and Patroni promotes
#                 only that standby: RPO 0); create the project's roles and
#                 database on the leader as the single PostgreSQL has them.
#                 Idempotent; a node that runs is kept.
#   pg_ha_down    stop the Patroni nodes (each stops its PostgreSQL), then etcd.
#   pg_ha_status  one line per node with its role (Patroni's REST API).
#   pg_ha_dsn     the multi-host DSN the processes use
#                 (target_session_attrs=read-write: the leader, whichever it is).
# Failover: the leader's lock in etcd lives ttl (10 s) without renewal; the
# standby then takes it and is promoted. The old leader comes back as a
# standby (pg_rewind). docs/scale.md#failover has the figures.

PGHA_PORTS=${SECKILL_PG_HA_PORTS:-15441 15442}
PGHA_PORTS=${PGHA_PORTS//,/ }
PGHA_ETCD_PORT=${SECKILL_PG_HA_ETCD_PORT:-12379}
PGHA_DIR=$STACK_DIR/data/pg-ha
# The servers' own users (not the project's): the superuser Patroni manages
# with and its replication user. Local development secrets, in 0600 files.
PGHA_SUPER_PASSWORD=${SECKILL_PG_HA_SUPER_PASSWORD:-dev-pg-super-change-me}
PGHA_REPL_PASSWORD=${SECKILL_PG_HA_REPL_PASSWORD:-dev-pg-repl-change-me}

pg_ha_dsn() {
  local p hosts=""
  for p in $PGHA_PORTS; do hosts+="${hosts:+,}127.0.0.1:$p"; done
  echo "postgres://seckill:seckill@$hosts/seckill?sslmode=disable&target_session_attrs=read-write"
}

pg_ha_install() {
  local want=()
  command -v patroni >/dev/null || want+=(patroni)
  command -v etcd >/dev/null || want+=(etcd-server)
  if [ ${#want[@]} -gt 0 ]; then apt_install "${want[@]}"; fi
}

_pgha_etcd_up() {
  local dir=$PGHA_DIR/etcd
  if running pg-ha-etcd && port_open 127.0.0.1 "$PGHA_ETCD_PORT"; then return; fi
  port_open 127.0.0.1 "$PGHA_ETCD_PORT" && fail pg-ha-etcd "$(logfile pg-ha-etcd)" "port $PGHA_ETCD_PORT is taken by another process"
  mkdir -p "$dir"; chmod 700 "$dir"
  log "pg-ha: starting etcd on 127.0.0.1:$PGHA_ETCD_PORT"
  start_bg pg-ha-etcd etcd --name pg-ha --data-dir "$dir" \
    --listen-client-urls "http://127.0.0.1:$PGHA_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$PGHA_ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((PGHA_ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((PGHA_ETCD_PORT + 1))" \
    --initial-cluster "pg-ha=http://127.0.0.1:$((PGHA_ETCD_PORT + 1))" --listen-metrics-urls "" --log-level warn
  wait_until pg-ha-etcd 30 curl -fsS "http://127.0.0.1:$PGHA_ETCD_PORT/health"
}

# _pgha_conf NAME PORT REST: Patroni's configuration of one node (0600: it
# holds the servers' passwords).
_pgha_conf() {
  local name=$1 port=$2 rest=$3 f="$PGHA_DIR/$1.yml"
  (umask 077; cat >"$f" <<EOF
scope: seckill-stack
namespace: /service/
name: $name
log: {level: WARNING}
restapi: {listen: "127.0.0.1:$rest", connect_address: "127.0.0.1:$rest"}
etcd3: {hosts: "127.0.0.1:$PGHA_ETCD_PORT"}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 300
        shared_buffers: 256MB
        wal_log_hints: "on"
        # remote_apply: a commit returns once the standby has applied it, so
        # what a client wrote is visible on whichever node it reaches next
        # (a database just created, too: pgx stops at a host that answers
        # "database does not exist" instead of trying the next one).
        synchronous_commit: remote_apply
        log_min_messages: warning
  initdb: [{encoding: UTF8}, {locale: C.UTF-8}]
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
postgresql:
  listen: "127.0.0.1:$port"
  connect_address: "127.0.0.1:$port"
  data_dir: "$PGHA_DIR/$name"
  bin_dir: "$PG_BIN"
  pgpass: "$PGHA_DIR/$name.pgpass"
  authentication:
    superuser: {username: postgres, password: "$PGHA_SUPER_PASSWORD"}
    replication: {username: replicator, password: "$PGHA_REPL_PASSWORD"}
    rewind: {username: postgres, password: "$PGHA_SUPER_PASSWORD"}
  parameters: {unix_socket_directories: "$PGHA_DIR/run-$name"}
EOF
  )
  chown postgres:postgres "$f"
}

_pgha_node_up() {
  local name=$1 port=$2 rest=$3
  if running "pg-ha-$name" && curl -fsS "http://127.0.0.1:$rest/health" >/dev/null 2>&1; then return; fi
  running "pg-ha-$name" && stop_pid "pg-ha-$name" 30
  # A PostgreSQL left running without its Patroni (Patroni gives it a
  # session of its own) is stopped first: Patroni starts it again itself.
  if ! _pgha_postmaster_gone "$name"; then
    local pm; pm=$(head -n1 "$PGHA_DIR/$name/postmaster.pid")
    log "pg-ha: PostgreSQL of $name (pid $pm) runs without its Patroni: stopping it"
    kill -INT "$pm" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do _pgha_postmaster_gone "$name" && break; sleep 0.1; done
    _pgha_postmaster_gone "$name" || kill -KILL "$pm" 2>/dev/null || true
  fi
  port_open 127.0.0.1 "$port" && fail "pg-ha-$name" "$(logfile "pg-ha-$name")" "port $port is taken by another process"
  mkdir -p "$PGHA_DIR/run-$name"; chown postgres:postgres "$PGHA_DIR" "$PGHA_DIR/run-$name"; chmod 700 "$PGHA_DIR/run-$name"
  _pgha_conf "$name" "$port" "$rest"
  log "pg-ha: starting Patroni $name (PostgreSQL 127.0.0.1:$port, REST 127.0.0.1:$rest)"
  # setpriv execs Patroni as postgres (runuser would stay its parent and
  # hold on to the signals stop_pid sends).
  start_bg "pg-ha-$name" setpriv --reuid=postgres --regid=postgres --init-groups --reset-env patroni "$PGHA_DIR/$name.yml"
  chown postgres:postgres "$(logfile "pg-ha-$name")"
}

# _pgha_role REST: the node's role (primary, replica, ...) by its REST API.
_pgha_role() { curl -fsS "http://127.0.0.1:$1/patroni" 2>/dev/null | sed -n 's/.*"role": *"\([a-z_]*\)".*/\1/p'; }

# _pgha_ready: a leader whose standby streams to it as its synchronous standby.
_pgha_ready() {
  local p out
  for p in $PGHA_PORTS; do
    out=$(curl -fsS "http://127.0.0.1:$((p + 3000))/patroni" 2>/dev/null) || continue
    grep -Eq '"role": *"(master|primary)"' <<<"$out" && grep -q '"sync_state": *"sync"' <<<"$out" && return 0
  done
  return 1
}

# _pgha_leader_port: the PostgreSQL port of the leader.
_pgha_leader_port() {
  local p
  for p in $PGHA_PORTS; do
    case $(_pgha_role $((p + 3000))) in master | primary) echo "$p"; return ;; esac
  done
  return 1
}

pg_ha_up() {
  local t0=$SECONDS p n=0 lf; lf=$(logfile pg-ha)
  pg_ha_install
  mkdir -p "$PGHA_DIR"; chown postgres:postgres "$PGHA_DIR"; chmod 700 "$PGHA_DIR"
  _pgha_etcd_up
  for p in $PGHA_PORTS; do n=$((n + 1)); _pgha_node_up "pg$n" "$p" "$((p + 3000))"; done
  wait_until pg-ha 120 _pgha_ready
  local leader; leader=$(_pgha_leader_port) || fail pg-ha "$lf" "no leader"
  # The project's roles and database, as on the single PostgreSQL (the standby replicates them).
  project_roles_sql | PGPASSWORD=$PGHA_SUPER_PASSWORD "$PG_BIN/psql" -h 127.0.0.1 -p "$leader" \
    -U postgres -v ON_ERROR_STOP=1 -qAt -d postgres >>"$lf" 2>&1 || fail pg-ha "$lf" "creating role/database failed"
  log "pg-ha: leader on 127.0.0.1:$leader, synchronous standby streaming ($((SECONDS - t0))s)"
}

# _pgha_postmaster_gone NAME: the node's PostgreSQL no longer runs.
_pgha_postmaster_gone() {
  local pid; pid=$(head -n1 "$PGHA_DIR/$1/postmaster.pid" 2>/dev/null) || return 0
  ! kill -0 "$pid" 2>/dev/null
}

pg_ha_down() {
  local n=0 p pid
  for p in $PGHA_PORTS; do
    n=$((n + 1)); stop_pid "pg-ha-pg$n" 60
    # Patroni stops its PostgreSQL on TERM, which may outlive it by a moment.
    for ((i = 0; i < 300; i++)); do _pgha_postmaster_gone "pg$n" && break; sleep 0.1; done
    if ! _pgha_postmaster_gone "pg$n"; then
      pid=$(head -n1 "$PGHA_DIR/pg$n/postmaster.pid"); log "pg-ha: PostgreSQL of pg$n (pid $pid) still runs: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  stop_pid pg-ha-etcd 30
}

pg_ha_status() {
  local n=0 p
  for p in $PGHA_PORTS; do
    n=$((n + 1))
    if running "pg-ha-pg$n"; then echo "pg-ha-pg$n running (PostgreSQL :$p, role:$(_pgha_role $((p + 3000))))"
    else echo "pg-ha-pg$n stopped (optional: SECKILL_PG=ha make up)"; fi
  done
}
