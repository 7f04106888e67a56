// Package bench measures the system on one machine against the local stack
// (docs/benchmarks.md); cmd/seckill's `bench` commands only parse flags and
// call RunReserve or RunOrder.
//
// `seckill bench reserve` (RunReserve, reserve.go) measures the reservation
// hot path: the raw Redis cost of lua/reserve.lua driven by redis-benchmark
// (reserve_raw.go, redisbench.go) against the gateway's HTTP reserve
// endpoint driven by a Go load generator (reserve_http.go, load.go) on
// in-process gateways (reserve_gateway.go); report.go is its report.
//
// `seckill bench order` (RunOrder, order.go) measures the PostgreSQL order
// transaction and what follows it, one file per leg: pgbench baseline and
// replay (order_pgbench.go, pgbench.go), CreateOrder called directly
// (order_activity.go), the RocketMQ produce/consume leg (broker.go) and
// sagas from a backlog (saga.go), on a scratch database (order_db.go);
// order_report.go is its report, cpuwindow.go its CPU accounting.
//
// Shared: CPU and process accounting (machine.go, stats.go, proc.go), the
// loopback guard and clean-up of the bench's Redis keys and rows (stack.go).
package bench
