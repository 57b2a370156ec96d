package capture

import (
	"io"
	"net/netip"
	"os"
	"time"
)

// SentCounts is what a capture holds from each node: frames by sending
// node's name and message type name.
type SentCounts map[string]map[string]uint64

// CountSent counts the frames of the capture at path by sending node and
// type, as the nodes' own counters of frames put on the wire count them:
// HELLOs, which open authenticated connections, under their own type, as
// the nodes count them.
// keep, when not nil, says which frames count: a node's frames from one
// time on, or in a window. Frames from addresses that are no node of the
// capture's testbed, and corrupt frames, are not counted.
func CountSent(path string, keep func(node string, at time.Time) bool) (SentCounts, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	rd, err := NewReader(fh)
	if err != nil {
		return nil, err
	}
	c := &sentCounter{keep: keep, byAddr: map[netip.Addr]string{}, counts: SentCounts{}}
	var d *Dissector
	for {
		p, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if d == nil {
			// Every interface is known once the first packet is read.
			ifaces := rd.Interfaces()
			for _, ifc := range ifaces {
				if n := ifc.Node; n != nil {
					c.byAddr[n.Addr] = n.Name
				}
			}
			d = NewDissector(c, DissectorOptions{Ports: framePorts(ifaces, p)})
		}
		if p.Record != nil || p.Iface == nil || p.Iface.Events {
			continue
		}
		ci := p.CI
		d.Packet(p.Num, p.Iface.LinkType, p.Data, &ci)
	}
	if d == nil {
		return c.counts, nil
	}
	d.Flush()
	return c.counts, nil
}

type sentCounter struct {
	keep   func(string, time.Time) bool
	byAddr map[netip.Addr]string
	counts SentCounts
}

func (c *sentCounter) Frame(f *Frame) {
	n, ok := c.byAddr[f.Src.Addr()]
	if !ok || f.Err != nil || (c.keep != nil && !c.keep(n, f.Time)) {
		return
	}
	if c.counts[n] == nil {
		c.counts[n] = map[string]uint64{}
	}
	c.counts[n][f.Msg.Type.String()]++
}

func (c *sentCounter) StreamError(*StreamError) {}
