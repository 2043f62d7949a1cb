-- The research context (pwa and cwa): the pwa's copy of merged episodes and
-- clips, research state per (episode, clip), leases and results.
--
-- Research state is kept sparse: a pair has a row in pairs only once it is
-- leased or researched; an unresearched, unleased pair has none. Each
-- episode counts its open clips (active clips with no pair row), so that
-- finding an episode with work to lease is an index scan, not a count over
-- 20,000 × 1,000 pairs.

CREATE TABLE research.episodes (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key                text        NOT NULL UNIQUE,
    active             boolean     NOT NULL,
    title              text        NOT NULL DEFAULT '',
    media_key          text        NOT NULL DEFAULT '',
    media_sha256       text        NOT NULL DEFAULT '',
    duration_ms        bigint      NOT NULL DEFAULT 0,
    priority           integer     NOT NULL DEFAULT 0,
    initial_curated_at timestamptz NOT NULL DEFAULT 'epoch',
    version            timestamptz NOT NULL,
    open_clips         integer     NOT NULL DEFAULT 0,
    researched_clips   integer     NOT NULL DEFAULT 0
);
-- Selection: the first open episode by priority, then newest initial curation.
CREATE INDEX episodes_selection ON research.episodes (priority DESC, initial_curated_at DESC, id)
    WHERE active AND open_clips > 0;

CREATE TABLE research.clips (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key                text        NOT NULL UNIQUE,
    active             boolean     NOT NULL,
    title              text        NOT NULL DEFAULT '',
    media_key          text        NOT NULL DEFAULT '',
    media_sha256       text        NOT NULL DEFAULT '',
    duration_ms        bigint      NOT NULL DEFAULT 0,
    priority           integer     NOT NULL DEFAULT 0,
    initial_curated_at timestamptz NOT NULL DEFAULT 'epoch',
    version            timestamptz NOT NULL
);
CREATE INDEX clips_selection ON research.clips (priority DESC, initial_curated_at DESC, id) WHERE active;

CREATE TABLE research.leases (
    id         uuid        PRIMARY KEY,
    episode_id bigint      NOT NULL REFERENCES research.episodes (id),
    clip_ids   bigint[]    NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    state      text        NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'revoked', 'expired')),
    ended_at   timestamptz
);
CREATE INDEX leases_active_expiry ON research.leases (expires_at) WHERE state = 'active';

-- state: 'leased' (lease_id names the lease) or 'researched'.
CREATE TABLE research.pairs (
    episode_id bigint NOT NULL REFERENCES research.episodes (id),
    clip_id    bigint NOT NULL REFERENCES research.clips (id),
    state      text   NOT NULL CHECK (state IN ('leased', 'researched')),
    lease_id   uuid,
    PRIMARY KEY (episode_id, clip_id)
);
CREATE INDEX pairs_lease ON research.pairs (lease_id) WHERE state = 'leased';

-- One result per pair: the first stored wins; a redelivered or duplicated
-- result changes nothing. occurrences is a JSON array of
-- {offset_ms, duration_ms, confidence}, empty when the clip was not found.
CREATE TABLE research.results (
    episode_id  bigint      NOT NULL REFERENCES research.episodes (id),
    clip_id     bigint      NOT NULL REFERENCES research.clips (id),
    lease_id    uuid        NOT NULL,
    researcher  text        NOT NULL,
    occurrences jsonb       NOT NULL,
    stored_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (episode_id, clip_id)
);

---- create above / drop below ----

DROP TABLE research.results;
DROP TABLE research.pairs;
DROP TABLE research.leases;
DROP TABLE research.clips;
DROP TABLE research.episodes;
