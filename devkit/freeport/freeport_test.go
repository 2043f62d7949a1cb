package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestTakeGivesDistinctBindablePortsBelowTheEphemeralRange(t *testing.T) {
	lo, hi := span()
	seen := map[int]bool{}
	for range 50 {
		p, release, err := Take()
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if p < lo || p > hi {
			t.Fatalf("port %d outside [%d, %d]", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice while reserved", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		l.Close()
	}
}
