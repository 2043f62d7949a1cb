-- Source records: episodes and clips as each curating system last described
-- them, keyed by (source, id). version is the sent_at of the event that wrote
-- the row: a newer event wins, an equal one is an idempotent replay, an older
-- one is skipped. same_as holds the record's links as "source:id" keys.
CREATE TABLE curator.episodes (
    source             text        NOT NULL,
    id                 text        NOT NULL,
    title              text        NOT NULL,
    media_key          text        NOT NULL,
    media_sha256       text        NOT NULL DEFAULT '',
    duration_ms        bigint      NOT NULL,
    priority           integer     NOT NULL,
    initial_curated_at timestamptz NOT NULL,
    latest_curated_at  timestamptz NOT NULL,
    same_as            text[]      NOT NULL DEFAULT '{}',
    version            timestamptz NOT NULL,
    event_id           text        NOT NULL,
    producer           text        NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    key                text        GENERATED ALWAYS AS (source || ':' || id) STORED,
    PRIMARY KEY (source, id)
);
-- key is unique because the primary key is and sources hold no ':'. It is
-- not a second unique constraint: ON CONFLICT arbitrates on one only.
CREATE INDEX episodes_key ON curator.episodes (key);

CREATE TABLE curator.clips (LIKE curator.episodes INCLUDING ALL);

-- The matcher's graph nodes: every key a record or a same-as link names,
-- with the graph (its canonical key) it was last matched into. A node's row
-- is its lock: the matcher locks every node of the graphs it recomputes.
CREATE TABLE curator.match_nodes (
    kind       text        NOT NULL CHECK (kind IN ('episode', 'clip')),
    key        text        NOT NULL,
    graph      text        NOT NULL,
    matched_at timestamptz,
    PRIMARY KEY (kind, key)
);
CREATE INDEX match_nodes_graph ON curator.match_nodes (kind, graph);

-- Undirected same-as edges as each record states them (from its latest
-- version); the reverse index finds who links to a key.
CREATE TABLE curator.match_links (
    kind     text NOT NULL,
    from_key text NOT NULL,
    to_key   text NOT NULL,
    PRIMARY KEY (kind, from_key, to_key)
);
CREATE INDEX match_links_to ON curator.match_links (kind, to_key);

-- The merger's output: one row per key, either the merged work it heads, a
-- redirect to the work it was merged into, or gone (its graph has no source
-- record). version is the matcher's time of the graph it was built from.
CREATE TABLE curator.works (
    kind               text        NOT NULL,
    key                text        NOT NULL,
    version            timestamptz NOT NULL,
    state              text        NOT NULL CHECK (state IN ('work', 'redirect', 'gone')),
    redirect_to        text        NOT NULL DEFAULT '',
    members            text[]      NOT NULL DEFAULT '{}',
    title              text        NOT NULL DEFAULT '',
    media_key          text        NOT NULL DEFAULT '',
    media_sha256       text        NOT NULL DEFAULT '',
    duration_ms        bigint      NOT NULL DEFAULT 0,
    priority           integer     NOT NULL DEFAULT 0,
    initial_curated_at timestamptz,
    latest_curated_at  timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key)
);
CREATE INDEX works_redirect_to ON curator.works (kind, redirect_to) WHERE state = 'redirect';

---- create above / drop below ----

DROP TABLE curator.works;
DROP TABLE curator.match_links;
DROP TABLE curator.match_nodes;
DROP TABLE curator.clips;
DROP TABLE curator.episodes;
