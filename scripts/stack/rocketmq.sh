# shellcheck shell=bash
# Apache RocketMQ 5.x (name server + one broker, or two broker groups with
# SECKILL_ROCKETMQ_BROKERS=2) for the local stack, run from
# Maven Central artifacts with plain `java -cp`. Sourced by scripts/stack.sh
# after scripts/stack/lib.sh (log, fail, start_bg, stop_pid, running,
# port_open, wait_until, $ROOT, $STACK_DIR).
#
#   rocketmq_up      resolve the classpath once (mvn), start namesrv + broker(s),
#                    wait until each broker is registered, create $ROCKETMQ_TOPICS
#                    on every broker of the cluster
#   rocketmq_down    stop broker, then name server
#   rocketmq_status  one line per process
#
# Layout under $STACK_DIR:
#   pids/rocketmq-{namesrv,broker}.pid, logs/rocketmq-{namesrv,broker,admin,mvn}.log
#   data/rocketmq/classpath.txt   resolved classpath (+ .pom.sha256 of the pom it came from)
#   data/rocketmq/broker.conf     generated from scripts/stack/rocketmq/broker.conf
#                                 and the ACL user (0600; home/conf/tools.yml too)
#   data/rocketmq/store/          commit log, consume queues, broker metadata (config/topics.json)
#   data/rocketmq/home/           ROCKETMQ_HOME and the JVMs' user.home: RocketMQ's own
#                                 logs go to home/logs/rocketmqlogs/, nothing touches ~/
#
# Ports (127.0.0.1): 9876 name server, 10911 broker, 10909 broker fast channel;
# 10912 broker HA (RocketMQ binds it on all interfaces).
#
# Two broker groups (SECKILL_ROCKETMQ_BROKERS=2, docs/scale.md#failover):
# broker-b beside broker-a in the same cluster and on the same name server,
# on 10921 (10919, 10922), with its own store (data/rocketmq/store-b), home
# (home-b: its logs), broker-b.conf and pid file rocketmq-broker-b. Every
# topic has its queues on both, so producers spread over them and route
# around a dead one, and a consumer group reads both.

ROCKETMQ_NAMESRV_ADDR=127.0.0.1:9876
ROCKETMQ_BROKER_ADDR=127.0.0.1:10911
ROCKETMQ_BROKERS=${SECKILL_ROCKETMQ_BROKERS:-1}
ROCKETMQ_CLUSTER=DefaultCluster
# The broker's ACL 2.0 user (a super user, created on the broker's first
# start with authentication: its password then lives in the store's
# config/users and a later change here is not applied; drop
# .stack/data/rocketmq/store/config/users to re-create it). The defaults are
# SECKILL_ROCKETMQ_ACCESS_KEY's and _SECRET_KEY's development ones
# (internal/platform/config).
ROCKETMQ_ACCESS_KEY=${SECKILL_ROCKETMQ_ACCESS_KEY:-seckill}
ROCKETMQ_SECRET_KEY=${SECKILL_ROCKETMQ_SECRET_KEY:-dev-rocketmq-secret-change-me}
# The %DLQ%<group> topics are the dead-letter queues of the saga starter's
# consumer groups (internal/platform/config StarterGroup, the tests' and e2e's groups,
# workers/deadletter's test group). The broker would create one itself on the
# first dead letter, but only with one queue and without a route until then, so
# the dead-letter consumer (workers/deadletter) could not start; created here
# with read+write permission (perm 6) it starts at once.
: "${ROCKETMQ_TOPICS:=seckill_order_create seckill_order_events seckill_smoke seckill_test_create seckill_test_events seckill_e2e_create seckill_e2e_events seckill_bench_create seckill_test_dlq seckill_chaos_create seckill_chaos_events seckill_contract_create seckill_contract_events seckill_multi_create seckill_multi_events %DLQ%saga-starter-chaos %DLQ%saga-starter %DLQ%saga-starter-test %DLQ%saga-starter-e2e %DLQ%saga-starter-dlqtest}"
: "${ROCKETMQ_TOPIC_QUEUES:=4}"
: "${ROCKETMQ_JAVA:=java}"

# JDK 17 module flags, the set RocketMQ's start scripts use for reflection into
# java.base (direct-buffer cleaning, netty, fastjson). With 5.3.3 on JDK 17 no
# InaccessibleObjectException showed up (boot, produce/consume, shutdown) even
# without them; they stay as a safety net.
ROCKETMQ_JDK17_FLAGS=(
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-exports java.base/sun.nio.ch=ALL-UNNAMED
)

_rmq_dir() { echo "$STACK_DIR/data/rocketmq"; }

# The broker groups: a (always) and b (SECKILL_ROCKETMQ_BROKERS=2), and of
# each its process name, listen port and the suffix of its files.
_rmq_groups() { if [ "$ROCKETMQ_BROKERS" = 2 ]; then echo "a b"; else echo a; fi; }
_rmq_name() { if [ "$1" = a ]; then echo rocketmq-broker; else echo "rocketmq-broker-$1"; fi; }
_rmq_port() { if [ "$1" = a ]; then echo 10911; else echo 10921; fi; }
_rmq_sfx() { if [ "$1" = a ]; then echo ""; else echo "-$1"; fi; }
_rmq_home() { echo "$(_rmq_dir)/home$(_rmq_sfx "$1")"; }
_rmq_store() { echo "$(_rmq_dir)/store$(_rmq_sfx "$1")"; }
_rmq_conf() { echo "$(_rmq_dir)/broker$(_rmq_sfx "$1").conf"; }
_rmq_src() { echo "$ROOT/scripts/stack/rocketmq"; }

# _rmq_jvm_common LOGBACK_RESOURCE [HOME]: flags shared by every RocketMQ JVM. user.home and
# rocketmq.home.dir point into the stack dir (HOME, default home/); the shaded logback is told which
# config to use (all of them are on the one classpath) and to keep its status
# chatter off stdout.
_rmq_jvm_common() {
  local home; home=${2:-$(_rmq_dir)/home}
  printf '%s\n' "${ROCKETMQ_JDK17_FLAGS[@]}" \
    -Duser.home="$home" \
    -Drocketmq.home.dir="$home" \
    -Drmq.logback.configurationFile="$1" \
    -Dlogback.statusListenerClass=org.apache.rocketmq.logging.ch.qos.logback.core.status.NopStatusListener \
    -Djava.net.preferIPv4Stack=true \
    -Dfile.encoding=UTF-8
}

# _rmq_classpath_ok: the cached classpath exists, came from the current pom,
# and every jar in it is still present in the local Maven repository.
_rmq_classpath_ok() {
  local d cp sum jar
  d=$(_rmq_dir)
  [ -s "$d/classpath.txt" ] && [ -f "$d/classpath.pom.sha256" ] || return 1
  sum=$(sha256sum "$(_rmq_src)/pom.xml" | cut -d' ' -f1)
  [ "$sum" = "$(cat "$d/classpath.pom.sha256")" ] || return 1
  cp=$(cat "$d/classpath.txt")
  local IFS=:
  for jar in $cp; do
    [ -f "$jar" ] || return 1
  done
  return 0
}

# _rmq_resolve_classpath: run mvn once; later calls reuse $STACK_DIR/data/rocketmq/classpath.txt.
_rmq_resolve_classpath() {
  local d mlog tmp
  d=$(_rmq_dir)
  mkdir -p "$d"
  _rmq_classpath_ok && return 0
  command -v mvn >/dev/null 2>&1 || fail rocketmq "$(logfile rocketmq-mvn)" "mvn not found on PATH"
  command -v "$ROCKETMQ_JAVA" >/dev/null 2>&1 || fail rocketmq "$(logfile rocketmq-mvn)" "$ROCKETMQ_JAVA not found on PATH"
  mlog=$(logfile rocketmq-mvn)
  tmp="$d/classpath.txt.tmp"
  log "rocketmq: resolving classpath with mvn (log: $mlog)"
  rm -f "$tmp"
  if ! mvn -B -ntp -f "$(_rmq_src)/pom.xml" dependency:build-classpath \
      -Dmdep.outputFile="$tmp" -Dmdep.includeScope=runtime >"$mlog" 2>&1 || [ ! -s "$tmp" ]; then
    fail rocketmq-mvn "$mlog" "mvn could not resolve the RocketMQ classpath"
  fi
  mv "$tmp" "$d/classpath.txt"
  sha256sum "$(_rmq_src)/pom.xml" | cut -d' ' -f1 >"$d/classpath.pom.sha256"
}

_rmq_cp() { cat "$(_rmq_dir)/classpath.txt"; }

# _rmq_prepare_conf: write the runtime broker.conf with the store under the
# stack dir and the ACL 2.0 user (authentication on: an unsigned request is
# refused with NO_PERMISSION; the name server checks nothing), and the
# tools.yml with which mqadmin signs its requests. Both files hold the secret:
# mode 0600.
_rmq_prepare_conf() {
  local g=${1:-a} d store; d=$(_rmq_dir); store=$(_rmq_store "$g")
  mkdir -p "$d/home/conf" "$(_rmq_home "$g")" "$store/commitlog"
  (umask 077
  {
    cat "$(_rmq_src)/broker.conf"
    printf '\n# --- added by scripts/stack/rocketmq.sh ---\n'
    if [ "$g" != a ]; then
      printf 'brokerName=broker-%s\nlistenPort=%s\n' "$g" "$(_rmq_port "$g")"
    fi
    printf 'storePathRootDir=%s\n' "$store"
    printf 'storePathCommitLog=%s\n' "$store/commitlog"
    printf 'authenticationEnabled=true\n'
    printf 'authenticationProvider=org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider\n'
    printf 'authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider\n'
    printf 'authorizationMetadataProvider=org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider\n'
    printf 'initAuthenticationUser={"username":"%s","password":"%s"}\n' "$ROCKETMQ_ACCESS_KEY" "$ROCKETMQ_SECRET_KEY"
    printf 'innerClientAuthenticationCredentials={"accessKey":"%s","secretKey":"%s"}\n' "$ROCKETMQ_ACCESS_KEY" "$ROCKETMQ_SECRET_KEY"
  } >"$(_rmq_conf "$g")"
  printf 'accessKey: %s\nsecretKey: %s\n' "$ROCKETMQ_ACCESS_KEY" "$ROCKETMQ_SECRET_KEY" >"$d/home/conf/tools.yml")
}

# _rmq_admin ARGS...: run mqadmin (org.apache.rocketmq.tools.command.MQAdminStartup)
# against the local name server; output appended to logs/rocketmq-admin.log.
# mqadmin exits 0 even when its command failed (it prints the stack trace), so
# a failure is recognised by its output. Each call costs ~5-7 s (JVM start +
# the client's 3 s shutdown wait).
_rmq_admin() {
  local alog out rc=0
  alog=$(logfile rocketmq-admin)
  local -a jvm
  mapfile -t jvm < <(_rmq_jvm_common rmq.tools.logback.xml)
  out=$(ROCKETMQ_HOME="$(_rmq_dir)/home" "$ROCKETMQ_JAVA" -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    "${jvm[@]}" -cp "$(_rmq_cp)" org.apache.rocketmq.tools.command.MQAdminStartup "$@" \
    -n "$ROCKETMQ_NAMESRV_ADDR" 2>&1) || rc=$?
  printf '\n$ mqadmin %s -n %s\n%s\n' "$*" "$ROCKETMQ_NAMESRV_ADDR" "$out" >>"$alog"
  [ "$rc" -eq 0 ] || return "$rc"
  if grep -q -E 'Exception|command failed|not exist' <<<"$out"; then
    return 1
  fi
  return 0
}

_rmq_broker_log() { echo "$(_rmq_home "${1:-a}")/logs/rocketmqlogs/broker.log"; }

# _rmq_broker_registered GROUP OFFSET: the broker printed "boot success" to its console
# log and, since byte OFFSET of its own broker.log, reported a completed
# registration with the name server; and its port accepts connections.
_rmq_broker_registered() {
  local g=$1 off=$2 blog; blog=$(_rmq_broker_log "$g")
  grep -q 'boot success' "$(logfile "$(_rmq_name "$g")")" 2>/dev/null || return 1
  [ -f "$blog" ] || return 1
  # broker.log rolled over (128 MiB) since the start: search all of it
  [ "$(wc -c <"$blog")" -ge "$off" ] || off=0
  tail -c +"$((off + 1))" "$blog" | grep -q "Registering current broker to name server completed. TargetHost=$ROCKETMQ_NAMESRV_ADDR" || return 1
  port_open 127.0.0.1 "$(_rmq_port "$g")"
}

# _rmq_topic_exists TOPIC: every broker's persisted topic table has TOPIC. TOPIC
# goes into an extended regular expression unquoted: topic names are
# [%|a-zA-Z0-9_-] (RocketMQ's rule), where only | would be special; ours have none.
_rmq_topic_exists() {
  local g
  for g in $(_rmq_groups); do
    grep -Eq "\"topicName\"[[:space:]]*:[[:space:]]*\"$1\"" "$(_rmq_store "$g")/config/topics.json" 2>/dev/null || return 1
  done
}

_rmq_missing_topics() {
  local t
  for t in $ROCKETMQ_TOPICS; do
    _rmq_topic_exists "$t" || printf '%s\n' "$t"
  done
}

# _rmq_create_topics: create the topics of $ROCKETMQ_TOPICS that the broker does
# not have yet, in one mqadmin updateTopicList call; fall back to updateTopic per
# topic (RocketMQ 5.3.3's batch call silently does nothing when one of the
# topics in it already exists unchanged).
_rmq_create_topics() {
  local -a missing
  local t json sep i alog
  alog=$(logfile rocketmq-admin)
  mapfile -t missing < <(_rmq_missing_topics)
  [ "${#missing[@]}" -eq 0 ] && return 0
  log "rocketmq: creating topics ${missing[*]} ($ROCKETMQ_TOPIC_QUEUES queues each)"
  json="$(_rmq_dir)/topics.json"
  sep=""
  {
    printf '['
    for t in "${missing[@]}"; do
      printf '%s{"topicName":"%s","readQueueNums":%d,"writeQueueNums":%d,"perm":6}' \
        "$sep" "$t" "$ROCKETMQ_TOPIC_QUEUES" "$ROCKETMQ_TOPIC_QUEUES"
      sep=","
    done
    printf ']\n'
  } >"$json"
  _rmq_admin updateTopicList -c "$ROCKETMQ_CLUSTER" -f "$json" ||
    fail rocketmq-admin "$alog" "mqadmin updateTopicList failed (is the broker registered with the name server?)"
  # the broker persists config/topics.json synchronously; give it a moment anyway
  for ((i = 0; i < 25; i++)); do
    [ -z "$(_rmq_missing_topics)" ] && return 0
    sleep 0.2
  done
  mapfile -t missing < <(_rmq_missing_topics)
  for t in "${missing[@]}"; do
    _rmq_admin updateTopic -c "$ROCKETMQ_CLUSTER" -t "$t" \
      -r "$ROCKETMQ_TOPIC_QUEUES" -w "$ROCKETMQ_TOPIC_QUEUES" ||
      fail rocketmq-admin "$alog" "mqadmin updateTopic $t failed"
  done
  for ((i = 0; i < 25; i++)); do
    [ -z "$(_rmq_missing_topics)" ] && return 0
    sleep 0.2
  done
  fail rocketmq-admin "$alog" "topics still missing after creation: $(_rmq_missing_topics | tr '\n' ' ')"
}

_rmq_start_namesrv() {
  local -a jvm
  mapfile -t jvm < <(_rmq_jvm_common rmq.namesrv.logback.xml)
  port_open 127.0.0.1 9876 &&
    fail rocketmq-namesrv "$(logfile rocketmq-namesrv)" "port 9876 is already in use by a process we did not start"
  log "rocketmq: starting name server on $ROCKETMQ_NAMESRV_ADDR"
  ROCKETMQ_HOME="$(_rmq_dir)/home" start_bg rocketmq-namesrv "$ROCKETMQ_JAVA" \
    -server -Xms128m -Xmx256m -XX:MaxDirectMemorySize=128m -XX:+UseG1GC \
    "${jvm[@]}" -cp "$(_rmq_cp)" org.apache.rocketmq.namesrv.NamesrvStartup \
    -c "$(_rmq_src)/namesrv.conf"
  wait_until rocketmq-namesrv 60 port_open 127.0.0.1 9876
}

# _rmq_start_broker GROUP: start broker-GROUP and wait until it is registered.
_rmq_start_broker() {
  local g=${1:-a}
  local -a jvm
  local off=0 blog name port p; name=$(_rmq_name "$g"); port=$(_rmq_port "$g")
  mapfile -t jvm < <(_rmq_jvm_common rmq.broker.logback.xml "$(_rmq_home "$g")")
  for p in "$port" "$((port - 2))" "$((port + 1))"; do
    port_open 127.0.0.1 "$p" &&
      fail "$name" "$(logfile "$name")" "port $p is already in use by a process we did not start"
  done
  _rmq_prepare_conf "$g"
  sha256sum "$(_rmq_conf "$g")" | cut -d' ' -f1 >"$(_rmq_conf "$g").started"
  blog=$(_rmq_broker_log "$g")
  [ -f "$blog" ] && off=$(wc -c <"$blog")
  log "rocketmq: starting broker-$g on 127.0.0.1:$port"
  ROCKETMQ_HOME="$(_rmq_home "$g")" start_bg "$name" "$ROCKETMQ_JAVA" \
    -server -Xms512m -Xmx1g -XX:MaxDirectMemorySize=512m -XX:+UseG1GC \
    -XX:-OmitStackTraceInFastThrow \
    "${jvm[@]}" -cp "$(_rmq_cp)" org.apache.rocketmq.broker.BrokerStartup \
    -c "$(_rmq_conf "$g")"
  wait_until "$name" 120 _rmq_broker_registered "$g" "$off"
  if grep -q 'InaccessibleObjectException' "$(logfile "$name")" "$blog" 2>/dev/null; then
    log "rocketmq: WARNING: InaccessibleObjectException in the broker log (a missing --add-opens?)"
  fi
}

# rocketmq_up: idempotent start of name server + broker and topic creation.
rocketmq_up() {
  local t0=$SECONDS
  _rmq_resolve_classpath
  [[ $ROCKETMQ_BROKERS =~ ^[12]$ ]] || fail rocketmq "$(logfile rocketmq-broker)" "SECKILL_ROCKETMQ_BROKERS=$ROCKETMQ_BROKERS: 1 or 2 broker groups"
  local g name
  if ! running rocketmq-namesrv; then
    # a broker that outlives its name server would only re-register after up to
    # 30 s; restart it so registration is immediate and checked.
    for g in a b; do running "$(_rmq_name "$g")" && stop_pid "$(_rmq_name "$g")" 60; done
    _rmq_start_namesrv
  fi
  for g in $(_rmq_groups); do
    name=$(_rmq_name "$g")
    # A broker started from other settings (an older checkout's, without the
    # ACL user) is restarted on the settings of this one.
    if running "$name"; then
      _rmq_prepare_conf "$g"
      if [ "$(sha256sum "$(_rmq_conf "$g")" | cut -d' ' -f1)" != "$(cat "$(_rmq_conf "$g").started" 2>/dev/null)" ]; then
        log "rocketmq: broker-$g runs on other settings than $(_rmq_src)/broker.conf and the ACL user's: restarting it"
        stop_pid "$name" 60
      fi
    fi
    running "$name" || _rmq_start_broker "$g"
  done
  _rmq_create_topics
  log "rocketmq: up (namesrv $ROCKETMQ_NAMESRV_ADDR, broker-a $ROCKETMQ_BROKER_ADDR$([ "$ROCKETMQ_BROKERS" = 2 ] && echo ", broker-b 127.0.0.1:10921")) in $((SECONDS - t0))s"
}

# rocketmq_down: stop the brokers (b too if it runs), then the name server.
rocketmq_down() {
  stop_pid rocketmq-broker-b 60
  stop_pid rocketmq-broker 60
  stop_pid rocketmq-namesrv 30
}

# rocketmq_status: one line per process: name, running/stopped, address.
rocketmq_status() {
  local name addr state
  for name in rocketmq-namesrv rocketmq-broker rocketmq-broker-b; do
    case $name in
      rocketmq-namesrv) addr=$ROCKETMQ_NAMESRV_ADDR ;;
      rocketmq-broker) addr=$ROCKETMQ_BROKER_ADDR ;;
      rocketmq-broker-b) addr=127.0.0.1:10921
        [ "$ROCKETMQ_BROKERS" = 2 ] || running "$name" || continue ;;
    esac
    if running "$name"; then
      state="running (pid $(cat "$(pidfile "$name")"))"
    else
      state=stopped
    fi
    printf '%-18s %-22s %s\n' "$name" "$state" "$addr"
  done
}
