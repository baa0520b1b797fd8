package picrew

import "fmt"

// maxRunFiles bounds the files of each kind of a run that are read: its event-log archives, its mailbox files, its
// steering files. NB: a run's workers can make any number of them, and each was read by the import and followed by
// the follower (a look at it every pass, a tail, a checkpoint kept for good); a run of pi-crew has a few archives,
// and a mailbox and a steering file a task (tens of tasks in a run, hundreds with its shadows).
const maxRunFiles = 2048

// firstRunFiles is files, the files of a run of kind what in the order they are read, cut to the first maxRunFiles;
// a cut is reported with report.
func firstRunFiles[T any](files []T, what string, report func(reason string)) []T {
	if len(files) <= maxRunFiles {
		return files
	}
	report(fmt.Sprintf("more than %d %s: those past the first %[1]d, in the order they are read, are not read",
		maxRunFiles, what))
	return files[:maxRunFiles]
}
