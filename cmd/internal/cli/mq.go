package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/workers/deadletter"
)

func newMQCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "mq", Short: "RocketMQ maintenance: replay dead-lettered messages"}
	var opts deadletter.ReplayOptions
	replay := &cobra.Command{
		Use:   "replay-dlq",
		Short: "Re-send dead-lettered messages (message_quarantine, source DLQ) to their original topic, once per message_id",
		Long: `Re-sends every not yet replayed dead-lettered message of the consumer group to its
original topic, as the gateway sent it (same message_id, key, tag and body), once per
message_id however many copies the DLQ held, and marks its rows replayed (replayed_at,
replay_count). A rerun sends nothing again. Fix the cause first (see docs/operations.md,
"Dead-lettered messages") and look with --dry-run. A failed send leaves its rows
unreplayed and the command exits non-zero.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := LoadBase()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("group") {
				opts.Group = b.Cfg.StarterGroup
			}
			pool, err := pg.Open(cmd.Context(), b.Cfg.PostgresDSN, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			prod, err := mq.NewProducer(mq.EndpointOf(b.Cfg), "seckill-replay-dlq", mq.WithSendTimeout(b.Cfg.MQSendTimeout))
			if err != nil {
				return err
			}
			defer prod.Close()
			rep, err := deadletter.Replay(cmd.Context(), pool, prod, opts)
			if err == nil || errors.Is(err, deadletter.ErrReplayFailed) || len(rep.Items) > 0 {
				printReplay(cmd.OutOrStdout(), opts.Group, rep)
			}
			return err
		},
	}
	replay.Flags().StringVar(&opts.Group, "group", "", "consumer group whose dead letters are replayed (default SECKILL_STARTER_GROUP)")
	replay.Flags().IntVar(&opts.Limit, "limit", 0, "replay at most this many messages, oldest first (0: all)")
	replay.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print what would be sent and change nothing")
	cmd.AddCommand(replay)
	return cmd
}

func printReplay(w io.Writer, group string, rep deadletter.Report) {
	for _, it := range rep.Items {
		fmt.Fprintf(w, "%-12s message_id %s  topic %s  key %s  copies %d", it.Outcome, it.MessageID, it.Topic, it.Key, it.Copies)
		if it.Outcome == deadletter.Replayed {
			fmt.Fprintf(w, "  broker_msg_id %s  replay %d", it.BrokerMsgID, it.ReplayCount)
		}
		if it.Detail != "" {
			fmt.Fprintf(w, "  (%s)", it.Detail)
		}
		fmt.Fprintln(w)
	}
	verb := "replayed"
	if rep.DryRun {
		verb = "dry run: would replay"
	}
	fmt.Fprintf(w, "group %s: %s %d, skipped %d, failed %d\n", group, verb, rep.Replayed, rep.Skipped, rep.Failed)
}
