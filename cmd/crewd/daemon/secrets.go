package daemon

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// File names in the data directory.
const (
	AdminTokenFile = "admin.token"
	ServerKeyFile  = "server.key"
	StoreDir       = "store"
)

// serverKeyLen is the length of a new server key: HMAC-SHA256 wants a key as long as its output, and the broker
// refuses shorter ones.
const serverKeyLen = 32

// MaxTokenLen is the longest token, in bytes, a token file may hold: a hello carries 1..256 UTF-16 units, as many
// bytes for the ASCII tokens crewd mints.
const MaxTokenLen = 256

// AdminToken returns the admin token in dataDir/admin.token, creating the file with a new random token at first
// start. The token is 64 hex chars (256 random bits).
func AdminToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, AdminTokenFile)
	b, err := loadOrCreate(path, func() ([]byte, error) {
		k, err := randomBytes(32)
		return []byte(hex.EncodeToString(k) + "\n"), err
	})
	if err != nil {
		return "", err
	}
	tok, ok := ParseToken(b)
	if !ok {
		return "", fmt.Errorf("daemon: %s must hold one token of 1..%d bytes", path, MaxTokenLen)
	}
	return tok, nil
}

// ParseToken is the token a token file's contents b hold: b without the whitespace about it, which is one token
// (ok) when it is not empty, holds no whitespace and is at most MaxTokenLen bytes long. crewd reads admin.token, and
// crewctl its --token-file, with it.
func ParseToken(b []byte) (tok string, ok bool) {
	tok = string(bytes.TrimSpace(b))
	return tok, tok != "" && len(tok) <= MaxTokenLen && !strings.ContainsAny(tok, " \t\r\n")
}

// ServerKey returns the key in dataDir/server.key, creating the file with 32 random bytes at first start. The
// broker derives the tokens it mints from it, so keeping it across restarts is what keeps issued tokens valid.
func ServerKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, ServerKeyFile)
	key, err := loadOrCreate(path, func() ([]byte, error) { return randomBytes(serverKeyLen) })
	if err != nil {
		return nil, err
	}
	if len(key) < serverKeyLen {
		return nil, fmt.Errorf("daemon: %s holds %d bytes; a server key has at least %d", path, len(key), serverKeyLen)
	}
	return key, nil
}

// Digest is the lowercase hex sha-256 of a token: the only form in which the broker holds the admin token.
func Digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("daemon: random: %w", err)
	}
	return b, nil
}

// loadOrCreate returns the contents of the secret file at path, creating it from gen() when absent.
//
// A secret file must be a regular file (not a symlink, which could point anywhere) that neither group nor others
// may read or write: one that is gets refused rather than fixed, since its secret may already have leaked.
//
// Creation is atomic: the secret is written and synced to a temporary file, then hard-linked into place, so a
// crash never leaves an empty or partial secret, and of two daemons racing the first link wins and the second
// reads the winner's secret.
func loadOrCreate(path string, gen func() ([]byte, error)) ([]byte, error) {
	b, err := readSecret(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	secret, err := gen()
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("daemon: create %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	// NB: every step's error must reach the check below; a lost write or sync error would link an empty or
	// partial secret into place (a full disk does exactly that).
	if err := writeSecret(tmp, secret); err != nil {
		return nil, fmt.Errorf("daemon: write %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readSecret(path)
		}
		return nil, fmt.Errorf("daemon: create %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	return secret, nil
}

// syncFile is (*os.File).Sync, of a file or a directory; tests replace it to make a sync fail, which no file system
// does on demand.
var syncFile = (*os.File).Sync

// writeSecret writes secret to the new temporary file f, syncs and closes it. CreateTemp makes the file 0600; it is
// chmod-ed anyway, in case a future Go or umask quirk differs.
func writeSecret(f *os.File, secret []byte) error {
	err := f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(secret)
	}
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SecretFault is what makes a file unfit to hold a secret.
type SecretFault int

const (
	// SecretFileFit is a regular file only its owner may access.
	SecretFileFit SecretFault = iota
	// SecretFileSymlink could point anywhere.
	SecretFileSymlink
	// SecretFileIrregular is a directory, a device or a FIFO (whose open blocks until something writes to it).
	SecretFileIrregular
	// SecretFileShared is a file group or others may access: its secret may have leaked.
	SecretFileShared
)

// SecretFileFault is what makes the file fi describes (from os.Lstat, or the Stat of the file as opened) unfit to
// hold a secret: crewd's secret files and crewctl's --token-file are refused alike, each caller saying why in its
// own words.
func SecretFileFault(fi fs.FileInfo) SecretFault {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return SecretFileSymlink
	case !fi.Mode().IsRegular():
		return SecretFileIrregular
	case fi.Mode().Perm()&0o077 != 0:
		return SecretFileShared
	}
	return SecretFileFit
}

// OpenSecret opens the secret file at path to read it, as crewd reads its own: a symlink, which could point anywhere,
// and a file that is not a regular one (a FIFO's open would wait for a writer for good) are found before it is
// opened, and what was opened is checked again, opened with O_NONBLOCK and O_NOFOLLOW, so that a FIFO or a symlink
// put in its place since is neither waited on nor followed. fault is the first fault found, with the FileInfo it was
// found on; only with SecretFileFit and no error is f open, for the caller to close. err is Lstat's or the open's.
func OpenSecret(path string) (f *os.File, fi fs.FileInfo, fault SecretFault, err error) {
	if fi, err = os.Lstat(path); err != nil {
		return nil, nil, SecretFileFit, err
	}
	if fault = SecretFileFault(fi); fault != SecretFileFit {
		return nil, fi, fault, nil
	}
	beforeOpenSecret(path)
	if f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0); err != nil {
		return nil, fi, SecretFileFit, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, SecretFileFit, err
	}
	if fault = SecretFileFault(fi); fault != SecretFileFit {
		f.Close()
		return nil, fi, fault, nil
	}
	return f, fi, SecretFileFit, nil
}

// beforeOpenSecret is called between OpenSecret's look at a secret file and its open: tests put another file in its
// place there, as another process could.
var beforeOpenSecret = func(string) {}

func readSecret(path string) ([]byte, error) {
	f, fi, fault, err := OpenSecret(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("daemon: %w", err)
	}
	switch fault {
	case SecretFileSymlink:
		return nil, fmt.Errorf("daemon: %s is a symlink; a secret file must be a regular file", path)
	case SecretFileIrregular:
		return nil, fmt.Errorf("daemon: %s is not a regular file", path)
	case SecretFileShared:
		return nil, fmt.Errorf("daemon: %s has mode %04o: group or others may access it, so its secret may have leaked; "+
			"remove it to have a new one made, or chmod 600 it if you are sure", path, fi.Mode().Perm())
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return b, nil
}

// syncDir makes a new directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("daemon: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := syncFile(d); err != nil {
		return fmt.Errorf("daemon: sync %s: %w", dir, err)
	}
	return nil
}
