-- Wireshark dissector for bullylab election frames (see wire/doc.go).
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
-- The bullylab-events interface carries fault records: their summary is
-- the packet comment (frame.comment).
--
-- Frame: 32-byte header, payload, CRC-32C trailer; big-endian.
--   0 start 0x1B | 1 version 1 | 2 type | 3 flags (low nibble: reason)
--   4 epoch u64 | 12 sender ID (16 bytes) | 28 payload length u32
--   32 payload | 32+len CRC-32C of bytes 0 .. 32+len-1
-- With FlagAuth (0x20 in the flags) a 16-byte tag follows the payload and
-- the CRC covers it too: 32+len tag | 48+len CRC-32C of bytes 0 .. 48+len-1.
--
-- Authentication: an authenticated connection opens with a HELLO (type
-- 11; payload To (16), Time (int64, Unix ns), Nonce (16)), and each of its
-- frames carries a tag:
--   Ks   = HMAC-SHA256(K, "bullylab-v1" || From || HELLO payload)
--   Tagi = HMAC-SHA256(Ks, uint64be(i) || header || payload)[:16]
-- i counting the connection's frames from 0, the HELLO. Every field decodes
-- without the cluster key K. With it, as the preference "Cluster key"
-- (base64, as `bullylab keygen` writes it; on the command line
-- -o bullylab.cluster_key:BASE64), the tags are verified here, in plain
-- Lua, frame by frame in the order of each TCP stream:
-- bullylab.auth.status is "verified", "failed" (with an expert info and
-- bullylab.auth.reason) or "unverified" (no key; or a stream whose HELLO
-- the capture does not have because it started later), and
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
-- reports replayed HELLOs.

local bullylab = Proto("bullylab", "Bullylab election protocol")

local HEADER_LEN = 32
local TRAILER_LEN = 4
local DEFAULT_PORT = 7946

local TAG_LEN = 16
local FLAG_AUTH = 0x20
local TYPE_HELLO = 11
local HELLO_LEN = 40
-- Positions tried after the expected one before a tag counts as failed.
local AUTH_PROBE = 8

local types = {
	[1] = "ELECTION", [2] = "ANSWER", [3] = "HALT", [4] = "HALT_ACK", [5] = "REJECT",
	[6] = "COORDINATOR", [7] = "HEARTBEAT", [8] = "JOIN", [9] = "LEAVE", [10] = "MEMBERS",
	[11] = "HELLO",
}
local reasons = {
	[0] = "none", [1] = "boot", [2] = "leader-failed", [3] = "bullied", [4] = "lower-leader",
	[5] = "wait-timeout", [6] = "leader-left", [7] = "outvoted", [8] = "manual",
}
-- ELECTION, HALT and COORDINATOR carry a reason.
local has_reason = { [1] = true, [3] = true, [6] = true }

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
f.len = ProtoField.uint32("bullylab.len", "Payload length", base.DEC)
f.payload = ProtoField.bytes("bullylab.payload", "Payload")
f.crc = ProtoField.uint32("bullylab.crc", "CRC-32C", base.HEX)
f.crc_status = ProtoField.string("bullylab.crc.status", "CRC status")
f.reject_id = ProtoField.bytes("bullylab.reject.id", "Promised to (node ID)")
f.join_addr = ProtoField.string("bullylab.join.addr", "Address")
f.members = ProtoField.uint16("bullylab.members", "Members", base.DEC)
f.member_id = ProtoField.bytes("bullylab.member.id", "Member ID")
f.member_addr = ProtoField.string("bullylab.member.addr", "Member address")
f.hello_to = ProtoField.bytes("bullylab.hello.to", "To (node dialled)")
f.hello_time = ProtoField.absolute_time("bullylab.hello.time", "Time", base.UTC)
f.hello_time_ns = ProtoField.int64("bullylab.hello.time_ns", "Time (Unix ns)", base.DEC)
f.hello_nonce = ProtoField.bytes("bullylab.hello.nonce", "Nonce")
f.tag = ProtoField.bytes("bullylab.tag", "Authentication tag")
f.auth_status = ProtoField.string("bullylab.auth.status", "Authentication")
f.auth_frame = ProtoField.uint32("bullylab.auth.frame", "Frame number in the connection", base.DEC)
f.auth_reason = ProtoField.string("bullylab.auth.reason", "Authentication detail")

local e_start = ProtoExpert.new("bullylab.bad_start", "Not a bullylab frame (bad start byte or version)", expert.group.MALFORMED, expert.severity.ERROR)
local e_crc = ProtoExpert.new("bullylab.bad_crc", "CRC-32C mismatch", expert.group.CHECKSUM, expert.severity.ERROR)
local e_payload = ProtoExpert.new("bullylab.bad_payload", "Malformed payload", expert.group.MALFORMED, expert.severity.WARN)
local e_auth = ProtoExpert.new("bullylab.auth_failed", "Authentication failed", expert.group.SECURITY, expert.severity.ERROR)
local e_unverified = ProtoExpert.new("bullylab.auth_unverified", "Authentication not verified", expert.group.SECURITY, expert.severity.NOTE)
local e_key = ProtoExpert.new("bullylab.bad_key", "Cluster key preference is not a cluster key", expert.group.PROTOCOL, expert.severity.WARN)
bullylab.experts = { e_start, e_crc, e_payload, e_auth, e_unverified, e_key }

bullylab.prefs.port = Pref.uint("TCP port", DEFAULT_PORT, "TCP port of the election traffic")
bullylab.prefs.check_crc = Pref.bool("Check CRC", true, "Verify each frame's CRC-32C")
bullylab.prefs.cluster_key = Pref.string("Cluster key", "",
	"The cluster key in base64, as `bullylab keygen` writes it: authentication tags are verified with it")

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

-- The cluster key's HMAC schedule, from the preference; nil and a reason
-- when the preference is empty or not a key.
local key_pref, key_sched, key_err = nil, nil, nil
local function cluster_key()
	local s = bullylab.prefs.cluster_key or ""
	if s ~= key_pref then
		key_pref, key_sched, key_err = s, nil, nil
		if s:match("%S") then
			local k = base64_decode(s)
			if k == nil or #k ~= 32 then
				key_err = "the Cluster key preference is not 44 base64 characters of a 32-byte key"
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
	if t == TYPE_HELLO and auth and length == HELLO_LEN then
		local m = {}
		for i = 1, 11 do
			m[i] = string.byte("bullylab-v1", i)
		end
		append_range(m, tvb(12, 16))
		append_range(m, tvb(HEADER_LEN, HELLO_LEN))
		local sks = hmac_key(hmac(ks, m, #m))
		if same_bytes(tag_at(sks, tvb, length, 0), tvb(HEADER_LEN + length, TAG_LEN)) then
			st.state, st.ks, st.from, st.next = "open", sks, from, 1
			r = { status = "verified", frame = 0 }
		elseif st.state ~= "open" then
			st.state, st.refused = "refused", "the connection's HELLO failed"
			r = { status = "failed", frame = 0, reason = "HELLO tag mismatch (another cluster key?)" }
		end
		-- else: checked below as the open connection's next frame
	end
	if r ~= nil then
		-- done
	elseif st.state == "new" then
		if t == TYPE_HELLO then
			st.state, st.refused = "refused", "the connection's HELLO failed"
			r = { status = "failed", frame = 0, reason = "HELLO without a tag, or with a payload not 40 bytes" }
		else
			-- Whether the capture has the connection's SYN; unknown (nil)
			-- in a first pass without a protocol tree.
			local completeness = have_completeness and last_value(f_tcp_completeness)
			if completeness and band(completeness, 1) ~= 0 then
				st.state = "refused"
				st.refused = "the connection did not begin with a HELLO"
				r = { status = "failed", frame = 0, reason = "the connection begins with " .. (types[t] or ("TYPE(" .. t .. ")")) .. ", not a HELLO" }
			else
				st.state = "nohello"
				st.nohello = completeness and "stream began mid-connection: its HELLO is not in the capture"
					or "no HELLO at the start of the stream in the capture (its SYN is unknown in this pass)"
				r = { status = "unverified", reason = st.nohello }
			end
		end
	elseif st.state == "refused" then
		r = { status = "failed", reason = st.refused }
	elseif st.state == "nohello" then
		r = { status = "unverified", reason = st.nohello }
	elseif not auth then
		r = { status = "failed", frame = st.next, reason = "no tag on an authenticated connection" }
		st.next = st.next + 1
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
			st.next = st.next + 1
		end
	end
	per_packet[rk] = r
	return r
end

local function hex_id(range)
	return tostring(range:bytes()):lower()
end

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
	sub:add(f.from, tvb(12, 16))
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
		elseif t == TYPE_HELLO then
			if length == HELLO_LEN then
				sub:add(f.hello_to, p(0, 16))
				local ns = p(16, 8):int64()
				local secs = ns / 1000000000
				sub:add(f.hello_time, p(16, 8), NSTime.new(secs:tonumber(), (ns - secs * 1000000000):tonumber()))
				sub:add(f.hello_time_ns, p(16, 8))
				sub:add(f.hello_nonce, p(24, 16))
			else
				sub:add_proto_expert_info(e_payload, "HELLO payload is not 40 bytes")
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

	local info = name .. " epoch=" .. tvb(4, 8):uint64():tonumber() .. " from=" .. hex_id(tvb(12, 4))
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
end

register_port()
