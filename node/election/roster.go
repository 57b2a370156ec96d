package election

import (
	"fmt"
	"slices"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Roster is a node's membership as every algorithm keeps it: the members
// with their addresses in ID order, the ones that left, and the JOIN,
// LEAVE and MEMBERS rules with their bounds (Config.MaxMembers,
// Config.Insecure), and the epoch window a message must fit
// (EpochWindow, MaxEpoch). Changes are reported as events to its Outbox;
// OnChange, when set, runs after each one, for a Machine whose timers
// depend on its rank among the members.
type Roster struct {
	cfg  Config
	self uuid.UUID
	out  *Outbox

	members map[uuid.UUID]string // every known member, self included
	ids     []uuid.UUID          // members sorted by Less; rebuilt on change
	// view is Members' answer, built anew on change and shared: a node
	// asks for its members on every state save and status update, and
	// at 1000 members in one host process building the list each time
	// was a large part of a boot's CPU.
	view []wire.Member
	// departed: members that sent LEAVE, with their addresses. One heard
	// from again, other than with LEAVE, did not leave (a LEAVE forged
	// without authentication) and is a member again.
	departed map[uuid.UUID]string
	// askedMembers: peers sent a JOIN asking for MEMBERS; only their
	// replies are taken.
	askedMembers map[uuid.UUID]bool
	scratch      []uuid.UUID // reused by Others

	// OnChange runs after the member list changed.
	OnChange func()
}

// NewRoster returns the membership of a node configured with cfg, restored
// from the State a previous incarnation persisted (nil on first boot).
func NewRoster(cfg Config, restored *State, out *Outbox) *Roster {
	r := &Roster{
		cfg:          cfg,
		self:         cfg.ID,
		out:          out,
		members:      make(map[uuid.UUID]string, len(cfg.Peers)+1),
		departed:     make(map[uuid.UUID]string),
		askedMembers: make(map[uuid.UUID]bool),
	}
	r.members[cfg.ID] = cfg.Addr
	for _, p := range cfg.Peers {
		if p.ID != cfg.ID {
			r.members[p.ID] = p.Addr
		}
	}
	if restored != nil {
		for _, p := range restored.Members {
			if _, known := r.members[p.ID]; !known && p.ID != cfg.ID {
				r.members[p.ID] = p.Addr
			}
		}
	}
	r.rebuild()
	return r
}

// CheckRestored says why a restored State cannot be resumed, or returns nil.
func CheckRestored(restored *State) error {
	if restored != nil && max(restored.Epoch, restored.Promise.Epoch, restored.LeaderEpoch) > MaxEpoch {
		return fmt.Errorf("restored state: epoch %d is beyond the maximum %d (written by a build without epoch bounds?); start the node afresh",
			max(restored.Epoch, restored.Promise.Epoch, restored.LeaderEpoch), uint64(MaxEpoch))
	}
	return nil
}

// Join announces the node with JOIN to every other member, asking each for
// its MEMBERS.
func (r *Roster) Join(epoch uint64) {
	payload := wire.AppendAddr(nil, r.cfg.Addr)
	for _, id := range r.Others() {
		r.askedMembers[id] = true
		r.out.Send(id, wire.TypeJoin, wire.FlagWantMembers, epoch, payload)
	}
}

// IDs returns the members' IDs in Less order, self included. The slice is
// the Roster's: do not modify it.
func (r *Roster) IDs() []uuid.UUID { return r.ids }

// Has reports whether id is a member.
func (r *Roster) Has(id uuid.UUID) bool {
	_, ok := r.members[id]
	return ok
}

// Addr returns the address of member id, or "".
func (r *Roster) Addr(id uuid.UUID) string { return r.members[id] }

// Member returns id with its address, for events.
func (r *Roster) Member(id uuid.UUID) wire.Member { return wire.Member{ID: id, Addr: r.members[id]} }

// Members returns every member, self included, in ID order. The slice is
// shared until the membership changes, and then replaced, never modified:
// do not modify it either.
func (r *Roster) Members() []wire.Member { return r.view }

// Others returns every member but self, in ID order. The slice is reused.
func (r *Roster) Others() []uuid.UUID {
	r.scratch = r.scratch[:0]
	for _, id := range r.ids {
		if id != r.self {
			r.scratch = append(r.scratch, id)
		}
	}
	return r.scratch
}

// Position is the index at which id is, or would be, in IDs.
func (r *Roster) Position(id uuid.UUID) int {
	i, _ := slices.BinarySearchFunc(r.ids, id, CompareIDs)
	return i
}

// RankBelow counts the members ranked strictly between this node and
// above: 0 for the node just below above, such as the highest follower of
// a leader. Members that left are not in the list; members that crashed
// still are, since no algorithm here has a liveness view beyond its
// leader's heartbeats: a crashed member in between costs one stagger step,
// within the cap. A node above above has rank 0.
func (r *Roster) RankBelow(above uuid.UUID) int {
	if !Less(r.self, above) {
		return 0
	}
	return max(r.Position(above)-r.Position(r.self)-1, 0)
}

// StaggerBelow is the extra detection delay of this node watching above:
// the StaggerDelay of its rank below it.
func (r *Roster) StaggerBelow(above uuid.UUID) time.Duration {
	return StaggerDelay(r.RankBelow(above), r.cfg.DetectionStagger, r.cfg.ElectionTimeout)
}

// Admit decides whether the Machine at epoch (bootstrapping: a first start
// that has followed no leader yet) takes msg: its epoch must fit the
// window, and its sender must be a member, unless msg is a JOIN or MEMBERS.
// A departed member heard from again, but with LEAVE, is a member again.
func (r *Roster) Admit(now time.Duration, msg *wire.Message, epoch uint64, bootstrapping bool) bool {
	from := msg.From
	if why := r.epochProblem(msg, epoch, bootstrapping); why != "" {
		r.out.Refuse(now, r.Member(from), CauseEpochWindow, why)
		return false
	}
	if _, member := r.members[from]; member {
		return true
	}
	addr, left := r.departed[from]
	switch {
	case msg.Type == wire.TypeJoin || msg.Type == wire.TypeMembers:
		return true
	case left && msg.Type != wire.TypeLeave:
		// It did not leave: its LEAVE was not its own (no cluster key)
		// or it restarted without its state. Either way it is here.
		r.add(now, wire.Member{ID: from, Addr: addr}, from)
		return true
	}
	// A node we do not know cannot be ordered against the others we
	// elect among; it becomes one with JOIN.
	return false
}

// epochProblem says why msg's epoch is refused, or "" when it is not: it
// may move the node's epoch by at most EpochWindow (but while
// bootstrapping, or in the MEMBERS reply that a JOIN asked for), and never
// past MaxEpoch.
func (r *Roster) epochProblem(msg *wire.Message, epoch uint64, bootstrapping bool) string {
	switch {
	case msg.Epoch > MaxEpoch:
		return fmt.Sprintf("%s epoch %d is beyond the maximum %d", msg.Type, msg.Epoch, uint64(MaxEpoch))
	case msg.Epoch <= epoch+EpochWindow, bootstrapping:
		return ""
	case msg.Type == wire.TypeMembers && r.askedMembers[msg.From]:
		return ""
	}
	return fmt.Sprintf("%s epoch %d is %d ahead of this node's %d, more than the window of %d",
		msg.Type, msg.Epoch, msg.Epoch-epoch, epoch, EpochWindow)
}

// OnJoin takes a JOIN from p, replying with MEMBERS when it asked for them
// and was new, and reports whether p is a member now (an insecure node
// refuses strangers).
func (r *Roster) OnJoin(now time.Duration, p wire.Member, wantMembers bool, epoch uint64) bool {
	_, member := r.members[p.ID]
	_, left := r.departed[p.ID]
	if r.cfg.Insecure && !member && !left {
		r.out.Refuse(now, r.Member(p.ID), CauseMembership, fmt.Sprintf("JOIN from %s at %q, which this node does not know: without a cluster key it accepts no new members", p.ID, p.Addr))
		return false
	}
	if r.add(now, p, p.ID) && wantMembers {
		r.out.Send(p.ID, wire.TypeMembers, 0, epoch, wire.AppendMembers(nil, r.Members()))
	}
	return true
}

// OnLeave forgets from, which sent LEAVE.
func (r *Roster) OnLeave(now time.Duration, from uuid.UUID) {
	addr := r.members[from]
	delete(r.members, from)
	if len(r.departed) >= r.cfg.MemberLimit() {
		clear(r.departed) // what is forgotten only costs a JOIN
	}
	r.departed[from] = addr
	r.changed()
	r.out.Emit(Event{At: now, Kind: EventMemberLeft, Peer: wire.Member{ID: from, Addr: addr}, By: from})
}

// OnMembers takes the member list a peer sent in reply to this node's JOIN;
// the list must fit MaxMembers whole. Each member new to this node is
// introduced to with a JOIN: that is how a JOIN reaches all participants.
func (r *Roster) OnMembers(now time.Duration, from uuid.UUID, payload []byte, epoch uint64) {
	if !r.askedMembers[from] {
		r.out.Refuse(now, r.Member(from), CauseMembership, "MEMBERS this node did not ask for")
		return
	}
	ms, err := wire.DecodeMembers(payload)
	if err != nil {
		return
	}
	delete(r.askedMembers, from)
	if len(ms) > r.cfg.MemberLimit() {
		r.out.Refuse(now, r.Member(from), CauseMembership, fmt.Sprintf("MEMBERS lists %d members, more than MaxMembers %d", len(ms), r.cfg.MemberLimit()))
		return
	}
	for _, p := range ms {
		if p.ID != from && r.add(now, p, from) {
			r.out.Send(p.ID, wire.TypeJoin, 0, epoch, wire.AppendAddr(nil, r.cfg.Addr))
		}
	}
}

// add adds or updates p, announced by member by, and reports whether
// anything changed.
func (r *Roster) add(now time.Duration, p wire.Member, by uuid.UUID) bool {
	if p.ID == r.self || p.ID == uuid.Nil {
		return false
	}
	addr, known := r.members[p.ID]
	if known && (addr == p.Addr || p.Addr == "") {
		return false
	}
	if !known && len(r.members) >= r.cfg.MemberLimit() {
		r.out.Refuse(now, r.Member(by), CauseMembership, fmt.Sprintf("member %s would make %d, more than MaxMembers %d", p.ID, len(r.members)+1, r.cfg.MemberLimit()))
		return false
	}
	r.members[p.ID] = p.Addr
	delete(r.departed, p.ID)
	r.changed()
	r.out.Emit(Event{At: now, Kind: EventMemberJoined, Peer: p, By: by})
	return true
}

func (r *Roster) changed() {
	r.rebuild()
	if r.OnChange != nil {
		r.OnChange()
	}
}

func (r *Roster) rebuild() {
	r.ids = r.ids[:0]
	for id := range r.members {
		r.ids = append(r.ids, id)
	}
	slices.SortFunc(r.ids, CompareIDs)
	r.view = make([]wire.Member, len(r.ids))
	for i, id := range r.ids {
		r.view[i] = wire.Member{ID: id, Addr: r.members[id]}
	}
}

// CompareIDs orders IDs by Less, for sorting and searching.
func CompareIDs(a, b uuid.UUID) int {
	switch {
	case Less(a, b):
		return -1
	case Less(b, a):
		return 1
	}
	return 0
}
