package events

// Bounds of the free texts crewlog's own commands record, which ImportedTexts holds an import to as well. Each record
// of such a text is kept in its run's log for good, so each has a bound of its own, whatever the frame size
// (docs/protocol.md, "Run quotas and fair slots"). NB: here, as the importers may use neither commands nor
// projections; commands defines its own from these.
const (
	// MaxIDChars bounds task and message ids (run ids: commands.MaxRunIDChars).
	MaxIDChars = 256
	// MaxTitleChars bounds a task's title.
	MaxTitleChars = 4 * MaxIDChars
	// MaxCwdChars bounds a working directory (Linux's PATH_MAX).
	MaxCwdChars = 4096
	// MaxModelChars bounds a model name (delegate.request, task.create).
	MaxModelChars = 256
	// MaxBodyChars bounds free text (goals, message bodies) like pi-crew's 256 Ki-char body limit.
	MaxBodyChars = 262144
	// MaxStatusTextChars bounds the free text of a status change: a run transition's summary and reason, a task
	// transition's error and reason, a delegation's cancel reason. The longest pi-crew writes is a task's error,
	// which can hold a worker's whole captured stderr (its last 512 KiB, maxCaptureBytes) under a line of pi-crew's
	// and its model-fallback wording; 576 Ki chars hold that with room to spare.
	MaxStatusTextChars = 576 << 10
	// MaxQuestionChars bounds a question's text (D§7.5).
	MaxQuestionChars = 8192
	// MaxSubjectChars bounds a message's subject (D§7.5).
	MaxSubjectChars = 256
	// MaxSteerChars bounds a steer's text (D§2.7).
	MaxSteerChars = 4096
	// MaxRecordedRoleChars bounds the requested role as crewlog records and quotes it (delegate.requested, the
	// policy inputs, the role-denied message). Any string is a valid request and an unknown role is a recorded
	// role-denied (SPEC §4.1), but a huge one must not bloat the log; every allowed role is far shorter, so the cut
	// never changes a decision and replay reaches the same one.
	MaxRecordedRoleChars = 64
	// MaxDescriptionChars and MaxPromptChars bound a delegation's description and prompt (D§4.1).
	MaxDescriptionChars = 512
	MaxPromptChars      = 32768
	// MaxRejectedMessageChars bounds delegate.rejected's message, as pi-crew.
	MaxRejectedMessageChars = 120
)
