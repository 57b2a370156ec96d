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
-- The bullylab-events interface carries fault records: their summary is
-- the packet comment (frame.comment).
--
-- Frame: 32-byte header, payload, CRC-32C trailer; big-endian.
--   0 start 0x1B | 1 version 1 | 2 type | 3 flags (low nibble: reason)
--   4 epoch u64 | 12 sender ID (16 bytes) | 28 payload length u32
--   32 payload | 32+len CRC-32C of bytes 0 .. 32+len-1

local bullylab = Proto("bullylab", "Bullylab election protocol")

local HEADER_LEN = 32
local TRAILER_LEN = 4
local DEFAULT_PORT = 7946

local types = {
	[1] = "ELECTION", [2] = "ANSWER", [3] = "HALT", [4] = "HALT_ACK", [5] = "REJECT",
	[6] = "COORDINATOR", [7] = "HEARTBEAT", [8] = "JOIN", [9] = "LEAVE", [10] = "MEMBERS",
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
f.type = ProtoField.uint8("bullylab.type", "Type", base.DEC, types)
f.flags = ProtoField.uint8("bullylab.flags", "Flags", base.HEX)
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

local e_start = ProtoExpert.new("bullylab.bad_start", "Not a bullylab frame (bad start byte or version)", expert.group.MALFORMED, expert.severity.ERROR)
local e_crc = ProtoExpert.new("bullylab.bad_crc", "CRC-32C mismatch", expert.group.CHECKSUM, expert.severity.ERROR)
local e_payload = ProtoExpert.new("bullylab.bad_payload", "Malformed payload", expert.group.MALFORMED, expert.severity.WARN)
bullylab.experts = { e_start, e_crc, e_payload }

bullylab.prefs.port = Pref.uint("TCP port", DEFAULT_PORT, "TCP port of the election traffic")
bullylab.prefs.check_crc = Pref.bool("Check CRC", true, "Verify each frame's CRC-32C")

-- Bit operations: Wireshark's Lua may be 5.2 (bit32) or have only its
-- bundled BitOp (bit, whose results are signed); the native operators of
-- Lua 5.3 would not even parse on 5.2.
local bitlib = bit32 or bit
local band, bxor, rshift = bitlib.band, bitlib.bxor, bitlib.rshift

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
	return tvb(offset + 28, 4):uint() + HEADER_LEN + TRAILER_LEN
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
	sub:add(f.type, tvb(2, 1))
	sub:add(f.flags, tvb(3, 1))
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
	local ci = sub:add(f.crc, tvb(HEADER_LEN + length, 4))
	if bullylab.prefs.check_crc then
		local want = tvb(HEADER_LEN + length, 4):uint()
		local got = crc32c(tvb(0, HEADER_LEN + length):bytes(), HEADER_LEN + length)
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
end

register_port()
