package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Machine describes where a comparison ran.
type Machine struct {
	NProc      int
	CPU        string
	Kernel     string
	FS         string // file system type of the data directory (from /proc/mounts)
	GoVersion  string
	GOOS, Arch string
}

// describeMachine reads what it can; unknown fields say so.
func describeMachine(dataDir string) Machine {
	m := Machine{NProc: runtime.NumCPU(), CPU: "unknown", Kernel: "unknown", FS: "unknown",
		GoVersion: runtime.Version(), GOOS: runtime.GOOS, Arch: runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	m.FS = fsOf(dataDir)
	return m
}

// fsOf is the type of the longest mount point containing dir.
func fsOf(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "unknown"
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "unknown"
	}
	best, typ, opts := "", "unknown", ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		mp := f[1]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, typ, opts = mp, f[2], f[3]
		}
	}
	if typ == "unknown" {
		return typ
	}
	return fmt.Sprintf("%s (%s)", typ, opts)
}
