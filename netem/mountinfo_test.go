//go:build linux

package netem

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The mount table of a freshly booted machine after a namespace was
// mounted on the plain /run/netns (62) and `ip netns add` then bound the
// directory on itself (63, copying 62 as 64) and added its own (65), and a
// name mounted twice on the bind (66 under 67). Seen on this kind of
// machine, 66 and 67 added.
const hiddenMountInfo = `26 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
42 26 0:20 / /proc rw,relatime - proc proc rw
62 26 0:4 net:[4026531833] /run/netns/bl0001-n1 rw - nsfs nsfs rw
63 26 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw,discard
64 63 0:4 net:[4026531833] /run/netns/bl0001-n1 rw shared:2 - nsfs nsfs rw
65 63 0:4 net:[4026532177] /run/netns/probe rw shared:3 - nsfs nsfs rw
66 63 0:4 net:[4026532200] /run/netns/bl0002-n1 rw shared:4 - nsfs nsfs rw
67 66 0:4 net:[4026532201] /run/netns/bl0002-n1 rw shared:5 - nsfs nsfs rw
`

func TestParseMountInfo(t *testing.T) {
	ms, err := parseMountInfo([]byte(hiddenMountInfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 8 {
		t.Fatalf("%d mounts, want 8", len(ms))
	}
	m := ms[2]
	if m.id != 62 || m.parent != 26 || m.point != "/run/netns/bl0001-n1" || m.fsType != "nsfs" || len(m.optional) != 0 {
		t.Errorf("line 3: %+v", m)
	}
	if got := ms[3].optional; !slices.Equal(got, []string{"shared:1"}) {
		t.Errorf("line 4 optional fields %q", got)
	}
	id, ok := m.netNS()
	if want := (nsID{dev: unix.Mkdev(0, 4), ino: 4026531833}); !ok || id != want {
		t.Errorf("netNS() = %v, %v, want %v", id, ok, want)
	}
	if _, ok := ms[0].netNS(); ok {
		t.Error("an ext4 mount named a network namespace")
	}
}

func TestParseMountInfoEscapes(t *testing.T) {
	ms, err := parseMountInfo([]byte(`70 26 0:50 / /mnt/a\040b\134c rw - tmpfs none rw` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].point != `/mnt/a b\c` {
		t.Errorf("mount point %q", ms[0].point)
	}
}

func TestParseMountInfoErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"1 2 3", "line 1: want at least 6 fields"},
		{"x 1 0:1 / / rw - ext4 d rw", `mount ID "x"`},
		{"1 y 0:1 / / rw - ext4 d rw", `parent ID "y"`},
		{"1 1 01 / / rw - ext4 d rw", `device "01": want MAJOR:MINOR`},
		{`1 1 0:1 / /a\04 rw - ext4 d rw`, "cut short"},
		{`1 1 0:1 / /a\09x rw - ext4 d rw`, "want three octal digits"},
		{"1 1 0:1 / / rw shared:1 ext4 d rw", "want at least 6 fields"},
	} {
		if _, err := parseMountInfo([]byte(tc.line)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.line, err, tc.want)
		}
	}
}

func TestHiddenNamespaces(t *testing.T) {
	ms, err := parseMountInfo([]byte(hiddenMountInfo))
	if err != nil {
		t.Fatal(err)
	}
	hidden := hiddenNamespaces(ms)
	if len(hidden) != 1 || hidden[0].id != 62 || hidden[0].name != "bl0001-n1" {
		t.Fatalf("hidden %+v, want mount 62 (bl0001-n1) alone: 64-67 sit on the bind mount", hidden)
	}
	// Before `ip netns add`, nothing covers the plain directory.
	if h := hiddenNamespaces(ms[:3]); len(h) != 0 {
		t.Errorf("hidden without a cover: %+v", h)
	}
	if top, ok := topMountAt(ms, NetnsDir); !ok || top.id != 63 {
		t.Errorf("top mount on %s: %+v, %v, want 63", NetnsDir, top, ok)
	}
	if top, ok := topMountAt(ms, NetnsDir+"/bl0002-n1"); !ok || top.id != 67 {
		t.Errorf("top mount on bl0002-n1: %+v, %v, want 67", top, ok)
	}
}

func TestHiddenErrorIsOneLine(t *testing.T) {
	var hidden []namespaceMount
	for i := range 5 {
		hidden = append(hidden, namespaceMount{name: fmt.Sprintf("bl0001-n%d", i+1)})
	}
	err := hiddenError(hidden, unix.EINVAL)
	if s := err.Error(); strings.Contains(s, "\n") || !strings.Contains(s, "bl0001-n1, bl0001-n2, bl0001-n3 and 2 more") || !strings.Contains(s, "`umount /run/netns`") {
		t.Errorf("%q", s)
	}
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add([]byte(hiddenMountInfo))
	f.Add([]byte(`70 26 0:50 / /mnt/a\040b rw - tmpfs none rw`))
	f.Add([]byte("1 1 0:1 / / rw - ext4"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := parseMountInfo(data)
		if err != nil {
			return
		}
		_ = hiddenNamespaces(ms)
		// What parsed formats back to a table that parses the same.
		var b strings.Builder
		for _, m := range ms {
			opt := strings.Join(append(slices.Clone(m.optional), "-"), " ")
			fmt.Fprintf(&b, "%d %d %d:%d %s %s rw %s %s none rw\n", m.id, m.parent, m.major, m.minor,
				escapeMountPath(m.root), escapeMountPath(m.point), opt, m.fsType)
		}
		again, err := parseMountInfo([]byte(b.String()))
		if err != nil {
			t.Fatalf("formatted table does not parse: %v\n%s", err, b.String())
		}
		if len(again) != len(ms) {
			t.Fatalf("%d mounts, then %d", len(ms), len(again))
		}
		for i := range ms {
			if again[i].point != ms[i].point || again[i].root != ms[i].root || again[i].id != ms[i].id || again[i].fsType != ms[i].fsType {
				t.Fatalf("mount %d: %+v, then %+v", i, ms[i], again[i])
			}
		}
	})
}

func TestCleanReportHidden(t *testing.T) {
	r := CleanReport{Hidden: []string{"foo-n1", "foo-n2"}}
	want := "nothing to clean; left 2 namespaces hidden under a later mount on /run/netns, of no run known here (foo-n1, foo-n2): `bullylab clean --run NAME` frees a run's"
	if s := r.String(); !strings.Contains(s, want) || strings.Contains(s, "\n") {
		t.Errorf("%q, want it to contain %q", s, want)
	}
}
