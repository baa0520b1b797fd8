package bench

import (
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// HostProbe is what the host gave a fixed piece of work at one moment: the
// speed of one core hashing, and the latency of a small synced write in the
// data directory. The comparison takes one before its rounds and one after
// each, so a reader sees whether the host itself slowed or sped up between
// rounds (shared vCPUs and disks do: the same code has run at half its rate
// and twice its CPU an operation minutes apart), which ratios taken within a
// round are immune to and absolute rates are not.
type HostProbe struct {
	HashMBps  float64       // SHA-256 on one core, MB/s: the best of hashRepeats passes
	SyncP50   time.Duration // a 4 KiB write and fdatasync, median of syncRepeats
	SyncError string        // why the sync probe could not run ("" when it did)
}

const (
	hashBytes   = 16 << 20
	hashRepeats = 3
	syncRepeats = 32
	probePages  = 8 // the pages the sync probe's writes cycle over
)

// probeHost measures the host once, writing its sync probe's file in dir and
// removing it.
func probeHost(dir string) HostProbe {
	buf := make([]byte, hashBytes)
	for i := range buf {
		buf[i] = byte(i)
	}
	best := time.Duration(0)
	for range hashRepeats {
		start := time.Now()
		_ = sha256.Sum256(buf)
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
	}
	p := HostProbe{HashMBps: float64(hashBytes) / 1e6 / max(best.Seconds(), 1e-9)}
	d, err := syncLatency(dir)
	if err != nil {
		p.SyncError = err.Error()
	}
	p.SyncP50 = d
	return p
}

// syncLatency is the median time of syncRepeats 4 KiB writes, each followed
// by an fdatasync, to one file in dir.
//
// NB: into pages written and synced before them, as the file store writes
// into its zero-filled file: a write that extends a file changes its size,
// which the sync after it must write too, and fsync (os.File.Sync) writes the
// inode's times besides; either times a heavier sync than the one reported.
func syncLatency(dir string) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "probe-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	for i := range probePages {
		if _, err := f.WriteAt(page, int64(i)*int64(len(page))); err != nil {
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	ds := make([]time.Duration, 0, syncRepeats)
	for i := range syncRepeats {
		start := time.Now()
		if _, err := f.WriteAt(page, int64(i%probePages)*int64(len(page))); err != nil {
			return 0, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// probesLine renders the probes for the report: each figure before the
// rounds, then after each round.
func probesLine(ps []HostProbe) string {
	if len(ps) == 0 {
		return ""
	}
	hash := make([]string, len(ps))
	sync := make([]string, len(ps))
	for i, p := range ps {
		hash[i] = fmt.Sprintf("%.0f", p.HashMBps)
		sync[i] = fmtDur(p.SyncP50)
		if p.SyncError != "" {
			sync[i] = "–"
		}
	}
	return fmt.Sprintf("Host probe, before the rounds and after each: SHA-256 on one core %s MB/s; a 4 KiB "+
		"write and fdatasync in the data directory, median of %d, %s.\n", strings.Join(hash, ", "), syncRepeats,
		strings.Join(sync, ", "))
}
