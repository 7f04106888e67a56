// Package bench measures the system on one machine against the local stack
// (docs/benchmarks.md); cmd/seckill-dev's `bench` commands only parse flags and
// call RunReserve, RunOrder or RunAll.
//
// `seckill-dev bench reserve` (RunReserve, reserve.go; the cases in their order,
// the fixed-rate case and the ratios in reserve_cases.go) measures the
// reservation hot path: the raw Redis cost of lua/reserve.lua driven by
// redis-benchmark (reserve_raw.go, redisbench.go) against the gateway's HTTP
// reserve endpoint (reserve_http.go) on in-process gateways
// (reserve_gateway.go), driven by wrk in its own process with wrk.lua (wrk.go);
// report.go is its report.
//
// `seckill-dev bench order` (RunOrder, order.go) measures the PostgreSQL order
// transaction and what follows it, one file per leg: the pgbench baseline
// (order_pgbench.go, pgbench.go, order_baseline.sql), CreateOrder called directly
// (order_activity.go), the RocketMQ produce/consume leg (broker.go), sagas
// from a backlog (saga.go) and, as their baseline, plain workflows of the
// saga's shape (plain.go), on a scratch database (order_db.go);
// order_report.go is its report, cpuwindow.go its CPU accounting.
//
// `seckill-dev bench all` (RunAll, all.go) runs both on a machine checked idle
// before each leg and prints one table from their reports (all_report.go).
//
// Shared: CPU and process accounting (machine.go, stats.go, proc.go), the
// loopback guard and clean-up of the bench's Redis keys and rows (stack.go).
package bench
