package fetch

import (
	"strings"
	"testing"
)

// TestRoomIsCheckedBeyondTheReservation: a download writes what was
// reserved for it without a look at the disk, then, beyond it, checks the
// working area's free space every roomCheckEvery bytes and stops below
// INGEST_MIN_FREE_BYTES.
func TestRoomIsCheckedBeyondTheReservation(t *testing.T) {
	chunk := make([]byte, 1<<20)
	r := &roomCheck{dir: t.TempDir(), min: 1 << 62, name: "f.bin", reserved: 100 << 20}
	var written int64
	var err error
	for err == nil && written < 1<<30 {
		_, err = r.Write(chunk)
		if err == nil {
			written += int64(len(chunk))
		}
	}
	if err == nil || !strings.Contains(err.Error(), "less than INGEST_MIN_FREE_BYTES") {
		t.Fatalf("after %d bytes: %v, want the download stopped for room", written, err)
	}
	if written < 100<<20 || written > 100<<20+roomCheckEvery {
		t.Errorf("stopped after %d bytes, want within %d beyond the %d reserved", written, roomCheckEvery, 100<<20)
	}
	roomy := &roomCheck{dir: t.TempDir(), min: 0, name: "g.bin"}
	for range 200 {
		if _, err := roomy.Write(chunk); err != nil {
			t.Fatalf("with room: %v", err)
		}
	}
}
