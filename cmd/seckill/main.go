// Command seckill is the production binary of the flash-sale system: the
// gateway (api), the workers (worker), migrations and the operator commands
// (cmd/internal/cli). The development commands (the local stack, the smoke
// check, the demo, the payment provider simulator, the benches and chaos)
// are cmd/seckill-dev's: `make lint` (tools/archlint) refuses a dependency of
// this binary on tools/ or on the test rigs.
package main

import (
	"github.com/seckill/seckill/cmd/internal/cli"
)

func main() {
	cli.Main(cli.NewRoot("seckill", "Flash-sale order system: Redis admission, RocketMQ, Temporal sagas, PostgreSQL authority",
		cli.Commands()...))
}
