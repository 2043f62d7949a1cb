// Package integrity is the bit-integrity check of
// bit-integrity-and-workman.txt: stream an object from the blob store,
// compare its checksum with the storage provider's, the content index's and
// the audit log's, find the row of the outcome table that matches, and apply
// that row's effects. The table is data (Table) and drives both the code and
// its tests.
package integrity

// State is what one of the four checksums is, relative to the others.
type State string

// States of a checksum in a row.
const (
	OK      State = "ok"       // agrees with the others
	Bad     State = "bad"      // differs
	NA      State = "n/a"      // not computed (content not downloaded)
	Absent  State = "404"      // the object is absent
	Missing State = "null"     // no record
	Any     State = "ok|n/a"   // agrees, or not computed
	BadNull State = "bad|null" // differs, or no record
)

// Effect is one thing a row does.
type Effect string

// Effects of the outcome table.
const (
	LogSuccess           Effect = "bit log: success"
	LogFailure           Effect = "bit log: failure"
	ResolveInternal      Effect = "resolution task: internally resolvable"
	ResolveExternal      Effect = "resolution task: externally resolvable"
	ResolveContent       Effect = "resolution task: internal if a secondary store has the item, else external"
	RepairIndex          Effect = "update the content index in place"
	PatchFromProvider    Effect = "if the audit log's properties are null, patch audit log and content index from the provider"
	QueueAudit           Effect = "add the item to the audit queue"
	RetryLater           Effect = "not the last attempt: put back with the retry delay"
	BitError             Effect = "last attempt: bit error"
	LastLogErrorAndAudit Effect = "last attempt: log the error and add to the audit queue"
)

// Row is one row of the outcome table.
type Row struct {
	No                            int
	Content, Provider, Index, Log State
	Effects                       []Effect
	Cause                         string
}

// Table is the spec's 11-row outcome table (docs/auditor.md, docs/designs.md), with our reading of
// rows 4 and 8-10: "retry later" means, on all but the last attempt, put
// the task back with a delay; on the last, the row's final effect applies.
//
// And our reading of a provider that keeps no checksum of the content (an
// S3 object stored without one: its ETag digests nothing), whose state is
// then n/a: the rows that the content, index and log decide between them
// (1, 2, 5, 6, 7 and 9) hold; the rows that need the provider's word (3
// and 4, its checksum failed; 10, it updated the object) never match, so
// rotted bytes are content gone sour, never an update to capture.
var Table = []Row{
	{1, Any, Any, OK, OK, []Effect{LogSuccess}, "all went as planned"},
	{2, Bad, Any, OK, OK, []Effect{LogFailure, ResolveContent}, "the content went sour"},
	{3, OK, Bad, OK, OK, []Effect{LogFailure, ResolveExternal}, "the provider's checksum process failed"},
	{4, NA, Bad, OK, OK, []Effect{RetryLater, BitError}, "provider checksum failed, the audit log is backed up, or an audit task was dropped"},
	{5, OK, Any, BadNull, OK, []Effect{LogFailure, RepairIndex, PatchFromProvider}, "the content index was corrupted by a failed update"},
	{6, Any, Any, OK, Bad, []Effect{LogFailure, ResolveInternal}, "the audit log item was corrupted on insert"},
	{7, Any, Any, OK, Missing, []Effect{LogFailure, QueueAudit}, "the audit record was lost or deleted by hand"},
	{8, Absent, Absent, OK, OK, []Effect{RetryLater, BitError}, "removed at the provider, not yet captured by the archive"},
	{9, OK, Any, Missing, Missing, []Effect{RetryLater, LastLogErrorAndAudit}, "added at the provider, not yet captured"},
	{10, OK, OK, Bad, Bad, []Effect{RetryLater, LastLogErrorAndAudit}, "updated at the provider, not yet captured"},
	{11, Absent, Absent, Missing, Missing, nil, "bit-integrity checks are behind fully processed deletes"},
}

// matches reports whether an observed state fits a row's state.
func matches(want, got State) bool {
	switch want {
	case Any:
		return got == OK || got == NA
	case BadNull:
		return got == Bad || got == Missing
	default:
		return want == got
	}
}

// Match finds the row for the observed states; ok is false when none fits
// (a combination the spec does not foresee).
func Match(content, provider, index, log State) (Row, bool) {
	for _, r := range Table {
		if matches(r.Content, content) && matches(r.Provider, provider) && matches(r.Index, index) && matches(r.Log, log) {
			return r, true
		}
	}
	return Row{}, false
}

// Has reports whether the row has an effect.
func (r Row) Has(e Effect) bool {
	for _, x := range r.Effects {
		if x == e {
			return true
		}
	}
	return false
}
