package election

import (
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Outbox accumulates what a Machine produces between two Drains: messages,
// counted by type, and events. Every algorithm embeds one.
type Outbox struct {
	from   uuid.UUID
	out    Output
	sentBy [16]uint64
}

// NewOutbox returns an Outbox whose messages come from id.
func NewOutbox(id uuid.UUID) *Outbox { return &Outbox{from: id} }

// Send queues a message to peer to.
func (o *Outbox) Send(to uuid.UUID, t wire.Type, flags uint8, epoch uint64, payload []byte) {
	o.sentBy[t&15]++
	o.out.Messages = append(o.out.Messages, Envelope{To: to, Msg: wire.Message{
		Type: t, Flags: flags, Epoch: epoch, From: o.from, Payload: payload,
	}})
}

// Emit queues an event.
func (o *Outbox) Emit(e Event) { o.out.Events = append(o.out.Events, e) }

// Refuse reports a message from peer, known at addr, that the Machine
// ignored for cause.
func (o *Outbox) Refuse(now time.Duration, peer wire.Member, cause RefusalCause, why string) {
	o.Emit(Event{At: now, Kind: EventRefused, Peer: peer, Cause: cause, Detail: why})
}

// Sent returns how many messages of type t were queued in all.
func (o *Outbox) Sent(t wire.Type) uint64 { return o.sentBy[t&15] }

// Take returns and clears what was queued since the last Take, with st
// as the State to persist (nil when nothing persisted changed).
func (o *Outbox) Take(st *State) Output {
	out := o.out
	out.State = st
	o.out = Output{}
	return out
}
