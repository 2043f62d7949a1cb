-- Ingest (ingest-queue-state-transitions.txt): batches, their jobs (one per
-- object), every transition's history, collection holds, the queue switch,
-- minted ARKs and the inventory. A transition is one transaction over these
-- rows; a claim on a batch or job is a PostgreSQL session advisory lock, so
-- it dies with its worker's connection.
CREATE TABLE curator.ingest_queue (
    id        integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    paused    boolean     NOT NULL DEFAULT false,
    paused_at timestamptz
);
INSERT INTO curator.ingest_queue (id) VALUES (1);

CREATE TABLE curator.collection_holds (
    profile text PRIMARY KEY,
    held_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE curator.batches (
    id           bigserial PRIMARY KEY,
    submitter    text        NOT NULL,
    profile      text        NOT NULL,
    payload_url  text        NOT NULL,
    type         text        NOT NULL CHECK (type IN ('file', 'container', 'manifest', 'batch-manifest', 'manifest-of-manifests')),
    title        text        NOT NULL DEFAULT '',
    creator      text        NOT NULL DEFAULT '',
    date         text        NOT NULL DEFAULT '',
    callback_url text        NOT NULL DEFAULT '',
    state        text        NOT NULL DEFAULT 'pending',
    state_at     timestamptz NOT NULL DEFAULT now(),
    error        text        NOT NULL DEFAULT '',
    report       jsonb,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX batches_state ON curator.batches (state, id);

CREATE TABLE curator.jobs (
    id              bigserial PRIMARY KEY,
    batch_id        bigint      NOT NULL REFERENCES curator.batches (id) ON DELETE CASCADE,
    profile         text        NOT NULL,
    priority        integer     NOT NULL DEFAULT 5,
    state           text        NOT NULL DEFAULT 'pending',
    state_at        timestamptz NOT NULL DEFAULT now(),
    last_successful text        NOT NULL DEFAULT '',
    retry_count     integer     NOT NULL DEFAULT 0,
    error           text        NOT NULL DEFAULT '',
    kind            text        NOT NULL CHECK (kind IN ('file', 'container', 'manifest')),
    payload_url     text        NOT NULL,
    local_id        text        NOT NULL DEFAULT '',
    title           text        NOT NULL DEFAULT '',
    files           jsonb       NOT NULL DEFAULT '[]',
    space_needed    bigint      NOT NULL DEFAULT 0,
    ark             text        NOT NULL DEFAULT '',
    version         integer     NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now()
);
-- The queue of each state: lower priority number first, then oldest.
CREATE INDEX jobs_queue ON curator.jobs (state, priority, id);
CREATE INDEX jobs_batch ON curator.jobs (batch_id, state);

CREATE TABLE curator.ingest_history (
    id         bigserial PRIMARY KEY,
    entity     text        NOT NULL CHECK (entity IN ('batch', 'job')),
    entity_id  bigint      NOT NULL,
    from_state text        NOT NULL,
    to_state   text        NOT NULL,
    by         text        NOT NULL,
    action     text        NOT NULL,
    detail     text        NOT NULL DEFAULT '',
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ingest_history_entity ON curator.ingest_history (entity, entity_id, id);

-- ARKs from the local minter: one per object, kept across restarts and
-- requeues (the job row holds its ARK from the transaction that minted it).
CREATE SEQUENCE curator.ark_seq;
CREATE TABLE curator.arks (
    ark       text PRIMARY KEY,
    profile   text        NOT NULL,
    local_id  text        NOT NULL DEFAULT '',
    job_id    bigint      NOT NULL,
    minted_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX arks_local_id ON curator.arks (profile, local_id) WHERE local_id <> '';

-- The inventory: objects, their versions, and every file with its size and
-- digest.
CREATE TABLE curator.inventory_objects (
    ark        text PRIMARY KEY,
    profile    text        NOT NULL,
    local_id   text        NOT NULL DEFAULT '',
    title      text        NOT NULL DEFAULT '',
    versions   integer     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE curator.inventory_versions (
    ark          text        NOT NULL REFERENCES curator.inventory_objects (ark),
    version      integer     NOT NULL,
    job_id       bigint      NOT NULL,
    manifest_key text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ark, version)
);
CREATE TABLE curator.inventory_files (
    ark     text   NOT NULL,
    version integer NOT NULL,
    path    text   NOT NULL,
    key     text   NOT NULL,
    size    bigint NOT NULL,
    sha256  text   NOT NULL,
    PRIMARY KEY (ark, version, path),
    FOREIGN KEY (ark, version) REFERENCES curator.inventory_versions (ark, version)
);

---- create above / drop below ----

DROP TABLE curator.inventory_files;
DROP TABLE curator.inventory_versions;
DROP TABLE curator.inventory_objects;
DROP TABLE curator.arks;
DROP SEQUENCE curator.ark_seq;
DROP TABLE curator.ingest_history;
DROP TABLE curator.jobs;
DROP TABLE curator.batches;
DROP TABLE curator.collection_holds;
DROP TABLE curator.ingest_queue;
