-- Who made each ARK: the local minter, EZID (registered_at once EZID holds
-- it, so that a crash between the number and its registration registers it
-- at the next attempt), or the depositor (a supplied "primary" ARK).
ALTER TABLE curator.arks ADD COLUMN minter text NOT NULL DEFAULT 'local';
ALTER TABLE curator.arks ADD COLUMN registered_at timestamptz;

-- A batch's and a job's supplied ARK ("primary"), and how a new version
-- of an existing object is made: add (the new files are added to the
-- previous version's) or update (the new version holds the new files only).
ALTER TABLE curator.batches ADD COLUMN primary_ark text NOT NULL DEFAULT '';
ALTER TABLE curator.batches ADD COLUMN submission_mode text NOT NULL DEFAULT 'add';
ALTER TABLE curator.jobs ADD COLUMN primary_ark text NOT NULL DEFAULT '';
ALTER TABLE curator.jobs ADD COLUMN submission_mode text NOT NULL DEFAULT 'add';

-- A manifest of containers: each row a zip container, one object each.
ALTER TABLE curator.batches DROP CONSTRAINT batches_type_check;
ALTER TABLE curator.batches ADD CONSTRAINT batches_type_check
    CHECK (type IN ('file', 'container', 'manifest', 'batch-manifest', 'manifest-of-manifests', 'manifest-of-containers'));
ALTER TABLE curator.batches ADD CONSTRAINT batches_submission_mode_check CHECK (submission_mode IN ('add', 'update'));

---- create above / drop below ----

ALTER TABLE curator.batches DROP CONSTRAINT batches_submission_mode_check;
ALTER TABLE curator.batches DROP CONSTRAINT batches_type_check;
ALTER TABLE curator.batches ADD CONSTRAINT batches_type_check
    CHECK (type IN ('file', 'container', 'manifest', 'batch-manifest', 'manifest-of-manifests'));

ALTER TABLE curator.jobs DROP COLUMN submission_mode;
ALTER TABLE curator.jobs DROP COLUMN primary_ark;
ALTER TABLE curator.batches DROP COLUMN submission_mode;
ALTER TABLE curator.batches DROP COLUMN primary_ark;
ALTER TABLE curator.arks DROP COLUMN registered_at;
ALTER TABLE curator.arks DROP COLUMN minter;
