package cdx

import (
	"bufio"
	"fmt"
	"io"
	"slices"
)

// WriteSorted sorts lines in byte order (as `LC_ALL=C sort`) and writes
// them to w, one per line. It sorts lines in place.
func WriteSorted(w io.Writer, lines []string) error {
	slices.Sort(lines)
	bw := bufio.NewWriterSize(w, 1<<20)
	for _, l := range lines {
		bw.WriteString(l)
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write sorted CDX: %w", err)
	}
	return nil
}
