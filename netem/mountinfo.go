//go:build linux

package netem

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountInfo is one line of /proc/PID/mountinfo (proc_pid_mountinfo(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2) (3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//
// Paths are unescaped: the kernel writes space, tab, newline and backslash
// in them as octal escapes (\040).
type mountInfo struct {
	id, parent   int
	major, minor uint32
	root         string // (4): for an nsfs mount, "net:[INODE]"
	point        string // (5), relative to this process's root
	optional     []string
	fsType       string
}

// parseMountInfo parses a whole mountinfo file. Errors name the line.
func parseMountInfo(data []byte) ([]mountInfo, error) {
	var out []mountInfo
	for n, line := range bytes.Split(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := parseMountInfoLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", n+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func parseMountInfoLine(line string) (mountInfo, error) {
	var m mountInfo
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 7 || sep < 0 || sep+1 >= len(f) {
		return m, fmt.Errorf("want at least 6 fields, \"-\" and a file system type, have %q", line)
	}
	var err error
	if m.id, err = strconv.Atoi(f[0]); err != nil {
		return m, fmt.Errorf("mount ID %q: %w", f[0], err)
	}
	if m.parent, err = strconv.Atoi(f[1]); err != nil {
		return m, fmt.Errorf("parent ID %q: %w", f[1], err)
	}
	maj, min, ok := strings.Cut(f[2], ":")
	major, err1 := strconv.ParseUint(maj, 10, 32)
	minor, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return m, fmt.Errorf("device %q: want MAJOR:MINOR", f[2])
	}
	m.major, m.minor = uint32(major), uint32(minor)
	if m.root, err = unescapeMountPath(f[3]); err != nil {
		return m, fmt.Errorf("root %q: %w", f[3], err)
	}
	if m.point, err = unescapeMountPath(f[4]); err != nil {
		return m, fmt.Errorf("mount point %q: %w", f[4], err)
	}
	m.optional = f[6:sep]
	m.fsType = f[sep+1]
	return m, nil
}

// unescapeMountPath undoes the kernel's octal escapes (\NNN) in a path.
func unescapeMountPath(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("escape at byte %d is cut short", i)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("escape %q at byte %d: want three octal digits", s[i:i+4], i)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// escapeMountPath is the kernel's escaping, the inverse of
// unescapeMountPath (for tests).
func escapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// readMountInfo reads this process's mount table.
func readMountInfo() ([]mountInfo, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountInfo(data)
}

// netNS returns the namespace an nsfs mount holds, as statNS would find it
// through the mount's path.
func (m mountInfo) netNS() (nsID, bool) {
	if m.fsType != "nsfs" {
		return nsID{}, false
	}
	s, ok := strings.CutPrefix(m.root, "net:[")
	if !ok || !strings.HasSuffix(s, "]") {
		return nsID{}, false
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
	if err != nil {
		return nsID{}, false
	}
	return nsID{dev: unix.Mkdev(m.major, m.minor), ino: ino}, true
}
