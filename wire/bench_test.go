package wire_test

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"slices"
	"testing"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// envelope is how the same message would travel with a generic codec: the
// header fields, plus the membership list as a field instead of a payload.
type envelope struct {
	Type    wire.Type
	Flags   uint8
	Epoch   uint64
	From    uuid.UUID
	Members []wire.Member `json:",omitempty"`
}

var benchMessages = []struct {
	name string
	env  envelope
}{
	{"heartbeat", envelope{Type: wire.TypeHeartbeat, Epoch: 1234, From: idB}},
	{"members", envelope{Type: wire.TypeMembers, Epoch: 1234, From: idB, Members: []wire.Member{
		{ID: uuid.MustParse("0f9ba7a1-5d3c-4a8e-9a51-2c3e1f0b7d01"), Addr: "10.0.0.1:7946"},
		{ID: uuid.MustParse("3c1e2a44-8b0f-4f6d-b1c2-7a9e5d3f1b02"), Addr: "10.0.0.2:7946"},
		{ID: uuid.MustParse("6a8d4e10-2f7b-4c3a-8e9d-1b5c7f2a4d03"), Addr: "10.0.0.3:7946"},
		{ID: uuid.MustParse("9d2f6b83-4a1c-4e8b-a7f0-3c6d8e1b5a04"), Addr: "10.0.0.4:7946"},
		{ID: uuid.MustParse("c47e8f25-6b3d-4a9c-9f1e-5d2a7c4b8e05"), Addr: "10.0.0.5:7946"},
	}}},
}

// A codec prepares one round trip (encode, then decode what was encoded)
// of env, checks it once, and returns it with the encoded size of env.
type codec struct {
	name  string
	setup func(env envelope) (roundTrip func() envelope, size int)
}

var codecs = []codec{
	{"bullylab", func(env envelope) (func() envelope, int) {
		m := wire.Message{Type: env.Type, Flags: env.Flags, Epoch: env.Epoch, From: env.From}
		var payload, buf []byte
		var in wire.Message
		roundTrip := func() envelope {
			if env.Type == wire.TypeMembers {
				payload = wire.AppendMembers(payload[:0], env.Members)
				m.Payload = payload
			}
			buf = wire.Append(buf[:0], &m)
			if _, err := wire.Decode(buf, &in); err != nil {
				panic(err)
			}
			out := envelope{Type: in.Type, Flags: in.Flags, Epoch: in.Epoch, From: in.From}
			if in.Type == wire.TypeMembers {
				ms, err := wire.DecodeMembers(in.Payload)
				if err != nil {
					panic(err)
				}
				out.Members = ms
			}
			return out
		}
		roundTrip()
		return roundTrip, len(buf)
	}},
	{"bullylab-auth", func(env envelope) (func() envelope, int) {
		// One authenticated connection: every frame is sealed by the
		// dialer and verified by the acceptor, in order.
		key := testKey()
		h := wire.Hello{To: idA, Time: 1}
		sealer, hello := wire.NewSealer(nil, &key, env.From, h)
		var in wire.Message
		if _, err := wire.Decode(hello, &in); err != nil {
			panic(err)
		}
		verifier, _, err := wire.OpenHello(&key, idA, &in)
		if err != nil {
			panic(err)
		}
		m := wire.Message{Type: env.Type, Flags: env.Flags, Epoch: env.Epoch, From: env.From}
		var payload, plain, buf []byte
		roundTrip := func() envelope {
			if env.Type == wire.TypeMembers {
				payload = wire.AppendMembers(payload[:0], env.Members)
				m.Payload = payload
			}
			plain = wire.Append(plain[:0], &m)
			buf = sealer.Seal(buf[:0], plain)
			if _, err := wire.Decode(buf, &in); err != nil {
				panic(err)
			}
			if err := verifier.Verify(&in); err != nil {
				panic(err)
			}
			out := envelope{Type: in.Type, Flags: in.Flags &^ wire.FlagAuth, Epoch: in.Epoch, From: in.From}
			if in.Type == wire.TypeMembers {
				ms, err := wire.DecodeMembers(in.Payload)
				if err != nil {
					panic(err)
				}
				out.Members = ms
			}
			return out
		}
		roundTrip()
		return roundTrip, len(buf)
	}},
	{"gob", func(env envelope) (func() envelope, int) {
		// One encoder and decoder over one stream, as over a connection:
		// gob sends the type description once, before the timer starts.
		var stream bytes.Buffer
		enc, dec := gob.NewEncoder(&stream), gob.NewDecoder(&stream)
		var out envelope
		roundTrip := func() envelope {
			if err := enc.Encode(&env); err != nil {
				panic(err)
			}
			out = envelope{} // a fresh value per message, as the others produce
			if err := dec.Decode(&out); err != nil {
				panic(err)
			}
			return out
		}
		roundTrip()
		before := stream.Len()
		if err := enc.Encode(&env); err != nil {
			panic(err)
		}
		size := stream.Len() - before
		if err := dec.Decode(&out); err != nil {
			panic(err)
		}
		return roundTrip, size
	}},
	{"json", func(env envelope) (func() envelope, int) {
		var out envelope
		data, _ := json.Marshal(&env)
		return func() envelope {
			data, err := json.Marshal(&env)
			if err != nil {
				panic(err)
			}
			out = envelope{}
			if err := json.Unmarshal(data, &out); err != nil {
				panic(err)
			}
			return out
		}, len(data)
	}},
}

func BenchmarkCodec(b *testing.B) {
	for _, c := range codecs {
		for _, msg := range benchMessages {
			b.Run(c.name+"/"+msg.name, func(b *testing.B) {
				roundTrip, size := c.setup(msg.env)
				if got := roundTrip(); !equalEnvelope(got, msg.env) {
					b.Fatalf("round trip = %+v, want %+v", got, msg.env)
				}
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					roundTrip()
				}
				b.ReportMetric(float64(size), "B/msg")
			})
		}
	}
}

func TestBenchCodecs(t *testing.T) {
	for _, c := range codecs {
		for _, msg := range benchMessages {
			roundTrip, size := c.setup(msg.env)
			if got := roundTrip(); !equalEnvelope(got, msg.env) {
				t.Errorf("%s/%s: round trip = %+v, want %+v", c.name, msg.name, got, msg.env)
			}
			if size <= 0 {
				t.Errorf("%s/%s: size %d", c.name, msg.name, size)
			}
			if c.name == "bullylab" {
				want := wire.MinFrameLen
				if msg.env.Members != nil {
					want += len(wire.AppendMembers(nil, msg.env.Members))
				}
				if size != want {
					t.Errorf("bullylab/%s: size %d, want %d", msg.name, size, want)
				}
			}
		}
	}
}

func BenchmarkReader(b *testing.B) {
	for _, msg := range benchMessages {
		b.Run(msg.name, func(b *testing.B) {
			m := wire.Message{Type: msg.env.Type, Epoch: msg.env.Epoch, From: msg.env.From}
			if msg.env.Members != nil {
				m.Payload = wire.AppendMembers(nil, msg.env.Members)
			}
			f := wire.Append(nil, &m)
			r := wire.NewReader(&loopReader{b: bytes.Repeat(f, 64)}, 0)
			var out wire.Message
			b.ReportAllocs()
			b.SetBytes(int64(len(f)))
			for b.Loop() {
				if err := r.Read(&out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func equalEnvelope(a, b envelope) bool {
	return a.Type == b.Type && a.Flags == b.Flags && a.Epoch == b.Epoch && a.From == b.From &&
		slices.Equal(a.Members, b.Members)
}
