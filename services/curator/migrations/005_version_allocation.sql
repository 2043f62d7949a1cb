-- The last version number given out for each object: two jobs of one ARK
-- (two deposits of one local id) get different versions, instead of both
-- computing "versions + 1" and writing over each other's files. A job that
-- fails after its number was given leaves a gap: versions increase, but
-- need not be consecutive.
CREATE TABLE curator.ark_versions (
    ark  text PRIMARY KEY,
    last integer NOT NULL
);
INSERT INTO curator.ark_versions (ark, last)
SELECT ark, max(v) FROM (
    SELECT ark, versions AS v FROM curator.inventory_objects
    UNION ALL SELECT ark, version FROM curator.jobs WHERE ark <> '' AND version > 0
) s GROUP BY ark;

---- create above / drop below ----

DROP TABLE curator.ark_versions;
