package cluster

import (
	"context"
	"fmt"
	"time"
)

// Phase is one measured step of Failover.
type Phase struct {
	Name   string
	Action string // what the harness did to start the phase
	Leader *Process
	Epoch  uint64
	Nodes  int // how many nodes had to agree
	// Took is from the action to the first poll that saw every node agree,
	// so it includes up to one PollInterval of polling delay.
	Took time.Duration
}

// Failover runs the demo scenario on a freshly started cluster: wait until
// all nodes agree on the highest node; kill -9 it and wait until the
// survivors agree on the highest survivor under a newer epoch; restart the
// killed node from its data dir and wait until all agree on it again under a
// still newer epoch. Each wait is bounded by phaseTimeout.
func Failover(ctx context.Context, c *Cluster, phaseTimeout time.Duration) ([]Phase, error) {
	wait := func(nodes []*Process, leader *Process, after uint64) (uint64, error) {
		wctx, cancel := context.WithTimeout(ctx, phaseTimeout)
		defer cancel()
		epoch, err := c.WaitAgree(wctx, nodes, leader, after)
		if err != nil && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return epoch, err
	}
	var phases []Phase
	all := c.Nodes
	first := Highest(all)

	epoch, err := wait(all, first, 0)
	if err != nil {
		return phases, fmt.Errorf("boot: %w", err)
	}
	phases = append(phases, Phase{
		Name: "boot", Action: fmt.Sprintf("start %d nodes", len(all)),
		Leader: first, Epoch: epoch, Nodes: len(all), Took: time.Since(c.StartedAt),
	})

	survivors := Except(all, first)
	second := Highest(survivors)
	t0 := time.Now()
	if err := c.Kill(first); err != nil {
		return phases, fmt.Errorf("failover: %w", err)
	}
	epoch2, err := wait(survivors, second, epoch)
	if err != nil {
		return phases, fmt.Errorf("failover after kill -9 of %s: %w", first, err)
	}
	phases = append(phases, Phase{
		Name: "failover", Action: fmt.Sprintf("kill -9 n%d", first.Index),
		Leader: second, Epoch: epoch2, Nodes: len(survivors), Took: time.Since(t0),
	})

	t0 = time.Now()
	if err := c.Restart(ctx, first); err != nil {
		return phases, fmt.Errorf("takeover: %w", err)
	}
	epoch3, err := wait(all, first, epoch2)
	if err != nil {
		return phases, fmt.Errorf("takeover after restart of %s: %w", first, err)
	}
	phases = append(phases, Phase{
		Name: "takeover", Action: fmt.Sprintf("restart n%d", first.Index),
		Leader: first, Epoch: epoch3, Nodes: len(all), Took: time.Since(t0),
	})
	return phases, nil
}
