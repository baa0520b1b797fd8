// Package eventlog is crewlog's storage: an append-only, gapless,
// checksummed, hash-chained event log in Pebble. It is the only package of
// crewlog that imports Pebble, apart from crewbench's plain-Pebble baseline
// (cmd/crewbench/bench/plainpebble), which measures Pebble itself.
//
// # Guarantees
//
//   - Append commits a group of writes atomically in one synced batch and
//     returns only after the fsync. Positions are global, gapless from 1 and
//     assigned inside the commit; stream versions are gapless from 1 per
//     stream. An append refused before the hand-off to Pebble (bad input,
//     version conflict, duplicate command id) leaves no trace and no gap.
//     A stream's version not cached is read from its last index entry, which
//     an append refuses (a *CorruptError naming its key) wherever Verify
//     would, rather than hand out a version from a damaged one.
//
//   - Stage is Append cut at the hand-off to Pebble, for a writer that
//     prepares the next append while one syncs: it assigns and hands off as
//     Append does, in call order, and Staged.Wait awaits the sync and makes
//     the append visible. A staged append is durable only if every append
//     staged before it is (Pebble syncs its WAL in order, and after a failed
//     sync every later one fails). The outcomes of a failed append are never
//     served, though Pebble's memtable holds them.
//
//   - Readers (Read, ReadStream, Event, Outcome, Head) never observe an
//     append before it is durable: Pebble makes a batch visible before its
//     WAL sync, so every read is bounded by the durable head. An event
//     Read returns owns its memory; ReadTransient, ReadStreamTransient and
//     VerifyOptions.Visit make the same checks but hand out events that
//     alias Pebble's memory until the iterator moves, for a reader that
//     copies what it keeps (audit's replay and verify, the dashboard's
//     newest-first pages of a run's events) and would otherwise pay a copy
//     per record.
//
//   - Every record carries a crc32c and a SHA-256 hash chained to the
//     previous record; the head (last position + hash) is written in the same
//     batch as the records it covers. Verify detects any flipped byte in any
//     record, index entry, outcome, snapshot or the head, and names the first
//     bad position. Verify checks each outcome against the records of its
//     command and each record stamped with a command id against the outcome
//     of its command, so an outcome that wrote events cannot be removed or
//     shortened unseen. NB: an outcome that wrote no event is found in no
//     record: a flipped byte in its key, or its removal whole, is not
//     detected unless its principal's tally then counts more such outcomes
//     than remain, and its command id would be decided again.
//
//   - Fail stop: after a write or sync error every later Append returns
//     ErrFailed. Reopening recovers every acknowledged append; the failed
//     append is wholly present or wholly absent. A snapshot's save and a
//     checkpoint sync the WAL first, and fail stop alike when that sync
//     fails; once a failure is recorded (the failed append's Wait has
//     returned) they, views and summaries are refused (ErrFailed) too, since
//     the WAL keeps the error and Pebble panics on a write that meets it.
//     Every write is followed by a sync, awaited at once or, for derived
//     data (views, summaries), an append's unsynced copy
//     (AppendFromUnsynced) and a format step's chunks, by the next of
//     these, the next synced write, an append included, and Close: an
//     error of a write left to the WAL's background would reach no one but
//     the next writes, as a panic (derived_sync.go). An append awaits it
//     only while one is pending, and holds the lock the writes made without
//     a sync take from that wait to its hand-off to Pebble, so that none
//     comes between: a run's appends that follow no view or summary pay one
//     uncontended lock for it and keep staging while one syncs (the lock is
//     not held through the sync). The log also learns of a failed write or
//     sync of a WAL file from its file system, before Pebble's WAL keeps
//     the error, and refuses every hand-off after it, whatever sync has been
//     awaited yet (wal_failure.go): no second record reaches the WAL after
//     its error, where one that panicked could (a view written after an
//     append whose bytes failed, before that append's Wait). Failed and Err
//     tell a writer that keeps state of the log (the commands engine) of the
//     failure at once, whichever write met it.
//
//   - A flush that fails (a full disk refusing its table) fails the log stop
//     too, though it loses nothing (the WAL holds what it would have
//     written): Pebble retries it without end, and holds every write back
//     once two memtables wait for it, an append among them, with no way out
//     but a flush that succeeds. Failed stop at the first failure, the log
//     refuses every write long before that (a memtable later), and its
//     writer stops with it; Close ends the retries. Each failed flush holds
//     Pebble back for 100 ms before the next try (flush_failure.go), where
//     it retried at once, tens of thousands of times a second. Open of a
//     store whose recovered state the disk will not take waits so: Pebble's
//     Open waits for that flush, and completes once the disk has space. A
//     flush that fails only after the appends were held back (a slow disk
//     that then fills up) leaves one append waiting in Pebble for good: the
//     failure is recorded without the log's lock, which that append holds,
//     so Failed and Err tell of it all the same, the writes other than
//     appends, made before the failure or after it, are refused at it
//     (none waits for the locks that append holds), StorageStats and
//     Outcome answer, and so does the Wait of an append staged before it,
//     once synced; but Close cannot end (it waits for that append), and the
//     process exits without it (crewd bounds its wait). Nothing
//     acknowledged is lost: it is in the WAL,
//     which the next Open replays and flushes; the held append was never
//     acknowledged.
//
//   - An error Pebble cannot continue from (its logger's Fatalf: a failed
//     write or sync of its MANIFEST, a commit its pipeline cannot finish, a
//     table that fails its checksum) fails the log stop, reads included:
//     every later Append, write and read is refused (ErrFailed, wrapping the
//     *FatalError) and reaches no Pebble, whose state is in doubt (an append
//     on it waited for good). Then the log panics, with that *FatalError, on
//     the goroutine that called into Pebble. Never recover it and go on:
//     every recover() of a goroutine that may call the log calls
//     RepanicFatal first, so that the process exits (status 2) and its
//     supervisor restarts it; the next Open recovers every acknowledged
//     append.
//
//   - SaveSnapshot is atomic and durable: a crash at any point leaves the
//     previous snapshot or the new one, whole and sealed, never neither.
//     The snapshot is ingested as a table of its own with the older ones
//     excised in the same step, so its bytes never pass through the WAL, the
//     memtable, a flush or a compaction of the events. It is stored in
//     sealed chunks of 64 KiB under a header that holds its size, chunk
//     count and checksum, so a chunk lost, added or moved is caught too.
//
//   - Nothing is ever deleted but superseded snapshots and stream views,
//     the versions of stream summaries no state can read any more
//     (summary_index.go) and, by the step to format 3, the format-2 outcome
//     keys it has moved. The events, the stream index and the outcomes are
//     never compacted or pruned: only derived data, which the log can give
//     again, is.
//
//   - Snapshots, stream views and stream summaries are derived data, sealed
//     like every value: a snapshot is saved with a sync, and after a sync of
//     the WAL, so every view and summary written before it is durable with
//     it; a view or a summary is followed by a sync it does not wait for,
//     only for the fail stop above (a crash may lose the last ones, never
//     corrupt one); readers use each only for the position it is stamped
//     with. Summaries are versioned by that position and
//     never overwritten: a reader asks for the newest at or before a
//     position (summary.go). A version older than the newest at or before
//     the newest snapshot's position can no longer be read, and goes in
//     the same batch that writes a newer one, or once a later snapshot is
//     saved; the index records how many streams it holds, under each of
//     its prefixes alone, so that a caller knowing how many it should hold
//     tells a removed index in O(1) (summary_index.go). A single summary
//     removed by hand while the count stayed is seen only by Verify, which
//     walks the index: the count cannot tell it.
//
//   - Checkpoint copies on the operating system's file system are private
//     (directories 0700, files 0600) whatever the umask, never inside the
//     store, and built in a StagingDir beside the destination: a checkpoint
//     killed part-way leaves it, and the next one beside it removes it.
//
//   - Pebble's errors reach the Logger at most once per 10 s per kind, with
//     the count left out: a flush retried on a full disk does not flood it
//     (nor can it: its retries are paced, above).
//     Its write stalls (writes held back until flushes or compactions catch
//     up) reach it at most once a minute, with the count since the last line.
//
//   - StorageStats reads what the storage engine is doing, for metrics:
//     level 0's tables and sublevels, the compaction debt, compactions,
//     flushes, the bytes the WAL, flushes and compactions wrote (and
//     compactions read), the space on disk, the write stalls and their time,
//     and the outcome filter's memory. It takes Pebble's metrics (a few
//     locks, no I/O): a scrape's call, not a hot path's.
//
// DiskFaults (diskfaults.go), a file system that fails or stalls writes on
// demand, exists only in test builds tagged crewlog_faults.
//
//   - AppendFrom appends a group copied from another ordered log (a
//     JetStream stream) together with its sequence there, so a copier
//     resumes after a restart without applying a group twice or skipping
//     one. A copy that appends the same writes in the same order has the
//     same positions, versions, outcomes and hash chain as the original.
//     AppendFromUnsynced does the same without awaiting the fsync, for a
//     copy whose source is itself durable: a crash loses a suffix of such
//     groups, each whole with its sequence, and the copy resumes from
//     the last one it holds; a later synced append makes them durable.
//     Check refuses what Append would refuse, without appending, so such a
//     writer never commits elsewhere a group its copy would refuse;
//     Outcomes walks the outcome table for a copy into another backend.
//
// It does not interpret event types or payloads, and it does not group
// commits itself: concurrent appenders share WAL fsyncs through Pebble's
// commit pipeline, and the single-writer engine above batches many commands
// into one Append.
//
// # Verify
//
// Verify reads one consistent Pebble snapshot (appends may continue) up to
// the durable head at its start, and checks, in this order:
//
//   - the format marker decodes and is not newer than this build's (a
//     *FormatError), and the head decodes;
//   - every record: its key, its checksum and structure, that positions run
//     gapless from 1 to the head (no record missing, none beyond it) and
//     each matches its key, the hash chain, and that every stream's
//     versions run gapless from 1; then that the head names the last
//     position and its hash;
//   - the stream index: each stream's entries cover its versions 1..n
//     exactly once, in order, each pointing at its record;
//   - from format 2 on, the stream catalog: each stream has the entry its
//     version 1 implies (that position and its record's time), and no entry
//     names a stream the log does not have;
//   - the outcome table: each outcome's key and seal, that its positions lie
//     inside the log, and that its first and last records are of its
//     command and, given VerifyOptions.Principal, of its principal; a store
//     before format 3 has its outcomes in the older layout ('c'), checked
//     alike by command id, and a format-3 store holds none of that layout;
//   - the converse: every record stamped with a command id lies inside the
//     positions an outcome of its command (and principal) names, and no
//     record inside another command's (verify_covered.go);
//   - the snapshot slot: every snapshot, whole or in chunks, sealed,
//     complete (header, chunks, checksum of the whole) and not beyond the
//     head;
//   - the views: key, seal, and a position that is one of its stream's;
//   - the summaries: keys, seals, a position that is one of its stream's,
//     each version stored under both its keys alike, and the counts (by
//     stream and by ordinal) agreeing with each other and with the keys;
//   - the tallies: keys, seals, no principal's tally above its outcomes
//     with no event, and no group's above all of those;
//   - the source sequence AppendFrom records: sealed and eight bytes.
//
// The first problem is a *CorruptError (wrapping ErrCorrupt) naming the
// first bad position when the damage is in a record, else the damaged key;
// a block of a table that fails its checksum is one too, naming the table.
// A read that fails (an I/O error) is returned as it came. VerifyReport
// counts what was checked.
//
// # Key layout
//
//	key                                      value
//	'e' | pos:8 BE                           event record (below)
//	's' | uvarint len | stream | ver:8 BE    stream index entry: the positions one append
//	                                         gave the stream from version ver on:
//	                                         uvarint n | uvarint pos_1 | uvarint deltas … (see index.go)
//	'o' | uvarint len | principal | id       sealed outcome (format 3)
//	'c' | command id                         sealed outcome (formats 1 and 2; moved by the step to 3)
//	't' | uvarint len | principal            sealed uvarint: how many of the principal's outcomes wrote
//	                                         no event, set with them (tally.go)
//	'g' | uvarint len | group                sealed uvarint: the same count for a group of principals
//	                                         (SetTallyGroup), set with them (tally.go)
//	'n' | pos:8 BE | 0:4 BE                  sealed [size:8 BE | chunks:4 BE | crc32c:4 BE]: the newest
//	                                         snapshot's header (only the newest is kept)
//	'n' | pos:8 BE | i:4 BE                  sealed chunk i (1 ≤ i ≤ chunks) of that snapshot, 64 KiB
//	                                         each but the last (snapshot_chunks.go)
//	'n' | pos:8 BE                           sealed whole snapshot (stores written before chunks)
//	'r' | stream                             sealed [first pos, time] (stream catalog, format 2)
//	'v' | uvarint len | stream               sealed [pos:8 BE | data]: the stream's view, derived
//	                                         data stamped with a position of the stream (view.go)
//	'u' | uvarint len | stream | pos:8 BE    sealed [ord:8 BE | data]: a version of the stream's
//	                                         summary, filed under the caller's ordinal (summary.go)
//	'w' | ord:8 BE | pos:8 BE                sealed [uvarint len | stream | data]: the same, in
//	                                         ordinal order
//	'u', 'w' (the prefix alone)              sealed streams:8 BE: how many streams the index of
//	                                         summaries holds (summary_index.go)
//	'm' "format"                             sealed uint32 BE format version
//	'm' "head"                               sealed pos:8 BE | hash:32
//	'm' "source"                             sealed seq:8 BE: the sequence, in the log this
//	                                         store copies, of the last group AppendFrom appended
//
// # Event record
//
//	+---------+-------------+--------------+---------------------------------+
//	| ver:1   | crc32c:4 BE | hash:32      | body (msgpack array of 12)      |
//	+---------+-------------+--------------+---------------------------------+
//	          crc32c (Castagnoli) covers hash ‖ body
//	          hash = SHA-256(hash of position-1 ‖ body); position 1 chains to 32 zero bytes
//
//	body = [ position uint, stream str, streamVersion uint, type str,
//	         schemaVersion uint, time int (unix ns), commandId str,
//	         causationId str, correlationId str, actorRole str, actorTask str,
//	         payload bin (the event's msgpack payload) ]
//
// The body is canonical msgpack (shortest encodings), written and read by a
// hand-made codec: decoding is the cost of replay, and a reflection-based
// decode of this envelope is an order of magnitude slower.
//
// # Sealed values
//
//	+---------+-------------+------------------+
//	| ver:1   | crc32c:4 BE | payload          |
//	+---------+-------------+------------------+
//
// An outcome's payload is a msgpack array [first uint, count uint, code str,
// reason str, result bin, fingerprint bin]; code "" means accepted (formats
// 1 and 2: the first five).
//
// # Outcomes by principal
//
// The outcome table is keyed by (principal, command id): the principal is
// the caller's opaque, canonical encoding of whose id it is (crewlog's is
// events.Principal.Key), length-prefixed so that no two pairs share a key
// whatever bytes they hold, and under a prefix of its own ('o', not 'c'),
// so keys of the old and new layouts never meet while the step to format 3
// runs. Outcome(principal, id) never looks at another principal's outcome
// under the same id. The fingerprint is the caller's digest of the request;
// the log stores it and compares nothing.
//
// Outcome and the duplicate check of Append first ask a bounded in-memory
// index of the outcomes this log recorded since it was opened (recent.go;
// Options.RecentOutcomes and RecentOutcomeBytes bound it by count and
// bytes, oldest out first). An outcome enters it once its append has
// synced, exactly as the table holds it, and outcomes are never rewritten,
// so it answers what Pebble would. A miss then asks an in-memory filter of
// every outcome key the store holds (outcome_filter.go): fed by every
// append from the moment the log opens, and completed by a background scan
// of the outcome table that the first append starts, it proves a new id
// (the common case) unrecorded without reading Pebble, and answers "maybe"
// for about two new ids in a thousand per full part (the parts double in
// size: two at 150,000 outcomes); until its build has
// finished, and on a read-only log or one at an older format, it proves
// nothing.
// A "maybe" reads Pebble; that read consults the bloom filters of every
// level, the bottom one included, so it rarely reads a data block.
//
// Records keep the plain command id (the record format is unchanged); the
// principal is not stored in them, since the caller can tell it from the
// envelope (actor, stream): Verify, given VerifyOptions.Principal, checks
// every outcome's first and last events against its principal and id, and
// every record stamped with a command id against the outcome of its
// principal and id. The step to format 3 (Upgrade.MoveOutcomes) moves each
// 'c' outcome to the principal its first event names (the caller decides,
// and names one for outcomes that wrote no events); moved outcomes have no
// fingerprint.
//
// # Format version
//
// 'm' "format" is written when the store is created (CurrentFormat) and only
// ever ratchets up, one step at a time (format.go lists the formats; the
// migrations package holds the steps, run through Upgrade, which commits the
// new marker in the same batch as the step's last write). Open refuses a
// store with a newer format (*FormatError wrapping ErrFormatTooNew), and a
// store with an older one unless it is opened read-only or with
// AllowOlderFormat (ErrFormatTooOld): a writer never appends to a store
// that lacks what the current format guarantees.
package eventlog
