-- Exclusions of one access point (#52): access_point names the open view
-- of the index (AGGREGATOR_ACCESS_POINTS) the exclusion hides captures
-- from; '' is every view, staff's too (a takedown).
ALTER TABLE aggregator.exclusions ADD COLUMN access_point text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE aggregator.exclusions DROP COLUMN access_point;
