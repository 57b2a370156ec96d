//go:build linux

package remote

import (
	"crypto/ed25519"
	"slices"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
)

// An agent takes every node's public key and its own nodes' private ones,
// and refuses keys that do not fit.
func TestShareMemberKeys(t *testing.T) {
	var privs []ed25519.PrivateKey
	r := ShareRequest{MemberKeys: map[int]string{}}
	for range 3 {
		k, err := wire.NewMemberKey()
		if err != nil {
			t.Fatal(err)
		}
		privs = append(privs, k)
		r.Cluster.PublicKeys = append(r.Cluster.PublicKeys, wire.EncodePublicKey(k.Public().(ed25519.PublicKey)))
	}
	r.MemberKeys[1] = wire.EncodeMemberKey(privs[1])
	pubs, mine, err := shareMemberKeys(r, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(pubs) != 3 || !pubs[2].Equal(privs[2].Public()) || mine[0] != nil || !mine[1].Equal(privs[1]) || mine[2] != nil {
		t.Fatalf("shareMemberKeys = %v, %v", pubs, mine)
	}
	if pubs, mine, err := shareMemberKeys(ShareRequest{}, 3); pubs != nil || mine != nil || err != nil {
		t.Errorf("without keys: %v, %v, %v; want none", pubs, mine, err)
	}
	for want, change := range map[string]func(r *ShareRequest){
		"3 public keys for 4 nodes": func(r *ShareRequest) {},
		"member key 2 is not the one its public key names": func(r *ShareRequest) {
			r.MemberKeys[1] = wire.EncodeMemberKey(privs[0])
		},
		"member key for node 7 of": func(r *ShareRequest) { r.MemberKeys[6] = r.MemberKeys[1] },
		"public key 1: not a member key": func(r *ShareRequest) {
			r.Cluster.PublicKeys = append([]string{"x"}, r.Cluster.PublicKeys[1:]...)
		},
	} {
		bad := ShareRequest{MemberKeys: map[int]string{1: r.MemberKeys[1]}, Cluster: SpanCluster{PublicKeys: slices.Clone(r.Cluster.PublicKeys)}}
		change(&bad)
		n := 3
		if strings.HasPrefix(want, "3 public keys") {
			n = 4
		}
		if _, _, err := shareMemberKeys(bad, n); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("shareMemberKeys = %v, want %q", err, want)
		}
	}
}
