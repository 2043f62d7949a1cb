-- contract: (#33) the flat generations are retired; a build before #33 reads
-- aggregator.generations and does not run on this schema: roll back across
-- #33 by restoring the database from before it.
-- Generations become ZipNum clusters in levels (#33): each build of new
-- outputs is a level-0 cluster; a level holding AGGREGATOR_LEVEL_FACTOR
-- clusters merges its oldest into one of the next level. A cluster covers
-- a range of builds (lo..hi), disjoint from every other's. The two flat
-- generations are retired; every output is built again into clusters.
CREATE SEQUENCE aggregator.builds;

CREATE TABLE aggregator.clusters (
    id        bigserial PRIMARY KEY,
    level     integer     NOT NULL,
    name      text        NOT NULL UNIQUE, -- its files are PREFIX || name || '/' || name || '.idx' and so on
    parts     integer     NOT NULL,
    lo        bigint      NOT NULL,        -- the builds it holds
    hi        bigint      NOT NULL,
    lines     bigint      NOT NULL,
    blocks    bigint      NOT NULL,
    bytes     bigint      NOT NULL,
    sources   bigint      NOT NULL,        -- outputs merged into it
    first_key text        NOT NULL,
    last_key  text        NOT NULL,
    built_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (lo <= hi)
);
CREATE INDEX clusters_level ON aggregator.clusters (level, lo);

-- The build an output's lines went into (NULL: not built yet); a withdrawn
-- file's lines answer no query and leave the next merge.
ALTER TABLE aggregator.outputs ADD COLUMN build bigint, ADD COLUMN withdrawn boolean NOT NULL DEFAULT false;
CREATE INDEX outputs_unbuilt ON aggregator.outputs (file) WHERE build IS NULL AND NOT withdrawn;

-- A mask hides the lines of an archive file (by the name its CDX lines
-- carry) that a build holds: the file was re-indexed or withdrawn after
-- that build. It is applied by every query on the cluster holding the
-- build and dropped when that cluster is merged (its lines left out).
CREATE TABLE aggregator.masks (
    name      text   NOT NULL,
    build     bigint NOT NULL,
    file      text   NOT NULL,
    masked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, build)
);
CREATE INDEX masks_build ON aggregator.masks (build);

INSERT INTO aggregator.retired (key) SELECT key FROM aggregator.generations WHERE key <> '' ON CONFLICT DO NOTHING;
DROP TABLE aggregator.generations;

---- create above / drop below ----

CREATE TABLE aggregator.generations (
    level    text PRIMARY KEY CHECK (level IN ('main', 'recent')),
    key      text        NOT NULL,
    lines    bigint      NOT NULL,
    bytes    bigint      NOT NULL,
    sources  integer     NOT NULL,
    built_at timestamptz NOT NULL
);
INSERT INTO aggregator.generations VALUES ('main', '', 0, 0, 0, 'epoch'), ('recent', '', 0, 0, 0, 'epoch');
DROP TABLE aggregator.masks;
DROP INDEX aggregator.outputs_unbuilt;
ALTER TABLE aggregator.outputs DROP COLUMN build, DROP COLUMN withdrawn;
DROP TABLE aggregator.clusters;
DROP SEQUENCE aggregator.builds;
