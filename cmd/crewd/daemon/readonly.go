package daemon

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ReadOnlyTokensFile holds the read-only tokens of the HTTP API, by digest only:
//
//	<id> <sha-256 hex of the token> <created, RFC 3339> <name…>
//
// one line each, 0600 like every secret file. crewctl token create/list/revoke edit it (crewd need not run);
// crewd re-reads it when it changes, at most once a second, so a new or revoked token takes effect within a second.
const ReadOnlyTokensFile = "readonly.tokens"

// readOnlyPrefix marks a read-only token, so one found in a script or a log is recognisable.
const readOnlyPrefix = "crro_"

// maxReadOnlyTokens bounds the file (and what crewd holds).
const maxReadOnlyTokens = 1024

// maxTokenName bounds a token's name.
const maxTokenName = 64

// newTokenID draws a token's id; tests replace it to draw ids that collide, which 32 random bits do only by chance.
var newTokenID = func() ([]byte, error) { return randomBytes(4) }

// ReadOnlyToken is one line of ReadOnlyTokensFile.
type ReadOnlyToken struct {
	ID      string    `json:"id"`
	Digest  string    `json:"-"`
	Created time.Time `json:"created"`
	Name    string    `json:"name,omitempty"`
}

// CreateReadOnlyToken makes a new read-only token named name, records its digest, and returns the token (shown
// once: only its digest is kept) and its record.
func CreateReadOnlyToken(dataDir, name string, now time.Time) (string, ReadOnlyToken, error) {
	name = strings.Join(strings.Fields(name), " ")
	if len(name) > maxTokenName {
		return "", ReadOnlyToken{}, fmt.Errorf("daemon: a token name is at most %d bytes", maxTokenName)
	}
	secret, err := randomBytes(32)
	if err != nil {
		return "", ReadOnlyToken{}, err
	}
	tok := readOnlyPrefix + base64.RawURLEncoding.EncodeToString(secret)
	rec := ReadOnlyToken{Digest: Digest(tok), Created: now.UTC().Truncate(time.Second), Name: name}
	err = editReadOnlyTokens(dataDir, func(ts []ReadOnlyToken) ([]ReadOnlyToken, error) {
		if len(ts) >= maxReadOnlyTokens {
			return nil, fmt.Errorf("daemon: %d read-only tokens exist; revoke some first", len(ts))
		}
		// NB: drawn under the file's lock and redrawn while taken: revoke removes every token with the id it is
		// given, and a second token under an id would be revoked with the first.
		for rec.ID == "" || slices.ContainsFunc(ts, func(t ReadOnlyToken) bool { return t.ID == rec.ID }) {
			id, err := newTokenID()
			if err != nil {
				return nil, err
			}
			rec.ID = hex.EncodeToString(id)
		}
		return append(ts, rec), nil
	})
	if err != nil {
		return "", ReadOnlyToken{}, err
	}
	return tok, rec, nil
}

// RevokeReadOnlyToken removes the token with id; false when there is none.
func RevokeReadOnlyToken(dataDir, id string) (bool, error) {
	found := false
	err := editReadOnlyTokens(dataDir, func(ts []ReadOnlyToken) ([]ReadOnlyToken, error) {
		out := ts[:0]
		for _, t := range ts {
			if t.ID == id {
				found = true
				continue
			}
			out = append(out, t)
		}
		return out, nil
	})
	return found, err
}

// ListReadOnlyTokens returns the recorded tokens (none when the file does not exist).
func ListReadOnlyTokens(dataDir string) ([]ReadOnlyToken, error) {
	b, err := readSecret(filepath.Join(dataDir, ReadOnlyTokensFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseReadOnlyTokens(b)
}

func parseReadOnlyTokens(b []byte) ([]ReadOnlyToken, error) {
	var out []ReadOnlyToken
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, " ", 4)
		if len(f) < 3 || !validDigest(f[1]) {
			return nil, fmt.Errorf("daemon: %s line %d is not \"id digest created [name]\"", ReadOnlyTokensFile, n)
		}
		created, err := time.Parse(time.RFC3339, f[2])
		if err != nil {
			return nil, fmt.Errorf("daemon: %s line %d: %v", ReadOnlyTokensFile, n, err)
		}
		if len(out) == maxReadOnlyTokens {
			// crewctl never writes more; a longer file was edited by hand, and holding it all is not crewd's job.
			return nil, fmt.Errorf("daemon: %s holds more than %d tokens (line %d)", ReadOnlyTokensFile, maxReadOnlyTokens, n)
		}
		t := ReadOnlyToken{ID: f[0], Digest: f[1], Created: created}
		if len(f) == 4 {
			t.Name = f[3]
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

func validDigest(d string) bool {
	_, err := hex.DecodeString(d)
	return len(d) == 64 && err == nil && strings.ToLower(d) == d
}

// editReadOnlyTokens rewrites the file with edit's answer, under an exclusive lock (two crewctl at once do not
// lose each other's change), atomically (written and synced to a temporary file, then renamed into place).
func editReadOnlyTokens(dataDir string, edit func([]ReadOnlyToken) ([]ReadOnlyToken, error)) error {
	if err := MakePrivateDir(dataDir); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dataDir, ReadOnlyTokensFile+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("daemon: lock %s: %w", ReadOnlyTokensFile, err)
	}
	ts, err := ListReadOnlyTokens(dataDir)
	if err != nil {
		return err
	}
	if ts, err = edit(ts); err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString("# crewlog read-only tokens: id sha256(token) created name — edit with crewctl token\n")
	for _, t := range ts {
		fmt.Fprintf(&buf, "%s %s %s %s\n", t.ID, t.Digest, t.Created.UTC().Format(time.RFC3339), t.Name)
	}
	path := filepath.Join(dataDir, ReadOnlyTokensFile)
	tmp, err := os.CreateTemp(dataDir, "."+ReadOnlyTokensFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := writeSecret(tmp, buf.Bytes()); err != nil {
		return fmt.Errorf("daemon: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	return syncDir(dataDir)
}

// ReadOnlyTokens is crewd's view of ReadOnlyTokensFile: it re-reads the file when its identity, size, mode or
// modification time changed since the last look, at most once a second, so crewctl's edits reach a running crewd
// within a second. A file that cannot be read (or is readable by others) counts as holding no token, and the
// problem is reported once per change through warn.
//
// Concurrency: safe for concurrent use.
type ReadOnlyTokens struct {
	path string
	warn func(error)
	now  func() time.Time

	mu      sync.Mutex
	checked time.Time
	stamp   fileStamp
	digests map[string]bool
}

// fileStamp is what tells a changed file. NB: the mode is part of it: a chmod changes neither the size, nor the
// modification time, nor the inode, and a file made readable by others must stop granting at the next look.
type fileStamp struct {
	ino, size int64
	mtime     time.Time
	mode      fs.FileMode
}

// NewReadOnlyTokens watches dataDir's ReadOnlyTokensFile.
func NewReadOnlyTokens(dataDir string, warn func(error)) *ReadOnlyTokens {
	return &ReadOnlyTokens{path: filepath.Join(dataDir, ReadOnlyTokensFile), warn: warn, now: time.Now}
}

// recheckEvery bounds how often Valid looks at the file.
const recheckEvery = time.Second

// Valid reports whether a read-only token with this digest exists.
func (r *ReadOnlyTokens) Valid(digest string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); r.digests == nil || now.Sub(r.checked) >= recheckEvery {
		r.checked = now
		r.reload()
	}
	return r.digests[digest]
}

// reload re-reads the file if it changed (under r.mu).
func (r *ReadOnlyTokens) reload() {
	var st fileStamp
	if fi, err := os.Lstat(r.path); err == nil {
		st.size, st.mtime, st.mode = fi.Size(), fi.ModTime(), fi.Mode()
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.ino = int64(sys.Ino)
		}
	}
	if r.digests != nil && st == r.stamp {
		return
	}
	r.stamp = st
	r.digests = map[string]bool{}
	ts, err := ListReadOnlyTokens(filepath.Dir(r.path))
	if err != nil {
		if r.warn != nil {
			r.warn(err)
		}
		return
	}
	for _, t := range ts {
		r.digests[t.Digest] = true
	}
}
