package cli

import (
	"bytes"
	"testing"
)

// TestPrintableEscapesC1SplitAcrossWrites: a C1 control character whose
// two UTF-8 bytes come in two writes is escaped still.
func TestPrintableEscapesC1SplitAcrossWrites(t *testing.T) {
	var w bytes.Buffer
	p := &printable{w: &w}
	p.Write([]byte("a\xc2"))
	p.Write([]byte("\x9bb\tc\n"))
	if w.String() != "a\\u009bb\tc\n" {
		t.Errorf("a C1 character split across writes: %q", w.String())
	}
}
