// Package daemon is crewd: configuration (flags, a JSON config file, XDG defaults), the secret files of the data
// directory, and the start-up and shutdown order of the event log, the engine and the broker. cmd/crewd's main
// only calls Main.
//
// # Data directory
//
//	<data>/admin.token   the admin credential, 64 hex chars (0600)     created at first start, then reused
//	<data>/server.key    32 random bytes keying minted tokens (0600)   created at first start, then reused
//	<data>/store/        the event log (package eventlog)
//	<data>/readonly.tokens  read-only tokens of the HTTP API, digests only (0600)   written by crewctl token
//	                        (readonly.tokens.lock serialises two crewctl editing it at once)
//
// # Guarantees
//
//   - crewd runs with umask 077. A data directory or store that another user owns or that group or others may
//     reach is refused (exit 1), never chmod-ed.
//   - crewd makes a new store only where it hides no copy: a data directory without a store that is a store itself
//     (a checkpoint), or that holds the staging directory of a crewctl restore, copy of a stream or backup that did
//     not finish, is refused (exit 1) with what to do, and nothing is written there.
//   - Below --min-free-mib of free space crewd does not start (Pebble never opens on a full disk, where it waits
//     for its recovery flush, retried a few times a second, until there is space), and while running it answers
//     writes disk-full before Pebble fails; nothing refused is recorded, reads keep working. A flush that fails
//     past that guard fails the log stop, as a failed commit does: the engine stops and crewd exits 1.
//   - Opening the store and rebuilding the state end at the first SIGINT/SIGTERM or at --open-timeout (exit 1).
//   - A commit error that stops the engine ends crewd: reads are answered for 2 s, then it shuts down and exits
//     1, for its supervisor to restart it (docs/crewd.service).
//   - Every problem with the flags and the config file is reported at once, each naming the flag or file key to
//     fix (a config file's in the order of its keys, the same text at every start); Main then exits 2 without
//     touching the data directory.
//   - A secret file is created atomically (written, synced, then linked into place), so a crash never leaves an
//     empty or partial one. A secret file that is a symlink, not a regular file, or accessible to group or others
//     is refused, never silently fixed: its secret may have leaked.
//   - The admin token never reaches stdout, the logs or the event log; the broker gets only its sha-256 digest.
//   - Keeping server.key and the store keeps every issued token valid across restarts (SPEC §5).
//   - The dashboard's HTTP API (package broker/httpapi) listens on --http (default 127.0.0.1:7717; "" turns it off),
//     loopback only unless --http-allow-remote; its session cookie is Secure only with --http-secure-cookie (for
//     browsers that reach it over https, through a proxy in front: crewd serves plain HTTP). A default address
//     already in use turns HTTP off with a warning; an address given explicitly that cannot be bound stops the start.
//     crewd prints a one-time login link (crewd: dashboard URL) before the socket line; the link's code is a secret
//     for whoever reads stdout, valid 10 minutes (httpapi.LoginCodeLifetime), so that stdout read later opens
//     nothing. Every login link names --http-public-url (the proxy's address, https with --http-secure-cookie,
//     checked at Load), else crewd's listener; with --http-secure-cookie and no public URL crewd logs a warning that
//     the links must be opened through the proxy's https address.
//   - Shutdown on SIGINT or SIGTERM: the pi-crew follower (--follow-picrew) sends what it has read and its
//     checkpoints while the broker still serves; then the broker stops accepting and closes connections, the engine
//     finishes the group it is committing, the log closes; exit 0 (1 if the signal came while the store was opened
//     or the state rebuilt, above). A second signal during shutdown kills the process.
//   - Memory: the Go heap's soft limit (debug.SetMemoryLimit) is what --memory-mib (default 256) leaves beside the
//     store's cache, three memtables and 32 MiB for the binary (without cgo the cache and memtables are on the Go
//     heap, and only the binary is taken out), at least 64 MiB, or a quarter above the live heap when that is more
//     (memory.go); GOMEMLIMIT, when set, overrides it. With cgo and glibc, malloc keeps 2 arenas,
//     and crewd returns the arenas' free pages to the system every 2 s and before each snapshot (malloc.go).
//   - The engine clock is time.Now. Only a test build tagged crewlog_faults (clock_faults.go) reads an offset from
//     the file named by CREWD_TEST_CLOCK_OFFSET_FILE, so a test can make the clock jump; no real build has it.
//   - The store is on the operating system's file system. Only a test build tagged crewlog_faults (disk_faults.go)
//     puts it on eventlog.DiskFaults, driven by the file named by CREWD_TEST_DISK_FAULTS_FILE and SIGUSR1, so a
//     test can make the disk full, stall it or fail an fsync; no real build has it.
//
// # Not guaranteed
//
//   - Exit 1 on every failed write: when the failing fsync is the one Pebble makes while closing a WAL (a memtable
//     rotation, or the flush of the recovered state at open), Pebble panics and crewd exits 2; so it does on any
//     error Pebble cannot continue from (eventlog.FatalError, which nothing in crewd recovers). Nothing unsynced was
//     acknowledged either way, and the supervisor restarts it all the same (Restart=on-failure).
//   - Single instance: two daemons on one data directory are refused by the store's lock, not by this package.
//   - The model catalog is read once at start; change it by restarting (the change is then recorded as
//     engine.configured).
package daemon
