package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// HostCPU is how the whole machine's CPU time was spent over a cell, as shares of it (0..1), from the kernel's
// counters (/proc/stat), every process included. It says what the cell's rate was bound by and how far its
// numbers can be trusted: Busy near 1 is a cell bound by CPU, a cell with idle time left is bound by latency
// (syncs, hand-offs); Steal is time the hypervisor gave to other guests while this one had work — on a shared
// virtual machine the largest source of round-to-round spread, and invisible in the process's own CPU time.
type HostCPU struct {
	Busy   float64 // user, nice, system, irq and softirq
	IOWait float64 // idle with a disk request outstanding
	Steal  float64
	Idle   float64
}

// String is "host CPU: busy 71 %, iowait 9 %, steal 14 %, idle 6 %".
func (h *HostCPU) String() string {
	return fmt.Sprintf("host CPU: busy %s, iowait %s, steal %s, idle %s", pct(h.Busy), pct(h.IOWait), pct(h.Steal),
		pct(h.Idle))
}

func pct(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }

// cpuTimes are the machine's cumulative CPU times from /proc/stat's "cpu" line, in the kernel's ticks.
type cpuTimes struct{ busy, iowait, steal, idle uint64 }

// readCPUTimes reads the machine's CPU times; false where /proc/stat is missing or unreadable (not Linux).
func readCPUTimes() (cpuTimes, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTimes{}, false
	}
	return parseCPUTimes(sc.Text())
}

// parseCPUTimes parses the aggregate line of /proc/stat: "cpu  user nice system idle iowait irq softirq steal
// [guest guest_nice]". Guest time is already counted in user and nice, so it is not added again. Kernels before
// 2.6.11 had no steal column: a line of fewer than eight values is refused rather than read as no steal.
func parseCPUTimes(line string) (cpuTimes, bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, false
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		v[i] = n
	}
	user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	return cpuTimes{busy: user + nice + system + irq + softirq, iowait: iowait, steal: steal, idle: idle}, true
}

// hostCPUBetween is the machine's CPU between two readings; nil when either is missing, when no time passed, or
// when a counter went backwards (a reading that cannot be trusted is not reported). The kernel documents iowait as
// unreliable — a CPU's iowait may move into its idle time and the counter decrease — so idle and iowait are taken
// together, which only grows, and iowait's own part is clamped into it.
func hostCPUBetween(a cpuTimes, aok bool, b cpuTimes, bok bool) *HostCPU {
	if !aok || !bok || b.busy < a.busy || b.steal < a.steal || b.idle+b.iowait < a.idle+a.iowait {
		return nil
	}
	busy, steal := b.busy-a.busy, b.steal-a.steal
	idleAll := b.idle + b.iowait - a.idle - a.iowait
	var iowait uint64
	if b.iowait > a.iowait {
		iowait = min(b.iowait-a.iowait, idleAll)
	}
	total := float64(busy + steal + idleAll)
	if total == 0 {
		return nil
	}
	return &HostCPU{Busy: float64(busy) / total, IOWait: float64(iowait) / total, Steal: float64(steal) / total,
		Idle: float64(idleAll-iowait) / total}
}
