package aggregator

import (
	"bufio"
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/archivist/archivist/pkg/pyjson"
	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// The /cdx answer's formats, as pywb's index handler writes them
// (warcserver/handlers.py and CDXObject): output=cdx (or text), the lines
// or the fields fl names; output=cdxj, "urlkey timestamp {JSON of the
// rest}"; output=json, one JSON object a line; output=link, an RFC 7089
// TimeMap. JSON is written as Python's json.dumps writes it (", " and
// ": " between items, every character past ASCII escaped), every field
// kept, "-" too: an answer compares byte for byte with pywb's.

// answer is what a /cdx query answers: its lines, and how it was cut.
type answer struct {
	lines []string
	// cap is the read cap, when the answer was cut by it (0: not cut).
	cap int
	// resume is the line after which the answer goes on, in index order
	// ("": it does not): its resume key.
	resume string
	// unread are the clusters that could not be read, left out.
	unread []string
}

// unreadMessage says which clusters an answer was made without.
func unreadMessage(clusters []string) string {
	return fmt.Sprintf("the index cluster(s) %s could not be read: this answer lacks their captures (ArchivistIndexClusterUnreadable)", strings.Join(clusters, ", "))
}

// MaxResumeKey is the longest resumeKey a query takes (a CDX line).
const MaxResumeKey = 8 << 10

// resumeKey is the key that resumes an answer after line: the line
// itself, escaped as a query parameter (the Internet Archive's CDX server
// prints "urlkey timestamp!" escaped so; a whole line resumes after it
// exactly, however many captures share its second).
func resumeKey(line string) string { return url.QueryEscape(line) }

// parseResumeKey reads a resumeKey (unescaped once, as every parameter
// is): a line, or the Internet Archive's "urlkey timestamp!", after which
// the answer goes on.
func parseResumeKey(k string) (string, error) {
	if len(k) > MaxResumeKey || !strings.Contains(k, " ") || strings.ContainsAny(k, "\n\x00") {
		return "", badRequest("resumeKey: the key a showResumeKey answer printed, as it printed it")
	}
	return k, nil
}

// write writes an answer in the request's format, saying how it was cut:
// the header Archivist-Lines-Read-Cap when the read cap cut it, the header
// Archivist-Resume-Key when it goes on in index order, the header
// Archivist-Incomplete when a cluster could not be read; and in the body,
// where the format has room for it: after a blank line, the resume key
// (cdx and cdxj, with showResumeKey, as the Internet Archive's server
// prints it); a last object (json: {"resumeKey"} with showResumeKey, and
// {"incomplete"} whenever the cap cut the answer or a cluster was left
// out); a rel="next" link to
// the rest (link).
func (r *request) write(w http.ResponseWriter, hr *http.Request, ans answer) {
	h := w.Header()
	if ans.cap > 0 {
		h.Set("Archivist-Lines-Read-Cap", strconv.Itoa(ans.cap))
	}
	if ans.resume != "" {
		h.Set("Archivist-Resume-Key", resumeKey(ans.resume))
	}
	if len(ans.unread) > 0 {
		h.Set("Archivist-Incomplete", unreadMessage(ans.unread))
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	switch r.output {
	case "json":
		h.Set("Content-Type", "text/x-ndjson")
		for _, l := range ans.lines {
			r.writeObject(bw, l, 0)
			bw.WriteByte('\n')
		}
		var keys, vals, why []string
		if ans.cap > 0 {
			why = append(why, fmt.Sprintf("the answer was cut after %d lines read (AGGREGATOR_MAX_QUERY_LINES): narrow the query, page it, or resume it", ans.cap))
		}
		if len(ans.unread) > 0 {
			why = append(why, unreadMessage(ans.unread))
		}
		if len(why) > 0 {
			keys, vals = append(keys, "incomplete"), append(vals, strings.Join(why, "; "))
		}
		if ans.resume != "" && (r.showResume || ans.cap > 0) {
			keys, vals = append(keys, "resumeKey"), append(vals, resumeKey(ans.resume))
		}
		if len(keys) > 0 {
			bw.WriteString(pyjson.Object(keys, vals))
			bw.WriteByte('\n')
		}
	case "link":
		h.Set("Content-Type", "application/link-format")
		r.writeTimeMap(bw, hr, ans)
	case "cdxj":
		h.Set("Content-Type", "text/x-cdxj")
		for _, l := range ans.lines {
			bw.WriteString(field(l, 0))
			bw.WriteByte(' ')
			bw.WriteString(field(l, 1))
			bw.WriteByte(' ')
			r.writeObject(bw, l, 2)
			bw.WriteByte('\n')
		}
		r.writeResume(bw, ans)
	default:
		h.Set("Content-Type", "text/plain")
		for _, l := range ans.lines {
			if r.fields == nil {
				bw.WriteString(l)
			} else {
				for j, i := range r.fields {
					if j > 0 {
						bw.WriteByte(' ')
					}
					bw.WriteString(cmp.Or(field(l, i), "-"))
				}
			}
			bw.WriteByte('\n')
		}
		r.writeResume(bw, ans)
	}
}

// writeResume writes the resume key after a blank line, as the Internet
// Archive's CDX server does, when showResumeKey asks and the answer goes
// on.
func (r *request) writeResume(bw *bufio.Writer, ans answer) {
	if r.showResume && ans.resume != "" {
		bw.WriteString("\n" + resumeKey(ans.resume) + "\n")
	}
}

// writeObject writes line's fields from field from on as one JSON object,
// as pywb's CDXObject.to_json and to_cdxj do: every field by its name, or
// those fl names, under the names fl gives them, when the line has them.
func (r *request) writeObject(bw *bufio.Writer, line string, from int) {
	f := strings.Fields(line)
	var keys, vals []string
	if r.fields == nil {
		for i := from; i < len(f) && i < len(Fields); i++ {
			keys, vals = append(keys, Fields[i]), append(vals, f[i])
		}
	} else {
		for j, i := range r.fields {
			if i >= from && i < len(f) {
				keys, vals = append(keys, r.names[j]), append(vals, f[i])
			}
		}
	}
	bw.WriteString(pyjson.Object(keys, vals))
}

// writeTimeMap writes the answer as an RFC 7089 TimeMap in link format:
// the TimeMap itself (rel="self", from the first memento's time), the
// original resource (the query's URL), then each capture as pywb's
// MementoUtils.make_timemap writes it, "<url>; rel=\"memento\";
// datetime=\"...\"", the lines separated by ",\n"; an answer that goes on
// links its rest (rel="next").
func (r *request) writeTimeMap(bw *bufio.Writer, hr *http.Request, ans answer) {
	var links []string
	self := fmt.Sprintf("<%s>; rel=\"self\"; type=\"application/link-format\"", hr.URL.RequestURI())
	if len(ans.lines) > 0 {
		self += fmt.Sprintf("; from=\"%s\"", httpDate(field(ans.lines[0], 1)))
	}
	links = append(links, self, fmt.Sprintf("<%s>; rel=\"original\"", r.original))
	if ans.resume != "" {
		q := hr.URL.Query()
		q.Set("resumeKey", ans.resume)
		links = append(links, fmt.Sprintf("<%s?%s>; rel=\"next\"; type=\"application/link-format\"", hr.URL.Path, q.Encode()))
	}
	for _, l := range ans.lines {
		u := field(l, 2)
		if u == "" || u == "-" {
			u = fmt.Sprintf("file://%s:%s:%s", field(l, 10), field(l, 9), field(l, 8))
		}
		links = append(links, fmt.Sprintf("<%s>; rel=\"memento\"; datetime=\"%s\"", u, httpDate(field(l, 1))))
	}
	bw.WriteString(strings.Join(links, ",\n"))
	bw.WriteByte('\n')
}

// httpDate is a CDX timestamp as an HTTP date (warcio's
// timestamp_to_http_date).
func httpDate(ts string) string { return timestampTime(ts).Format(http.TimeFormat) }

// writeBlocks writes summary lines (showPagedIndex) as pywb's IDXObject
// writes them: "urlkey\tpart\toffset\tlength\tlineno", or in JSON with
// the numbers as numbers.
func (r *request) writeBlocks(w http.ResponseWriter, blocks []cdxindex.Block) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	if r.output == "json" {
		w.Header().Set("Content-Type", "text/x-ndjson")
		for _, b := range blocks {
			bw.WriteString(`{"urlkey": `)
			bw.WriteString(pyjson.Quote(b.Key))
			bw.WriteString(`, "part": `)
			bw.WriteString(pyjson.Quote(b.Part))
			fmt.Fprintf(bw, ", \"offset\": %d, \"length\": %d, \"lineno\": %d}\n", b.Offset, b.Length, b.Number)
		}
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	for _, b := range blocks {
		fmt.Fprintf(bw, "%s\t%s\t%d\t%d\t%d\n", b.Key, b.Part, b.Offset, b.Length, b.Number)
	}
}
