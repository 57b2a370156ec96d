// Package capture records bullylab testbed runs and analyzes the
// recordings: a capture file holds every frame the nodes sent and a record
// of every fault injected and every node started or stopped, and its
// analysis tells which elections ran, what triggered each, who won, how
// fast, and what went wrong.
//
// # Capture files
//
// A capture file is pcapng. It has one Ethernet interface per node, in the
// testbed's node order, named after the node and described as
// "bullylab node n5 index=5 id=<uuid> addr=10.77.0.6 port=7946"; each frame
// is recorded once, on the port of the node that sent it. After them comes
// the events interface ([EventsInterfaceName], link type [LinkTypeEvents]),
// whose packets are records ([Record]): each a JSON object, with its
// one-line summary ([Record.Comment], such as
// "bullylab: crash n5 (SIGKILL to process 4242)") as the packet comment, which
// Wireshark shows in its packet list and expert info. Every interface is
// described before the first packet (reordercap and some Wireshark versions
// need that); the [KindTestbed] record, with the [TestbedInfo] and its nodes
// ([NodeInfo]), comes first, the [KindEnd] record, with the [CaptureStats],
// last, and packets are in timestamp order (see [Writer] for the
// exceptions).
//
// [Writer] ([NewWriter], [WriterOptions]) writes such a file from frames
// and records that arrive a little out of order. [FileReader] ([NewReader])
// reads any pcapng file back, packet by packet ([Packet], [Interface]),
// decoding the records ([DecodeRecord]); a file cut inside a block, as a
// killed writer leaves it, reads up to the cut, then fails with a
// [TruncatedError].
//
// # Live capture
//
// [Start] captures a testbed switch's traffic into a Writer until its
// context ends or [Live.Stop], which returns the capture's [Stats];
// [NodePort] names a node's switch port. It needs Linux (an AF_PACKET
// socket in the switch's network namespace): elsewhere Start returns
// [ErrNotSupported]. Writing, reading and analyzing capture files work on
// any system.
//
// # Frames as a gopacket layer
//
// [Bullylab] is one frame as a gopacket layer ([LayerTypeBullylab]), for
// programs that decode packets with gopacket; frames on ports other than
// [wire.DefaultPort] need [RegisterPort]. It decodes and serializes with
// package wire, whose package doc describes the frame format.
//
// # TCP reassembly
//
// [Dissector] ([NewDissector], [DissectorOptions]) turns the TCP segments
// of captured packets into frames, however they were cut, repeated or
// reordered, and hands them to a [Handler]: each [Frame], with its
// [Stream], and each [StreamError], a corrupt frame, bytes missing from the
// capture ([ErrGap]) or a stream that ended inside a frame
// ([ErrIncomplete]). [DissectorStats] counts what it saw. [CountSent] uses
// it to count a capture's frames by sending node ([SentCounts]), as the
// nodes count what they send.
//
// # Analysis
//
// [Analyze] and [AnalyzeFile] ([AnalyzeOptions]) read a capture and return
// its [Report]: frames counted by type ([TypeCounts]) overall and per node
// ([NodeReport]), the elections ([Election]) with their [Trigger], leader
// and timings, the [Final] state, and the anomalies ([Anomaly]); Analyze's
// doc gives the rules. A Report is a JSON document of schema [Schema], or
// text ([Report.WriteText]), with one election's messages in order if asked
// for ([Report.ElectionTimeline], [Timeline]).
//
// # Authentication
//
// Frames of authenticated connections carry tags (see package wire). With
// the cluster key ([AnalyzeOptions.Key]) the analysis verifies them per
// stream, as the receiving node would, and reports the frames that failed
// and the HELLOs replayed ([AuthReport], [AuthFailure], [HelloReplay]);
// without it, it counts the authenticated frames.
package capture
