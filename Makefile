# The two commands a newcomer needs are `make run` and `make test` (README).
SHELL := /bin/bash
GO ?= go
empty :=
space := $(empty) $(empty)
comma := ,
# bin/seckill is the production binary (the image's: api, worker, migrate and
# the operator commands); bin/seckill-dev adds the development commands
# (stack, smoke, demo, paysim, bench) to the same ones.
BIN := bin/seckill
DEV_BIN := bin/seckill-dev
export SECKILL_INTEGRATION ?= 1
# The local stack runs with the public development secrets; a production
# deployment refuses them (internal/platform/config: SECKILL_ENV).
export SECKILL_ENV ?= development
# The API contract test's tool (scripts/stack.sh up installs it).
export SECKILL_SCHEMATHESIS ?= $(CURDIR)/.stack/venv/bin/st

.PHONY: up down status build migrate run test test-temporal-server test-redis-cluster test-redis-failover test-broker-failover test-pg-failover lint promtool-rules deploy-check bench chaos fuzz contract

build:
	$(GO) build -o $(BIN) ./cmd/seckill
	$(GO) build -o $(DEV_BIN) ./cmd/seckill-dev

## up: start the local stack (installs what is missing) and migrate the database
up: build
	scripts/stack.sh up
	$(BIN) migrate up

## down: stop exactly what `up` started
down:
	scripts/stack.sh down

status:
	scripts/stack.sh status

migrate: build
	$(BIN) migrate up

## run: bring the stack up (with Prometheus), prove every service works, start the gateway and the workers
## (bin/seckill api, bin/seckill worker: background processes, logs in .stack/logs, left running), run a
## flash sale end to end against them over HTTP, and print what to open; make down stops everything
run: export SECKILL_PROMETHEUS = 1
run: up
	$(DEV_BIN) smoke
	scripts/stack.sh app up
	SECKILL_LOG_LEVEL=$${SECKILL_LOG_LEVEL:-warn} $(DEV_BIN) demo --gateway http://$${SECKILL_APP_HTTP_ADDR:-127.0.0.1:8080}
	@echo; echo "The gateway and the workers keep running:"; scripts/stack.sh app env

## bench: reservation hot path: raw redis-benchmark EVALSHA vs the HTTP gateway
bench: up
	$(DEV_BIN) bench reserve

## test: bring the stack up, then lint and run every test (unit + integration)
# The whole-sale e2e tests, the crash-point matrix and the soaks (all in ./e2e)
# each drive hundreds of sagas through the one local Temporal dev server
# (SQLite): run together they slow each other past their convergence
# deadlines, so they run one after the other, after the rest of the packages
# (which run in parallel).
HEAVY_PKGS := ./e2e
test: up lint
	@# The gateway and the workers `make run` leaves running hold 127.0.0.1:8080, :9464 and :9465,
	@# which the tests' own gateways and workers (the README block) listen on.
	scripts/stack.sh app down
	$(GO) test -tags failpoints -race -count=1 $$($(GO) list ./... | grep -v -e '/e2e$$')
	$(GO) test -tags failpoints -race -count=1 -p 1 -timeout 60m $(HEAVY_PKGS)
	$(MAKE) fuzz FUZZ_TIME=10000x

## test-temporal-server: the e2e suite against the real Temporal server on PostgreSQL instead of the dev server
## (SECKILL_TEMPORAL=server; docs/operations.md). Stop a running dev server first (make down), or move the
## real server to other ports: make test-temporal-server SECKILL_TEMPORAL_PORT=17233 SECKILL_TEMPORAL_UI_PORT=18233
## (TEST_FLAGS=-v lists each test)
SECKILL_TEMPORAL_PORT ?= 7233
SECKILL_TEMPORAL_UI_PORT ?= 8233
test-temporal-server: export SECKILL_TEMPORAL = server
test-temporal-server: export SECKILL_TEMPORAL_PORT := $(SECKILL_TEMPORAL_PORT)
test-temporal-server: export SECKILL_TEMPORAL_UI_PORT := $(SECKILL_TEMPORAL_UI_PORT)
test-temporal-server: export SECKILL_TEMPORAL_ADDR = 127.0.0.1:$(SECKILL_TEMPORAL_PORT)
test-temporal-server: export SECKILL_TEMPORAL_UI = http://127.0.0.1:$(SECKILL_TEMPORAL_UI_PORT)
test-temporal-server: up
	$(GO) test $(TEST_FLAGS) -tags failpoints -race -p 1 -count=1 -timeout 60m ./e2e

## test-redis-cluster: the integration packages of `make test` (not e2e, not the crash-point matrix) against
## a Redis Cluster of 3 masters on 127.0.0.1:17001-17003, a replica each on 17101-17103 (SECKILL_REDIS=cluster
## make up starts it beside the stack;
## docs/operations.md#redis-cluster). With the stack already up from another checkout: STACK_UP= (then only
## `scripts/stack.sh redis-cluster up` runs). TEST_FLAGS=-v lists each test.
SECKILL_REDIS_CLUSTER_PORTS ?= 17001 17002 17003
STACK_UP ?= up
test-redis-cluster: export SECKILL_REDIS = cluster
test-redis-cluster: export SECKILL_REDIS_CLUSTER_PORTS := $(SECKILL_REDIS_CLUSTER_PORTS)
test-redis-cluster: export SECKILL_REDIS_CLUSTER_ADDRS = $(subst $(space),$(comma),$(strip $(patsubst %,127.0.0.1:%,$(SECKILL_REDIS_CLUSTER_PORTS))))
test-redis-cluster: $(STACK_UP)
	scripts/stack.sh redis-cluster up
	@echo "SECKILL_REDIS_CLUSTER_ADDRS=$$SECKILL_REDIS_CLUSTER_ADDRS"
	$(GO) test $(TEST_FLAGS) -tags failpoints -race -count=1 $$($(GO) list ./... | grep -v -e '/e2e$$')

## test-redis-failover: a Redis Cluster master SIGKILLed for good mid-burst (e2e TestRedisClusterMasterFailover):
## its replica takes over, admission goes on, reconciliation finds what replication lost and the rebuild from
## PostgreSQL repairs it; prints the failover time and the units lost (docs/scale.md#failover). Starts the
## cluster with a replica per master (SECKILL_REDIS_CLUSTER_REPLICAS=1, ports 17101-17103) and restarts the
## killed node at the end. STACK_UP= as for test-redis-cluster.
test-redis-failover: export SECKILL_REDIS = cluster
test-redis-failover: export SECKILL_REDIS_CLUSTER_PORTS := $(SECKILL_REDIS_CLUSTER_PORTS)
test-redis-failover: export SECKILL_REDIS_CLUSTER_ADDRS = $(subst $(space),$(comma),$(strip $(patsubst %,127.0.0.1:%,$(SECKILL_REDIS_CLUSTER_PORTS))))
test-redis-failover: export SECKILL_FAILOVER = redis
test-redis-failover: $(STACK_UP)
	scripts/stack.sh redis-cluster up
	$(GO) test -v -tags failpoints -count=1 -timeout 15m -run '^TestRedisClusterMasterFailover$$' ./e2e

## test-broker-failover: broker-a of two RocketMQ broker groups SIGKILLed for good mid-burst (e2e
## TestRocketMQBrokerFailover): admission goes on, sends move to broker-b, the send-due scanner resends what
## the dead broker failed or kept, the inbox absorbs the duplicates; prints the send and consume counts
## (docs/scale.md#failover). Starts broker-b (SECKILL_ROCKETMQ_BROKERS=2, 127.0.0.1:10921) with the topics on
## both, and broker-a again at the end.
test-broker-failover: export SECKILL_ROCKETMQ_BROKERS = 2
test-broker-failover: export SECKILL_FAILOVER = broker
test-broker-failover: $(STACK_UP)
	scripts/stack.sh up
	$(GO) test -v -tags failpoints -count=1 -timeout 15m -run '^TestRocketMQBrokerFailover$$' ./e2e

## test-pg-failover: the PostgreSQL leader of a Patroni pair SIGKILLed for good in a sale's payment phase (e2e
## TestPostgresLeaderFailover): the synchronous standby is promoted, the gateway and the workers reconnect through
## the multi-host DSN, every payment the provider confirmed is PAID or REFUNDED; prints the failover time
## (docs/scale.md#failover). Starts the pair (SECKILL_PG=ha: Patroni and etcd, PostgreSQL on 15441/15442) and the
## killed node again at the end.
test-pg-failover: export SECKILL_PG = ha
test-pg-failover: export SECKILL_FAILOVER = pg
test-pg-failover: $(STACK_UP)
	scripts/stack.sh pg-ha up
	SECKILL_PG_DSN="$$(scripts/stack.sh pg-ha dsn)" $(GO) test -v -tags failpoints -count=1 -timeout 15m -run '^TestPostgresLeaderFailover$$' ./e2e

## contract: the API contract test alone, longer (Schemathesis, EXAMPLES per operation; make test runs 100)
contract: up
	SECKILL_CONTRACT_EXAMPLES=$${EXAMPLES:-1000} SECKILL_CONTRACT_SEED=$${SEED:-random} $(GO) test -count=1 -v -run '^TestAPIContract$$' -timeout 60m ./e2e

## fuzz: the native fuzz targets (request decoding, path ids, tokens, webhook signatures), FUZZ_TIME each
# A count (Nx), not a duration: Go 1.26's fuzz coordinator can report
# "context deadline exceeded" as a failure when a duration ends while a
# worker is mid-call (go.dev/issue/75804, fixed in Go 1.27).
FUZZ_TIME ?= 150000x
FUZZ_TARGETS := ./api:FuzzParseID ./api:FuzzReserveRequest ./internal/platform/auth:FuzzUser ./paysim:FuzzVerify ./internal/events:FuzzDecodeOrderCreateRequested
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "fuzz $$pkg $$fn for $(FUZZ_TIME)"; $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZ_TIME) $$pkg; done

## lint: gofmt, go vet (with and without failpoints), the architecture rules (tools/archlint: layers, sizes, no development package in bin/seckill), workflowcheck (workflow code stays deterministic), gosec, promtool check/test rules (deploy/prometheus), the Helm chart and docker-compose.yml through their real loaders (deploy-check)
lint: promtool-rules deploy-check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags failpoints ./...
	$(GO) run ./tools/archlint
	$(GO) run go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0 ./workflows/...
	$(GO) run github.com/securego/gosec/v2/cmd/gosec@v2.30.0 -quiet ./...

## chaos: the long forms of the chaos tests in ./e2e (docs/chaos.md#long-forms): the crash-point matrix with
## RUNS pipelined runs of each failpoint (200), then a kill soak of DURATION (20m)
chaos: up
	SECKILL_CRASH_RUNS=$${RUNS:-200} SECKILL_CHAOS_TIMEOUT=$${CHAOS_TIMEOUT:-3h} $(GO) test -tags failpoints -count=1 -v -timeout 4h \
	  -run '^TestCrashPointMatrix$$' ./e2e
	SECKILL_KILL_SOAK=$${DURATION:-20m} SECKILL_CHAOS_TIMEOUT=$${CHAOS_TIMEOUT:-3h} $(GO) test -tags failpoints -count=1 -v -timeout 4h \
	  -run '^TestKillSoak$$' ./e2e

## deploy-check: helm lint of deploy/helm/seckill with default (plus the required) and production-like values, and
## deploy/check's tests: the chart rendered by Helm's code, every object decoded strictly into the Kubernetes API
## types (k8s.io/api, the Prometheus Operator's), the refusals without secrets; docker-compose.yml loaded by
## compose-go. deploy/check is a module of its own (Helm, k8s.io, compose-go stay out of the production
## go.mod); Helm is its Go tool (`go tool helm`), built from the module proxy on first use (about 8 min here)
DEPLOY_CHECK_VALUES := testdata/minimal.yaml testdata/production.yaml
KUBE_VERSION ?= 1.33.0
deploy-check:
	cd deploy/check && for f in $(DEPLOY_CHECK_VALUES); do \
	  $(GO) tool helm lint --strict --kube-version $(KUBE_VERSION) ../helm/seckill -f $$f || exit 1; done
	cd deploy/check && $(GO) vet ./... && $(GO) test -count=1 ./...

## promtool-rules: the alert rules parse (promtool check rules) and fire as their unit tests say (promtool test rules);
## promtool comes with the Debian package prometheus, which `make up` installs (scripts/stack.sh install-promtool alone, as root)
PROMTOOL ?= promtool
promtool-rules:
	@command -v $(PROMTOOL) >/dev/null || scripts/stack.sh install-promtool
	$(PROMTOOL) check rules deploy/prometheus/alerts.yml
	$(PROMTOOL) test rules deploy/prometheus/alerts_test.yml
