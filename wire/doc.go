// Package wire encodes and decodes the frames bullylab nodes exchange over
// TCP to elect a leader (Bully with HALT, or the ring election; epochs and
// membership).
// It has a zero-allocation encoder and decoder, a buffered stream Reader, and
// FrameLen for packet dissectors that must reassemble frames from segments.
//
// Every frame has a fixed 32-byte header, a payload of Length bytes and a
// CRC-32C trailer; all integers are big-endian. A control frame (no payload)
// is MinFrameLen = 36 bytes.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Start (0x1B) |  Version (1)  |      Type     | Rsvd  | Reason|   0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |   4
//	+                         Epoch (uint64)                        +
//	|                                                               |   8
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |  12
//	+                                                               +
//	|                                                               |  16
//	+                 Sender ID (16 raw bytes of a UUID)            +
//	|                                                               |  20
//	+                                                               +
//	|                                                               |  24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Payload Length (uint32)                   |  28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Payload (Length bytes) ...                   |  32
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     CRC-32C (uint32)                          |  32+Length
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The trailer directly follows the payload, so it is 4-byte aligned only
// when Length is a multiple of 4.
//
//	Offset      Size  Field    Meaning
//	0           1     Start    0x1B (ASCII ESC), StartByte; lets a reader or
//	                           dissector reject a stream that is not bullylab
//	1           1     Version  1; any other value is ErrVersion
//	2           1     Type     the message type, a number from the table
//	                           under Types below
//	3           1     Flags    low nibble: Reason for ELECTION, HALT and
//	                           COORDINATOR, else 0; high nibble: flags,
//	                           FlagWantMembers (0x10) on JOIN, FlagAuth
//	                           (0x20): a 16-byte tag follows the payload;
//	                           others reserved, sent as 0, passed through
//	                           unchanged
//	4           8     Epoch    cluster epoch the sender is in or proposes
//	12          16    From     sender's node ID (uuid.UUID bytes, the Bully
//	                           priority: the highest ID wins)
//	28          4     Length   payload length in bytes
//	32          n     Payload  type-specific, see below
//	32+n        4     CRC      CRC-32C (Castagnoli) of bytes 0 .. 32+n-1
//
// With FlagAuth a TagLen-byte tag sits between the payload and the CRC,
// which then covers it too; Length still counts the payload alone:
//
//	+-----------------+-------------------+--------------+-------------+
//	| Header (32)     | Payload (Length)  | Tag (16)     | CRC-32C (4) |
//	+-----------------+-------------------+--------------+-------------+
//
// The checksum exists even though TCP has one because TCP's 16-bit sum
// misses some corruption, and, more often, because a framing bug on either
// side shows up at once as ErrChecksum instead of as a plausible message.
// Castagnoli is used because hash/crc32 computes it with the CPU's CRC32
// instruction on amd64 and arm64.
//
// Types: the Type byte says what a frame is. A number keeps its meaning for
// good; one not listed here (0, or 14 and up) is a type a newer version
// added, which a decoder skips, by Length, once the CRC proved the frame
// intact (see Decode):
//
//	Type  Name         Meaning
//	1     ELECTION     asks every higher node whether it is alive
//	2     ANSWER       a higher node is alive and takes over
//	3     HALT         a candidate halts a lower node before claiming
//	4     HALT_ACK     accepts a HALT, for the candidate's epoch
//	5     REJECT       refuses a HALT or COORDINATOR of a lower ballot
//	6     COORDINATOR  announces the sender as leader of Epoch
//	7     HEARTBEAT    the leader's keep-alive
//	8     JOIN         announces a node to the cluster
//	9     LEAVE        the sender leaves the cluster for good
//	10    MEMBERS      the sender's membership list
//	11    HELLO        opens an authenticated connection (transport, not
//	                   election; see Authentication)
//	12    RING_ELECTION  the ring's travelling ballot, to the clockwise
//	                   successor
//	13    ELECTED      the ring's winner, announced around the ring
//
// Types 1 to 6 are the Bully algorithm's and 12 and 13 the ring's
// (Type.Algorithm); the others every algorithm sends. A cluster runs one
// algorithm: a node logs and ignores the other's frames.
//
// Reasons: the low nibble of the Flags byte of ELECTION, HALT,
// COORDINATOR, RING_ELECTION and ELECTED says why the election started
// (Reason); it is 0 in other frames, and values not listed are reserved:
//
//	Reason  Name            Meaning
//	0       none            no reason given
//	1       boot            cold start, or restart after a crash
//	2       leader-failed   no heartbeat within the failure timeout
//	3       bullied         an ELECTION or HALT came from a lower node
//	4       lower-leader    a COORDINATOR or HEARTBEAT came from a lower node
//	5       wait-timeout    answered or halted, but no COORDINATOR came
//	6       leader-left     the leader sent LEAVE
//	7       outvoted        a REJECT named a lower node with a higher epoch
//	8       manual          asked for by an operator or a test
//	9       leader-crashed  the leader's host refused a connection: its process is gone
//
// Payload by type:
//
//	Type         Payload
//	ELECTION     empty
//	ANSWER       empty
//	HALT         empty
//	HALT_ACK     empty
//	REJECT       16 bytes: ID of the node whose ballot the sender promised
//	             (AppendID, DecodeID); Epoch is that ballot's epoch
//	COORDINATOR  empty
//	HEARTBEAT    empty
//	RING_ELECTION  32 bytes (AppendRingElection, DecodeRingElection);
//	             Epoch is the epoch the run proposes:
//
//	  0                 16                32
//	  +-----------------+-----------------+
//	  | Initiator (16)  | Candidate (16)  |
//	  +-----------------+-----------------+
//	  Initiator: the node that started the run; runs are ordered by
//	  (Epoch, Initiator) and a node drops a run below the last it
//	  forwarded. Candidate: the highest ID the run has passed so far.
//
//	ELECTED      16 bytes: ID of the leader the run of Epoch elected
//	             (AppendID, DecodeID)
//	JOIN         the joiner's dial address, raw bytes, at most MaxAddrLen
//	             (AppendAddr, DecodeAddr)
//	LEAVE        empty
//	MEMBERS      membership list (AppendMembers, DecodeMembers):
//
//	  0       2                 18      19
//	  +-------+-----------------+-------+-----------------+
//	  | Count | ID (16 bytes)   | ALen  | Addr (ALen)     | ... Count times
//	  +-------+-----------------+-------+-----------------+
//	  Count uint16, ALen uint8; no bytes may follow the last entry.
//
//	HELLO        the first frame of an authenticated connection, 40
//	             bytes unsigned (HelloLen) or 136 signed (SignedHelloLen);
//	             the length tells them apart:
//
//	  0                 16                24                40
//	  +-----------------+-----------------+-----------------+
//	  | To (16 bytes)   | Time (int64)    | Nonce (16)      |
//	  +-----------------+-----------------+-----------------+
//	  40                                  72                      136
//	  +-----------------------------------+-----------------------+
//	  | PublicKey (32, ed25519)           | Signature (64)        |
//	  +-----------------------------------+-----------------------+
//	  To: the node dialled; Time: the dialer's clock, Unix ns;
//	  Nonce: random; PublicKey: the dialer's member key; Signature:
//	  by that key (see Authentication). Epoch is 0 and FlagAuth is
//	  set.
//
// Decode checks the frame, not the payload: a HEARTBEAT with a payload is
// delivered as such, and the payload helpers report ErrPayload for a
// malformed payload. Decode reports ErrUnknownType only after the length and
// checksum proved the frame intact, so a reader can skip frames of types a
// newer peer added without losing its place in the stream.
//
// # Authentication
//
// Every member of a cluster holds the same 32-byte cluster key K (Key),
// and its own member key, an ed25519 key pair (NewMemberKey) whose public
// half its peers know from the peers file. A connection carries frames one
// way, from the node that dialled it to the node that accepted it, and is
// authenticated as a whole:
//
//	dialer                                         acceptor
//	  | HELLO  From=A, To=B, Time, Nonce,           derives Ks, checks Tag0,
//	  |        PublicKey, Signature, Tag0 ----->   To == B, Signature, that
//	  |                                            PublicKey is A's, Time fresh
//	  | HEARTBEAT  From=A ... Tag1 --------------->   checks Tag1, From == A
//	  | COORDINATOR From=A ... Tag2 ------------->    checks Tag2, From == A
//
//	Signature = Ed25519(A's member key,
//	            "bullylab-hello-v1" || From || To || Time || Nonce || PublicKey)
//	Ks   = HMAC-SHA256(K, "bullylab-v1" || From || HELLO payload)
//	Tagi = HMAC-SHA256(Ks, uint64be(i) || header || payload)[:16]
//
// where i counts the connection's frames from 0 (the HELLO) and header is
// the frame's 32 header bytes with FlagAuth set. Tag0 proves that the
// sender holds K: that it is a member. The signature proves which member:
// only A holds A's member key, so a member that holds K cannot open a
// connection in another's name, and From is in the signed message, so a
// member cannot pass its own signed HELLO off as another's. The session
// key covers the whole payload, signature included, so the frames after
// the HELLO are bound to it: a frame whose From differs from the HELLO's
// is dropped, and a tag that does not verify ends the connection.
//
// The HELLO's Time is strictly increasing per dialer and peer: the
// acceptor refuses a HELLO not newer than the last it accepted from that
// ID, or too far from its own clock, so that a recorded connection cannot
// be replayed (see node.TCPTransport). That rule holds a peer's record
// hostage to whoever can make HELLOs in its name, so it is sound only
// because the signature leaves that to the peer itself: with K alone, a
// member could send a HELLO in the leader's name stamped minutes ahead,
// and the acceptor would refuse the real leader's HELLOs as replays until
// the forged time passed. The sequence number in each tag makes
// replaying, reordering or cutting frames within a connection detectable
// too.
//
// An unsigned HELLO (40 bytes) proves membership only: a holder of K can
// claim any ID with it. Nodes whose peers file gives member keys refuse
// it; those without keys accept it, for clusters that have not moved to
// member keys yet.
//
// This costs no round trip: the dialer writes its HELLO and first frame at
// once, and the acceptor writes nothing, so a capture of one direction is
// still exactly the frames one node sent another. An authenticated control
// frame is 52 bytes instead of 36, and one HELLO (188 bytes signed, 92
// unsigned) opens each connection. Signing a HELLO costs the dialer some
// 19 us, and opening it the acceptor 52 us instead of 2 (BenchmarkSignedHello,
// 2-core VM): once per connection, which lasts as long as both nodes do. Frames are authenticated, not
// encrypted: a dissector decodes everything without K, checks a HELLO's
// signature without it too, and verifies the tags when given K.
package wire
