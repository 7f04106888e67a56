# shellcheck shell=bash
# Common helpers for the local stack. Sourced by scripts/stack.sh and the
# per-component files next to it. Everything lives under $STACK_DIR:
#   $STACK_DIR/pids/<name>.pid   pid of the process we started (process group leader)
#   $STACK_DIR/logs/<name>.log   its stdout+stderr
#   $STACK_DIR/data/<name>/      its data

: "${ROOT:?ROOT must be set}"
: "${STACK_DIR:=$ROOT/.stack}"
export STACK_DIR
mkdir -p "$STACK_DIR/pids" "$STACK_DIR/logs" "$STACK_DIR/data" "$STACK_DIR/bin"

log() { printf '[stack] %s\n' "$*" >&2; }

# fail COMPONENT LOGFILE MESSAGE: name the component and its log, show the tail, exit.
fail() {
  local name=$1 logfile=$2; shift 2
  printf '[stack] FAILED: %s: %s\n[stack] log: %s\n' "$name" "$*" "$logfile" >&2
  if [ -f "$logfile" ]; then
    printf '[stack] ---- last 30 lines of %s ----\n' "$logfile" >&2
    tail -n 30 "$logfile" >&2
  fi
  exit 1
}

pidfile() { echo "$STACK_DIR/pids/$1.pid"; }
logfile() { echo "$STACK_DIR/logs/$1.log"; }

# running NAME: true when the pid in NAME's pid file is alive.
running() {
  local pf pid; pf=$(pidfile "$1")
  [ -f "$pf" ] || return 1
  pid=$(cat "$pf")
  kill -0 "$pid" 2>/dev/null || return 1
  # A process killed after the script that started it exited is a zombie
  # until init reaps it; kill -0 still succeeds on it, but it is not running.
  [ "$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

# start_bg NAME CMD...: start CMD in its own session (so stop can signal the
# whole process group), output to NAME's log, pid to NAME's pid file.
start_bg() {
  local name=$1; shift
  local lf; lf=$(logfile "$name")
  : >"$lf"
  setsid "$@" >>"$lf" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
}

# stop_pid NAME [TIMEOUT_SECONDS]: TERM the process group we started, wait, then KILL.
stop_pid() {
  local name=$1 timeout=${2:-30} pf pid i
  pf=$(pidfile "$name")
  [ -f "$pf" ] || return 0
  pid=$(cat "$pf")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $name (pid $pid)"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name did not stop in ${timeout}s, killing"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pf"
}

# port_open HOST PORT: true when something accepts TCP connections there.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# warn_ephemeral NAME PORT: say so when PORT lies in the kernel's range for
# outgoing connections (net.ipv4.ip_local_port_range): any client socket may
# hold it, and a restart of NAME then fails with "Address already in use".
# The stack's defaults all lie below it.
warn_ephemeral() {
  local lo hi
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || return 0
  if [ "$2" -ge "$lo" ] && [ "$2" -le "$hi" ]; then
    log "warning: $1 port $2 is in the ephemeral range $lo-$hi (an outgoing connection may take it while $1 restarts)"
  fi
}

# wait_until NAME TIMEOUT_SECONDS CMD...: poll CMD every 0.2s until it succeeds;
# fail naming NAME and its log if it does not, or if NAME's process died.
wait_until() {
  local name=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [ -f "$(pidfile "$name")" ] && ! running "$name"; then
      fail "$name" "$(logfile "$name")" "process exited during start-up"
    fi
    if ((SECONDS >= deadline)); then
      fail "$name" "$(logfile "$name")" "not healthy after ${timeout}s (check: $*)"
    fi
    sleep 0.2
  done
}
