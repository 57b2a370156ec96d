package node

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// A probe that gets no answer, or of a peer the transport does not know,
// is no evidence either way.
func TestTCPProbeNoAnswer(t *testing.T) {
	tr := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	silent := uuid.New()
	_, port := fullListener(t)
	tr.SetPeers([]wire.Member{{ID: silent, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if got := tr.ProbePeer(ctx, silent, 100*time.Millisecond); got != ProbeNoAnswer {
		t.Errorf("probe of a listener that drops SYNs: %s, want no answer", got)
	}
	if got := tr.ProbePeer(ctx, uuid.New(), 100*time.Millisecond); got != ProbeNoAnswer {
		t.Errorf("probe of an unknown peer: %s, want no answer", got)
	}
}
