// Package topologies parses bullylab's YAML topology files and ships a few
// built-in ones (star3 … star1000, two-site), embedded so that
// `--topology star5` works from an installed binary.
//
// A topology, in the spirit of containerlab:
//
//	name: two-site          # [A-Za-z0-9._-]{1,64}; defaults to the file name
//	nodes: 5                # a count (names n1..n5) or a list, see below
//	subnet: 10.77.0.0/16    # IPv4; node i gets host i+1 (n1 is .2); the switch has no address;
//	                        # not touching 0.0.0.0/8, loopback, multicast or 240.0.0.0/4
//	port: 7946              # election port, 1..65535, not 7000 (Wireshark's Gryphon dissector)
//	hosting: process        # process: a process per node; shared: one host process runs them all
//	algorithm: bully        # the election every node runs: bully (the default) or ring
//	impair:                 # default impairment of every node's link
//	  delay: 0ms            # durations: Go syntax (30ms, 1.5s), >= 0
//	  jitter: 0ms
//	  loss: 0%              # percentages 0..100, "%" optional
//	  duplicate: 0%
//	  reorder: 0%
//	settings: {heartbeat: 100ms, failure_timeout: 500ms, election_timeout: 200ms, detection_stagger: 50ms}
//	                        # floors: heartbeat >= 10ms, failure_timeout >= 50ms and above
//	                        # heartbeat, election_timeout >= 20ms, detection_stagger 0 (off) or >= 1ms
//	groups:                 # named sets of nodes, for links
//	  site-a: [n1, n2, n3]
//	  site-b: [n4, n5]
//	links:                  # extra impairment between two groups or nodes, both ways
//	  - between: [site-a, site-b]
//	    impair: {delay: 30ms}
//	hosts:                  # machines the testbed spans, over SSH (README: Testbeds across hosts)
//	  - {name: rack-a, ssh: 192.0.2.10:22, user: root, key: ~/.ssh/id_ed25519,
//	     known_hosts: ~/.ssh/known_hosts, nodes: [n1, n2]}
//	                        # nodes no host lists go, in order, to the host with the fewest
//
// The timing floors (MinHeartbeat and friends) keep a testbed meaningful:
// below them the nodes' timers race the host's scheduler, and what a
// bench measures is the machine, not the election.
//
// In the list form each node may override the settings and the impairment
// of its own link, field by field:
//
//	nodes:
//	  - name: a
//	  - {name: b, heartbeat: 50ms, impair: {delay: 5ms}}
//
// Node and group names match [a-z0-9-]{1,16}, do not start with '-', and
// "sw" is reserved for the switch. When several links cover the same pair,
// later ones override earlier ones field by field. Unknown fields are errors,
// and every error is one line naming the file, line and field:
//
//	two-site.yaml:7: groups.site-a[2]: unknown node "n9"
//
// A file holds at most MaxFileSize bytes (8 MiB); Load refuses a larger
// one, or a device such as /dev/zero, without reading further, and reads
// a FIFO without blocking when nobody writes to it. /dev/stdin works.
//
// example.yaml in this folder is a commented file using every field.
package topologies
