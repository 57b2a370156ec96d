package wire

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// KeySize is the length of a cluster key in bytes.
const KeySize = 32

// maxKeyFile bounds what ReadKeyFile reads: a key file is one line.
const maxKeyFile = 1 << 10

// Key is a cluster key: 32 random bytes every member holds. A connection
// whose HELLO proves the key (Sealer) is a member's. String does not print
// it, so that a key cannot end up in a log by accident; Encode does.
type Key [KeySize]byte

// ErrKey is wrapped by the errors of ParseKey and ReadKeyFile.
var ErrKey = errors.New("not a cluster key")

// NewKey returns a new random key.
func NewKey() (Key, error) {
	var k Key
	if _, err := io.ReadFull(rand.Reader, k[:]); err != nil {
		return Key{}, fmt.Errorf("new cluster key: %w", err)
	}
	return k, nil
}

// Encode returns the key file's text: the key in standard base64 (44
// characters), as `bullylab keygen` prints it.
func (k *Key) Encode() string { return base64.StdEncoding.EncodeToString(k[:]) }

func (k Key) String() string { return "cluster-key(redacted)" }

// ParseKey parses what Encode returns; surrounding white space is ignored.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != KeySize {
		return Key{}, fmt.Errorf("%w: want %d base64 characters for %d bytes, as `bullylab keygen` prints", ErrKey, base64.StdEncoding.EncodedLen(KeySize), KeySize)
	}
	return Key(b), nil
}

// ReadKeyFile reads a key file. The file must be a regular file that only
// its owner can read or write (mode 0600 or stricter): a key others can
// read lets them join the cluster as any member. Errors are one line that
// names the file.
func ReadKeyFile(path string) (Key, error) {
	b, err := readSecretFile(path, "cluster key", ErrKey)
	if err != nil {
		return Key{}, err
	}
	if strings.HasPrefix(strings.TrimSpace(string(b)), memberKeyPrefix) {
		return Key{}, fmt.Errorf("cluster key %s: %w: it is a member key (give it as --member-key)", path, ErrKey)
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("cluster key %s: %w", path, err)
	}
	return k, nil
}

// readSecretFile reads the key file at path, a regular file of at most
// maxKeyFile bytes that only its owner can read or write; what names the
// kind of key in errors, which are one line that names the file, and
// notKey is wrapped by the error of a file too long to be a key.
func readSecretFile(path, what string, notKey error) ([]byte, error) {
	// O_NONBLOCK so that a FIFO is refused below instead of blocking here.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, pathErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s: not a regular file (%s)", what, path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s %s: mode %04o lets other users read or change it; run chmod 600 %s", what, path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%s %s: %w: longer than %d bytes", what, path, notKey, maxKeyFile)
	}
	return b, nil
}

// WriteKeyFile writes k to a new file at path, mode 0600; it refuses to
// overwrite an existing file, so that a cluster's key is never replaced by
// accident.
func WriteKeyFile(path string, k Key) error {
	return writeSecretFile(path, "cluster key", k.Encode())
}

// writeSecretFile writes text and a newline to a new file at path, mode
// 0600, and removes it again if that fails; what names the kind of key in
// errors.
func writeSecretFile(path, what, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, pathErr(err))
	}
	// The mode above is subject to the umask, which can only remove bits.
	_, err = f.WriteString(text + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return nil
}

// pathErr drops the *os.PathError around err, whose text repeats the path.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
