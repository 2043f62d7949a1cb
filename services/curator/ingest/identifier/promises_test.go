package identifier_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest/ark"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
)

// TestARKSpellingsNameOneObject: every spelling of an ARK the archive
// holds finds its object, which keeps the ARK as first spelt; another
// depositor's spelling is refused; an ARK with one more ':' is another
// identifier, whose object is stored under a prefix of its own.
func TestARKSpellingsNameOneObject(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	first, err := r.local.Mint(ctx, r.job(t, "alice", "loc-a", "ARK:/13030/m5-abc/"), erc)
	if err != nil || first != "ark:13030/m5abc" { // kept in normal form
		t.Fatalf("supplied: %q %v", first, err)
	}
	for _, spelling := range []string{"ark:/13030/m5abc", "ark:13030/m5-abc", "ARK:/13030/m5abc/", "ark:/13030/m5abc."} {
		got, err := r.local.Mint(ctx, r.job(t, "alice", "", spelling), erc)
		if err != nil || got != first {
			t.Errorf("%s: %q %v, want the object's %s", spelling, got, err, first)
		}
	}
	if _, err := r.local.Mint(ctx, r.job(t, "bob", "", "ark:13030/m5-abc"), erc); !fault.IsPermanent(err) || !strings.Contains(err.Error(), "another depositor") {
		t.Errorf("bob spelling alice's ARK anew: %v, want refused as another depositor's", err)
	}
	other, err := r.local.Mint(ctx, r.job(t, "alice", "loc-b", "ark:/13030/m5a:bc"), erc)
	if err != nil || other != "ark:13030/m5a:bc" {
		t.Fatalf("one more ':': %q %v, want an object of its own", other, err)
	}
	if inventory.Prefix(first) == inventory.Prefix(other) || inventory.Key(first, 1, "producer/a") == inventory.Key(other, 1, "producer/a") {
		t.Errorf("%s and %s share blob keys: %s", first, other, inventory.Key(first, 1, "producer/a"))
	}
	var prefixes int
	if err := r.db.QueryRow(ctx, `SELECT count(DISTINCT storage_prefix) FROM curator.arks`).Scan(&prefixes); err != nil || prefixes != 2 {
		t.Errorf("%d storage prefixes for two objects (%v)", prefixes, err)
	}
}

// TestSuppliedARKsStayUnderTheKeysShoulders: an ARK that names no object
// yet is taken only under a shoulder or NAAN the depositor's key names,
// never under the archive's own shoulder, whose numbers its minter gives;
// an ARK the archive gave the depositor's own object may be supplied to
// add a version.
func TestSuppliedARKsStayUnderTheKeysShoulders(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, c := range []struct {
		submitter, primary, want string
	}{
		{"alice", shoulder + "zzzzz", "the archive's own shoulder"},
		{"alice", "ark:/99999/fk8-zzzzz", "the archive's own shoulder"},
		{"alice", "ark:/12345/x1", "under none of the shoulders"},
		{"bob", "ark:/13030/b0b", "may supply none"},
	} {
		_, err := r.local.Mint(ctx, r.job(t, c.submitter, "", c.primary), erc)
		if !fault.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s supplying %s: %v, want refused: %s", c.submitter, c.primary, err, c.want)
		}
	}
	minted, err := r.local.Mint(ctx, r.job(t, "alice", "loc-m", ""), erc)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.local.Mint(ctx, r.job(t, "alice", "", minted), erc); err != nil || got != minted {
		t.Errorf("alice naming her own object's minted ARK: %q %v", got, err)
	}
	if _, err := r.local.Mint(ctx, r.job(t, "bob", "", minted), erc); !fault.IsPermanent(err) {
		t.Errorf("bob naming alice's minted ARK: %v, want refused", err)
	}
}

// TestNoNumberTwiceAfterARestore: after the database is restored to before
// an ARK was minted (its row and the sequence's step lost), the store still
// holds the object's files and EZID the identifier; minting again skips
// that number, so no public identifier is pointed at a second object.
func TestNoNumberTwiceAfterARestore(t *testing.T) {
	for _, minter := range []string{"local", "ezid"} {
		t.Run(minter, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			mint := r.local.Mint
			if minter == "ezid" {
				mint = r.ez.Mint
			}
			lost, err := mint(ctx, r.job(t, "alice", "before", ""), erc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.blob.Put(ctx, inventory.Key(lost, 1, "producer/page.txt"), strings.NewReader("stored after the backup"), nil); err != nil {
				t.Fatal(err)
			}
			// The restore: the row and the number forgotten.
			if _, err := r.db.Exec(ctx, `DELETE FROM curator.arks; UPDATE curator.jobs SET ark = ''; SELECT setval('curator.ark_seq', 1, false)`); err != nil {
				t.Fatal(err)
			}
			if minter == "ezid" {
				// The store is asked first; EZID too: take the file away.
				if err := r.blob.Delete(ctx, inventory.Key(lost, 1, "producer/page.txt")); err != nil {
					t.Fatal(err)
				}
			}
			again, err := mint(ctx, r.job(t, "alice", "after", ""), erc)
			if err != nil {
				t.Fatal(err)
			}
			if again == lost {
				t.Fatalf("%s given out twice", lost)
			}
			if minter == "ezid" {
				if held := r.ezid.Identifier(lost); held["erc.what"] != erc.What || held["_target"] != "https://archive.example/"+lost {
					t.Errorf("the first object's identifier was changed: %v", held)
				}
			}
		})
	}
}

// TestARKRulesInSQL: curator.ark_norm and curator.ark_storage_prefix (the
// migration's, for the ARKs stored before) agree with package ark on
// thousands of random spellings.
func TestARKRulesInSQL(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(17, 47))
	const alphabet = "aAbZ09:/%_.-2Ff~$*#?\\"
	var in []string
	for range 3000 {
		var b strings.Builder
		b.WriteString([]string{"ark:/", "ark:", "ARK:/", "ark://", "ark:/1"}[rnd.IntN(5)])
		b.WriteString([]string{"13030", "1303", "b2k4x", "B2K4X", "1303a"}[rnd.IntN(5)])
		b.WriteString("/")
		for range rnd.IntN(8) {
			b.WriteByte(alphabet[rnd.IntN(len(alphabet))])
		}
		in = append(in, b.String())
	}
	rows, err := r.db.Query(ctx, `SELECT a, curator.ark_norm(a), curator.ark_storage_prefix(a) FROM unnest($1::text[]) a`, in)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var a string
		var norm *string
		var prefix string
		if err := rows.Scan(&a, &norm, &prefix); err != nil {
			t.Fatal(err)
		}
		want, err := ark.Normalize(a)
		switch {
		case err != nil && norm != nil:
			t.Errorf("%q: SQL normalizes it to %q, Go refuses it: %v", a, *norm, err)
		case err == nil && (norm == nil || *norm != want):
			t.Errorf("%q: SQL %v, Go %q", a, norm, want)
		case err == nil && prefix != inventory.Prefix(a):
			t.Errorf("%q: SQL prefix %q, Go %q", a, prefix, inventory.Prefix(a))
		}
		n++
	}
	if n != len(in) {
		t.Fatalf("%d of %d compared", n, len(in))
	}
}
