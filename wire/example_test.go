package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

func Example() {
	from := uuid.MustParse("1234abcd-0000-4000-8000-000000000001")
	var buf []byte // reused across sends, so encoding stops allocating
	buf = wire.Append(buf[:0], &wire.Message{
		Type:  wire.TypeCoordinator,
		Flags: uint8(wire.ReasonLeaderFailed),
		Epoch: 3,
		From:  from,
	})

	var m wire.Message
	n, err := wire.Decode(buf, &m)
	fmt.Println(n, err)
	fmt.Println(m)
	// Output:
	// 36 <nil>
	// COORDINATOR epoch=3 from=1234abcd reason=leader-failed len=0
}

func ExampleReader() {
	var stream []byte
	for epoch := range uint64(3) {
		stream = wire.Append(stream, &wire.Message{Type: wire.TypeHeartbeat, Epoch: epoch})
	}
	stream = stream[:len(stream)-5] // the peer died mid-frame

	r := wire.NewReader(bytes.NewReader(stream), 0) // a net.Conn in practice
	for {
		var m wire.Message
		err := r.Read(&m)
		if errors.Is(err, wire.ErrUnknownType) {
			continue // sent by a newer peer; the stream is still in step
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(errors.Is(err, io.ErrUnexpectedEOF), err)
			break
		}
		fmt.Println(m)
	}
	// Output:
	// HEARTBEAT epoch=0 from=00000000 len=0
	// HEARTBEAT epoch=1 from=00000000 len=0
	// true wire: truncated frame at stream offset 72: unexpected EOF after 31 bytes
}

func ExampleDecodeMembers() {
	p := wire.AppendMembers(nil, []wire.Member{
		{ID: uuid.MustParse("00000000-0000-4000-8000-000000000001"), Addr: "10.0.0.1:7946"},
		{ID: uuid.MustParse("00000000-0000-4000-8000-000000000002"), Addr: "10.0.0.2:7946"},
	})
	ms, err := wire.DecodeMembers(p)
	fmt.Println(len(p), err)
	for _, m := range ms {
		fmt.Println(m.ID, m.Addr)
	}
	// Output:
	// 62 <nil>
	// 00000000-0000-4000-8000-000000000001 10.0.0.1:7946
	// 00000000-0000-4000-8000-000000000002 10.0.0.2:7946
}
