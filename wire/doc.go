// Package wire encodes and decodes the frames bullylab nodes exchange over
// TCP to elect a leader (Bully algorithm with HALT, epochs and membership).
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
//	2           1     Type     ELECTION=1 .. MEMBERS=10 (see Type)
//	3           1     Flags    low nibble: Reason for ELECTION, HALT and
//	                           COORDINATOR, else 0; high nibble: flags,
//	                           FlagWantMembers (0x10) on JOIN, others
//	                           reserved, sent as 0, passed through unchanged
//	4           8     Epoch    cluster epoch the sender is in or proposes
//	12          16    From     sender's node ID (uuid.UUID bytes, the Bully
//	                           priority: the highest ID wins)
//	28          4     Length   payload length in bytes
//	32          n     Payload  type-specific, see below
//	32+n        4     CRC      CRC-32C (Castagnoli) of bytes 0 .. 32+n-1
//
// The checksum exists even though TCP has one because TCP's 16-bit sum
// misses some corruption, and, more often, because a framing bug on either
// side shows up at once as ErrChecksum instead of as a plausible message.
// Castagnoli is used because hash/crc32 computes it with the CPU's CRC32
// instruction on amd64 and arm64.
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
// Decode checks the frame, not the payload: a HEARTBEAT with a payload is
// delivered as such, and the payload helpers report ErrPayload for a
// malformed payload. Decode reports ErrUnknownType only after the length and
// checksum proved the frame intact, so a reader can skip frames of types a
// newer peer added without losing its place in the stream.
package wire
