package httpapi

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Label bounds: a label takes at most maxLabelValues distinct values (methods and reasons are fixed lists in the
// code, so this only guards against a future change); the rest count as "other". Per-run series exist only for
// runs not ended, at most maxRunSeries of them.
const (
	maxLabelValues = 64
	maxRunSeries   = 1000
)

// Metrics are crewlog's Prometheus metrics. It is the engine's commands.Observer (set it as
// commands.Options.Observer) and is served at /metrics by the Server given it in Options.Metrics; the gauges that
// describe the state (head, slots, connections, budgets) are read at scrape time.
//
// Concurrency: safe for concurrent use.
type Metrics struct {
	reg       *prometheus.Registry
	commands  *prometheus.CounterVec
	rejected  *prometheus.CounterVec
	groupSize prometheus.Histogram
	commit    prometheus.Histogram
	fsync     prometheus.Histogram
	appended  prometheus.Counter
	methods   boundedLabels
	reasons   boundedLabels

	// snap is the last snapshot saved since start (nil: none): one record, so a scrape never reads the position of
	// one snapshot with the size or time of another.
	snap atomic.Pointer[snapshotInfo]

	attachOnce sync.Once
}

// NewMetrics returns the metrics, registered in their own registry (not the process-global one).
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "crewlog_commands_total",
			Help: "Commands the writer took, by method and outcome (admitted, rejected, error)."}, []string{"method", "outcome"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "crewlog_commands_rejected_total",
			Help: "Rejected commands, by method and reason."}, []string{"method", "reason"}),
		groupSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "crewlog_group_size",
			Help: "Commands decided and committed together.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "crewlog_commit_seconds",
			Help: "Time from taking a group to answering it.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "crewlog_fsync_seconds",
			Help: "Time of a group's synced append.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		appended: prometheus.NewCounter(prometheus.CounterOpts{Name: "crewlog_events_appended_total",
			Help: "Events appended to the log since start."}),
		methods: boundedLabels{max: maxLabelValues},
		reasons: boundedLabels{max: maxLabelValues},
	}
	m.reg.MustRegister(m.commands, m.rejected, m.groupSize, m.commit, m.fsync, m.appended)
	return m
}

// Committed implements commands.Observer.
func (m *Metrics) Committed(g *commands.GroupReport) {
	for _, c := range g.Commands {
		method := m.methods.value(c.Method)
		m.commands.WithLabelValues(method, c.Outcome).Inc()
		if c.Outcome == commands.OutcomeRejected {
			m.rejected.WithLabelValues(method, m.reasons.value(c.Reason)).Inc()
		}
	}
	m.groupSize.Observe(float64(len(g.Commands)))
	m.commit.Observe(g.Commit.Seconds())
	if g.Append > 0 {
		m.fsync.Observe(g.Append.Seconds())
	}
	m.appended.Add(float64(g.Events))
}

// snapshotInfo is what the gauges tell of a snapshot.
type snapshotInfo struct {
	position uint64
	bytes    int
	at       time.Time
}

// Snapshotted implements commands.Observer.
func (m *Metrics) Snapshotted(position uint64, bytes int, at time.Time) {
	m.snap.Store(&snapshotInfo{position: position, bytes: bytes, at: at})
}

// boundedLabels maps label values to themselves until max distinct ones were seen, then to "other".
type boundedLabels struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func (b *boundedLabels) value(v string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[v] {
		return v
	}
	if len(b.seen) >= b.max {
		return "other"
	}
	if b.seen == nil {
		b.seen = make(map[string]bool)
	}
	b.seen[v] = true
	return v
}

// attach registers the scrape-time collector of s (once).
func (m *Metrics) attach(s *Server) {
	m.attachOnce.Do(func() { m.reg.MustRegister(&stateCollector{s: s, m: m}) })
}

// stateCollector reads the gauges at scrape time.
type stateCollector struct {
	s *Server
	m *Metrics
}

var (
	descHead        = prometheus.NewDesc("crewlog_log_head", "The last durable position the published state reflects.", nil, nil)
	descSlotsHeld   = prometheus.NewDesc("crewlog_slots_held", "Slots of the pool held by delegations in flight.", nil, nil)
	descSlotsCap    = prometheus.NewDesc("crewlog_slots_capacity", "Capacity of the slot pool.", nil, nil)
	descConns       = prometheus.NewDesc("crewlog_connections", "Open socket connections by role (pending: no hello yet).", []string{"role"}, nil)
	descSubscribers = prometheus.NewDesc("crewlog_subscribers", "Socket connections holding an events.subscribe subscription.", nil, nil)
	descResyncs     = prometheus.NewDesc("crewlog_resyncs_total", "Resyncs sent to slow subscribers, by transport (socket, sse).", []string{"transport"}, nil)
	descRequests    = prometheus.NewDesc("crewlog_requests_total", "Socket requests answered, by method (other: one the server does not answer) and answer (ok, or the error code), those refused before the engine included.", []string{"method", "answer"}, nil)
	descStreams     = prometheus.NewDesc("crewlog_http_streams", "Open HTTP event streams.", nil, nil)
	descEvicted     = prometheus.NewDesc("crewlog_http_connections_evicted_total", "HTTP connections closed to make room for a new one at MaxConns, by their state then (idle, new, active: a request in progress that holds no read turn nor stream).", []string{"state"}, nil)
	descSnapAge     = prometheus.NewDesc("crewlog_snapshot_age_seconds", "Age of the last snapshot written since start.", nil, nil)
	descSnapBytes   = prometheus.NewDesc("crewlog_snapshot_bytes", "Size of the last snapshot written since start.", nil, nil)
	descSnapPos     = prometheus.NewDesc("crewlog_snapshot_position", "Position of the last snapshot written since start.", nil, nil)
	descGranted     = prometheus.NewDesc("crewlog_budget_tokens_granted", "Delegation tokens granted to the tasks of a run not ended.", []string{"run"}, nil)
	descSpent       = prometheus.NewDesc("crewlog_budget_tokens_spent", "Delegation tokens spent by the tasks of a run not ended.", []string{"run"}, nil)
	descReady       = prometheus.NewDesc("crewlog_engine_up", "1 while the engine accepts commands, 0 after it failed stop.", nil, nil)

	// The storage engine's (eventlog.StorageStats): signs that flushes and compactions fall behind the writes.
	descL0Files     = prometheus.NewDesc("crewlog_storage_l0_files", "Tables in the storage engine's level 0.", nil, nil)
	descL0Sublevels = prometheus.NewDesc("crewlog_storage_l0_sublevels", "Sublevels of the storage engine's level 0: what a read that misses the memtables checks; writes stall when there are too many.", nil, nil)
	descDebt        = prometheus.NewDesc("crewlog_storage_compaction_debt_bytes", "Bytes the storage engine estimates its compactions must rewrite to be back in shape.", nil, nil)
	descCompactions = prometheus.NewDesc("crewlog_storage_compactions_total", "Compactions the storage engine finished since start.", nil, nil)
	descFlushes     = prometheus.NewDesc("crewlog_storage_flushes_total", "Memtable flushes the storage engine finished since start.", nil, nil)
	descWALBytes    = prometheus.NewDesc("crewlog_storage_wal_bytes_written_total", "Bytes written to the write-ahead log since start.", nil, nil)
	descFlushBytes  = prometheus.NewDesc("crewlog_storage_flush_bytes_total", "Bytes memtable flushes wrote to tables since start.", nil, nil)
	descCompRead    = prometheus.NewDesc("crewlog_storage_compaction_bytes_read_total", "Bytes compactions read since start.", nil, nil)
	descCompWritten = prometheus.NewDesc("crewlog_storage_compaction_bytes_written_total", "Bytes compactions wrote since start.", nil, nil)
	descDiskBytes   = prometheus.NewDesc("crewlog_storage_disk_bytes", "Space the store's tables and write-ahead logs take on disk.", nil, nil)
	descStalls      = prometheus.NewDesc("crewlog_storage_write_stalls_total", "Times since start the storage engine held writes back until flushes or compactions caught up.", nil, nil)
	descStallSecs   = prometheus.NewDesc("crewlog_storage_write_stall_seconds_total", "Time the storage engine's write stalls lasted since start, one going on included.", nil, nil)
	descFilterBytes = prometheus.NewDesc("crewlog_outcome_filter_bytes", "Memory of the filter that proves new command ids unrecorded: 2 bytes per outcome in the store.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHead, descSlotsHeld, descSlotsCap, descConns, descSubscribers, descResyncs,
		descRequests, descStreams, descEvicted, descSnapAge, descSnapBytes, descSnapPos, descGranted, descSpent, descReady,
		descL0Files, descL0Sublevels, descDebt, descCompactions, descFlushes, descWALBytes, descFlushBytes, descCompRead,
		descCompWritten, descDiskBytes, descStalls, descStallSecs, descFilterBytes} {
		ch <- d
	}
}

// activeStatuses are the run statuses that have a per-run series.
var activeStatuses = []projections.RunStatus{projections.RunQueued, projections.RunPlanning, projections.RunRunning,
	projections.RunBlocked}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	var (
		head uint64
		sl   projections.Slots
		runs projections.RunPage
	)
	s.opts.Engine.Read(func(st *projections.State) {
		head, sl = st.Position, st.Slots()
		runs, _ = st.Runs(projections.RunFilter{Statuses: activeStatuses, Limit: maxRunSeries})
	})
	gauge(descHead, float64(head))
	gauge(descSlotsHeld, float64(sl.Held))
	gauge(descSlotsCap, float64(sl.Capacity))
	up := 1.0
	if s.opts.Engine.Err() != nil {
		up = 0
	}
	gauge(descReady, up)
	for _, r := range runs.Runs {
		var granted, spent int64
		// One short read per run: the writer never waits for the whole scrape.
		s.opts.Engine.Read(func(st *projections.State) { granted, spent = st.LedgerTotals(r.RunID) })
		gauge(descGranted, float64(granted), r.RunID)
		gauge(descSpent, float64(spent), r.RunID)
	}
	if b := s.opts.Broker; b != nil {
		bs := b.Stats()
		for _, role := range []string{events.RoleAdmin, events.RoleOrchestrator, events.RoleWorker, "pending"} {
			gauge(descConns, float64(bs.Connections[role]), role)
		}
		gauge(descSubscribers, float64(bs.Subscribers))
		ch <- prometheus.MustNewConstMetric(descResyncs, prometheus.CounterValue, float64(bs.Resyncs), "socket")
		for _, r := range bs.Requests {
			ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(r.N), r.Method, r.Answer)
		}
	}
	ch <- prometheus.MustNewConstMetric(descResyncs, prometheus.CounterValue, float64(s.streams.resyncs.Load()), "sse")
	gauge(descStreams, float64(s.streams.open()))
	var idle, fresh, busy uint64
	s.mu.Lock()
	if l := s.ln; l != nil {
		idle, fresh, busy = l.evictedIdle.Load(), l.evictedNew.Load(), l.evictedBusy.Load()
	}
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(idle), "idle")
	ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(fresh), "new")
	ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(busy), "active")
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	st := s.opts.Log.StorageStats()
	gauge(descL0Files, float64(st.L0Files))
	gauge(descL0Sublevels, float64(st.L0Sublevels))
	gauge(descDebt, float64(st.CompactionDebtBytes))
	counter(descCompactions, float64(st.Compactions))
	counter(descFlushes, float64(st.Flushes))
	counter(descWALBytes, float64(st.WALBytesWritten))
	counter(descFlushBytes, float64(st.FlushBytes))
	counter(descCompRead, float64(st.CompactionBytesRead))
	counter(descCompWritten, float64(st.CompactionBytesWritten))
	gauge(descDiskBytes, float64(st.DiskBytes))
	counter(descStalls, float64(st.WriteStalls))
	counter(descStallSecs, st.WriteStallTime.Seconds())
	gauge(descFilterBytes, float64(st.OutcomeFilterBytes))
	if snap := c.m.snap.Load(); snap != nil {
		gauge(descSnapAge, time.Since(snap.at).Seconds())
		gauge(descSnapBytes, float64(snap.bytes))
		gauge(descSnapPos, float64(snap.position))
	}
}

// GET /metrics
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, _ principal) {
	m := s.opts.Metrics
	if m == nil {
		writeError(w, notFound("metrics are not enabled"))
		return
	}
	// Only a credential reads them, so no cache may keep them: the API's JSON answers say the same (writeBody).
	w.Header().Set("Cache-Control", "no-store")
	promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}
