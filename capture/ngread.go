package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// The pcapng blocks ngReader understands; it skips the others (name
// resolution, decryption secrets, custom and unknown blocks), as the
// format lets readers do.
const (
	ngSectionHeader       = 0x0A0D0D0A
	ngInterfaceDesc       = 1
	ngObsoletePacket      = 2
	ngSimplePacket        = 3
	ngInterfaceStatistics = 5
	ngEnhancedPacket      = 6

	ngByteOrderMagic = 0x1A2B3C4D

	ngOptEnd       = 0
	ngOptComment   = 1
	ngOptIfName    = 2
	ngOptIfDesc    = 3
	ngOptIfTsresol = 9
	ngOptIfTsoff   = 14
)

// ngReadSize is the most an ngReader asks its input for at once: a file's
// blocks are small, and reading them in large chunks that the packets'
// data slices point into keeps the cost per packet to parsing its header.
const ngReadSize = 1 << 20

// ngInterface is an interface description block, and how to turn its
// packets' timestamps into times.
type ngInterface struct {
	linkType    layers.LinkType
	snapLen     uint32
	name        string
	description string
	comment     string
	// A timestamp ts is ts/secondMask+offset seconds and
	// ts%secondMask*scaleUp/scaleDown nanoseconds, computed in that order
	// so that every time comes out as the gopacket reader made it.
	secondMask, scaleUp, scaleDown, offset uint64
}

// ngReader reads the packets of a pcapng file, any number of sections
// in either byte order. Unlike gopacket's reader it numbers interfaces
// over the whole file, as Wireshark does, so that a packet of a later
// section does not take an earlier section's interface of its number.
type ngReader struct {
	src io.Reader
	buf []byte
	// buf[start:end] holds input not parsed yet; base is buf[0]'s offset
	// in the (uncompressed) input.
	start, end int
	base       int64
	srcErr     error // what ended the input: io.EOF or a read error
	bigEndian  bool
	ifaces     []ngInterface
	// section is the index in ifaces of the current section's first
	// interface.
	section int
	// compressed says the input is gzip-compressed: offsets are then
	// those of the uncompressed bytes.
	compressed bool
}

// newNgReader reads the section header at the start of r, which may be
// gzip-compressed; bufSize sizes the first chunk read from it.
func newNgReader(r io.Reader, bufSize int) (*ngReader, error) {
	ng := &ngReader{src: r, buf: make([]byte, bufSize)}
	if err := ng.fill(2); err != nil {
		if ng.end == 0 && ng.srcErr == io.EOF {
			return nil, io.EOF
		}
		return nil, err
	}
	if ng.buf[0] == 0x1f && ng.buf[1] == 0x8b {
		zr, err := gzip.NewReader(io.MultiReader(bytes.NewReader(slices.Clone(ng.buf[:ng.end])), r))
		if err != nil {
			return nil, err
		}
		ng.src, ng.start, ng.end, ng.srcErr, ng.compressed = zr, 0, 0, nil, true
	}
	typ, at, body, err := ng.block()
	if err != nil {
		return nil, err
	}
	if typ != ngSectionHeader {
		return nil, fmt.Errorf("first block is of type %#x, not a section header", typ)
	}
	if err := ng.sectionHeader(typ, at, body); err != nil {
		return nil, err
	}
	return ng, nil
}

// fill makes at least n bytes of input available at buf[start:], moving
// what is there to the front or growing buf as needed. It grows buf only
// once it is full of input, so a length read from a corrupt file costs
// no more memory than the file has. Input that ends first is
// io.ErrUnexpectedEOF.
func (r *ngReader) fill(n int) error {
	for r.end-r.start < n {
		if r.srcErr != nil {
			if r.srcErr == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return r.srcErr
		}
		if r.start > 0 && (r.end == len(r.buf) || r.start+n > len(r.buf)) {
			r.end = copy(r.buf, r.buf[r.start:r.end])
			r.base += int64(r.start)
			r.start = 0
		}
		if r.end == len(r.buf) {
			grown := make([]byte, min(2*len(r.buf), max(n, len(r.buf)+1)))
			copy(grown, r.buf[:r.end])
			r.buf = grown
		}
		m, err := r.src.Read(r.buf[r.end:min(len(r.buf), r.end+ngReadSize)])
		r.end += m
		if err != nil {
			r.srcErr = err
		}
	}
	return nil
}

// offset is the input offset of the next block.
func (r *ngReader) offset() int64 { return r.base + int64(r.start) }

func (r *ngReader) u16(b []byte) uint16 {
	if r.bigEndian {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (r *ngReader) u32(b []byte) uint32 {
	if r.bigEndian {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *ngReader) u64(b []byte) uint64 {
	if r.bigEndian {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

// ngBlockName names a block type for errors.
func ngBlockName(typ uint32) string {
	switch typ {
	case ngSectionHeader:
		return "section header"
	case ngInterfaceDesc:
		return "interface description"
	case ngObsoletePacket:
		return "packet"
	case ngSimplePacket:
		return "simple packet"
	case ngInterfaceStatistics:
		return "interface statistics"
	case ngEnhancedPacket:
		return "enhanced packet"
	}
	return fmt.Sprintf("type %#x", typ)
}

// blockError is an error in the block of type typ at offset at.
func blockError(typ uint32, at int64, format string, args ...any) error {
	return fmt.Errorf("pcapng %s block at byte %d: %s", ngBlockName(typ), at, fmt.Sprintf(format, args...))
}

// block reads the next block and returns its type, offset and body (what
// follows its length, up to its trailing length), valid until the next
// call. It returns io.EOF at the end of the input, and
// io.ErrUnexpectedEOF when the input ends inside a block.
func (r *ngReader) block() (typ uint32, at int64, body []byte, err error) {
	if err := r.fill(8); err != nil {
		if r.start == r.end && r.srcErr == io.EOF {
			return 0, 0, nil, io.EOF
		}
		return 0, 0, nil, err
	}
	at = r.offset()
	head := r.buf[r.start:r.end]
	// The section header's type reads the same in either byte order; its
	// byte-order magic sets the order of what follows.
	typ = binary.LittleEndian.Uint32(head)
	if typ == ngSectionHeader {
		if err := r.fill(12); err != nil {
			return 0, 0, nil, err
		}
		switch magic := r.buf[r.start+8 : r.start+12]; {
		case binary.LittleEndian.Uint32(magic) == ngByteOrderMagic:
			r.bigEndian = false
		case binary.BigEndian.Uint32(magic) == ngByteOrderMagic:
			r.bigEndian = true
		default:
			return 0, 0, nil, blockError(typ, at, "byte-order magic %#x", binary.LittleEndian.Uint32(magic))
		}
	} else {
		typ = r.u32(head)
	}
	length := r.u32(r.buf[r.start+4:])
	if length < 12 || length%4 != 0 {
		return 0, 0, nil, blockError(typ, at, "block length %d is not a multiple of 4 of at least 12", length)
	}
	if err := r.fill(int(length)); err != nil {
		return 0, 0, nil, err
	}
	b := r.buf[r.start : r.start+int(length)]
	if tail := r.u32(b[length-4:]); tail != length {
		return 0, 0, nil, blockError(typ, at, "block length %d at its start, %d at its end", length, tail)
	}
	r.start += int(length)
	return typ, at, b[8 : length-4], nil
}

// next reads blocks up to the next packet and returns its data, valid
// until the next call, filling ci (its InterfaceIndex numbering the
// file's interfaces) and returning its comments. It returns io.EOF at
// the end of the input, and io.ErrUnexpectedEOF when the input ends
// inside a block.
func (r *ngReader) next(ci *gopacket.CaptureInfo) (data []byte, comments []string, err error) {
	for {
		typ, at, body, err := r.block()
		if err != nil {
			return nil, nil, err
		}
		switch typ {
		case ngEnhancedPacket:
			if len(body) < 20 {
				return nil, nil, blockError(typ, at, "%d bytes, too short", len(body)+12)
			}
			data, err := r.packet(typ, at, ci, r.u32(body), body[4:])
			if err != nil {
				return nil, nil, err
			}
			opts := body[20+(len(data)+3)&^3:]
			if len(opts) == 0 {
				return data, nil, nil
			}
			comments, err := r.packetComments(typ, at, opts)
			if err != nil {
				return nil, nil, err
			}
			return data, comments, nil
		case ngObsoletePacket:
			// Its options are not read, as gopacket's reader does not.
			if len(body) < 20 {
				return nil, nil, blockError(typ, at, "%d bytes, too short", len(body)+12)
			}
			data, err := r.packet(typ, at, ci, uint32(r.u16(body)), body[4:])
			return data, nil, err
		case ngSimplePacket:
			if len(body) < 4 {
				return nil, nil, blockError(typ, at, "%d bytes, too short", len(body)+12)
			}
			if r.section == len(r.ifaces) {
				return nil, nil, blockError(typ, at, "no interface described in its section")
			}
			ifc := &r.ifaces[r.section]
			orig := r.u32(body)
			captured := min(orig, uint32(len(body)-4))
			if ifc.snapLen != 0 {
				captured = min(captured, ifc.snapLen)
			}
			*ci = gopacket.CaptureInfo{CaptureLength: int(captured), Length: int(orig), InterfaceIndex: r.section}
			return body[4 : 4+captured : 4+captured], nil, nil
		case ngInterfaceDesc:
			if err := r.interfaceDesc(typ, at, body); err != nil {
				return nil, nil, err
			}
		case ngInterfaceStatistics:
			if len(body) < 12 {
				return nil, nil, blockError(typ, at, "%d bytes, too short", len(body)+12)
			}
			if id := r.u32(body); int64(id) >= int64(len(r.ifaces)-r.section) {
				return nil, nil, blockError(typ, at, "interface %d is not described in its section (%d are)", id, len(r.ifaces)-r.section)
			}
		case ngSectionHeader:
			if err := r.sectionHeader(typ, at, body); err != nil {
				return nil, nil, err
			}
		}
	}
}

// sectionHeader starts the section whose header's body is body.
func (r *ngReader) sectionHeader(typ uint32, at int64, body []byte) error {
	if len(body) < 16 {
		return blockError(typ, at, "%d bytes, too short", len(body)+12)
	}
	if major, minor := r.u16(body[4:]), r.u16(body[6:]); major != 1 || minor != 0 {
		return blockError(typ, at, "version %d.%d, not 1.0", major, minor)
	}
	r.section = len(r.ifaces)
	return nil
}

// packet reads the fixed part of an enhanced or obsolete packet block
// (fixed, after its interface ID) into ci and returns its data.
func (r *ngReader) packet(typ uint32, at int64, ci *gopacket.CaptureInfo, id uint32, fixed []byte) ([]byte, error) {
	if int64(id) >= int64(len(r.ifaces)-r.section) {
		return nil, blockError(typ, at, "interface %d is not described in its section (%d are)", id, len(r.ifaces)-r.section)
	}
	captured := r.u32(fixed[8:])
	if room := uint64(len(fixed) - 16); (uint64(captured)+3)&^3 > room {
		return nil, blockError(typ, at, "captured length %d overruns the block", captured)
	}
	iface := r.section + int(id)
	*ci = gopacket.CaptureInfo{
		Timestamp:      r.ifaces[iface].time(uint64(r.u32(fixed))<<32 | uint64(r.u32(fixed[4:]))),
		CaptureLength:  int(captured),
		Length:         int(r.u32(fixed[12:])),
		InterfaceIndex: iface,
	}
	return fixed[16 : 16+captured : 16+captured], nil
}

// time converts a timestamp of the interface.
func (ifc *ngInterface) time(ts uint64) time.Time {
	if ifc.secondMask == 1e9 && ifc.offset == 0 {
		// Nanoseconds, as this package writes: constant divisors are
		// multiplications.
		return time.Unix(int64(ts/1e9), int64(ts%1e9)).UTC()
	}
	return time.Unix(int64(ts/ifc.secondMask+ifc.offset), int64(ts%ifc.secondMask*ifc.scaleUp/ifc.scaleDown)).UTC()
}

// nextOption splits the first option off opts. ok is false at the end of
// the options: at their end marker or at the end of the block.
func (r *ngReader) nextOption(typ uint32, at int64, opts []byte) (code uint16, val, rest []byte, ok bool, err error) {
	if len(opts) < 4 {
		return 0, nil, nil, false, nil
	}
	code, n := r.u16(opts), int(r.u16(opts[2:]))
	if code == ngOptEnd {
		if n != 0 {
			return 0, nil, nil, false, blockError(typ, at, "end of options of length %d", n)
		}
		return 0, nil, nil, false, nil
	}
	padded := (n + 3) &^ 3
	if 4+padded > len(opts) {
		return 0, nil, nil, false, blockError(typ, at, "option %d of %d bytes overruns the block", code, n)
	}
	return code, opts[4 : 4+n], opts[4+padded:], true, nil
}

// packetComments returns the comments among a packet's options; nil when
// it has none, as most have not.
func (r *ngReader) packetComments(typ uint32, at int64, opts []byte) ([]string, error) {
	var comments []string
	for {
		code, val, rest, ok, err := r.nextOption(typ, at, opts)
		if err != nil || !ok {
			return comments, err
		}
		if code == ngOptComment {
			comments = append(comments, string(val))
		}
		opts = rest
	}
}

// interfaceDesc adds the interface a description block describes.
func (r *ngReader) interfaceDesc(typ uint32, at int64, body []byte) error {
	if len(body) < 8 {
		return blockError(typ, at, "%d bytes, too short", len(body)+12)
	}
	ifc := ngInterface{linkType: layers.LinkType(r.u16(body)), snapLen: r.u32(body[4:])}
	resolution := byte(6)
	opts := body[8:]
	for {
		code, val, rest, ok, err := r.nextOption(typ, at, opts)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		switch code {
		case ngOptIfName:
			ifc.name = string(val)
		case ngOptIfDesc:
			ifc.description = string(val)
		case ngOptComment:
			ifc.comment = string(val)
		case ngOptIfTsresol:
			// A value of 0 means the default, as gopacket's reader has it.
			if len(val) >= 1 && val[0] != 0 {
				resolution = val[0]
			}
		case ngOptIfTsoff:
			if len(val) >= 8 {
				ifc.offset = r.u64(val)
			}
		}
		opts = rest
	}
	exp := uint64(resolution & 0x7f)
	if exp > 63 {
		base := "10"
		if resolution&0x80 != 0 {
			base = "2"
		}
		return blockError(typ, at, "timestamp resolution %s^-%d is too fine", base, exp)
	}
	if resolution&0x80 != 0 {
		ifc.secondMask = 1 << exp
	} else {
		ifc.secondMask = 1
		for range exp {
			ifc.secondMask *= 10
		}
	}
	ifc.scaleUp, ifc.scaleDown = 1, 1
	if ifc.secondMask < 1e9 {
		ifc.scaleUp = 1e9 / ifc.secondMask
	} else {
		ifc.scaleDown = ifc.secondMask / 1e9
	}
	r.ifaces = append(r.ifaces, ifc)
	return nil
}
