package fault

import (
	"fmt"
	"time"
)

// Policy bounds how a unit of work (a file to index, a job, an episode, a
// pair, an object check) is retried: each transient failure puts it back
// with a delay that doubles from Base to Max, until it has failed Attempts
// times or kept failing for Budget since its first failure; then it parks.
// A permanent failure parks at once; an outage spends nothing.
//
// The delay is kept with the unit (a next_attempt_at column, a nak delay),
// so it survives redeliveries, leases, claims and restarts.
type Policy struct {
	// Base is the delay after the first failure.
	Base time.Duration
	// Max caps the delay.
	Max time.Duration
	// Attempts parks the unit after this many failed attempts (crashes and
	// hangs count, as attempts are counted when work is handed out); 0: no
	// bound by count.
	Attempts int
	// Budget parks the unit once it has kept failing this long since its
	// first failure; 0: no bound by time. A unit is parked only when both
	// bounds that are set are spent, so a burst of failures in a short
	// outage the checks did not see does not park it.
	Budget time.Duration
}

// Delay is the wait after the n-th consecutive failure (n ≥ 1); with no
// Base, none.
func (p Policy) Delay(n int) time.Duration {
	d := max(p.Base, 0)
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	if p.Max > 0 {
		d = min(d, p.Max)
	}
	return d
}

// Decision is what to do with a unit after a failure.
type Decision struct {
	// Kind is the failure's kind.
	Kind Kind
	// Park: give the unit up until an operator releases it.
	Park bool
	// RetryAt is when to try again (not parked).
	RetryAt time.Time
	// Reason is what to record: the error, and for a park why it parked.
	Reason string
}

// Decide says what follows a failure of a unit that has now failed
// failures times (this one included), the first of them at first (zero:
// this is the first), at now.
//
// An outage is not counted: Decide returns RetryAt now and Park false, and
// the caller should record nothing against the unit (and pause).
func (p Policy) Decide(err error, failures int, first, now time.Time) Decision {
	kind := Of(err)
	msg := "unknown error"
	if err != nil {
		msg = err.Error()
	}
	d := Decision{Kind: kind, Reason: msg}
	switch kind {
	case KindOutage:
		d.RetryAt = now
		return d
	case KindPermanent:
		d.Park = true
		return d
	}
	if first.IsZero() {
		first = now
	}
	byCount := p.Attempts <= 0 || failures >= p.Attempts
	byTime := p.Budget <= 0 || now.Sub(first) >= p.Budget
	if (p.Attempts > 0 || p.Budget > 0) && byCount && byTime {
		d.Park = true
		d.Reason = fmt.Sprintf("gave up after %d failed attempts over %s: %s", failures, now.Sub(first).Round(time.Second), msg)
		return d
	}
	d.RetryAt = now.Add(p.Delay(failures))
	return d
}
