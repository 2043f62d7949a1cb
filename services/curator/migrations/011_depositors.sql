-- Depositors own their work. A batch's submitter is the key that submitted
-- it (no longer a field of the body); its jobs carry it, so a publisher lists
-- and reads only its own, and an ARK is reused only for the same depositor's
-- (submitter, collection, local id): another depositor naming the same local
-- id in the same collection gets an object of its own, never a new version
-- of someone else's.
ALTER TABLE curator.jobs ADD COLUMN submitter text NOT NULL DEFAULT '';
UPDATE curator.jobs j SET submitter = b.submitter FROM curator.batches b WHERE b.id = j.batch_id;
CREATE INDEX jobs_submitter ON curator.jobs (submitter, id);
CREATE INDEX batches_submitter ON curator.batches (submitter, id);

-- ARKs minted before this know their submitter only while their job is
-- kept; one whose job was tidied away keeps '' and is reused by no one (an
-- operator may give it its depositor: UPDATE curator.arks SET submitter).
ALTER TABLE curator.arks ADD COLUMN submitter text NOT NULL DEFAULT '';
UPDATE curator.arks a SET submitter = j.submitter FROM curator.jobs j WHERE j.id = a.job_id;
DROP INDEX curator.arks_local_id;
CREATE UNIQUE INDEX arks_local_id ON curator.arks (submitter, profile, local_id) WHERE local_id <> '';

---- create above / drop below ----

DROP INDEX curator.arks_local_id;
-- Fails, deleting nothing, while two depositors have ARKs of one
-- (collection, local id): an operator decides which keeps its local id.
CREATE UNIQUE INDEX arks_local_id ON curator.arks (profile, local_id) WHERE local_id <> '';
ALTER TABLE curator.arks DROP COLUMN submitter;
DROP INDEX curator.batches_submitter;
DROP INDEX curator.jobs_submitter;
ALTER TABLE curator.jobs DROP COLUMN submitter;
