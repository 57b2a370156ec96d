// Package capture records bullylab testbed runs and analyzes the
// recordings: a capture file holds every frame the nodes sent and a record
// of every fault injected and every node started or stopped, and its
// analysis tells which elections ran, what triggered each, who won, how
// fast, and what went wrong.
//
// [Writer] ([NewWriter], [WriterOptions]) writes a capture file from
// frames and records that arrive a little out of order. [FileReader]
// ([NewReader]) reads any pcapng file back, packet by packet ([Packet],
// [Interface]), decoding the records ([DecodeRecord]). The sections below
// describe the file format, enough to write or read such files without
// this package.
//
// # Capture files
//
// A capture file is pcapng (draft-ietf-opsawg-pcapng), little-endian, of
// one section:
//
//   - a section header block, version 1.0, section length -1 (not
//     given), with options shb_userappl "bullylab", shb_hardware and
//     shb_os (the writer's GOARCH and GOOS);
//   - one interface description block per interface (see Interfaces),
//     all before the first packet: reordercap and some Wireshark versions
//     need that, and the readers here know the nodes and the election port
//     from what is described when the first packet is read;
//   - the packets, enhanced packet blocks: the frames and the records, in
//     timestamp order but for late ones (see Timestamps and order);
//   - when the writer closed cleanly ([Writer.Close]), after the end
//     record, one interface statistics block per interface, in interface
//     order: isb_ifrecv is the packets written on the interface and, on
//     the events interface only and only when a live capture reported its
//     counters, isb_ifdrop is [CaptureStats.Drops].
//
// # Interfaces
//
// With N nodes, interfaces 0 to N-1 are the nodes' switch ports, in the
// order of [TestbedInfo.Nodes] in the testbed record, and interface N, the
// last, is the events interface. Every interface has if_tsresol 9
// (nanoseconds), if_os (the writer's GOOS) and snap length
// [DefaultSnapLen] ([WriterOptions.SnapLen] if set).
//
// A node's interface has link type 1 (Ethernet), if_name the node's name
// and if_description
//
//	bullylab node <name> index=<index> id=<id> addr=<addr> port=<port>
//
// with the fields of its [NodeInfo]: index its 1-based position in the
// topology, id its UUID in the canonical 36-character form, addr its IP
// address and port its election port, such as
// "bullylab node n5 index=5 id=6f1c2a3e-0d4b-4c8e-9a7f-2b5d8e9c1a40 addr=10.77.0.6 port=7946".
//
// The events interface has link type [LinkTypeEvents] (147, LINKTYPE_USER0,
// which Wireshark shows as raw data with the packet comment), if_name
// [EventsInterfaceName] ("bullylab-events") and if_description "bullylab
// fault and lifecycle records (JSON, one per packet; summary in the packet
// comment)".
//
// Readers need not rely on the order ([FileReader.Interface] does not): an
// interface whose description's first three space-separated words are
// "bullylab", "node" and a name is that node's port ([Interface.Node]);
// the key=value words after them may come in any order, keys it does not
// know are ignored and missing ones leave their field zero (so a node
// name holds no space). The interface of link type 147 named
// "bullylab-events" is the events interface ([Interface.Events]). Any
// other interface is read as in any pcapng file.
//
// # Frames and the nodes that sent them
//
// A packet on a node's interface is an Ethernet frame as it entered the
// testbed switch from that node's port: each frame is recorded once, on
// the interface of the node that sent it, whatever its addresses. Its
// captured length is what was captured (the live capture takes at most
// DefaultSnapLen bytes), its original length the frame's; a frame may be
// a GSO super-frame (veth hands them over), a TCP segment of up to 64 KiB.
// Frames carry no packet options.
//
// The live capture ([StartLive]) gets that from the switch: its socket's filter
// keeps the copy of each frame that enters the switch by a port (not the
// copy the switch routes out by the receiver's port), and each frame is written on the interface of the node whose port it
// came in by ([NodePort.Veth], matched by interface index). What it cannot
// attribute it does not write, but counts in the end record: frames from
// an interface that is no node's port ([CaptureStats.Unmatched]) and, for
// a port whose node's MAC address is known ([NodePort.MAC]), frames whose
// source MAC is another ([CaptureStats.WrongSource]): copies the socket
// received before its filter was attached.
//
// Readers here attribute a frame by its IP addresses, not by its
// interface: [Analyze] and [CountSent] take its sender to be the node with
// its source address (its receiver, for Analyze, the node with its
// destination address).
//
// # Records
//
// A packet on the events interface is one record ([Record]): a JSON object
// (UTF-8, no trailing newline), its captured length equal to its original
// length, its timestamp the record's time, and with one packet comment
// (opt_comment), the record's one-line summary ([Record.Comment], such as
// "bullylab: crash n5 (SIGKILL to process 4242)"), which Wireshark shows
// as frame.comment and in its expert info. Its fields, omitted when empty
// but for the first three:
//
//	version  number      RecordVersion, 1
//	time     string      when it happened: RFC 3339 with nanoseconds (Go's
//	                     time.Time), the same instant as the packet's
//	                     timestamp, which is what Analyze uses
//	kind     string      what happened: testbed, end or a fault kind
//	nodes    [string]    the nodes it concerns, by name (see the kinds)
//	groups   [[string]]  partition only: the groups, by node name
//	one_way  bool        partition, cut
//	links    [[string]]  cut only: the node pairs, two names each
//	mode     string      partition, isolate, cut: reset, or absent for drop
//	detail   string      any kind: what changed, in words for people (its
//	                     wording is no format)
//	in_force string      any fault kind: when the change was known to be in
//	                     force (process gone or stopped, rules installed),
//	                     RFC 3339 like time; absent when unknown
//	peers    [string]    delay, loss: the destinations, absent for all
//	impair   object      delay, loss: what is asked on what nodes send (to
//	                     peers): delay_ns, jitter_ns (integers), loss
//	                     (percent)
//	clock    object      clock: the skew asked of the nodes' wall clocks,
//	                     offset_ns (integer) from in_force, drifting at
//	                     rate_ppm (number) from then; both 0 put them back
//	                     on their host's
//	testbed  object      testbed record only: TestbedInfo
//	capture  object      end record only: CaptureStats
//
// The kinds ([RecordKinds]; a fault's kind is its [fault.Kind]):
//
//   - testbed, the first record (see Timestamps and order): testbed is
//     the [TestbedInfo]: topology (string, its name), run (string, the run
//     ID), nodes (the [NodeInfo] of each node, in interface order: name,
//     index, id, addr, port as in the interface descriptions, index and
//     port numbers, the others strings) and the nodes' timings
//     heartbeat_ns, failure_timeout_ns and election_timeout_ns (integer
//     nanoseconds, omitted when unknown), and clock, the [ClockInfo]
//     (monotonic_offset_ns, offset_error_ns, ts_unit_ns), omitted when the
//     nodes' TCP timestamps cannot be read as send times (see Send and
//     receipt times).
//   - crash, restart, pause, resume, isolate, unisolate, campaign, leave:
//     nodes are the nodes it was done to.
//   - partition: groups are two or more disjoint lists of nodes, cut from
//     each other; nodes in no group keep reaching everyone. With one_way
//     there are exactly two groups and only what the first sends to the
//     second is cut. A partition replaces the one before; isolations and
//     cuts stay.
//   - cut: links are node pairs cut from each other, every other link up;
//     with one_way only what each pair's first node sends to its second is
//     cut. A cut replaces the one before; partitions and isolations stay.
//   - partition, isolate and cut with mode reset: the receivers answer
//     every TCP segment across the cut with a reset (a SYN is refused, a
//     connection resets at its next segment) rather than dropping it.
//     Where faults in different modes cut one direction, it is a drop.
//   - heal: every partition, cut and isolation removed; nodes are the nodes
//     that were cut.
//   - delay, loss: the impairment of what nodes send changed; detail says
//     to whom and what is now in force.
//   - clear: the impairments of nodes (of all, without nodes) are back to
//     the topology's.
//   - clock: the wall clocks of nodes read their host's plus clock's
//     offset_ns from in_force on, drifting at its rate_ppm; a node the
//     lab restarts keeps the skew (the lab models it as its host's).
//   - end, the last record: capture is the [CaptureStats], the counters of
//     the writer and of its live capture, each an integer.
//
// The lab (package netem/lab) writes a record as it applies a fault, with
// time when it began (the change is in force within about a millisecond),
// and writes kinds this package has no constant for (join, a node started
// again as a newcomer). The version and the kinds are open: a reader
// ([DecodeRecord]) accepts any version from 1 up, ignores fields it does
// not know and keeps records of kinds it does not know ([Analyze] lists
// them, and takes any kind but testbed and end for a possible trigger), so
// a later version may add fields and kinds but not change the meaning of
// these. It refuses, with an error naming the packet ([FileReader.Next]),
// a record that is not a JSON object, has no version (or one below 1) or
// has no kind.
//
// # Timestamps and order
//
// A packet's timestamp counts nanoseconds since the Unix epoch (if_tsresol
// 9; the reader here takes any resolution an interface declares). A
// frame's is the kernel's, taken when the frame reached the capture
// socket from the switch port; a record's is its time, read by whoever
// made the change: both are the testbed host's wall clock
// (CLOCK_REALTIME), which a clock step moves for both.
//
// The [Writer] buffers frames and records and writes them in timestamp
// order, ties in the order it was given them, each once it is
// [WriterOptions.Window] ([DefaultWindow], 250 ms) or more older than the
// watermark: the latest frame timestamp, or the time given to
// [Writer.Advance] (the live capture advances it to 10 ms ago whenever its
// socket has nothing to read); records never move the watermark. An item
// that comes older than one already written is written at once, out of
// order, and counted in [CaptureStats.Late]; a negative Window writes
// every item as it comes. So packets are in timestamp order but for the
// late ones, which readers must tolerate ([Analyze] sorts by timestamp).
// The testbed record, given first and stamped [WriterOptions.Start], comes
// first unless the Writer is given items stamped before it;
// [Writer.Close] stamps the end record at the latest timestamp it was
// given or now, whichever is later, so that it comes last.
//
// # Truncated captures
//
// The Writer buffers what it writes and flushes at [Writer.Flush] and
// Close, so a writer killed first leaves a file that ends inside a block,
// or between blocks, without the end record and the statistics. The
// reader reads every packet before the cut, then fails with an error
// wrapping a [TruncatedError] (an io.ErrUnexpectedEOF too) that says how many packets
// it read whole and where they end; [Analyze] reports those packets as it
// would a file that ended cleanly after them, and says so in
// [Report.Truncated] and [Report.Warnings] (a cut before the first packet
// is an error). A file that ends between blocks reads as complete: only
// the missing end record tells. A frame the cut leaves incomplete is
// counted in [DissectorStats.CutAtEnd], as at the end of any capture (see
// TCP reassembly).
//
// # The election port
//
// Frames travel over TCP connections to or from the election port. The
// readers here take the ports from the node interfaces' descriptions,
// else from the testbed record if it is the first packet, else
// [wire.DefaultPort] (7946); [AnalyzeOptions.Ports] overrides them. A
// segment is the election's when either of its ports is one of them
// ([DissectorOptions.Ports], wire.DefaultPort by default).
//
// # Frames as a gopacket layer
//
// [Bullylab] is one frame as a gopacket layer ([LayerTypeBullylab]), for
// programs that decode packets with gopacket; frames on ports other than
// wire.DefaultPort need [RegisterPort]. It decodes and serializes with
// package wire, whose package doc describes the frame format.
//
// # TCP reassembly
//
// [Dissector] ([NewDissector], [DissectorOptions]) turns the TCP segments
// of captured packets into frames and hands them to a [Handler]: each
// [Frame], with its [Stream], and each [StreamError]. [DissectorStats]
// counts what it saw. [CountSent] uses it to count a capture's frames by
// sending node ([SentCounts]), as the nodes count what they send.
//
// Each direction of a connection is a byte stream, cut into frames by
// their headers and reassembled from its segments by sequence number,
// however they were cut, repeated or reordered: each byte goes to the
// frame parser once, in order. An offset ([Frame.Offset],
// [StreamError.Offset]) is a position in that stream: 0 is the byte after
// the SYN (offset = sequence number - SYN's - 1, not wrapping at 2^32) or,
// when the capture lacks the SYN ([Stream.MidStream]), the first byte of
// the first data segment captured. Bytes the capture lacks count, so an
// offset is the same whatever was lost. A new SYN on the same addresses
// and ports starts a new connection, from offset 0. A frame's packet,
// time and interface ([Frame.Packet]) are those of the packet after which
// all of its bytes were there in order: when the receiver could read it.
//
// A StreamError is one of:
//
//   - a corrupt frame, Err [wire.ErrBadStart], [wire.ErrVersion],
//     [wire.ErrTooLarge] (a length above [DissectorOptions.MaxFrame]) or
//     [wire.ErrChecksum]: Offset is the frame's first byte, Bytes 0,
//     Packet the one in which the fault showed (for a checksum, the one
//     that completed the frame);
//   - [ErrGap], bytes the capture lacks: Offset is the first of them,
//     Bytes how many. Packet is the segment the snap length cut short or,
//     for bytes behind a hole (a segment lost, or cut short while an
//     earlier one was missing), the packet at which the Dissector gave up
//     waiting for them: the one at which the half had
//     [DissectorOptions.MaxBufferedPages] pages buffered or, at
//     [Dissector.Flush], the last segment it was given (pure ACKs aside). The frames waiting behind the hole are delivered then,
//     with that packet;
//   - [ErrIncomplete], a stream that ended inside a frame (at its FIN or an
//     RST): Offset is the frame's first byte, Bytes the bytes of it there
//     were, Packet the one that ended the stream.
//
// After a corrupt frame or a gap, and at the start of a stream without its
// SYN, the Dissector resynchronizes: it looks, from the byte after the
// corrupt frame's first or from the first byte after the gap, for the
// first offset where a whole frame of a known type, at most MaxFrame long
// and with a valid CRC, starts, and goes on from there; the bytes passed
// over are counted in [DissectorStats.SkippedBytes], not reported. It
// never gives a stream up. At the end of the capture (Flush), a frame still
// incomplete is counted in [DissectorStats.CutAtEnd], not reported.
//
// # Live capture
//
// [StartLive] captures a testbed switch's traffic into a Writer until its
// context ends or [Live.Stop], which returns the capture's [Stats];
// [NodePort] names a node's switch port. It needs Linux (an AF_PACKET
// socket in the switch's network namespace): elsewhere Start returns
// [ErrNotSupported]. Writing, reading and analyzing capture files work on
// any system.
//
// # Analysis
//
// [Analyze] and [AnalyzeFile] ([AnalyzeOptions]) read a capture and return
// its [Report]: the election algorithm its frames are of (Bully's or the
// ring's; both is an anomaly), frames counted by type ([TypeCounts])
// overall and per node ([NodeReport]), the elections ([Election]) with
// their [Trigger], leader and timings, the [Final] state, and the
// anomalies ([Anomaly]); Analyze's doc gives the rules. A Report is a JSON document of schema [Schema],
// whose every key README.md documents (section "The analyze JSON", held to
// the types by a test), or text ([Report.WriteText]), with one election's
// messages in order if asked for ([Report.ElectionTimeline], [Timeline]).
//
// # Send and receipt times
//
// A frame's capture timestamp is when it entered the switch from its
// sender's port. On a bullylab testbed every delay and jitter is added on
// the sender's egress (before the switch) and every cut and loss drops on
// the receiver's arrival (after it), so the capture timestamp is also when
// the frame reached its receiver's kernel, within the switch's forwarding
// time (microseconds): the receipt time ([MessageRef.Time]). A frame
// dropped at arrival has no receipt, and the capture tells it by the
// receiver's acknowledgement: [MessageRef.Acked] is when the receiver's
// TCP ACK covering the frame's last byte entered the switch, nil if none
// did (the receiver's ACK can come no earlier than its kernel had the
// bytes, so Acked bounds the receipt from above; a delayed ACK makes it
// loose, never wrong).
//
// A frame dropped and then retransmitted was captured twice or more:
// [MessageRef.Transmissions] keeps every copy with its own capture and
// send time and whether it was delivered or lost ([Transmission] gives
// the rule), so that a frame is drawn as received when a copy was, not
// when its first, dropped copy was on the switch.
//
// The send time comes from the frame's own segment: the testbed turns off
// TCP's per-connection timestamp offset in every node (net.ipv4.tcp_timestamps
// = 2), so the timestamp option's TSval counts CLOCK_MONOTONIC ticks
// (microseconds on Linux 6.7 and later, where the testbed sets the route
// feature tcp_usec_ts; else milliseconds) modulo 2^32, stamped by the
// sender's kernel when it built the segment, before its egress delay. The
// testbed record's [ClockInfo] gives the tick and CLOCK_REALTIME minus
// CLOCK_MONOTONIC. [MessageRef.Sent] is the midpoint of the TSval's tick
// on the capture's clock, unwrapped to the 2^32 ticks before the capture
// timestamp and never after it; its error bound, [MessageRef.SentErrNS],
// is half a tick plus the error of the clock offset. A frame completed by
// a retransmission is sent when that copy was. Captures without a
// ClockInfo (older ones, other tools') have no send times.
//
// # Faults verified on the wire
//
// For every fault record the analysis sets what the capture observed next
// to what the record asked ([Report.FaultChecks], [FaultCheck]), counting
// from the record's in_force time (its time when absent) to the record
// that changed the same thing next:
//
//   - delay: per direction (sender to receiver) that carried segments, the
//     median of each segment's capture timestamp minus its send time (pure
//     ACKs included: they take the same egress), its minimum and maximum,
//     against the record's delay_ns ([DelayObservation]). A segment sent
//     less than delay+jitter before the next change began is no sample:
//     the change may let it go early (the NFQUEUE delayer releases what it
//     holds when it closes). Each sample's error is the send time's bound.
//     A direction whose median is more
//     than max(2 ms, 10%) from the asked delay fails the check; one
//     without segments is not verified. The median is compared because
//     jitter is symmetric around the delay; under jitter the tolerance
//     grows by how far the median of that direction's n samples strays by
//     chance, 3.29 j/sqrt(n+2) and at most j ([DelayTolerance]), so a
//     direction with three segments is not failed for drawing three long
//     delays.
//     [Report.PathDelay] is the same measure outside every delay and
//     every change of one under way: what the testbed itself adds.
//   - loss: the data transmissions (segments with payload, SYN or FIN) of
//     the record's directions, not over a cut, whose fate the capture
//     shows: delivered (the receiver acknowledged them before they were
//     sent again) or lost (sent again first) ([LossObservation]). The
//     check fails when the asked rate is outside the 99.9% Wilson score
//     interval of the observed one, so few transmissions never fail it.
//     Pure ACKs, whose loss TCP does not show, are not counted; a
//     retransmission of a segment whose ACK was delayed past the sender's
//     timeout counts as a loss (Linux waits at least 200 ms for it).
//   - cut (partition, isolate, cut): per cut direction, the frames that
//     entered the switch while the cut was in force, and those of them
//     that the receiver acknowledged before the cut changed, by the ACK's
//     own send time ([CutObservation]): crossed. Any crossing fails the
//     check. A frame received during a cut whose ACK the receiver delayed
//     past its end is missed. Over a direction a reset cuts, also the TCP
//     segments sent across while in force (resets not counted) and the
//     resets the receiver sent back meanwhile: a direction with segments
//     and no reset fails the check too.
//   - last-frame (crash, pause): per node, the last frame it sent before
//     it came back ([LastFrame]); the check fails if its kernel sent it
//     after the fault was in force (beyond the send time's error bound)
//     and nothing shows the kernel held it from before. A stopped
//     process's sockets stay open and a killed one's close with a FIN
//     after what it wrote, and TCP retransmits both: a frame whose
//     connection's FIN past it went out before the fault was in force
//     passes (ClosedBy), and one whose direction had loss asked since the
//     frame before it leaves the check unverified (LossAsked), since the
//     testbed drops on the sender's egress, before the switch, so the
//     only copy the capture has may be a retransmission.
//   - clock: every HELLO sent while the record was in force, until the
//     next clock record, against the skew of its sender's clock: the
//     HELLO's time minus its send time (its capture timestamp when
//     unknown) is the offset its clock had, which for the record's nodes
//     must be the asked offset_ns plus rate_ppm times the time since
//     in_force, and for the others the skew an earlier record left them
//     (none, normally: ~0) ([ClockObservation], min, median and max per
//     node). A node stamps a HELLO before it writes it, so the offset
//     observed is never above the skew's by more than the send time's
//     error, and below it by the stamp-to-send gap, which the check
//     bounds at [ClockToleranceLate], 100 ms; a HELLO outside fails it.
//     In a capture merged from several hosts' a HELLO carries its host's
//     clock, so the host's offset (HostClock) is added back and its bound
//     allowed. A node sends a HELLO only when it opens a connection: with
//     none from the record's nodes, the check is not verified.
//
// # Authentication
//
// Frames of authenticated connections carry tags (see package wire). With
// the cluster key ([AnalyzeOptions.Key]) the analysis verifies them per
// stream, as the receiving node would, and reports the frames that failed
// and the HELLOs replayed ([AuthReport], [AuthFailure], [HelloReplay]);
// without it, it counts the authenticated frames. A HELLO signed by its
// sender's member key fails when its signature does not verify, or when
// it carries another key than its sender's first signed HELLO in the
// capture did: the peers file, which says whose key is whose, is not in
// the capture. The layer shows a signed HELLO's key and checks its
// signature without the cluster key ([Bullylab.PublicKey],
// [Bullylab.CheckSignature]).
package capture
