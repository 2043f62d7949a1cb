package notify

import (
	"fmt"
	"strings"
)

// Batch is what a mail says of a batch.
type Batch struct {
	ID                       int64
	Submitter, Profile, Type string
	PayloadURL, Title        string
}

// Confirmation is the mail that tells the collection's addresses a batch
// was queued as jobs objects.
func Confirmation(to []string, b Batch, jobs int) Mail {
	var body strings.Builder
	fmt.Fprintf(&body, "Batch %d of %s into collection %s is queued: %d object(s) to ingest.\n\n", b.ID, b.Submitter, b.Profile, jobs)
	fmt.Fprintf(&body, "type:    %s\npayload: %s\n", b.Type, b.PayloadURL)
	if b.Title != "" {
		fmt.Fprintf(&body, "title:   %s\n", b.Title)
	}
	body.WriteString("\nA report follows when every job has ended.\n")
	return Mail{To: to, Subject: fmt.Sprintf("Archivist: batch %d queued (%d objects, %s)", b.ID, jobs, b.Profile),
		Body: body.String(), ID: fmt.Sprintf("batch-%d-confirmation", b.ID)}
}

// ReportMail is the mail of a batch's report: its outcome, and the report
// itself (cut at 64 KiB; the whole is in the blob store under key).
func ReportMail(to []string, b Batch, sequence int, outcome, detail, key string, report []byte) Mail {
	var body strings.Builder
	fmt.Fprintf(&body, "Batch %d of %s into collection %s is %s: %s.\n\n", b.ID, b.Submitter, b.Profile, outcome, detail)
	fmt.Fprintf(&body, "The report (number %d) is kept as %s:\n\n", sequence, key)
	if len(report) > 64<<10 {
		body.Write(report[:64<<10])
		body.WriteString("\n... (cut; the whole report is in the store)\n")
	} else {
		body.Write(report)
		body.WriteString("\n")
	}
	return Mail{To: to, Subject: fmt.Sprintf("Archivist: batch %d %s (%s)", b.ID, outcome, b.Profile),
		Body: body.String(), ID: fmt.Sprintf("batch-%d-report-%d", b.ID, sequence)}
}
