# shellcheck shell=bash
# A Redis Cluster of three masters, each with a replica, on 127.0.0.1, beside
# the stack's single Redis, for running the project on a cluster
# (SECKILL_REDIS_CLUSTER_ADDRS; docs/operations.md#redis-cluster). Debian's
# redis-server and redis-cli, as the single Redis. Sourced by scripts/stack.sh
# after scripts/stack/lib.sh.
#
#   redis_cluster_up      only when SECKILL_REDIS=cluster (`make up`) or asked
#                         for (`scripts/stack.sh redis-cluster up`): start one
#                         redis-server per port of $REDIS_CLUSTER_PORTS
#                         (default 17001 17002 17003, SECKILL_REDIS_CLUSTER_PORTS
#                         moves them) and, for each master, REDIS_CLUSTER_REPLICAS
#                         replicas (SECKILL_REDIS_CLUSTER_REPLICAS, default 1;
#                         0 for masters only) on port + 100 (17101...), then
#                         + 200; each node with cluster-enabled yes, its
#                         cluster bus on port+10000, the stack's Redis
#                         password (redis_auth_conf), AOF
#                         everysec like the single Redis, data and nodes.conf
#                         in .stack/data/redis-cluster/<port>; then, if the
#                         nodes are not a cluster yet, `redis-cli --cluster
#                         create` of the masters (slots split evenly); then
#                         each replica the cluster does not know yet joins
#                         (`--cluster add-node --cluster-slave`) as the replica
#                         of its master's port (this also upgrades a cluster
#                         made before replicas); then wait for cluster_state:ok
#                         on every node. Idempotent: nodes that run are kept,
#                         and a created cluster comes back from its nodes.conf
#                         on restart. After a failover the old master comes
#                         back as a replica of the promoted one.
#   redis_cluster_down    stop the nodes (by pid file, like every stack process).
#   redis_cluster_status  one line per node.
#   redis_cluster_seeds   the seed list for SECKILL_REDIS_CLUSTER_ADDRS.
# A node's data is kept across down/up; `scripts/stack.sh redis-cluster drop`
# deletes it (the next up creates a new cluster).

REDIS_CLUSTER_PORTS=${SECKILL_REDIS_CLUSTER_PORTS:-17001 17002 17003}
REDIS_CLUSTER_PORTS=${REDIS_CLUSTER_PORTS//,/ }
REDIS_CLUSTER_REPLICAS=${SECKILL_REDIS_CLUSTER_REPLICAS:-1}
REDIS_CLUSTER_DIR=$STACK_DIR/data/redis-cluster

# redis_cluster_replica_ports: every replica's port (master port + 100 * i).
redis_cluster_replica_ports() {
  local p i out=""
  for ((i = 1; i <= REDIS_CLUSTER_REPLICAS; i++)); do
    for p in $REDIS_CLUSTER_PORTS; do out+="${out:+ }$((p + 100 * i))"; done
  done
  echo "$out"
}

# redis_cluster_all_ports: the masters' ports, then the replicas'.
redis_cluster_all_ports() { echo "$REDIS_CLUSTER_PORTS $(redis_cluster_replica_ports)"; }

redis_cluster_seeds() {
  local p out=""
  for p in $(redis_cluster_all_ports); do out+="${out:+,}127.0.0.1:$p"; done
  echo "$out"
}

redis_cluster_ok() { redis-cli -p "$1" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok'; }

# redis_cluster_known PORT: the node knows other nodes (the cluster exists).
redis_cluster_known() {
  local n; n=$(redis-cli -p "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')
  [ "${n:-0}" -gt 1 ]
}

# redis_cluster_node_id PORT: the node's own id.
redis_cluster_node_id() { redis-cli -p "$1" cluster myid 2>/dev/null | tr -d '\r'; }

# redis_cluster_knows PORT ID: the node of PORT has ID in its table.
redis_cluster_knows() { redis-cli -p "$1" cluster nodes 2>/dev/null | grep -q "^$2 "; }

# redis_cluster_add_replicas: each replica port the cluster does not know
# joins as a replica of its master (port - 100 * i). A replica whose master
# failed over to another node joins that master's shard all the same: the
# master-id named is the node that ran on the master's port.
redis_cluster_add_replicas() {
  local r m i id mid lf; lf=$(logfile redis-cluster)
  local first=${REDIS_CLUSTER_PORTS%% *}
  for ((i = 1; i <= REDIS_CLUSTER_REPLICAS; i++)); do
    for m in $REDIS_CLUSTER_PORTS; do
      r=$((m + 100 * i)); id=$(redis_cluster_node_id "$r")
      [ -n "$id" ] && redis_cluster_knows "$first" "$id" && continue
      mid=$(redis_cluster_node_id "$m")
      log "redis-cluster: adding 127.0.0.1:$r as a replica of 127.0.0.1:$m"
      redis-cli --cluster add-node "127.0.0.1:$r" "127.0.0.1:$first" --cluster-slave --cluster-master-id "$mid" >>"$lf" 2>&1 ||
        fail redis-cluster "$lf" "redis-cli --cluster add-node 127.0.0.1:$r as a replica of 127.0.0.1:$m failed"
    done
  done
}

# redis_cluster_synced PORT: a replica's link to its master is up (or PORT is a master).
redis_cluster_synced() {
  local info; info=$(redis-cli -p "$1" info replication 2>/dev/null | tr -d '\r')
  grep -qx 'role:master' <<<"$info" || grep -qx 'master_link_status:up' <<<"$info"
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
  [[ $REDIS_CLUSTER_REPLICAS =~ ^[0-9]+$ ]] || fail redis-cluster "$(logfile redis-cluster)" "SECKILL_REDIS_CLUSTER_REPLICAS=$REDIS_CLUSTER_REPLICAS is not a count"
  for p in $(redis_cluster_all_ports); do redis_cluster_node_up "$p"; done
  if ! redis_cluster_known "${ports[0]}"; then
    local lf; lf=$(logfile redis-cluster)
    log "redis-cluster: creating the cluster of ${nodes[*]} (masters)"
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$lf" 2>&1 ||
      fail redis-cluster "$lf" "redis-cli --cluster create failed (nodes left from another cluster? scripts/stack.sh redis-cluster drop)"
    created=1
  fi
  wait_until redis-cluster 60 redis_cluster_ok "${ports[0]}"
  redis_cluster_add_replicas
  for p in $(redis_cluster_all_ports); do
    wait_until "redis-cluster-$p" 60 redis_cluster_ok "$p"
    wait_until "redis-cluster-$p" 60 redis_cluster_synced "$p"
  done
  if [ "$created" = 1 ]; then log "redis-cluster: created and ok in $((SECONDS - start))s"
  else log "redis-cluster: ok ($((SECONDS - start))s)"; fi
}

redis_cluster_down() {
  local p
  for p in $(redis_cluster_all_ports); do stop_pid "redis-cluster-$p" 30; done
}

redis_cluster_drop() {
  redis_cluster_down
  log "redis-cluster: deleting $REDIS_CLUSTER_DIR"
  rm -rf "$REDIS_CLUSTER_DIR"
}

redis_cluster_status() {
  local p
  for p in $(redis_cluster_all_ports); do
    if running "redis-cluster-$p"; then
      local st role; st=$(redis-cli -p "$p" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_state://p')
      role=$(redis-cli -p "$p" info replication 2>/dev/null | tr -d '\r' | sed -n 's/^role://p')
      echo "redis-cluster-$p running (pid $(cat "$(pidfile "redis-cluster-$p")"), cluster_state:${st:-?}, role:${role:-?})"
    else
      echo "redis-cluster-$p stopped (optional: SECKILL_REDIS=cluster make up)"
    fi
  done
}
