# shellcheck shell=bash
# A Redis Cluster of three masters (no replicas) on 127.0.0.1, beside the
# stack's single Redis, for running the project on a cluster
# (SECKILL_REDIS_CLUSTER_ADDRS; docs/operations.md#redis-cluster). Debian's
# redis-server and redis-cli, as the single Redis. Sourced by scripts/stack.sh
# after scripts/stack/lib.sh.
#
#   redis_cluster_up      only when SECKILL_REDIS=cluster (`make up`) or asked
#                         for (`scripts/stack.sh redis-cluster up`): start one
#                         redis-server per port of $REDIS_CLUSTER_PORTS
#                         (default 17001 17002 17003, SECKILL_REDIS_CLUSTER_PORTS
#                         moves them), each with cluster-enabled yes, its
#                         cluster bus on port+10000, the stack's Redis
#                         password (redis_auth_conf), AOF
#                         everysec like the single Redis, data and nodes.conf
#                         in .stack/data/redis-cluster/<port>; then, if the
#                         nodes are not a cluster yet, `redis-cli --cluster
#                         create` (slots split evenly); then wait for
#                         cluster_state:ok on every node. Idempotent: nodes
#                         that run are kept, and a created cluster comes back
#                         from its nodes.conf on restart.
#   redis_cluster_down    stop the nodes (by pid file, like every stack process).
#   redis_cluster_status  one line per node.
#   redis_cluster_seeds   the seed list for SECKILL_REDIS_CLUSTER_ADDRS.
# A node's data is kept across down/up; `scripts/stack.sh redis-cluster drop`
# deletes it (the next up creates a new cluster).

REDIS_CLUSTER_PORTS=${SECKILL_REDIS_CLUSTER_PORTS:-17001 17002 17003}
REDIS_CLUSTER_PORTS=${REDIS_CLUSTER_PORTS//,/ }
REDIS_CLUSTER_DIR=$STACK_DIR/data/redis-cluster

redis_cluster_seeds() {
  local p out=""
  for p in $REDIS_CLUSTER_PORTS; do out+="${out:+,}127.0.0.1:$p"; done
  echo "$out"
}

redis_cluster_ok() { redis-cli -p "$1" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok'; }

# redis_cluster_known PORT: the node knows other nodes (the cluster exists).
redis_cluster_known() {
  local n; n=$(redis-cli -p "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')
  [ "${n:-0}" -gt 1 ]
}

redis_cluster_node_up() {
  local port=$1 name="redis-cluster-$1" dir="$REDIS_CLUSTER_DIR/$1"
  if running "$name" && redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
    log "redis-cluster: node :$port already running"; return
  fi
  port_open 127.0.0.1 "$port" && fail "$name" "$(logfile "$name")" "port $port is taken by another process"
  port_open 127.0.0.1 "$((port + 10000))" && fail "$name" "$(logfile "$name")" "port $((port + 10000)) (its cluster bus) is taken by another process"
  mkdir -p "$dir"
  warn_ephemeral "$name" "$port"; warn_ephemeral "$name bus" "$((port + 10000))"
  log "redis-cluster: starting node on 127.0.0.1:$port"
  start_bg "$name" redis-server "$(redis_auth_conf)" --bind 127.0.0.1 --port "$port" --dir "$dir" \
    --cluster-enabled yes --cluster-port "$((port + 10000))" --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
    --daemonize no --appendonly yes --appendfsync everysec --save "" --maxmemory-policy noeviction
  wait_until "$name" 30 sh -c "redis-cli -p $port ping | grep -q PONG"
}

redis_cluster_up() {
  local start=$SECONDS p ports=() nodes=() created=0
  { command -v redis-server && command -v redis-cli; } >/dev/null ||
    fail redis-cluster "$(logfile redis-cluster)" "redis-server/redis-cli missing (scripts/stack.sh up installs them)"
  for p in $REDIS_CLUSTER_PORTS; do ports+=("$p"); nodes+=("127.0.0.1:$p"); done
  [ ${#ports[@]} -ge 3 ] || fail redis-cluster "$(logfile redis-cluster)" "a cluster needs 3 masters, SECKILL_REDIS_CLUSTER_PORTS=${REDIS_CLUSTER_PORTS}"
  for p in "${ports[@]}"; do redis_cluster_node_up "$p"; done
  if ! redis_cluster_known "${ports[0]}"; then
    local lf; lf=$(logfile redis-cluster)
    log "redis-cluster: creating the cluster of ${nodes[*]} (no replicas)"
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$lf" 2>&1 ||
      fail redis-cluster "$lf" "redis-cli --cluster create failed (nodes left from another cluster? scripts/stack.sh redis-cluster drop)"
    created=1
  fi
  for p in "${ports[@]}"; do
    wait_until "redis-cluster-$p" 60 redis_cluster_ok "$p"
  done
  if [ "$created" = 1 ]; then log "redis-cluster: created and ok in $((SECONDS - start))s"
  else log "redis-cluster: ok ($((SECONDS - start))s)"; fi
}

redis_cluster_down() {
  local p
  for p in $REDIS_CLUSTER_PORTS; do stop_pid "redis-cluster-$p" 30; done
}

redis_cluster_drop() {
  redis_cluster_down
  log "redis-cluster: deleting $REDIS_CLUSTER_DIR"
  rm -rf "$REDIS_CLUSTER_DIR"
}

redis_cluster_status() {
  local p
  for p in $REDIS_CLUSTER_PORTS; do
    if running "redis-cluster-$p"; then
      local st; st=$(redis-cli -p "$p" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_state://p')
      echo "redis-cluster-$p running (pid $(cat "$(pidfile "redis-cluster-$p")"), cluster_state:${st:-?})"
    else
      echo "redis-cluster-$p stopped (optional: SECKILL_REDIS=cluster make up)"
    fi
  done
}
