package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"time"
)

// ProfileOptions ask Compare for profiles of one implementation's timed
// cells: a CPU profile and an allocation profile of each cell's timed run
// (warm-up and window; not the store's opening, setup or read-back).
type ProfileOptions struct {
	Prefix string // files are Prefix-<impl>-<n>.cpu.pprof, .allocs.pprof and .allocs-base.pprof; "" profiles nothing
	Impl   string // the implementation profiled (default crewlog)
	// Trace also writes an execution trace of each profiled cell to
	// Prefix-<impl>-<n>.trace: which goroutine ran, and which waited for a
	// processor, when (`go tool trace`; its -pprof=sched is the waits). It
	// traces this process: a socket cell's clients, not its server.
	Trace bool
}

// cellProfiling is what runCell profiles of one cell: nothing when prefix
// is "".
type cellProfiling struct {
	prefix string
	trace  bool
}

// cellProfile profiles one timed run. The allocation profile is cumulative
// over the process, so the one taken as the run starts is written beside
// the one taken as it ends: `go tool pprof -sample_index=alloc_space -base
// X.allocs-base.pprof X.allocs.pprof` is the run's own.
type cellProfile struct {
	path     string
	stopCPU  func()
	base     bytes.Buffer
	ms0      runtime.MemStats
	gc0      [2]float64
	began    time.Time
	progress io.Writer
}

// startCellProfile starts profiling into files named by what.prefix; nil
// when it is "".
func startCellProfile(what cellProfiling, progress io.Writer) (*cellProfile, error) {
	prefix := what.prefix
	if prefix == "" {
		return nil, nil
	}
	p := &cellProfile{path: prefix, progress: progress}
	if err := pprof.Lookup("allocs").WriteTo(&p.base, 0); err != nil {
		return nil, err
	}
	stop, err := startCPUProfile(prefix + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	p.stopCPU = stop
	if what.trace {
		f, err := os.Create(prefix + ".trace")
		if err == nil {
			if err = trace.Start(f); err != nil {
				_ = f.Close()
			}
		}
		if err != nil {
			stop()
			return nil, err
		}
		p.stopCPU = func() { trace.Stop(); _ = f.Close(); stop() }
	}
	runtime.ReadMemStats(&p.ms0)
	p.gc0 = gcCPU()
	p.began = time.Now()
	return p, nil
}

// stop ends the profile, writes the allocation profiles and reports the
// collector's work over the run.
func (p *cellProfile) stop(ops int64) error {
	if p == nil {
		return nil
	}
	elapsed := time.Since(p.began)
	p.stopCPU()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gc := gcCPU()
	err := errors.Join(os.WriteFile(p.path+".allocs-base.pprof", p.base.Bytes(), 0o600),
		writeAllocs(p.path+".allocs.pprof"))
	if ops > 0 {
		fmt.Fprintf(p.progress, "profile %s: %d ops in %s; %d GCs, %.1f allocs and %.0f B per op, heap in use %d "+
			"MiB at the end; the collector %.0f%% of the process's CPU\n", p.path, ops,
			elapsed.Round(time.Millisecond), ms.NumGC-p.ms0.NumGC, float64(ms.Mallocs-p.ms0.Mallocs)/float64(ops),
			float64(ms.TotalAlloc-p.ms0.TotalAlloc)/float64(ops), ms.HeapInuse>>20,
			100*(gc[0]-p.gc0[0])/(gc[1]-p.gc0[1]))
	}
	return err
}

// gcCPU is the collector's CPU time and the process's busy CPU time (the
// runtime's estimates: all it could have used less the idle), in seconds.
func gcCPU() [2]float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"},
		{Name: "/cpu/classes/idle:cpu-seconds"}}
	metrics.Read(s)
	var v [3]float64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			v[i] = s[i].Value.Float64()
		}
	}
	return [2]float64{v[0], v[1] - v[2]}
}

// writeAllocs writes the process's allocation profile (cumulative since it
// started) to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
}
