package fetch

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

func TestTeeCopyGivesEveryWriterTheWholeStreamInOrder(t *testing.T) {
	for _, size := range []int{0, 1, teeChunk - 1, teeChunk, teeChunk + 1, 5*teeChunk*teeChunks + 123} {
		data := make([]byte, size)
		rng := rand.New(rand.NewPCG(uint64(size), 7))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		var a, b bytes.Buffer
		h := sha256.New()
		// A reader that returns one byte at a time exercises partial reads.
		n, err := teeCopy(iotest.HalfReader(bytes.NewReader(data)), &a, &b, h)
		if err != nil || n != int64(size) {
			t.Fatalf("size %d: n=%d err=%v", size, n, err)
		}
		want := sha256.Sum256(data)
		if !bytes.Equal(a.Bytes(), data) || !bytes.Equal(b.Bytes(), data) || !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatalf("size %d: a writer got something else", size)
		}
	}
}

type failAfter struct{ left int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.left -= len(p); f.left < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestTeeCopyStopsAtTheFirstError(t *testing.T) {
	src := bytes.NewReader(make([]byte, 100*teeChunk))
	_, err := teeCopy(src, &bytes.Buffer{}, &failAfter{left: 3 * teeChunk})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v, want the writer's", err)
	}
	if src.Len() == 0 {
		t.Fatal("the whole source was read after a writer failed")
	}
	_, err = teeCopy(iotest.ErrReader(errors.New("connection reset")), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("err = %v, want the reader's", err)
	}
}
