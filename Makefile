# The two commands a newcomer needs are `make run` and `make test` (README).
SHELL := /bin/bash
GO ?= go
BIN := bin/seckill
export SECKILL_INTEGRATION ?= 1

.PHONY: up down status build migrate run smoke test unit integration lint bench

build:
	$(GO) build -o $(BIN) ./cmd/seckill

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

## run: bring the stack up and run the main job (for now the stack smoke run)
run: up
	$(BIN) smoke

## test: bring the stack up, then lint and run every test (unit + integration)
test: up lint
	$(GO) test -race -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
