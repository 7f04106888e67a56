// Command seckill-dev is the development binary of the flash-sale system:
// the commands of cmd/seckill (the same ones, from cmd/internal/cli) and those
// that need the project's tools or its local stack: stack, smoke, demo,
// paysim (the payment provider simulator) and bench. It is not in the
// production image (Dockerfile).
package main

import (
	"github.com/seckill/seckill/cmd/internal/cli"
)

func main() {
	cli.Main(cli.NewRoot("seckill-dev", "Development commands of the flash-sale system (local stack, smoke, demo, paysim, bench) and those of seckill",
		append(cli.Commands(), newStackCmd(), newSmokeCmd(), newBenchCmd(), newDemoCmd(), newPaysimCmd())...))
}
