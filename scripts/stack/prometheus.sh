# shellcheck shell=bash
# Prometheus (Debian's `prometheus` package, which also ships promtool) for the
# alert rules: `make lint` runs `promtool check rules` and the rule unit tests
# (deploy/prometheus/alerts_test.yml), and the stack can run a Prometheus on
# 127.0.0.1 that loads deploy/prometheus/alerts.yml. Sourced by scripts/stack.sh
# after scripts/stack/lib.sh; prometheus_install is called from ensure_packages,
# where stack.sh's apt_install is defined.
#
#   prometheus_install  install the `prometheus` package (no recommends, so no
#                       node exporter) when prometheus or promtool is missing.
#                       With systemd, Debian's postinst enables and starts its
#                       own prometheus.service on :9090; ours is a separate
#                       process with its own port, config and data.
#   prometheus_up       only when SECKILL_PROMETHEUS=1 (`make up`) or asked for
#                       (`scripts/stack.sh prometheus up`): write the config to
#                       $PROMETHEUS_DIR, start prometheus on $PROMETHEUS_ADDR
#                       with its TSDB in $PROMETHEUS_DIR/tsdb, wait for /-/ready.
#   prometheus_down     stop it (by pid file, like every stack process).
#
# What it scrapes. `scripts/stack.sh up` starts no seckill process that
# serves /metrics (paysim has none); `make run` starts Prometheus
# (SECKILL_PROMETHEUS=1) and then the gateway and the workers
# (scripts/stack/app.sh) on the default addresses below. The config scrapes:
#   job prometheus   itself;
#   job seckill      the addresses in $PROMETHEUS_TARGETS_FILE, a file_sd
#                    file written from SECKILL_PROMETHEUS_TARGETS (space or
#                    comma separated host:port list, default
#                    127.0.0.1:9464 127.0.0.1:9465: the default metrics
#                    addresses of `bin/seckill api` and `bin/seckill worker`).
#                    Prometheus re-reads the file when it changes, so editing
#                    it adds a process without a restart; `up` rewrites it.
# Targets that are not running show as down in the UI's targets page.

PROMETHEUS_BIN=/usr/bin/prometheus
PROMTOOL_BIN=/usr/bin/promtool
PROMETHEUS_ADDR=${SECKILL_PROMETHEUS_ADDR:-127.0.0.1:19090}
PROMETHEUS_DIR=$STACK_DIR/data/prometheus
PROMETHEUS_CONFIG=$PROMETHEUS_DIR/prometheus.yml
PROMETHEUS_TARGETS_FILE=$PROMETHEUS_DIR/targets/seckill.json
PROMETHEUS_RULES=$ROOT/deploy/prometheus/alerts.yml

prometheus_install() {
  if [ -x "$PROMETHEUS_BIN" ] && [ -x "$PROMTOOL_BIN" ]; then return; fi
  if [ "$(id -u)" != 0 ]; then
    fail prometheus "$(logfile apt)" "$PROMTOOL_BIN is missing and installing it needs root:" \
      "run 'sudo scripts/stack.sh install-promtool' (or: sudo apt-get install --no-install-recommends prometheus)"
  fi
  local start=$SECONDS
  log "prometheus: installing Debian package prometheus (prometheus and promtool: alert rule checks and tests)"
  apt_install prometheus
  [ -x "$PROMTOOL_BIN" ] || fail prometheus "$(logfile apt)" "package prometheus installed but $PROMTOOL_BIN is missing"
  log "prometheus: installed $("$PROMETHEUS_BIN" --version 2>&1 | head -n1) in $((SECONDS - start))s"
}

# prometheus_write_config: the config and the file_sd targets file.
prometheus_write_config() {
  mkdir -p "$PROMETHEUS_DIR/tsdb" "$(dirname "$PROMETHEUS_TARGETS_FILE")"
  local targets=${SECKILL_PROMETHEUS_TARGETS:-127.0.0.1:9464 127.0.0.1:9465} t json=""
  for t in ${targets//,/ }; do
    json+="${json:+, }\"$t\""
  done
  printf '[{"targets": [%s], "labels": {"stack": "local"}}]\n' "$json" >"$PROMETHEUS_TARGETS_FILE.tmp"
  mv "$PROMETHEUS_TARGETS_FILE.tmp" "$PROMETHEUS_TARGETS_FILE"
  cat >"$PROMETHEUS_CONFIG" <<YAML
# Written by scripts/stack.sh (scripts/stack/prometheus.sh) on every start;
# edit SECKILL_PROMETHEUS_TARGETS or $PROMETHEUS_TARGETS_FILE instead.
global:
  # deploy/prometheus/alerts.yml: windows of 1m need 15s or less.
  scrape_interval: 15s
  evaluation_interval: 15s
rule_files:
  - $PROMETHEUS_RULES
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ["$PROMETHEUS_ADDR"]
  - job_name: seckill
    file_sd_configs:
      - files: ["$PROMETHEUS_TARGETS_FILE"]
YAML
}

prometheus_ready() { curl -fsS "http://$PROMETHEUS_ADDR/-/ready"; }

prometheus_up() {
  prometheus_install
  prometheus_write_config
  "$PROMTOOL_BIN" check config "$PROMETHEUS_CONFIG" >"$(logfile prometheus-config)" 2>&1 ||
    fail prometheus "$(logfile prometheus-config)" "promtool check config $PROMETHEUS_CONFIG failed"
  if running prometheus && prometheus_ready >/dev/null 2>&1; then
    # The config (targets, rules) may have changed: have it re-read them.
    kill -HUP "$(cat "$(pidfile prometheus)")"
    log "prometheus: already running (config reloaded)"; return
  fi
  port_open "${PROMETHEUS_ADDR%:*}" "${PROMETHEUS_ADDR#*:}" &&
    fail prometheus "$(logfile prometheus)" "port ${PROMETHEUS_ADDR#*:} is taken by another process"
  local start=$SECONDS
  log "prometheus: starting on http://$PROMETHEUS_ADDR (rules $PROMETHEUS_RULES, targets $PROMETHEUS_TARGETS_FILE)"
  start_bg prometheus "$PROMETHEUS_BIN" --config.file="$PROMETHEUS_CONFIG" \
    --web.listen-address="$PROMETHEUS_ADDR" --storage.tsdb.path="$PROMETHEUS_DIR/tsdb" \
    --storage.tsdb.retention.time=2d --log.level=warn
  wait_until prometheus 60 prometheus_ready
  log "prometheus: ready in $((SECONDS - start))s"
}

prometheus_down() { stop_pid prometheus 30; }
