-- The archive-file registry: every ARC/WARC file the indexer knows of, and
-- how its indexing went.
CREATE TABLE indexer.files (
    name          text PRIMARY KEY,           -- the file's key in the blob store
    kind          text        NOT NULL CHECK (kind IN ('warc', 'arc')),
    size          bigint      NOT NULL DEFAULT 0,
    discovered_at timestamptz NOT NULL DEFAULT now(),
    status        text        NOT NULL DEFAULT 'new'
                  CHECK (status IN ('new', 'queued', 'indexing', 'indexed', 'failed', 'parked')),
    status_at     timestamptz NOT NULL DEFAULT now(),
    attempts      integer     NOT NULL DEFAULT 0,
    failures      integer     NOT NULL DEFAULT 0,
    last_error    text        NOT NULL DEFAULT '',
    output        text        NOT NULL DEFAULT '',  -- blob key of the current CDX output
    lines         bigint      NOT NULL DEFAULT 0,
    complete      boolean     NOT NULL DEFAULT false,
    indexed_at    timestamptz,
    announced     boolean     NOT NULL DEFAULT true -- index.cdx.ready published for output
);
-- What to hand out next: fewest failures first, then newest.
CREATE INDEX files_due ON indexer.files (failures, discovered_at DESC) WHERE status IN ('new', 'failed');
CREATE INDEX files_unannounced ON indexer.files (name) WHERE NOT announced;

---- create above / drop below ----

DROP TABLE indexer.files;
