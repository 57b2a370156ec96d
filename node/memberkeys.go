package node

import (
	"crypto/ed25519"
	"fmt"
	"sync"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// memberKeys decides whether a HELLO that verified under the cluster key
// is its sender's own (TCPConfig.PeerKeys): signed by the member key the
// peers file gives for its ID or, for an ID the file gives none for (a
// member that joined later), by the key its first accepted HELLO carried.
//
// The second is trust on first use: whichever member first opens a
// connection in an unlisted ID's name owns that ID at this node until the
// node restarts. That is weaker than a listed key, and it is the price of
// members joining without a new peers file; listed members, the leader
// among them, are not exposed to it.
type memberKeys struct {
	// required: the peers file gave keys, so every HELLO must be signed.
	required bool
	// given is TCPConfig.PeerKeys, read, never written: the nodes of one
	// host process share one, where a copy each was 60 KB a node at 1000.
	given map[uuid.UUID]ed25519.PublicKey
	// maxPinned bounds pinned: a member can sign HELLOs for as many IDs
	// as it likes, each with a key of its own.
	maxPinned int

	mu     sync.Mutex
	pinned map[uuid.UUID][ed25519.PublicKeySize]byte
}

func newMemberKeys(given map[uuid.UUID]ed25519.PublicKey, maxPinned int) *memberKeys {
	k := &memberKeys{
		required:  len(given) > 0,
		given:     given,
		maxPinned: maxPinned,
		pinned:    make(map[uuid.UUID][ed25519.PublicKeySize]byte),
	}
	return k
}

// check says why h, a HELLO from from whose signature, if any, verified
// (wire.OpenHello), is not from's own, or returns nil. pin reports that
// from has no key yet, and h's is to be pinned once the HELLO is accepted.
func (k *memberKeys) check(from uuid.UUID, h *wire.Hello) (pin bool, err error) {
	if !k.required {
		return false, nil
	}
	if !h.Signed {
		return false, fmt.Errorf("HELLO from %s is not signed, and this node's peers give member keys: a member key proves the sender is %s (give that node its key with --member-key)", from, from)
	}
	var want [ed25519.PublicKeySize]byte
	if pub, ok := k.given[from]; ok {
		if len(pub) != ed25519.PublicKeySize {
			return false, fmt.Errorf("the member key given for %s is %d bytes, not %d", from, len(pub), ed25519.PublicKeySize)
		}
		want = [ed25519.PublicKeySize]byte(pub)
	} else {
		k.mu.Lock()
		want, ok = k.pinned[from]
		k.mu.Unlock()
		if !ok {
			return true, nil
		}
	}
	if h.PublicKey != want {
		return false, fmt.Errorf("HELLO from %s is signed by %s, not by its member key %s", from,
			wire.EncodePublicKey(h.PublicKey[:]), wire.EncodePublicKey(want[:]))
	}
	return false, nil
}

// pin makes h's key from's, unless another HELLO pinned one first. At
// maxPinned it first forgets the IDs that are not members (keep), which a
// member that signs HELLOs for made-up IDs fills the table with; the
// members' keys stay, so that such a flood cannot hand a member's ID to
// whoever speaks for it next.
func (k *memberKeys) pin(from uuid.UUID, h *wire.Hello, keep func(uuid.UUID) bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if want, ok := k.pinned[from]; ok {
		if want != h.PublicKey {
			return fmt.Errorf("HELLO from %s is signed by %s, not by the member key %s its first HELLO carried", from,
				wire.EncodePublicKey(h.PublicKey[:]), wire.EncodePublicKey(want[:]))
		}
		return nil
	}
	if len(k.pinned) >= k.maxPinned {
		for id := range k.pinned {
			if !keep(id) {
				delete(k.pinned, id)
			}
		}
	}
	if len(k.pinned) >= k.maxPinned {
		return fmt.Errorf("HELLO from %s: this node already holds the keys of %d members the peers file does not list, its limit", from, len(k.pinned))
	}
	k.pinned[from] = h.PublicKey
	return nil
}
