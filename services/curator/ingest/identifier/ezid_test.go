package identifier_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/ezid"
	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/identifier"
	"github.com/archivist/archivist/services/curator/ingest/ingesttest"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
	"github.com/archivist/archivist/services/curator/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const shoulder = "ark:/99999/fk8"

// rig is a curator database, a blob store, an EZID in small and a minter
// of each kind.
type rig struct {
	db    *pgxpool.Pool
	blob  blob.Store
	store *ingest.Store
	ezid  *ezid.Server
	ez    *identifier.EZID
	local *identifier.Local
	// batch is alice's, who may supply ARKs under ark:/13030; bob's, who
	// may supply none.
	batch, bobs int64
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{db: testenv.DB(t, migrations.Schema), ezid: ezid.Start("archivist", "s3cret")}
	t.Cleanup(r.ezid.Close)
	var err error
	if r.blob, err = blob.NewLocal(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	r.store = ingest.NewStore(r.db)
	r.local = &identifier.Local{DB: r.db, Shoulder: shoulder, Blob: r.blob, Log: testenv.Logger(t)}
	r.ez = &identifier.EZID{Local: *r.local, Target: "https://archive.example/{ark}",
		Client: &identifier.EZIDClient{Base: r.ezid.URL, User: "archivist", Password: "s3cret"}}
	if r.batch, _, err = r.store.Submit(context.Background(), ingest.Submission{Submitter: "alice", Profile: "books", PayloadURL: "http://o/x", Type: "file",
		ARKShoulders: "ark:/13030"}); err != nil {
		t.Fatal(err)
	}
	if r.bobs, _, err = r.store.Submit(context.Background(), ingest.Submission{Submitter: "bob", Profile: "books", PayloadURL: "http://o/y", Type: "file"}); err != nil {
		t.Fatal(err)
	}
	return r
}

// job makes a job of the rig's batch (submitter, local id, supplied ARK).
func (r *rig) job(t *testing.T, submitter, localID, primary string) *ingest.JobRow {
	t.Helper()
	var id int64
	batch := r.batch
	if submitter == "bob" {
		batch = r.bobs
	}
	id = ingesttest.NewJob(t, r.db, ingesttest.Job{Batch: batch, Submitter: submitter, Profile: "books", PayloadURL: "http://o/x", LocalID: localID, PrimaryARK: primary})
	j, err := r.store.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

var erc = inventory.ERC{Who: "Woolf, Virginia", What: "The Waves: a play-poem\nsecond line", When: "1931"}

// TestEZIDRegistersANewARK: a new object's ARK is taken from the sequence
// in the shoulder and created at EZID with its ERC and target; the job
// keeps it.
func TestEZIDRegistersANewARK(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	j := r.job(t, "alice", "loc-1", "")
	ark, err := r.ez.Mint(ctx, j, erc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ark, shoulder) {
		t.Fatalf("ARK %s is not in %s", ark, shoulder)
	}
	got := r.ezid.Identifier(ark)
	if got["erc.what"] != erc.What || got["erc.who"] != erc.Who || got["erc.when"] != "1931" || got["_profile"] != "erc" ||
		got["_target"] != "https://archive.example/"+ark || got["_owner"] != "archivist" {
		t.Errorf("EZID holds %v", got)
	}
	if again, _ := r.store.Job(ctx, j.ID); again.ARK != ark {
		t.Errorf("the job keeps %q, want %s", again.ARK, ark)
	}
}

// TestEZIDNeverMakesTwoIdentifiers: an answer lost after EZID made the
// ARK, and an outage of EZID, fail the attempt as transient; the next
// attempt takes the same ARK (EZID already holds it, for this account)
// and EZID holds one identifier per object.
func TestEZIDNeverMakesTwoIdentifiers(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()

	lost := r.job(t, "alice", "", "")
	r.ezid.LoseAnswers(1)
	if _, err := r.ez.Mint(ctx, lost, erc); err == nil || fault.IsPermanent(err) {
		t.Fatalf("a lost answer: %v, want a transient error", err)
	}
	again, _ := r.store.Job(ctx, lost.ID)
	ark, err := r.ez.Mint(ctx, again, erc)
	if err != nil || ark != again.ARK {
		t.Fatalf("the retry: %s %v, want the job's %s", ark, err, again.ARK)
	}

	down := r.job(t, "alice", "", "")
	r.ezid.SetDown(true)
	if _, err := r.ez.Mint(ctx, down, erc); err == nil || fault.IsPermanent(err) {
		t.Fatalf("EZID down: %v, want a transient error", err)
	}
	r.ezid.SetDown(false)
	again, _ = r.store.Job(ctx, down.ID)
	if _, err := r.ez.Mint(ctx, again, erc); err != nil {
		t.Fatal(err)
	}
	if n := r.ezid.Creates.Load(); n != 2 || len(r.ezid.Identifiers()) != 2 {
		t.Errorf("EZID made %d identifiers (%v) for two objects", n, r.ezid.Identifiers())
	}
}

// TestEZIDUpdatesALaterVersion: a job of the same local identifier gets
// the same ARK, and EZID its new metadata; an ARK EZID holds for another
// account is refused for good; wrong credentials are a permanent fault.
func TestEZIDUpdatesALaterVersion(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	first, err := r.ez.Mint(ctx, r.job(t, "alice", "loc-7", ""), erc)
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.ez.Mint(ctx, r.job(t, "alice", "loc-7", ""), inventory.ERC{Who: erc.Who, What: "The Waves, revised", When: "1932"})
	if err != nil || second != first {
		t.Fatalf("second version: %s %v, want %s", second, err, first)
	}
	if got := r.ezid.Identifier(first); got["erc.what"] != "The Waves, revised" || got["erc.when"] != "1932" {
		t.Errorf("after the second version EZID holds %v", got)
	}
	if r.ezid.Creates.Load() != 1 {
		t.Errorf("%d identifiers made for one object", r.ezid.Creates.Load())
	}

	// The number's ARK is already another account's at EZID (a shoulder
	// shared with EZID's own minter): left to it, the next number minted.
	taken := r.job(t, "alice", "", "")
	theirs := nextARK(t, r, taken)
	r.ezid.Hold(theirs, "someone-else")
	got, err := r.ez.Mint(ctx, taken, erc)
	if err != nil || got == theirs || !strings.HasPrefix(got, shoulder) {
		t.Fatalf("an ARK another account holds: %q %v, want the next number", got, err)
	}
	if held := r.ezid.Identifier(theirs); held["_owner"] != "someone-else" || held["erc.what"] != "" {
		t.Errorf("the other account's identifier was changed: %v", held)
	}

	bad := *r.ez
	bad.Client = &identifier.EZIDClient{Base: r.ezid.URL, User: "archivist", Password: "wrong"}
	if _, err := bad.Mint(ctx, r.job(t, "alice", "", ""), erc); !fault.IsPermanent(err) || !strings.Contains(err.Error(), "unauthorized") {
		t.Errorf("wrong credentials: %v, want a permanent error", err)
	}
}

// nextARK is the ARK the job will be given: its number is taken now (the
// sequence advances), as Mint would, and kept on the job.
func nextARK(t *testing.T, r *rig, j *ingest.JobRow) string {
	t.Helper()
	ark, err := r.local.Mint(context.Background(), j, erc)
	if err != nil {
		t.Fatal(err)
	}
	// Recorded as the EZID minter's, not yet registered: the next Mint
	// registers it.
	if _, err := r.db.Exec(context.Background(), `UPDATE curator.arks SET minter = 'ezid' WHERE ark = $1`, ark); err != nil {
		t.Fatal(err)
	}
	j.ARK = ark
	return ark
}

// TestSuppliedARKs: a supplied ARK (primary) is the new object's, not
// registered (it is the depositor's); a later job of its local identifier
// may name it again; one naming another ARK than its local identifier's,
// or an ARK of another depositor, fails for good.
func TestSuppliedARKs(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	const theirs, kept = "ark:/13030/m5abc", "ark:13030/m5abc" // kept in normal form
	ark, err := r.ez.Mint(ctx, r.job(t, "alice", "loc-s", theirs), erc)
	if err != nil || ark != kept {
		t.Fatalf("supplied: %s %v", ark, err)
	}
	if r.ezid.Creates.Load() != 0 {
		t.Error("a supplied ARK was registered")
	}
	if ark, err := r.ez.Mint(ctx, r.job(t, "alice", "loc-s", theirs), erc); err != nil || ark != kept {
		t.Errorf("the same again: %s %v", ark, err)
	}
	for _, c := range []struct {
		submitter, local, primary, want string
	}{
		{"alice", "loc-s", "ark:/13030/m5other", "local id \"loc-s\" is ark:13030/m5abc, not the supplied ark:/13030/m5other"},
		{"bob", "", theirs, "an object of another depositor or collection"},
		{"alice", "loc-t", theirs, "is local id \"loc-s\", not \"loc-t\""},
	} {
		_, err := r.local.Mint(ctx, r.job(t, c.submitter, c.local, c.primary), erc)
		if !fault.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// TestANVL: names and values with '%', line ends and colons go through
// EZID's encoding and back.
func TestANVL(t *testing.T) {
	in := map[string]string{"erc.what": "50% off:\nline two\r", "odd:name": "v", "_target": "https://x/a%20b"}
	out, err := identifier.DecodeANVL(strings.NewReader(identifier.EncodeANVL(in)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range in {
		if out[k] != v {
			t.Errorf("%q: %q, want %q", k, out[k], v)
		}
	}
	if _, err := identifier.DecodeANVL(strings.NewReader("no colon here\n"), 1<<20); err == nil {
		t.Error("a line without a colon was read")
	}
}

// TestEZIDClientSpeaksTheAPI: mint in a shoulder, get, update and create
// as EZID documents them; an identifier EZID lacks is ErrNoSuchIdentifier,
// one it has ErrExists on create.
func TestEZIDClientSpeaksTheAPI(t *testing.T) {
	srv := ezid.Start("u", "p")
	defer srv.Close()
	c := &identifier.EZIDClient{Base: srv.URL, User: "u", Password: "p"}
	ctx := context.Background()
	id, err := c.Mint(ctx, "ark:/99999/fk4", map[string]string{"erc.what": "minted: a test"})
	if err != nil || !strings.HasPrefix(id, "ark:/99999/fk4") {
		t.Fatalf("mint: %q %v", id, err)
	}
	if err := c.Update(ctx, id, map[string]string{"erc.who": "someone"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, id)
	if err != nil || got["erc.what"] != "minted: a test" || got["erc.who"] != "someone" || got["_owner"] != "u" {
		t.Errorf("get: %v %v", got, err)
	}
	if err := c.Create(ctx, id, nil); !errors.Is(err, identifier.ErrExists) {
		t.Errorf("create of an existing identifier: %v", err)
	}
	if _, err := c.Get(ctx, "ark:/99999/fk4none"); !errors.Is(err, identifier.ErrNoSuchIdentifier) || !fault.IsPermanent(err) {
		t.Errorf("get of a missing identifier: %v", err)
	}
}
