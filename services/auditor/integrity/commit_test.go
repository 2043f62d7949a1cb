package integrity_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentChecksAreRecordedTogetherEachOnItsOwn: 200 checks at once
// (their effects written in shared transactions) are each recorded once,
// their schedules stamped; one check whose record the database refuses
// fails alone, with its reason, and the others of its group are recorded.
func TestConcurrentChecksAreRecordedTogetherEachOnItsOwn(t *testing.T) {
	e := setup(t, nil)
	const n = 200
	objects := make([]string, n)
	for i := range objects {
		objects[i] = fmt.Sprintf("objects/%03d", i)
		content := "content " + objects[i]
		if _, err := e.store.Put(e.ctx, objects[i], strings.NewReader(content), nil); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)`,
			`INSERT INTO auditor.audit_log (object, action, checksum, size) VALUES ($1, 'add', $2, $3)`} {
			if _, err := e.db.Exec(e.ctx, q, objects[i], sum(content), len(content)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.db.Exec(e.ctx, `INSERT INTO auditor.schedule (object, next_due) VALUES ($1, now())`, objects[i]); err != nil {
			t.Fatal(err)
		}
	}
	// The database refuses the bit-log row of one object.
	poison := objects[77]
	if _, err := e.db.Exec(e.ctx, `CREATE FUNCTION auditor.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.object = '`+poison+`' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON auditor.bit_log FOR EACH ROW EXECUTE FUNCTION auditor.refuse()`); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, o := range objects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.chk.Check(e.ctx, o, false, 1, 3)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if objects[i] == poison {
			if err == nil || !strings.Contains(err.Error(), "refused by the test") {
				t.Errorf("the refused check: %v, want the database's reason", err)
			}
		} else if err != nil {
			t.Errorf("check of %s: %v", objects[i], err)
		}
	}
	if got := e.count(`SELECT count(*) FROM auditor.bit_log WHERE success`); got != n-1 {
		t.Errorf("%d bit-log rows, want %d (each once)", got, n-1)
	}
	if got := e.count(`SELECT count(DISTINCT object) FROM auditor.bit_log`); got != n-1 {
		t.Errorf("%d objects in the bit log, want %d", got, n-1)
	}
	if got := e.count(`SELECT count(*) FROM auditor.schedule WHERE checked_at IS NOT NULL`); got != n-1 {
		t.Errorf("%d schedules stamped, want %d (the refused check's is not)", got, n-1)
	}
}
