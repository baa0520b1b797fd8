package commands

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/crewlog/crewlog/events"
)

// importedTextProblem says which free text of p, an imported payload given as a pointer or a struct, is longer than
// crewlog's own command that records it takes (events.ImportedTexts); "" when none is. NB: refused, not cut: the
// importer cuts what its source holds, marking the cut, and a write that still carries more is one no importer of
// crewlog's sends.
func importedTextProblem(p any) string {
	if v := reflect.ValueOf(p); v.IsValid() && v.Kind() != reflect.Pointer {
		ptr := reflect.New(v.Type()) // NB: a copy: the caller's payload is not changed
		ptr.Elem().Set(v)
		p = ptr.Interface()
	}
	for _, f := range events.ImportedTexts(p) {
		if longerThan(*f.Text, f.Max) {
			return fmt.Sprintf("%s must be at most %d chars", f.Name, f.Max)
		}
	}
	return ""
}

// importedIDBound is what an imported id must be (events.ImportedIDOK).
var importedIDBound = fmt.Sprintf("at most %d chars, of at most %d bytes in JSON", MaxIDChars, MaxIDChars)

// importedIDFields are the fields by which an imported payload names a task, a delegation, a question, a message or a
// mailbox.
var importedIDFields = []string{"TaskID", "SubID", "QuestionID", "MessageID", "ID", "To", "Recipient"}

// importedIDProblem says which id of p, an imported payload given as a pointer or a struct, is one crewlog does not
// record: longer than any id crewlog records, in chars or in the bytes JSON writes it in (events.ImportedIDOK: its
// fields TaskID, SubID, QuestionID, MessageID, ID, To and Recipient, and a message's data.subId), a task.created
// named by a reserved word (events.TaskIDReserved), or an empty taskId wherever a payload names a task (a TaskID
// field whose tag has no omitempty); "" when none is, and for a foreign.imported, which keeps what its source wrote.
// NB: refused, not cut: a cut id names another task, and projections key delegations, accounts and questions by these
// ids; an empty id is the run inbox's mailbox key, and a task named "parent", "all" or "group" could never be sent a
// message of its own.
func importedIDProblem(p any) string {
	if payloadAs[events.ForeignImported](p) != nil {
		return ""
	}
	v := reflect.Indirect(reflect.ValueOf(p))
	if v.Kind() != reflect.Struct {
		return ""
	}
	for _, name := range importedIDFields {
		f, ok := v.Type().FieldByName(name)
		if !ok || f.Type.Kind() != reflect.String {
			continue
		}
		if !events.ImportedIDOK(v.FieldByIndex(f.Index).String()) {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			return tag + " must be " + importedIDBound
		}
	}
	if m := payloadAs[events.MailboxAppended](p); m != nil && m.Data != nil && !events.ImportedIDOK(m.Data.SubID) {
		return "data.subId must be " + importedIDBound
	}
	if c := payloadAs[events.TaskCreated](p); c != nil && events.TaskIDReserved(c.TaskID) {
		return fmt.Sprintf("taskId %q is the run inbox, a group of tasks or the orchestrator, not a task's", c.TaskID)
	}
	if f, ok := v.Type().FieldByName("TaskID"); ok && f.Type.Kind() == reflect.String &&
		!strings.Contains(f.Tag.Get("json"), ",omitempty") && v.FieldByIndex(f.Index).String() == "" {
		return "taskId must not be empty"
	}
	return ""
}

// importedWordProblem says which word of p, an imported mailbox.appended given as a pointer or a struct, is none
// crewlog records: its kind, priority or deliveryMode must be empty (the default) or one of the words of D§2.6 that
// msg.send and pi-crew write (events.MessageKindOK, PriorityOK, DeliveryModeOK); "" when each is, and for another
// payload. NB: every read of the message copies them, and one of 60,000 '<' left msg.inbox answering oversize-frame
// at the message for good, whatever the frame.
func importedWordProblem(p any) string {
	m := payloadAs[events.MailboxAppended](p)
	if m == nil {
		return ""
	}
	for _, w := range events.MessageWords(&m.Kind, &m.Priority, &m.DeliveryMode) {
		if !w.OK(*w.Value) {
			return w.Name + " must be empty or one of the words a message of crewlog's has (D§2.6)"
		}
	}
	return ""
}
