-- A result without occurrences may say why the clip was found nowhere:
-- the researcher's best refused candidates (events.Miss, JSON), NULL where
-- it said nothing. Expand only: a release before this one stores results
-- without it.
ALTER TABLE research.results ADD COLUMN miss jsonb;

---- create above / drop below ----

ALTER TABLE research.results DROP COLUMN miss;
