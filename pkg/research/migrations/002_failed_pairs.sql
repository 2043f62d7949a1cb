-- A clip that cannot be researched (its media missing, undecodable or beyond
-- a bound) is parked: its pair is 'failed', not leased again, and its result
-- row holds the reason instead of occurrences.
ALTER TABLE research.pairs DROP CONSTRAINT pairs_state_check;
ALTER TABLE research.pairs ADD CONSTRAINT pairs_state_check CHECK (state IN ('leased', 'researched', 'failed'));
ALTER TABLE research.results ADD COLUMN failure text;

---- create above / drop below ----

ALTER TABLE research.results DROP COLUMN failure;
DELETE FROM research.pairs WHERE state = 'failed';
ALTER TABLE research.pairs DROP CONSTRAINT pairs_state_check;
ALTER TABLE research.pairs ADD CONSTRAINT pairs_state_check CHECK (state IN ('leased', 'researched'));
