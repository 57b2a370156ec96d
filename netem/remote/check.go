package remote

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bullylab/bullylab/topologies"
)

// DefaultBinaryDir is where a host keeps the controllers' binaries, each
// named by its SHA-256, so that controllers of two versions never replace
// each other's.
const DefaultBinaryDir = "/var/lib/bullylab/bin"

// clockSamples is how many round trips a check's clock offset takes.
const clockSamples = 16

// CheckOptions configure Check.
type CheckOptions struct {
	// Binary is the controller's own bullylab, copied to every host.
	Binary string
	// Version is the controller's version; an agent of another is an
	// error.
	Version string
	// BinaryDir is where on the hosts; "" is DefaultBinaryDir.
	BinaryDir string
	// Dial makes the hosts' TCP connections; nil dials from this
	// process's namespace.
	Dial DialFunc
}

// HostReport is what Check found of one host.
type HostReport struct {
	Host   topologies.Host
	Agent  AgentInfo
	Copied bool // the binary was copied: the host had another or none
	Clock  ClockOffset
	// Unfit says why the host cannot run a testbed; "" when it can.
	Unfit string
	// Backend is the impairment backend its faults would use.
	Backend string
	// Err is why the check did not get through; the fields above hold
	// what it found before.
	Err error
}

// Check reaches every host at once, over SSH: it copies the controller's
// binary there when the host's differs, starts the agent, and asks it who
// it is, for its clock and whether the host can run a testbed.
func Check(ctx context.Context, hosts []topologies.Host, opts CheckOptions) []HostReport {
	return eachHost(hosts, opts, func(h topologies.Host, remoteBin string) HostReport {
		return checkHost(ctx, h, opts, remoteBin)
	}, func(h topologies.Host, err error) HostReport { return HostReport{Host: h, Err: err} })
}

// eachHost calls do for every host at once, with the path of the
// controller's binary there, or failed for every host when that path
// cannot be found.
func eachHost[R any](hosts []topologies.Host, opts CheckOptions, do func(h topologies.Host, remoteBin string) R, failed func(h topologies.Host, err error) R) []R {
	out := make([]R, len(hosts))
	remoteBin, err := HostBinary(opts)
	var wg sync.WaitGroup
	for i, h := range hosts {
		if err != nil {
			out[i] = failed(h, err)
			continue
		}
		wg.Go(func() { out[i] = do(h, remoteBin) })
	}
	wg.Wait()
	return out
}

// HostBinary is where on a host the controller's binary goes: in
// opts.BinaryDir (DefaultBinaryDir when empty), named by its SHA-256.
func HostBinary(opts CheckOptions) (string, error) {
	sum, err := fileSHA256(opts.Binary)
	if err != nil {
		return "", fmt.Errorf("the controller's binary: %w", err)
	}
	dir := opts.BinaryDir
	if dir == "" {
		dir = DefaultBinaryDir
	}
	return path.Join(dir, "bullylab-"+sum[:16]), nil
}

func checkHost(ctx context.Context, h topologies.Host, opts CheckOptions, remoteBin string) HostReport {
	c, a, r := connectHost(ctx, h, opts, remoteBin)
	if r.Err != nil {
		return r
	}
	defer c.Close()
	defer a.Close()
	var err error
	if r.Clock, err = a.ClockOffset(clockSamples); err != nil {
		r.Err = err
		return r
	}
	if r.Unfit, r.Backend, err = a.Probe(); err != nil {
		r.Err = err
	}
	return r
}

// HostClean is what `bullylab clean` did on one host.
type HostClean struct {
	Host topologies.Host
	// Output is what it printed: what it removed, and the runs it left
	// alone because their owner (a controller's agent) still runs.
	Output string
	Err    error
}

// ShareRun names the run of host k's share (0-based, in the topology's
// order) of the testbed across hosts run: each host's objects carry its
// number too, so that hosts sharing a kernel (the tests' stand-ins) do not
// collide.
func ShareRun(run string, k int) string { return run + "h" + strconv.Itoa(k+1) }

// CleanHosts runs `bullylab clean` on every host at once, over SSH, with
// the controller's binary (copied when the host's differs): it removes
// what testbeds whose agent died left there, as it does on one host. With
// runs, it cleans only their shares (ShareRun), on each host its own.
func CleanHosts(ctx context.Context, hosts []topologies.Host, opts CheckOptions, runs ...string) []HostClean {
	return eachHost(hosts, opts, func(h topologies.Host, remoteBin string) HostClean {
		r := HostClean{Host: h}
		cmd := shellQuote(remoteBin) + " clean"
		if len(runs) > 0 {
			k := slices.IndexFunc(hosts, func(o topologies.Host) bool { return o.Name == h.Name })
			shares := make([]string, len(runs))
			for i, run := range runs {
				shares[i] = ShareRun(run, k) // the host's clean checks the name
			}
			cmd += " --run " + strings.Join(shares, ",")
		}
		c, err := dialHost(ctx, h, opts)
		if err != nil {
			r.Err = err
			return r
		}
		defer c.Close()
		if _, r.Err = c.EnsureFile(ctx, opts.Binary, remoteBin); r.Err != nil {
			return r
		}
		out, err := c.Output(ctx, cmd)
		r.Output, r.Err = strings.TrimSpace(string(out)), err
		return r
	}, func(h topologies.Host, err error) HostClean { return HostClean{Host: h, Err: err} })
}

// dialHost reaches h over SSH, with opts.Dial when set.
func dialHost(ctx context.Context, h topologies.Host, opts CheckOptions) (*Client, error) {
	if opts.Dial == nil {
		return Dial(ctx, h)
	}
	return DialWith(ctx, h, opts.Dial)
}

// connectHost reaches h, copies the binary there when the host's differs,
// starts the agent and checks its version. On error it closes what it
// opened and returns nil client and agent.
func connectHost(ctx context.Context, h topologies.Host, opts CheckOptions, remoteBin string) (_ *Client, _ *Agent, r HostReport) {
	r.Host = h
	c, err := dialHost(ctx, h, opts)
	if err != nil {
		r.Err = err
		return nil, nil, r
	}
	fail := func(err error) (*Client, *Agent, HostReport) {
		c.Close()
		r.Err = err
		return nil, nil, r
	}
	if r.Copied, err = c.EnsureFile(ctx, opts.Binary, remoteBin); err != nil {
		return fail(err)
	}
	// The agent outlives ctx, which may be a check's: the connection's
	// end stops it.
	a, err := c.StartAgent(context.WithoutCancel(ctx), remoteBin)
	if err != nil {
		return fail(err)
	}
	if r.Agent, err = a.Hello(); err != nil {
		return fail(err)
	}
	if opts.Version != "" && r.Agent.Version != opts.Version {
		return fail(fmt.Errorf("host %s: agent version %q, the controller's is %q", h.Name, r.Agent.Version, opts.Version))
	}
	return c, a, r
}
