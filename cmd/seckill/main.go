// Command seckill is the one binary of the flash-sale system. Its subcommands
// run the gateway, the workers, migrations, the local stack and the demo.
package main

import (
	"github.com/seckill/seckill/cmd/internal/cli"
)

func main() {
	cli.Main(cli.NewRoot("seckill", "Flash-sale order system: Redis admission, RocketMQ, Temporal sagas, PostgreSQL authority",
		append(cli.Commands(), newStackCmd(), newSmokeCmd(), newBenchCmd(), newDemoCmd(), newPaysimCmd(), newChaosCmd())...))
}
