-- When each piece of audio (by its declared sha256) was last in a lease,
-- as an episode's or a clip's media, the work that named it then, and
-- when its prints were last retired: prints of audio no lease has named
-- for PWA_PRINT_RETENTION are discarded (research.media.retired, reason
-- "unused"), and a lease naming it again has them made again. Expand
-- only: a release before this one leases without writing it.
CREATE TABLE research.media_use (
    sha256     text        PRIMARY KEY,
    work       text        NOT NULL,
    used_at    timestamptz NOT NULL,
    retired_at timestamptz
);
-- The retention's page: the longest unused first, among those not retired
-- since their last use. Its cost is the due rows, not the table.
CREATE INDEX media_use_due ON research.media_use (used_at) WHERE retired_at IS NULL;

---- create above / drop below ----

DROP TABLE research.media_use;
