-- Wireshark dissector for bullylab election frames (see wire/doc.go) and
-- the fault and lifecycle records of bullylab captures (capture/doc.go).
--
-- Load it with `wireshark -X lua_script:scripts/bullylab.lua` (or tshark),
-- or copy it into the personal plugins folder. Frames are reassembled
-- across TCP segments (dissect_tcp_pdus), so a frame split over several
-- segments, or several frames in one segment, dissect one by one. The
-- election port is a preference (Protocols > BULLYLAB), 7946 by default.
-- Set tcp.reassemble_out_of_order (Protocols > TCP > "Reassemble out-of-order
-- segments", off by default in 4.0) or Wireshark loses the frames of
-- segments that arrive out of order; with it, tshark finds exactly the
-- frames `bullylab analyze` counts:
--   tshark -r run.pcapng -X lua_script:scripts/bullylab.lua \
--     -o tcp.reassemble_out_of_order:TRUE -T fields -e bullylab.type
-- bullylab.type is the type's name, as `bullylab analyze` prints it
-- (ELECTION, HALT_ACK; TYPE(n) for a type it does not know), in that
-- output and in filters (bullylab.type == "HEARTBEAT");
-- bullylab.type.code is its number (bullylab.type.code == 7).
-- The ring election's payloads: bullylab.ring_election.initiator and
-- bullylab.ring_election.candidate of a RING_ELECTION,
-- bullylab.elected.leader of an ELECTED (node IDs, 16 bytes); the Info
-- column shows their first 4 bytes. The sender is bullylab.from (16
-- bytes), bullylab.from.uuid (its text, 8-4-4-4-12) and
-- bullylab.from.name (its node name, from the capture's testbed record;
-- absent without one), and the Info column shows both:
--   RING_ELECTION epoch=3 from=n3 (00030000-0000-4000-8000-000000000000) initiator=00020000 candidate=00030000 reason=leader-failed
--
-- Records. A capture's bullylab-events interface (link type 147,
-- LINKTYPE_USER0) carries the fault and lifecycle records, one JSON object
-- a packet (capture.Record). This script takes Wireshark's USER0
-- encapsulation and dissects them as protocol bullylab.record, the Info
-- column showing the record's one-line summary, which is also its packet
-- comment (frame.comment); USER0 packets of interfaces of other names
-- still go to Protocols > DLT_USER (a packet dissected without a protocol
-- tree, as in Wireshark's first pass, counts as a record if it starts
-- with '{'). Fields:
--   bullylab.record.summary    the summary, as Go's Record.Comment writes it
--   bullylab.record.version, .time (absolute time, UTC), .kind, .detail
--   bullylab.record.in_force   of a fault: when it was in force (absolute
--                              time, UTC)
--   bullylab.record.nodes      one per node the record names
--   bullylab.record.peers      of a delay or loss: one per destination
--   bullylab.record.groups     one per partition group, its nodes joined
--                              with commas (and each in .groups.node)
--   bullylab.record.one_way    of a partition: only the first group's
--                              traffic to the others is cut; of a cut:
--                              only what each pair's first node sends
--                              to its second
--   bullylab.record.links      of a cut: one per node pair, as the summary
--                              writes it (n1<->n2, one-way n1->n2), each
--                              node in .links.node
--   bullylab.record.mode       of a partition, isolate or cut: drop or
--                              reset, absent for drop
--   bullylab.record.impair     of a delay or loss: .impair.delay_ns,
--                              .impair.jitter_ns (integers), .impair.loss
--                              (a double, percent), those the record has
--   bullylab.record.clock      of a clock fault, the skew asked of the
--                              nodes' wall clocks: .clock.offset_ns (an
--                              integer, from in_force), .clock.rate_ppm (a
--                              double, the drift from then)
--   bullylab.record.testbed    of the testbed record: .testbed.topology,
--                              .testbed.run, .testbed.node (one per node,
--                              with .node.index, .node.id, .node.addr,
--                              .node.port), .testbed.heartbeat_ns,
--                              .testbed.failure_timeout_ns,
--                              .testbed.election_timeout_ns, and
--                              .testbed.clock (how to read the nodes' TCP
--                              timestamps as send times), its
--                              .clock.monotonic_offset_ns,
--                              .clock.offset_error_ns, .clock.ts_unit_ns
--                              (a missing one 0, as Go reads it)
--   bullylab.record.capture    of the end record, its counters:
--                              .capture.packets, .drops, .freezes,
--                              .written, .late, .unmatched, .wrong_source
-- For instance a run's crashes and partitions, when and what:
--   tshark -r run.pcapng -X lua_script:scripts/bullylab.lua \
--     -Y 'bullylab.record.kind in {"crash", "partition"}' \
--     -T fields -e frame.time -e bullylab.record.summary
-- The JSON is read in plain Lua as Go's encoding/json reads it (member
-- names matched regardless of case, the last of a name winning, invalid
-- UTF-8 replaced, objects and arrays nested at most 10000 deep), up to
-- 1 MiB. A record Go's reader rejects (bad JSON, a member of the wrong
-- type, no kind, version below 1) gets the expert info
-- bullylab.record.malformed, saying what and where, and "[malformed: ...]"
-- in the Info column; data after the JSON object gets
-- bullylab.record.trailing, and a kind this script does not know
-- bullylab.record.unknown_kind.
--
-- Frame: 32-byte header, payload, CRC-32C trailer; big-endian.
--   0 start 0x1B | 1 version 1 | 2 type | 3 flags (low nibble: reason)
--   4 epoch u64 | 12 sender ID (16 bytes) | 28 payload length u32
--   32 payload | 32+len CRC-32C of bytes 0 .. 32+len-1
-- With FlagAuth (0x20 in the flags) a 16-byte tag follows the payload and
-- the CRC covers it too: 32+len tag | 48+len CRC-32C of bytes 0 .. 48+len-1.
--
-- Authentication: an authenticated connection opens with a HELLO (type
-- 11; payload To (16), Time (int64, Unix ns), Nonce (16), and when the
-- dialer has a member key, its ed25519 PublicKey (32) and Signature (64):
-- 40 bytes unsigned, 136 signed), and each of its frames carries a tag:
--   Ks   = HMAC-SHA256(K, "bullylab-v1" || From || HELLO payload)
--   Tagi = HMAC-SHA256(Ks, uint64be(i) || header || payload)[:16]
-- i counting the connection's frames from 0, the HELLO. Every field decodes
-- without the cluster key K. With it, as the preference "Cluster key"
-- (base64, as `bullylab keygen` writes it; on the command line
-- -o bullylab.cluster_key:BASE64), the tags are verified here, in plain
-- Lua, frame by frame in the order of each TCP stream:
-- bullylab.auth.status is "verified", "failed" (with an expert info and
-- bullylab.auth.reason), "not accepted" (a frame after a failed one on its
-- stream: the receiving node closes the connection at a tag that does not
-- verify, so it never read the frame, whatever its tag) or "unverified"
-- (no key; or a stream whose HELLO the capture does not have because it
-- started later), and
-- bullylab.auth.frame is the frame's number in its connection. A stream
-- whose SYN is in the capture must begin with a HELLO; but Wireshark can
-- tell whether it is only when its first pass builds a protocol tree, as
-- tshark's single pass does, and not Wireshark without a display filter or
-- tshark -2, where such a stream shows as unverified instead of failed. A
-- frame whose tag does not verify at its position is tried at the next
-- few, in case the capture lost frames before it. Verifying costs some 0.2 ms of CPU per
-- frame (Lua 5.2, two SHA-256 blocks), three times what dissecting it
-- does. `bullylab analyze --cluster-key FILE` checks the same, and more
-- strictly: it bounds the missing frames by the bytes missing, and
-- reports replayed HELLOs. A signed HELLO's public key and signature are
-- shown (bullylab.hello.public_key, as the peers file writes it in
-- bullylab.hello.public_key_text), not verified: plain Lua has no
-- ed25519, and `bullylab analyze` verifies them.

local bullylab = Proto("bullylab", "Bullylab election protocol")

local HEADER_LEN = 32
local TRAILER_LEN = 4
local DEFAULT_PORT = 7946

local TAG_LEN = 16
local FLAG_AUTH = 0x20
local TYPE_HELLO = 11
local HELLO_LEN = 40
local SIGNED_HELLO_LEN = 136
-- Positions tried after the expected one before a tag counts as failed.
local AUTH_PROBE = 8

local types = {
	[1] = "ELECTION", [2] = "ANSWER", [3] = "HALT", [4] = "HALT_ACK", [5] = "REJECT",
	[6] = "COORDINATOR", [7] = "HEARTBEAT", [8] = "JOIN", [9] = "LEAVE", [10] = "MEMBERS",
	[11] = "HELLO", [12] = "RING_ELECTION", [13] = "ELECTED",
}
local reasons = {
	[0] = "none", [1] = "boot", [2] = "leader-failed", [3] = "bullied", [4] = "lower-leader",
	[5] = "wait-timeout", [6] = "leader-left", [7] = "outvoted", [8] = "manual",
	[9] = "leader-crashed",
}
-- ELECTION, HALT, COORDINATOR, RING_ELECTION and ELECTED carry a reason.
local has_reason = { [1] = true, [3] = true, [6] = true, [12] = true, [13] = true }
local TYPE_RING_ELECTION = 12
local TYPE_ELECTED = 13

local f = bullylab.fields
f.start = ProtoField.uint8("bullylab.start", "Start", base.HEX)
f.version = ProtoField.uint8("bullylab.version", "Version", base.DEC)
-- The type is a string field, its name as Go's wire.Type.String prints it
-- (TYPE(n) for a type this version does not define), so that tshark's
-- fields and JSON output print names; bullylab.type.code is the number.
f.type = ProtoField.string("bullylab.type", "Type")
f.type_code = ProtoField.uint8("bullylab.type.code", "Type code", base.DEC, types)
f.flags = ProtoField.uint8("bullylab.flags", "Flags", base.HEX)
f.flag_auth = ProtoField.bool("bullylab.flags.auth", "Authenticated (FlagAuth)", 8, nil, FLAG_AUTH)
f.reason = ProtoField.uint8("bullylab.reason", "Reason", base.DEC, reasons, 0x0f)
f.epoch = ProtoField.uint64("bullylab.epoch", "Epoch", base.DEC)
f.from = ProtoField.bytes("bullylab.from", "Sender ID", base.NONE)
f.from_uuid = ProtoField.string("bullylab.from.uuid", "Sender ID (UUID)")
f.from_name = ProtoField.string("bullylab.from.name", "Sender (node name from the testbed record)")
f.len = ProtoField.uint32("bullylab.len", "Payload length", base.DEC)
f.payload = ProtoField.bytes("bullylab.payload", "Payload")
f.crc = ProtoField.uint32("bullylab.crc", "CRC-32C", base.HEX)
f.crc_status = ProtoField.string("bullylab.crc.status", "CRC status")
f.reject_id = ProtoField.bytes("bullylab.reject.id", "Promised to (node ID)")
f.join_addr = ProtoField.string("bullylab.join.addr", "Address")
f.ring_initiator = ProtoField.bytes("bullylab.ring_election.initiator", "Initiator (node ID that started the run)")
f.ring_candidate = ProtoField.bytes("bullylab.ring_election.candidate", "Candidate (highest node ID so far)")
f.elected_leader = ProtoField.bytes("bullylab.elected.leader", "Leader (node ID)")
f.members = ProtoField.uint16("bullylab.members", "Members", base.DEC)
f.member_id = ProtoField.bytes("bullylab.member.id", "Member ID")
f.member_addr = ProtoField.string("bullylab.member.addr", "Member address")
f.hello_to = ProtoField.bytes("bullylab.hello.to", "To (node dialled)")
f.hello_time = ProtoField.absolute_time("bullylab.hello.time", "Time", base.UTC)
f.hello_time_ns = ProtoField.int64("bullylab.hello.time_ns", "Time (Unix ns)", base.DEC)
f.hello_nonce = ProtoField.bytes("bullylab.hello.nonce", "Nonce")
f.hello_signed = ProtoField.bool("bullylab.hello.signed", "Signed by a member key")
f.hello_public_key = ProtoField.bytes("bullylab.hello.public_key", "Member key (ed25519 public key)")
f.hello_public_key_text = ProtoField.string("bullylab.hello.public_key_text", "Member key as the peers file gives it")
f.hello_signature = ProtoField.bytes("bullylab.hello.signature", "Signature (ed25519, not verified here)")
f.tag = ProtoField.bytes("bullylab.tag", "Authentication tag")
f.auth_status = ProtoField.string("bullylab.auth.status", "Authentication")
f.auth_frame = ProtoField.uint32("bullylab.auth.frame", "Frame number in the connection", base.DEC)
f.auth_reason = ProtoField.string("bullylab.auth.reason", "Authentication detail")

local e_start = ProtoExpert.new("bullylab.bad_start", "Not a bullylab frame (bad start byte or version)", expert.group.MALFORMED, expert.severity.ERROR)
local e_crc = ProtoExpert.new("bullylab.bad_crc", "CRC-32C mismatch", expert.group.CHECKSUM, expert.severity.ERROR)
local e_payload = ProtoExpert.new("bullylab.bad_payload", "Malformed payload", expert.group.MALFORMED, expert.severity.WARN)
local e_auth = ProtoExpert.new("bullylab.auth_failed", "Authentication failed", expert.group.SECURITY, expert.severity.ERROR)
local e_unverified = ProtoExpert.new("bullylab.auth_unverified", "Authentication not verified", expert.group.SECURITY, expert.severity.NOTE)
local e_not_accepted = ProtoExpert.new("bullylab.auth_not_accepted", "Not accepted: after a failure on its connection", expert.group.SECURITY, expert.severity.WARN)
local e_key = ProtoExpert.new("bullylab.bad_key", "Cluster key preference is not a cluster key", expert.group.PROTOCOL, expert.severity.WARN)
bullylab.experts = { e_start, e_crc, e_payload, e_auth, e_unverified, e_not_accepted, e_key }

bullylab.prefs.port = Pref.uint("TCP port", DEFAULT_PORT, "TCP port of the election traffic")
bullylab.prefs.check_crc = Pref.bool("Check CRC", true, "Verify each frame's CRC-32C")
bullylab.prefs.cluster_key = Pref.string("Cluster key", "",
	"The cluster key in base64, as `bullylab keygen` writes it and a key file holds it: authentication tags are verified with it")
bullylab.prefs.cluster_key_file = Pref.string("Cluster key file", "",
	"The path of a cluster key file, used when Cluster key is empty: a bench's run-...-N.key beside run-...-N.pcapng, `bullylab up --capture FILE.pcapng`'s FILE.key, or `bullylab keygen`'s output")

-- Whether a stream's SYN was seen (bit 0x01). Wireshark before 3.6 lacks
-- the field, and field extractors are empty in a first pass without a
-- protocol tree (Wireshark's without a display filter, tshark -2): a
-- stream without a HELLO then counts as begun mid-connection, unverified
-- instead of failed.
local have_completeness, f_tcp_completeness = pcall(Field.new, "tcp.completeness")

-- Bit operations: Wireshark's Lua may be 5.2 (bit32), have only its
-- bundled BitOp (bit, whose results are signed), or be 5.3 or later with
-- neither; the native operators of 5.3 would not even parse on 5.2, so
-- they are compiled from a string. Only the two-operand forms are used,
-- and bxor with three, which bit32 and BitOp take in one call.
local bitlib = bit32 or bit
if bitlib == nil then
	bitlib = load([[
		local m = 0xFFFFFFFF
		return {
			band = function(a, b) return (a & b) & m end,
			bor = function(a, b) return (a | b) & m end,
			bxor = function(a, b, c) return (a ~ b ~ (c or 0)) & m end,
			rshift = function(a, n) return (a & m) >> n end,
			lshift = function(a, n) return (a << n) & m end,
		}
	]])()
end
local band, bor, bxor, rshift, lshift = bitlib.band, bitlib.bor, bitlib.bxor, bitlib.rshift, bitlib.lshift
local rrotate = bitlib.rrotate or bitlib.ror or function(x, n)
	return bor(rshift(x, n), lshift(x, 32 - n))
end
local TWO32 = 4294967296

local function u32(x)
	if x < 0 then
		return x + 4294967296
	end
	return x
end

-- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table driven.
local crc_table = {}
for i = 0, 255 do
	local c = i
	for _ = 1, 8 do
		if band(c, 1) == 1 then
			c = bxor(rshift(c, 1), 0x82F63B78)
		else
			c = rshift(c, 1)
		end
	end
	crc_table[i] = c
end

local function crc32c(bytes, n)
	local c = 0xFFFFFFFF
	for i = 0, n - 1 do
		c = bxor(crc_table[band(bxor(c, bytes:get_index(i)), 0xFF)], rshift(c, 8))
	end
	return u32(bxor(c, 0xFFFFFFFF))
end

local function frame_len(tvb, pinfo, offset)
	local n = tvb(offset + 28, 4):uint() + HEADER_LEN + TRAILER_LEN
	if band(tvb(offset + 3, 1):uint(), FLAG_AUTH) ~= 0 then
		n = n + TAG_LEN
	end
	return n
end

-- SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) on arrays of byte
-- values, 1-based. Words are kept as numbers in [0, 2^32): sums are taken
-- modulo 2^32, which also turns BitOp's signed results unsigned.
local K256 = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}
local IV256 = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 }
local W = {}

-- compress folds the 64-byte block of m at offset off (0-based) into H.
local function compress(H, m, off)
	for j = 1, 16 do
		local o = off + 4 * j - 4
		W[j] = ((m[o + 1] * 256 + m[o + 2]) * 256 + m[o + 3]) * 256 + m[o + 4]
	end
	for j = 17, 64 do
		local x, y = W[j - 15], W[j - 2]
		local s0 = bxor(rrotate(x, 7), rrotate(x, 18), rshift(x, 3))
		local s1 = bxor(rrotate(y, 17), rrotate(y, 19), rshift(y, 10))
		W[j] = (W[j - 16] + s0 + W[j - 7] + s1) % TWO32
	end
	local a, b, c, d, e, f_, g, h = H[1], H[2], H[3], H[4], H[5], H[6], H[7], H[8]
	for j = 1, 64 do
		local s1 = bxor(rrotate(e, 6), rrotate(e, 11), rrotate(e, 25))
		local ch = bxor(g, band(e, bxor(f_, g))) -- (e and f) xor (not e and g)
		local t1 = (h + s1 + ch + K256[j] + W[j]) % TWO32
		local s0 = bxor(rrotate(a, 2), rrotate(a, 13), rrotate(a, 22))
		local maj = bor(band(a, b), band(c, bor(a, b))) -- majority of a, b, c
		h, g, f_, e = g, f_, e, (d + t1) % TWO32
		d, c, b, a = c, b, a, (t1 + s0 + maj) % TWO32
	end
	H[1], H[2], H[3], H[4] = (H[1] + a) % TWO32, (H[2] + b) % TWO32, (H[3] + c) % TWO32, (H[4] + d) % TWO32
	H[5], H[6], H[7], H[8] = (H[5] + e) % TWO32, (H[6] + f_) % TWO32, (H[7] + g) % TWO32, (H[8] + h) % TWO32
end

-- sha256_finish returns the digest (32 bytes) of the prefix bytes already
-- folded into state H0 followed by the n bytes of m.
local function sha256_finish(H0, prefix, m, n)
	local H = { H0[1], H0[2], H0[3], H0[4], H0[5], H0[6], H0[7], H0[8] }
	local buf = {}
	for i = 1, n do
		buf[i] = m[i]
	end
	buf[n + 1] = 0x80
	local len = n + 1
	while len % 64 ~= 56 do
		len = len + 1
		buf[len] = 0
	end
	local bits = (prefix + n) * 8
	for i = 8, 1, -1 do
		buf[len + i] = bits % 256
		bits = math.floor(bits / 256)
	end
	len = len + 8
	for off = 0, len - 1, 64 do
		compress(H, buf, off)
	end
	local out = {}
	for i = 1, 8 do
		local w = H[i]
		out[4 * i - 3] = math.floor(w / 16777216) % 256
		out[4 * i - 2] = math.floor(w / 65536) % 256
		out[4 * i - 1] = math.floor(w / 256) % 256
		out[4 * i] = w % 256
	end
	return out
end

-- hmac_key returns the HMAC-SHA256 key schedule of key (at most 64
-- bytes): the hash states after the inner and the outer pad, so that each
-- HMAC costs the compressions of its message and one more.
local function hmac_key(key)
	local ipad, opad = {}, {}
	for i = 1, 64 do
		local k = key[i] or 0
		ipad[i] = bxor(k, 0x36)
		opad[i] = bxor(k, 0x5c)
	end
	local hi, ho = {}, {}
	for i = 1, 8 do
		hi[i], ho[i] = IV256[i], IV256[i]
	end
	compress(hi, ipad, 0)
	compress(ho, opad, 0)
	return { hi, ho }
end

local function hmac(ks, m, n)
	return sha256_finish(ks[2], 64, sha256_finish(ks[1], 64, m, n), 32)
end

local function append_range(t, range)
	local b = range:bytes()
	local n = #t
	for i = 0, b:len() - 1 do
		t[n + i + 1] = b:get_index(i)
	end
	return t
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local b64_index = {}
for i = 1, 64 do
	b64_index[B64:sub(i, i)] = i - 1
end

-- base64_decode decodes standard base64 (padding required, white space
-- around it ignored); nil for anything else.
local function base64_decode(s)
	s = s:gsub("^%s+", ""):gsub("%s+$", "")
	if #s % 4 ~= 0 then
		return nil
	end
	local out = {}
	for i = 1, #s, 4 do
		local v, pad = 0, 0
		for j = i, i + 3 do
			local ch = s:sub(j, j)
			local x = b64_index[ch]
			if ch == "=" and j >= #s - 1 then
				x, pad = 0, pad + 1
			elseif x == nil or pad > 0 then
				return nil
			end
			v = v * 64 + x
		end
		out[#out + 1] = math.floor(v / 65536) % 256
		if pad < 2 then
			out[#out + 1] = math.floor(v / 256) % 256
		end
		if pad < 1 then
			out[#out + 1] = v % 256
		end
	end
	return out
end

-- base64_encode encodes the bytes of the string s in standard base64, as
-- Go's base64.StdEncoding does.
local function base64_encode(s)
	local out = {}
	for i = 1, #s, 3 do
		local a, b, c = s:byte(i, i + 2)
		local v = a * 65536 + (b or 0) * 256 + (c or 0)
		local n = 4
		if b == nil then
			n = 2
		elseif c == nil then
			n = 3
		end
		for j = 1, 4 do
			if j <= n then
				local x = math.floor(v / 64 ^ (4 - j)) % 64
				out[#out + 1] = B64:sub(x + 1, x + 1)
			else
				out[#out + 1] = "="
			end
		end
	end
	return table.concat(out)
end

-- key_file_text is the text of the key file at path, or nil and why not.
local function key_file_text(path)
	local fh, err = io.open(path, "rb")
	if fh == nil then
		return nil, "the Cluster key file cannot be read: " .. tostring(err)
	end
	local text = fh:read(4096) or ""
	fh:close()
	return text
end

-- The cluster key's HMAC schedule, from the Cluster key preference or,
-- when that is empty, the file Cluster key file names (read again when
-- either preference changes); nil and a reason when both are empty or
-- what they give is not a key.
local key_pref, key_sched, key_err = nil, nil, nil
local function cluster_key()
	local s = bullylab.prefs.cluster_key or ""
	local path = bullylab.prefs.cluster_key_file or ""
	local id = s .. "\0" .. path
	if id ~= key_pref then
		key_pref, key_sched, key_err = id, nil, nil
		local what = "the Cluster key preference"
		if not s:match("%S") and path:match("%S") then
			what = "the Cluster key file " .. path
			s, key_err = key_file_text(path)
		end
		if s ~= nil and s:match("%S") then
			local k = base64_decode(s)
			if k == nil or #k ~= 32 then
				key_err = what .. " is not 44 base64 characters of a 32-byte key"
			else
				key_sched = hmac_key(k)
			end
		end
	end
	return key_sched, key_err
end

local function uint64_bytes(t, v)
	for i = 8, 1, -1 do
		t[i] = v % 256
		v = math.floor(v / 256)
	end
	return t
end

-- tag_at returns the tag of the frame in tvb (header and payload of n
-- bytes) as frame number i of the session whose HMAC schedule is ks.
local function tag_at(ks, tvb, n, i)
	local m = append_range(uint64_bytes({}, i), tvb(0, HEADER_LEN + n))
	local d = hmac(ks, m, #m)
	local out = {}
	for j = 1, TAG_LEN do
		out[j] = d[j]
	end
	return out
end

local function same_bytes(a, range)
	local b = range:bytes()
	for i = 0, b:len() - 1 do
		if a[i + 1] ~= b:get_index(i) then
			return false
		end
	end
	return true
end

-- Verification state, filled in the first pass over the packets in
-- order: per TCP stream and direction, and each frame's result for later
-- passes, by packet number, the frame's offset in the data it was found in
-- and its CRC (two frames of a packet share no offset unless they come from
-- different reassemblies, and then not their CRC too).
local streams = {}
local results = {}

local function last_value(field)
	local vals = { field() }
	local v = vals[#vals]
	if v == nil then
		return nil
	end
	return v.value
end

-- verify decides the authentication of the frame in tvb: a table with
-- status, and frame and reason when known; nil for an unauthenticated
-- frame without a key.
local function verify(tvb, pinfo, t, auth, length)
	local ks, kerr = cluster_key()
	if ks == nil then
		if not auth then
			return nil
		end
		return { status = "unverified", reason = kerr or "no cluster key (preference Protocols > BULLYLAB > Cluster key)", bad_key = kerr ~= nil }
	end
	local rk = tvb:offset() .. "/" .. tvb(tvb:len() - TRAILER_LEN, TRAILER_LEN):uint()
	local per_packet = results[pinfo.number]
	if pinfo.visited then
		return per_packet and per_packet[rk]
	end
	if per_packet == nil then
		per_packet = {}
		results[pinfo.number] = per_packet
	end

	-- One direction of a connection: addresses and ports, from pinfo, as
	-- field extractors such as tcp.stream are empty in a first pass
	-- without a protocol tree. A connection reusing the ports starts with
	-- a HELLO, which starts the stream's state anew.
	local sk = tostring(pinfo.src) .. ":" .. pinfo.src_port .. ">" .. tostring(pinfo.dst) .. ":" .. pinfo.dst_port
	local st = streams[sk]
	if st == nil then
		st = { state = "new" }
		streams[sk] = st
	end
	local from = tostring(tvb(12, 16):bytes())
	local r
	if t == TYPE_HELLO and auth and (length == HELLO_LEN or length == SIGNED_HELLO_LEN) then
		local m = {}
		for i = 1, 11 do
			m[i] = string.byte("bullylab-v1", i)
		end
		append_range(m, tvb(12, 16))
		append_range(m, tvb(HEADER_LEN, length))
		local sks = hmac_key(hmac(ks, m, #m))
		if same_bytes(tag_at(sks, tvb, length, 0), tvb(HEADER_LEN + length, TAG_LEN)) then
			st.state, st.ks, st.from, st.next = "open", sks, from, 1
			r = { status = "verified", frame = 0 }
		elseif st.state ~= "open" then
			st.state, st.refused = "refused", "its connection's HELLO failed"
			r = { status = "failed", frame = 0, reason = "HELLO tag mismatch (another cluster key?)" }
		end
		-- else: checked below as the open connection's next frame
	end
	if r ~= nil then
		-- done
	elseif st.state == "new" then
		if t == TYPE_HELLO then
			st.state, st.refused = "refused", "its connection's HELLO failed"
			r = { status = "failed", frame = 0, reason = "HELLO without a tag, or with a payload neither 40 nor 136 bytes" }
		else
			-- Whether the capture has the connection's SYN; unknown (nil)
			-- in a first pass without a protocol tree.
			local completeness = have_completeness and last_value(f_tcp_completeness)
			if completeness and band(completeness, 1) ~= 0 then
				st.state = "refused"
				st.refused = "its connection did not begin with a HELLO"
				r = { status = "failed", frame = 0, reason = "the connection begins with " .. (types[t] or ("TYPE(" .. t .. ")")) .. ", not a HELLO" }
			else
				st.state = "nohello"
				st.nohello = completeness and "stream began mid-connection: its HELLO is not in the capture"
					or "no HELLO at the start of the stream in the capture (its SYN is unknown in this pass)"
				r = { status = "unverified", reason = st.nohello }
			end
		end
	elseif st.state == "refused" then
		r = { status = "not accepted", reason = st.refused }
	elseif st.state == "nohello" then
		r = { status = "unverified", reason = st.nohello }
	elseif not auth then
		r = { status = "failed", frame = st.next, reason = "no tag on an authenticated connection" }
		st.state, st.refused = "refused", "a frame before it on its connection failed"
	else
		local tag = tvb(HEADER_LEN + length, TAG_LEN)
		for i = st.next, st.next + AUTH_PROBE do
			if same_bytes(tag_at(st.ks, tvb, length, i), tag) then
				r = { status = "verified", frame = i }
				if i > st.next then
					r.reason = (i - st.next) .. " frames before it are not in the capture"
				end
				if from ~= st.from then
					r.status, r.reason = "failed", "sender ID is not the one of the connection's HELLO"
				end
				st.next = i + 1
				break
			end
		end
		if r == nil then
			r = { status = "failed", frame = st.next, reason = "tag mismatch" }
			st.state, st.refused = "refused", "a frame before it on its connection failed"
		end
	end
	per_packet[rk] = r
	return r
end

local function hex_id(range)
	return tostring(range:bytes()):lower()
end

-- dashed_uuid is a 16-byte ID as a UUID's text (8-4-4-4-12), as the
-- testbed record and `bullylab status` give it.
local function dashed_uuid(range)
	local h = hex_id(range)
	return h:sub(1, 8) .. "-" .. h:sub(9, 12) .. "-" .. h:sub(13, 16) .. "-" .. h:sub(17, 20) .. "-" .. h:sub(21, 32)
end

-- node_names are the testbed record's node names by their dashed UUID:
-- the record is a capture's first packet, dissected before any frame.
local node_names = {}

-- Packets with more than one frame list them all in the Info column.
local last_packet = -1

local function dissect_frame(tvb, pinfo, tree)
	local n = tvb:len()
	local t = tvb(2, 1):uint()
	local flags = tvb(3, 1):uint()
	local length = tvb(28, 4):uint()
	local name = types[t] or ("TYPE(" .. t .. ")")

	local sub = tree:add(bullylab, tvb(0, n), "Bullylab " .. name)
	sub:add(f.start, tvb(0, 1))
	local vi = sub:add(f.version, tvb(1, 1))
	if tvb(0, 1):uint() ~= 0x1B or tvb(1, 1):uint() ~= 1 then
		vi:add_proto_expert_info(e_start)
	end
	sub:add(f.type, tvb(2, 1), name):add(f.type_code, tvb(2, 1))
	local auth = band(flags, FLAG_AUTH) ~= 0
	local tag_len = auth and TAG_LEN or 0
	local fi = sub:add(f.flags, tvb(3, 1))
	fi:add(f.flag_auth, tvb(3, 1))
	if has_reason[t] then
		sub:add(f.reason, tvb(3, 1))
	end
	sub:add(f.epoch, tvb(4, 8))
	local from_uuid = dashed_uuid(tvb(12, 16))
	local from_name = node_names[from_uuid]
	local fromi = sub:add(f.from, tvb(12, 16))
	fromi:add(f.from_uuid, tvb(12, 16), from_uuid)
	local from_text = from_uuid
	if from_name ~= nil then
		fromi:add(f.from_name, tvb(12, 16), from_name)
		from_text = from_name .. " (" .. from_uuid .. ")"
	end
	fromi:append_text(" = " .. from_text)
	sub:add(f.len, tvb(28, 4))
	if length > 0 then
		local p = tvb(HEADER_LEN, length)
		sub:add(f.payload, p)
		if t == 5 then
			if length == 16 then
				sub:add(f.reject_id, p)
			else
				sub:add_proto_expert_info(e_payload, "REJECT payload is not 16 bytes")
			end
		elseif t == 8 then
			sub:add(f.join_addr, p)
		elseif t == TYPE_RING_ELECTION then
			if length == 32 then
				sub:add(f.ring_initiator, p(0, 16))
				sub:add(f.ring_candidate, p(16, 16))
			else
				sub:add_proto_expert_info(e_payload, "RING_ELECTION payload is not 32 bytes")
			end
		elseif t == TYPE_ELECTED then
			if length == 16 then
				sub:add(f.elected_leader, p)
			else
				sub:add_proto_expert_info(e_payload, "ELECTED payload is not 16 bytes")
			end
		elseif t == TYPE_HELLO then
			if length == HELLO_LEN or length == SIGNED_HELLO_LEN then
				sub:add(f.hello_to, p(0, 16))
				local ns = p(16, 8):int64()
				local secs = ns / 1000000000
				sub:add(f.hello_time, p(16, 8), NSTime.new(secs:tonumber(), (ns - secs * 1000000000):tonumber()))
				sub:add(f.hello_time_ns, p(16, 8))
				sub:add(f.hello_nonce, p(24, 16))
				sub:add(f.hello_signed, length == SIGNED_HELLO_LEN)
				if length == SIGNED_HELLO_LEN then
					sub:add(f.hello_public_key, p(40, 32))
					sub:add(f.hello_public_key_text, p(40, 32), "ed25519:" .. base64_encode(p(40, 32):raw()))
					sub:add(f.hello_signature, p(72, 64))
				end
			else
				sub:add_proto_expert_info(e_payload, "HELLO payload is neither 40 nor 136 bytes")
			end
		elseif t == 10 and length >= 2 then
			local count = p(0, 2):uint()
			local mi = sub:add(f.members, p(0, 2))
			local off = 2
			for _ = 1, count do
				if off + 17 > length then
					mi:add_proto_expert_info(e_payload, "MEMBERS list truncated")
					break
				end
				local alen = p(off + 16, 1):uint()
				if off + 17 + alen > length then
					mi:add_proto_expert_info(e_payload, "MEMBERS address truncated")
					break
				end
				mi:add(f.member_id, p(off, 16))
				if alen > 0 then
					mi:add(f.member_addr, p(off + 17, alen))
				end
				off = off + 17 + alen
			end
		end
	end
	if auth then
		sub:add(f.tag, tvb(HEADER_LEN + length, TAG_LEN))
	end
	local covered = HEADER_LEN + length + tag_len
	local ci = sub:add(f.crc, tvb(covered, 4))
	if bullylab.prefs.check_crc then
		local want = tvb(covered, 4):uint()
		local got = crc32c(tvb(0, covered):bytes(), covered)
		if got == want then
			sub:add(f.crc_status, "Good")
		else
			sub:add(f.crc_status, "Bad")
			ci:add_proto_expert_info(e_crc, string.format("CRC-32C mismatch: computed 0x%08x", got))
		end
	end

	local info = name .. " epoch=" .. tvb(4, 8):uint64():tonumber() .. " from=" .. from_text
	if t == TYPE_RING_ELECTION and length == 32 then
		info = info .. " initiator=" .. hex_id(tvb(HEADER_LEN, 4)) .. " candidate=" .. hex_id(tvb(HEADER_LEN + 16, 4))
	elseif t == TYPE_ELECTED and length == 16 then
		info = info .. " leader=" .. hex_id(tvb(HEADER_LEN, 4))
	end
	if has_reason[t] then
		local r = band(flags, 0x0f)
		info = info .. " reason=" .. (reasons[r] or tostring(r))
	end
	local res = verify(tvb, pinfo, t, auth, length)
	if res ~= nil then
		local ai = sub:add(f.auth_status, res.status)
		if res.frame ~= nil then
			sub:add(f.auth_frame, res.frame)
		end
		if res.reason ~= nil then
			sub:add(f.auth_reason, res.reason)
		end
		if res.status == "failed" then
			ai:add_proto_expert_info(e_auth, "Authentication failed: " .. res.reason)
			info = info .. " [auth failed]"
		elseif res.status == "not accepted" then
			ai:add_proto_expert_info(e_not_accepted, "Not accepted: " .. res.reason .. ", and the receiver closed the connection there")
			info = info .. " [not accepted]"
		elseif res.bad_key then
			ai:add_proto_expert_info(e_key, res.reason)
		elseif res.status == "unverified" then
			ai:add_proto_expert_info(e_unverified, "Not verified: " .. res.reason)
		end
	end
	pinfo.cols.protocol = "BULLYLAB"
	if last_packet ~= pinfo.number then
		last_packet = pinfo.number
		pinfo.cols.info:set(info)
	else
		pinfo.cols.info:append(", " .. info)
	end
	return n
end

function bullylab.dissector(tvb, pinfo, tree)
	if tvb:len() >= 2 and (tvb(0, 1):uint() ~= 0x1B or tvb(1, 1):uint() ~= 1) then
		-- Not at a frame boundary (a capture that started mid-stream, or
		-- corruption): show the bytes, do not guess a length.
		pinfo.cols.protocol = "BULLYLAB"
		local sub = tree:add(bullylab, tvb(), "Bullylab (not a frame start)")
		sub:add_proto_expert_info(e_start)
		return tvb:len()
	end
	dissect_tcp_pdus(tvb, tree, HEADER_LEN, frame_len, dissect_frame, true)
	return tvb:len()
end

local registered_port = nil

local function register_port()
	local tcp = DissectorTable.get("tcp.port")
	if registered_port ~= nil then
		tcp:remove(registered_port, bullylab)
	end
	registered_port = bullylab.prefs.port
	tcp:add(registered_port, bullylab)
end

function bullylab.prefs_changed()
	if registered_port ~= bullylab.prefs.port then
		register_port()
	end
end

function bullylab.init()
	last_packet = -1
	streams, results = {}, {}
	node_names = {}
end

register_port()

-- ---------------------------------------------------------------------------
-- Records: the packets of the bullylab-events interface (capture/doc.go),
-- link type 147 (LINKTYPE_USER0, Wireshark's encapsulation USER0), each a
-- JSON object (capture.Record).

local record = Proto("bullylab.record", "Bullylab fault and lifecycle record")

local EVENTS_INTERFACE = "bullylab-events"
-- The JSON reader's bounds: records are some hundred bytes (the testbed
-- record some 150 a node) and nest three levels deep; Go's encoding/json
-- allows 10000 (and so does this reader, recursing in Lua, not C).
local JSON_MAX_LEN = 1048576
local JSON_MAX_DEPTH = 10000

-- The kinds capture.Record defines.
local record_kinds = {
	testbed = true, crash = true, restart = true, pause = true, resume = true, isolate = true,
	unisolate = true, partition = true, heal = true, delay = true, loss = true, clear = true,
	leave = true, join = true, campaign = true, cut = true, clock = true, ["end"] = true,
}

local rf = record.fields
rf.summary = ProtoField.string("bullylab.record.summary", "Summary")
rf.version = ProtoField.int64("bullylab.record.version", "Version", base.DEC)
rf.time = ProtoField.absolute_time("bullylab.record.time", "Time", base.UTC)
rf.in_force = ProtoField.absolute_time("bullylab.record.in_force", "In force", base.UTC)
rf.kind = ProtoField.string("bullylab.record.kind", "Kind")
rf.nodes = ProtoField.string("bullylab.record.nodes", "Node")
rf.peers = ProtoField.string("bullylab.record.peers", "Peer")
rf.groups = ProtoField.string("bullylab.record.groups", "Group")
rf.groups_node = ProtoField.string("bullylab.record.groups.node", "Node")
rf.one_way = ProtoField.bool("bullylab.record.one_way", "One way (only the first group cut from the others)", base.NONE)
rf.links = ProtoField.string("bullylab.record.links", "Link")
rf.links_node = ProtoField.string("bullylab.record.links.node", "Node")
rf.mode = ProtoField.string("bullylab.record.mode", "Mode")
rf.detail = ProtoField.string("bullylab.record.detail", "Detail")
rf.impair = ProtoField.none("bullylab.record.impair", "Impairment")
rf.impair_delay = ProtoField.int64("bullylab.record.impair.delay_ns", "Delay (ns)", base.DEC)
rf.impair_jitter = ProtoField.int64("bullylab.record.impair.jitter_ns", "Jitter (ns)", base.DEC)
rf.impair_loss = ProtoField.double("bullylab.record.impair.loss", "Loss (%)")
rf.skew = ProtoField.none("bullylab.record.clock", "Clock skew")
rf.skew_offset = ProtoField.int64("bullylab.record.clock.offset_ns", "Offset (ns)", base.DEC)
rf.skew_rate = ProtoField.double("bullylab.record.clock.rate_ppm", "Rate (ppm)")
rf.testbed = ProtoField.none("bullylab.record.testbed", "Testbed")
rf.topology = ProtoField.string("bullylab.record.testbed.topology", "Topology")
rf.run = ProtoField.string("bullylab.record.testbed.run", "Run")
rf.tb_node = ProtoField.string("bullylab.record.testbed.node", "Node")
rf.tb_index = ProtoField.int64("bullylab.record.testbed.node.index", "Index", base.DEC)
rf.tb_id = ProtoField.string("bullylab.record.testbed.node.id", "ID")
rf.tb_addr = ProtoField.string("bullylab.record.testbed.node.addr", "Address")
rf.tb_port = ProtoField.int64("bullylab.record.testbed.node.port", "Port", base.DEC)
rf.heartbeat = ProtoField.int64("bullylab.record.testbed.heartbeat_ns", "Heartbeat (ns)", base.DEC)
rf.failure_timeout = ProtoField.int64("bullylab.record.testbed.failure_timeout_ns", "Failure timeout (ns)", base.DEC)
rf.election_timeout = ProtoField.int64("bullylab.record.testbed.election_timeout_ns", "Election timeout (ns)", base.DEC)
rf.clock = ProtoField.none("bullylab.record.testbed.clock", "Clock (TCP timestamps as send times)")
rf.clock_offset = ProtoField.int64("bullylab.record.testbed.clock.monotonic_offset_ns", "CLOCK_REALTIME - CLOCK_MONOTONIC (ns)", base.DEC)
rf.clock_error = ProtoField.int64("bullylab.record.testbed.clock.offset_error_ns", "Offset error bound (ns)", base.DEC)
rf.clock_unit = ProtoField.int64("bullylab.record.testbed.clock.ts_unit_ns", "TSval unit (ns)", base.DEC)
rf.capture = ProtoField.none("bullylab.record.capture", "Capture counters")
-- The counters of capture.CaptureStats, in its order: JSON key, label.
local capture_counters = {
	{ "packets", "Packets (accepted by the socket)" },
	{ "drops", "Drops (no ring space)" },
	{ "freezes", "Queue freezes" },
	{ "written", "Written (records included)" },
	{ "late", "Late (written out of order)" },
	{ "unmatched", "Unmatched (no node's port)" },
	{ "wrong_source", "Wrong source MAC" },
}
for _, c in ipairs(capture_counters) do
	rf["capture_" .. c[1]] = ProtoField.uint64("bullylab.record.capture." .. c[1], c[2], base.DEC)
end

local e_rec_malformed = ProtoExpert.new("bullylab.record.malformed", "Malformed bullylab record", expert.group.MALFORMED, expert.severity.ERROR)
local e_rec_trailing = ProtoExpert.new("bullylab.record.trailing", "Data after the record's JSON object", expert.group.MALFORMED, expert.severity.WARN)
local e_rec_kind = ProtoExpert.new("bullylab.record.unknown_kind", "Record kind unknown to this dissector", expert.group.UNDECODED, expert.severity.NOTE)
record.experts = { e_rec_malformed, e_rec_trailing, e_rec_kind }

-- UTF-8 --------------------------------------------------------------------

local function utf8_char(cp)
	if cp < 0x80 then
		return string.char(cp)
	elseif cp < 0x800 then
		return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64)
	elseif cp < 0x10000 then
		return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
	end
	return string.char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
		0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

local REPLACEMENT = utf8_char(0xFFFD)
local utf8_lead = { [2] = { 32, 0x80 }, [3] = { 16, 0x800 }, [4] = { 8, 0x10000 } }

-- utf8_clean replaces each byte of s that is not part of a valid UTF-8
-- sequence with U+FFFD, as Go's encoding/json does.
local function utf8_clean(s)
	if not s:find("[\128-\255]") then
		return s
	end
	local out, i, n = {}, 1, #s
	while i <= n do
		local c = s:byte(i)
		local len = (c < 0x80 and 1) or (c >= 0xC2 and c <= 0xDF and 2) or (c >= 0xE0 and c <= 0xEF and 3)
			or (c >= 0xF0 and c <= 0xF4 and 4) or 0
		local ok = len > 0 and i + len - 1 <= n
		if ok and len > 1 then
			local cp = c % utf8_lead[len][1]
			for j = 1, len - 1 do
				local b = s:byte(i + j)
				if b < 0x80 or b > 0xBF then
					ok = false
					break
				end
				cp = cp * 64 + b - 0x80
			end
			ok = ok and cp >= utf8_lead[len][2] and cp <= 0x10FFFF and (cp < 0xD800 or cp > 0xDFFF)
		end
		if ok then
			out[#out + 1] = s:sub(i, i + len - 1)
			i = i + len
		else
			out[#out + 1] = REPLACEMENT
			i = i + 1
		end
	end
	return table.concat(out)
end

-- JSON ---------------------------------------------------------------------

-- json_decode reads the JSON value s holds (RFC 8259), nesting at most
-- JSON_MAX_DEPTH objects and arrays. A value is a table: t ("object", "array", "string",
-- "number", "bool" or "null"), v (an object's members by key folded to
-- lower case, the last one of a key winning, as Go's encoding/json matches
-- them; an array's values; a string's text, invalid UTF-8 replaced; a
-- number's value; a bool), text (a number's literal) and off and len, its
-- bytes in s (off counting from 0). It returns the value and the offset of
-- what follows it other than white space (nil: nothing), or nil, an error
-- message and its offset. It never raises an error.
local json_escapes = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }

local function json_decode(s)
	local pos, n = 1, #s

	local function fail(msg, at)
		error({ json = msg, at = at or pos }, 0)
	end

	local function skip()
		pos = s:find("[^ \t\r\n]", pos) or n + 1
	end

	local function str()
		local start = pos
		pos = pos + 1
		local parts = {}
		while true do
			local i = s:find('["\\%c]', pos)
			if i == nil then
				fail("unterminated string", start)
			end
			parts[#parts + 1] = s:sub(pos, i - 1)
			local c = s:byte(i)
			if c == 34 then
				pos = i + 1
				break
			elseif c == 127 then -- DEL needs no escape
				parts[#parts + 1] = "\127"
				pos = i + 1
			elseif c == 92 then
				local e = s:sub(i + 1, i + 1)
				if e == "u" then
					local h = s:match("^%x%x%x%x", i + 2)
					if h == nil then
						fail("bad \\u escape in a string", i)
					end
					local cp = tonumber(h, 16)
					pos = i + 6
					if cp >= 0xD800 and cp <= 0xDBFF then
						local l = s:match("^\\u(%x%x%x%x)", pos)
						local lo = l and tonumber(l, 16)
						if lo and lo >= 0xDC00 and lo <= 0xDFFF then
							cp = 0x10000 + (cp - 0xD800) * 1024 + lo - 0xDC00
							pos = pos + 6
						else
							cp = 0xFFFD
						end
					elseif cp >= 0xDC00 and cp <= 0xDFFF then
						cp = 0xFFFD
					end
					parts[#parts + 1] = utf8_char(cp)
				elseif json_escapes[e] then
					parts[#parts + 1] = json_escapes[e]
					pos = i + 2
				else
					fail("bad escape in a string", i)
				end
			else
				fail("control character in a string", i)
			end
		end
		return { t = "string", v = utf8_clean(table.concat(parts)), off = start - 1, len = pos - start }
	end

	local function num()
		local start, i = pos, pos
		if s:sub(i, i) == "-" then
			i = i + 1
		end
		local c = s:sub(i, i)
		if c == "0" then
			i = i + 1
		elseif c:match("^[1-9]$") then
			i = s:find("[^0-9]", i) or n + 1
		else
			fail("bad number", start)
		end
		if s:sub(i, i) == "." then
			local j = s:find("[^0-9]", i + 1) or n + 1
			if j == i + 1 then
				fail("bad number", start)
			end
			i = j
		end
		if s:sub(i, i):match("^[eE]$") then
			local j = i + 1
			if s:sub(j, j):match("^[-+]$") then
				j = j + 1
			end
			local k = s:find("[^0-9]", j) or n + 1
			if k == j then
				fail("bad number", start)
			end
			i = k
		end
		pos = i
		local text = s:sub(start, i - 1)
		return { t = "number", v = tonumber(text), text = text, off = start - 1, len = i - start }
	end

	local literals = { t = { "true", "bool", true }, f = { "false", "bool", false }, n = { "null", "null", nil } }

	local value
	value = function(depth)
		skip()
		local start = pos
		local c = s:sub(pos, pos)
		if c == "{" or c == "[" then
			if depth > JSON_MAX_DEPTH then
				fail("nested deeper than " .. JSON_MAX_DEPTH .. " levels")
			end
			local object = c == "{"
			local close = object and "}" or "]"
			local items = {}
			pos = pos + 1
			skip()
			if s:sub(pos, pos) == close then
				pos = pos + 1
			else
				while true do
					local key
					if object then
						skip()
						if s:sub(pos, pos) ~= '"' then
							fail(pos > n and "unexpected end of the record" or "expected a member name")
						end
						key = str().v:lower()
						skip()
						if s:sub(pos, pos) ~= ":" then
							fail(pos > n and "unexpected end of the record" or "expected ':'")
						end
						pos = pos + 1
					end
					local v = value(depth + 1)
					if object then
						items[key] = v
					else
						items[#items + 1] = v
					end
					skip()
					local d = s:sub(pos, pos)
					if d == close then
						pos = pos + 1
						break
					elseif d ~= "," then
						fail(pos > n and "unexpected end of the record" or ("expected ',' or '" .. close .. "'"))
					end
					pos = pos + 1
				end
			end
			return { t = object and "object" or "array", v = items, off = start - 1, len = pos - start }
		elseif c == '"' then
			return str()
		elseif c == "-" or c:match("^%d$") then
			return num()
		end
		local lit = literals[c]
		if lit and s:sub(pos, pos + #lit[1] - 1) == lit[1] then
			pos = pos + #lit[1]
			return { t = lit[2], v = lit[3], off = start - 1, len = #lit[1] }
		end
		if c == "" then
			fail("unexpected end of the record")
		end
		fail(string.format("unexpected character %q", c))
	end

	local ok, res = pcall(function()
		local v = value(1)
		skip()
		return v
	end)
	if not ok then
		if type(res) == "table" and res.json then
			return nil, res.json, res.at - 1
		end
		return nil, tostring(res), 0
	end
	if pos <= n then
		return res, pos - 1
	end
	return res, nil
end

-- Decimal integers ---------------------------------------------------------

-- in_range reports whether the digits (no sign, no leading zeros) are at
-- most max, a string of digits.
local function in_range(digits, max)
	return #digits < #max or (#digits == #max and digits <= max)
end

-- json_int returns v as an Int64 if it is a JSON integer that fits Go's
-- int (64 bits), as encoding/json decodes it (no fraction, no exponent).
local function json_int(v)
	if v.t ~= "number" then
		return nil
	end
	local neg, digits = v.text:match("^(-?)(%d+)$")
	if digits == nil or not in_range(digits, neg == "-" and "9223372036854775808" or "9223372036854775807") then
		return nil
	end
	local x = Int64.new(0)
	for i = 1, #digits do
		x = x * 10 + (digits:byte(i) - 48)
	end
	if neg == "-" then
		x = -x
	end
	return x
end

-- json_uint returns v as a UInt64 if it is a JSON integer that fits uint64.
local function json_uint(v)
	if v.t ~= "number" or not v.text:match("^%d+$") or not in_range(v.text, "18446744073709551615") then
		return nil
	end
	local x = UInt64.new(0)
	for i = 1, #v.text do
		x = x * 10 + (v.text:byte(i) - 48)
	end
	return x
end

-- Time ---------------------------------------------------------------------

local function days_from_civil(y, m, d)
	if m <= 2 then
		y = y - 1
	end
	local era = math.floor(y / 400)
	local yoe = y - era * 400
	local doy = math.floor((153 * ((m + 9) % 12) + 2) / 5) + d - 1
	return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end

local month_days = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

-- parse_time reads an RFC 3339 time, as Go's time.Time marshals to JSON,
-- into an NSTime; nil if it is not one.
local function parse_time(s)
	local y, mo, d, h, mi, sec, rest = s:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)(.*)$")
	if y == nil then
		return nil
	end
	y, mo, d, h, mi, sec = tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(sec)
	local leap = y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0)
	if mo < 1 or mo > 12 or d < 1 or d > month_days[mo] or (mo == 2 and d == 29 and not leap)
		or h > 23 or mi > 59 or sec > 59 then
		return nil
	end
	local ns = 0
	local frac = rest:match("^%.(%d+)")
	if frac then
		ns = tonumber((frac .. "00000000"):sub(1, 9))
		rest = rest:sub(#frac + 2)
	end
	local off = 0
	if rest ~= "Z" then
		local sign, oh, om = rest:match("^([+-])(%d%d):(%d%d)$")
		if sign == nil or tonumber(oh) > 23 or tonumber(om) > 59 then
			return nil
		end
		off = (tonumber(oh) * 60 + tonumber(om)) * 60
		if sign == "-" then
			off = -off
		end
	end
	return NSTime.new(days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off, ns)
end

-- The record ---------------------------------------------------------------

-- dissect_record shows the record in tvb under tree and returns its
-- one-line summary, as capture.Record.Comment writes it, and what is
-- wrong with it, if anything.
local function dissect_record(tvb, pinfo, tree)
	local n = tvb:len()
	local item = tree:add(record, tvb())
	local function range(v)
		return tvb(v.off, v.len)
	end
	local problem
	local function malformed(v, what)
		local r = v and range(v) or tvb()
		item:add_tvb_expert_info(e_rec_malformed, r, "Malformed bullylab record: " .. what)
		problem = problem or what
	end

	if n > JSON_MAX_LEN then
		malformed(nil, "longer than " .. JSON_MAX_LEN .. " bytes")
		return "bullylab: malformed record (too long)"
	end
	local raw = n > 0 and tvb:raw() or ""
	local rec, after, at = json_decode(raw)
	if rec == nil then
		local r = n == 0 and tvb() or tvb(math.min(at, n - 1), 1)
		item:add_tvb_expert_info(e_rec_malformed, r, string.format("Malformed bullylab record: %s at byte %d", after, at))
		item:append_text(": malformed")
		return "bullylab: malformed record (" .. after .. " at byte " .. at .. ")"
	end
	if after ~= nil then
		item:add_tvb_expert_info(e_rec_trailing, tvb(after), string.format("%d bytes after the record's JSON object", n - after))
	end
	if rec.t ~= "object" then
		malformed(rec, "not a JSON object")
		return "bullylab: malformed record (not a JSON object)"
	end

	-- member returns the member key of object o if present and not null,
	-- and flags it if it is not of JSON type t. o.path names o in messages.
	local function member(o, key, t, what)
		local v = o.v[key]
		if v == nil or v.t == "null" then
			return nil
		end
		v.path = (o.path or "") .. key
		if v.t ~= t then
			malformed(v, v.path .. " is not " .. what)
			return nil
		end
		return v
	end
	-- strings returns the strings of array a, null as "" (as Go decodes
	-- it); others are flagged.
	local function strings(a)
		local out = {}
		for i, v in ipairs(a.v) do
			if v.t == "string" then
				out[#out + 1] = v
			elseif v.t == "null" then
				out[#out + 1] = { v = "", off = v.off, len = v.len }
			else
				malformed(v, a.path .. "[" .. (i - 1) .. "] is not a string")
			end
		end
		return out
	end
	-- add_double adds member key of object o, a float64 as Go reads it
	-- (a number out of its range is an error), to tree t.
	local function add_double(t, field, o, key)
		local v = member(o, key, "number", "a number")
		if v == nil then
			return nil
		end
		local x = tonumber(v.text)
		if x == nil or x ~= x or x == math.huge or x == -math.huge then
			malformed(v, v.path .. " is not a number that fits float64")
			return nil
		end
		t:add(field, range(v), x)
		return v.text
	end
	local function add_int(t, field, o, key, unsigned)
		local v = member(o, key, "number", "a number")
		if v == nil then
			return nil
		end
		local x
		if unsigned then
			x = json_uint(v)
		else
			x = json_int(v)
		end
		if x == nil then
			malformed(v, v.path .. " is not an integer that fits " .. (unsigned and "uint64" or "int64"))
			return nil
		end
		t:add(field, range(v), x)
		return v.text
	end
	-- add_summed adds the object member key of o as field f, with the
	-- numeric members parts lists ({add_int or add_double, field, key,
	-- label, unit}) under it and those present summed up in its text.
	local function add_summed(o, key, f, parts)
		local v = member(o, key, "object", "an object")
		if v == nil then
			return
		end
		v.path = key .. "."
		local vi = item:add(f, range(v))
		local desc = {}
		for _, p in ipairs(parts) do
			local x = p[1](vi, p[2], v, p[3])
			if x then
				desc[#desc + 1] = p[4] .. " " .. x .. p[5]
			end
		end
		if #desc > 0 then
			vi:append_text(": " .. table.concat(desc, ", "))
		end
	end

	local o = rec
	local version = member(o, "version", "number", "a number")
	local vx = version and json_int(version)
	if version and vx == nil then
		malformed(version, "version is not an integer that fits int64")
	elseif vx ~= nil then
		item:add(rf.version, range(version), vx)
		if vx < Int64.new(1) then
			malformed(version, "version " .. version.text .. ", not 1 or more")
		end
	elseif version == nil and (o.v.version == nil or o.v.version.t == "null") then
		malformed(nil, "no version")
	end
	-- A time.Time: an RFC 3339 string.
	local function add_time(field, key)
		local tv = member(o, key, "string", "a string")
		if tv then
			local ts = parse_time(tv.v)
			if ts then
				item:add(field, range(tv), ts)
			else
				malformed(tv, key .. " " .. string.format("%q", tv.v) .. " is not an RFC 3339 time")
			end
		end
	end
	add_time(rf.time, "time")
	add_time(rf.in_force, "in_force")
	local kv = member(o, "kind", "string", "a string")
	local kind = kv and kv.v or ""
	if kind == "" then
		malformed(kv, "no kind")
	else
		local ki = item:add(rf.kind, range(kv), kind)
		if not record_kinds[kind] then
			ki:add_proto_expert_info(e_rec_kind, "Record kind " .. string.format("%q", kind) .. " is unknown to this dissector")
		end
	end

	local nodes = {}
	local nv = member(o, "nodes", "array", "a list")
	if nv then
		for _, v in ipairs(strings(nv)) do
			item:add(rf.nodes, range(v), v.v)
			nodes[#nodes + 1] = v.v
		end
	end
	local pv = member(o, "peers", "array", "a list")
	if pv then
		for _, v in ipairs(strings(pv)) do
			item:add(rf.peers, range(v), v.v)
		end
	end
	local groups = {}
	local gv = member(o, "groups", "array", "a list")
	if gv then
		for i, g in ipairs(gv.v) do
			g.path = "groups[" .. (i - 1) .. "]"
			if g.t == "array" or g.t == "null" then
				local names = {}
				local members = g.t == "array" and strings(g) or {}
				for _, v in ipairs(members) do
					names[#names + 1] = v.v
				end
				local gi = item:add(rf.groups, range(g), table.concat(names, ","))
				for _, v in ipairs(members) do
					gi:add(rf.groups_node, range(v), v.v)
				end
				groups[#groups + 1] = names
			else
				malformed(g, g.path .. " is not a list")
			end
		end
	end
	local one_way = false
	local ov = member(o, "one_way", "bool", "true or false")
	if ov then
		one_way = ov.v
	end
	-- A pair is a Go [2]string: members past the second are skipped
	-- unread, missing ones empty.
	local links = {}
	local lv = member(o, "links", "array", "a list")
	if lv then
		for i, l in ipairs(lv.v) do
			l.path = "links[" .. (i - 1) .. "]"
			if l.t == "array" or l.t == "null" then
				local pair = { v = {}, path = l.path }
				if l.t == "array" then
					pair.v = { l.v[1], l.v[2] }
				end
				local ends = strings(pair)
				local names = { ends[1] and ends[1].v or "", ends[2] and ends[2].v or "" }
				local li = item:add(rf.links, range(l), names[1] .. (one_way and "->" or "<->") .. names[2])
				for k = 1, 2 do
					if ends[k] then
						li:add(rf.links_node, range(ends[k]), names[k])
					else
						li:add(rf.links_node, ""):set_generated()
					end
				end
				links[#links + 1] = names
			else
				malformed(l, l.path .. " is not a list")
			end
		end
	end
	if ov then
		item:add(rf.one_way, range(ov), one_way)
	elseif #groups > 0 or #links > 0 then
		item:add(rf.one_way, false):set_generated()
	end
	local mode = ""
	local mv = member(o, "mode", "string", "a string")
	if mv then
		mode = mv.v
		item:add(rf.mode, range(mv), mode)
	end
	local detail = ""
	local dv = member(o, "detail", "string", "a string")
	if dv then
		detail = dv.v
		item:add(rf.detail, range(dv), detail)
	end

	-- The impairment's and the clock's members are omitted when 0: those
	-- present.
	add_summed(o, "impair", rf.impair, {
		{ add_int, rf.impair_delay, "delay_ns", "delay", " ns" },
		{ add_int, rf.impair_jitter, "jitter_ns", "jitter", " ns" },
		{ add_double, rf.impair_loss, "loss", "loss", "%" },
	})
	add_summed(o, "clock", rf.skew, {
		{ add_int, rf.skew_offset, "offset_ns", "offset", " ns" },
		{ add_double, rf.skew_rate, "rate_ppm", "rate", " ppm" },
	})

	local testbed
	local tbv = member(o, "testbed", "object", "an object")
	if tbv then
		tbv.path = "testbed."
		local ti = item:add(rf.testbed, range(tbv))
		local topo = member(tbv, "topology", "string", "a string")
		local run = member(tbv, "run", "string", "a string")
		if topo then
			ti:add(rf.topology, range(topo), topo.v)
		end
		if run then
			ti:add(rf.run, range(run), run.v)
		end
		testbed = { topology = topo and topo.v or "", run = run and run.v or "", nodes = 0 }
		local tn = member(tbv, "nodes", "array", "a list")
		if tn then
			for i, nd in ipairs(tn.v) do
				testbed.nodes = testbed.nodes + 1
				nd.path = "testbed.nodes[" .. (i - 1) .. "]."
				if nd.t == "object" then
					local name = member(nd, "name", "string", "a string")
					local ni = ti:add(rf.tb_node, range(nd), name and name.v or "")
					local desc = {}
					local idx = add_int(ni, rf.tb_index, nd, "index")
					if idx then
						desc[#desc + 1] = "index " .. idx
					end
					local id = member(nd, "id", "string", "a string")
					if id then
						ni:add(rf.tb_id, range(id), id.v)
						if name then
							node_names[id.v:lower()] = name.v
						end
					end
					local addr = member(nd, "addr", "string", "a string")
					if addr then
						ni:add(rf.tb_addr, range(addr), addr.v)
					end
					local port = add_int(ni, rf.tb_port, nd, "port")
					if addr then
						desc[#desc + 1] = addr.v .. (port and (":" .. port) or "")
					end
					if #desc > 0 then
						ni:append_text(" (" .. table.concat(desc, ", ") .. ")")
					end
				elseif nd.t ~= "null" then
					malformed(nd, "testbed.nodes[" .. (i - 1) .. "] is not an object")
				end
			end
		end
		add_int(ti, rf.heartbeat, tbv, "heartbeat_ns")
		add_int(ti, rf.failure_timeout, tbv, "failure_timeout_ns")
		add_int(ti, rf.election_timeout, tbv, "election_timeout_ns")
		local clv = member(tbv, "clock", "object", "an object")
		if clv then
			clv.path = "testbed.clock."
			local cli = ti:add(rf.clock, range(clv))
			-- Not omitted when 0: missing (or flagged), 0, as Go reads it.
			local clock = {}
			for _, c in ipairs({ { "monotonic_offset_ns", rf.clock_offset }, { "offset_error_ns", rf.clock_error },
				{ "ts_unit_ns", rf.clock_unit } }) do
				clock[c[1]] = add_int(cli, c[2], clv, c[1])
				if clock[c[1]] == nil then
					clock[c[1]] = "0"
					cli:add(c[2], Int64.new(0)):set_generated()
				end
			end
			cli:append_text(string.format(": TSval unit %s ns, offset %s ns (error %s ns)",
				clock.ts_unit_ns, clock.monotonic_offset_ns, clock.offset_error_ns))
		end
		ti:append_text(": " .. testbed.topology .. " run " .. testbed.run .. ", " .. testbed.nodes .. " nodes")
	end

	local counters
	local cv = member(o, "capture", "object", "an object")
	if cv then
		cv.path = "capture."
		local ci = item:add(rf.capture, range(cv))
		counters = {}
		for _, c in ipairs(capture_counters) do
			local field = rf["capture_" .. c[1]]
			counters[c[1]] = add_int(ci, field, cv, c[1], true)
			if counters[c[1]] == nil then
				-- Missing (or flagged): 0, as Go reads it.
				counters[c[1]] = "0"
				ci:add(field, UInt64.new(0)):set_generated()
			end
		end
	end

	-- The summary, as capture.Record.Comment writes it.
	local b = { "bullylab: ", kind }
	if testbed then
		b[#b + 1] = string.format(" %s run %s, %d nodes", testbed.topology, testbed.run, testbed.nodes)
	elseif #groups > 0 then
		for i, g in ipairs(groups) do
			b[#b + 1] = i == 1 and " " or (one_way and " -> " or " | ")
			b[#b + 1] = table.concat(g, ",")
		end
	elseif #links > 0 then
		for i, l in ipairs(links) do
			b[#b + 1] = (i == 1 and " " or ",") .. l[1] .. (one_way and "->" or "<->") .. l[2]
		end
	elseif #nodes > 0 then
		b[#b + 1] = " " .. table.concat(nodes, ",")
	end
	if mode == "reset" then
		b[#b + 1] = " [reset]"
	end
	if counters then
		b[#b + 1] = string.format(" (%s packets, %s dropped, %s late)", counters.packets, counters.drops, counters.late)
	end
	if detail ~= "" then
		b[#b + 1] = " (" .. detail .. ")"
	end
	local summary = table.concat(b)
	item:add(rf.summary, summary):set_generated()
	item:append_text(": " .. summary:sub(#"bullylab: " + 1))
	return summary, problem
end

local f_interface_name = Field.new("frame.interface_name")
local wtap_encap = DissectorTable.get("wtap_encap")
local USER0 = (wtap_encaps and wtap_encaps.USER0) or (wtap and wtap.USER0) or 45
-- What USER0 packets of other interfaces go to (Wireshark's DLT_USER
-- preferences).
local user_dlt = wtap_encap:get_dissector(USER0)

function record.dissector(tvb, pinfo, tree)
	-- The interface's name is known when the packet's tree is built (its
	-- extractor is empty otherwise); without it, a packet that starts with
	-- '{' counts as a record.
	local name = f_interface_name()
	local ours
	if name ~= nil then
		ours = name.value == EVENTS_INTERFACE
	else
		ours = tvb:len() > 0 and tvb(0, math.min(tvb:len(), 16)):raw():find("^%s*{") ~= nil
	end
	if not ours then
		if user_dlt ~= nil then
			return user_dlt:call(tvb, pinfo, tree)
		end
		return 0
	end
	pinfo.cols.protocol = "BULLYLAB"
	local ok, summary, problem = pcall(dissect_record, tvb, pinfo, tree)
	if not ok then
		-- A bug here must not hide the packet: show what went wrong.
		tree:add_tvb_expert_info(e_rec_malformed, tvb(), "Malformed bullylab record (dissector error: " .. tostring(summary) .. ")")
		summary = "bullylab: record (dissector error)"
	elseif problem then
		summary = summary .. " [malformed: " .. problem .. "]"
	end
	pinfo.cols.info:set(summary)
	return tvb:len()
end

wtap_encap:add(USER0, record)
