-- A version is exactly what its mode says, and a takedown sticks (#47).
--
-- One job at a time stores a version of an object: the one whose version
-- is the object's last given out (curator.ark_versions.last), while it is
-- storing or recording. Others wait, then take the next number, carrying
-- the version just recorded. A withdrawal waits for that job too: while
-- withdrawal_until is ahead, no job begins a version of the object.
ALTER TABLE curator.ark_versions ADD COLUMN withdrawal_until timestamptz;
CREATE INDEX jobs_storing_ark ON curator.jobs (ark) WHERE state IN ('storing', 'recording');

-- A withdrawal and the reinstatement that alone lets an object withdrawn
-- take deposits again.
ALTER TABLE curator.withdrawals ADD COLUMN action text NOT NULL DEFAULT 'withdraw';
ALTER TABLE curator.withdrawals ADD CONSTRAINT withdrawals_action_check CHECK (action IN ('withdraw', 'reinstate'));

---- create above / drop below ----

ALTER TABLE curator.withdrawals DROP CONSTRAINT withdrawals_action_check;
ALTER TABLE curator.withdrawals DROP COLUMN action;
DROP INDEX curator.jobs_storing_ark;
ALTER TABLE curator.ark_versions DROP COLUMN withdrawal_until;
