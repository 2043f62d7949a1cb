package cdx

import (
	"errors"
	"io"

	"github.com/archivist/archivist/services/indexer/warc"
)

// Index reads an archive and calls fn with the entry of every indexed
// record, in file order. A fault in the file ends the reading with a
// *warc.FormatError after the entries before it were given: index
// everything up to a fault, then fail the file with the reason.
func Index(r io.Reader, filename string, fn func(Entry) error) (int, error) {
	rd, err := warc.NewReaderOptions(r, warc.Options{Digest: PayloadStart})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		e, ok := FromRecord(rec, filename)
		if !ok {
			continue
		}
		if err := fn(e); err != nil {
			return n, err
		}
		n++
	}
}
