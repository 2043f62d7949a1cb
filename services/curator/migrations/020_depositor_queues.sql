-- A fair share for every depositor (#48): each state's daemon lists the
-- due batches and jobs of every depositor with work in the state, a few of
-- each, one index seek per depositor, so that a depositor with thousands
-- waiting does not push the others off the list.
CREATE INDEX jobs_depositor_queue ON curator.jobs (state, submitter, priority, id);
CREATE INDEX batches_depositor_queue ON curator.batches (state, submitter, id);

---- create above / drop below ----

DROP INDEX curator.batches_depositor_queue;
DROP INDEX curator.jobs_depositor_queue;
