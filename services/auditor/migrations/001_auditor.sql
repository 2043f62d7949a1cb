-- The auditor's sources of truth besides the blob store, and what its checks
-- produce.

-- The content index: what the archive believes each object is.
CREATE TABLE auditor.content_index (
    object     text PRIMARY KEY,
    checksum   text,                      -- sha256 hex; NULL when lost
    size       bigint,
    properties jsonb,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The audit log: append-only add/update/delete events with their checksums.
-- An object's audit checksum is its latest event's (none after a delete).
CREATE TABLE auditor.audit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    object     text        NOT NULL,
    action     text        NOT NULL CHECK (action IN ('add', 'update', 'delete')),
    checksum   text,
    size       bigint,
    properties jsonb,
    source     text        NOT NULL DEFAULT 'event', -- 'event:<event id>', or 'patch' by a check
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_object ON auditor.audit_log (object, id DESC);

-- The bit log: one row per completed check, with every value compared.
CREATE TABLE auditor.bit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    object     text        NOT NULL,
    row_no     integer     NOT NULL,   -- the row of the outcome table (0: no row matched)
    success    boolean     NOT NULL,
    bit_error  boolean     NOT NULL DEFAULT false,
    attempt    integer     NOT NULL,
    checks     jsonb       NOT NULL,   -- {content, provider, index, log}: value, state
    note       text        NOT NULL DEFAULT '',
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bit_log_at ON auditor.bit_log (at);
CREATE INDEX bit_log_object ON auditor.bit_log (object, at DESC);

-- Problems for people (or a repair process): internally or externally
-- resolvable.
CREATE TABLE auditor.resolution_tasks (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    object     text        NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('internal', 'external')),
    reason     text        NOT NULL,
    row_no     integer     NOT NULL,
    state      text        NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX resolution_tasks_open ON auditor.resolution_tasks (object, kind, row_no) WHERE state = 'open';

-- The audit queue: objects whose audit records must be captured again.
CREATE TABLE auditor.audit_queue (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    object     text        NOT NULL,
    reason     text        NOT NULL,
    row_no     integer     NOT NULL,
    done       boolean     NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX audit_queue_pending ON auditor.audit_queue (object) WHERE NOT done;

-- The schedule: every object once per cycle, spread over it.
CREATE TABLE auditor.schedule (
    object       text PRIMARY KEY,
    next_due     timestamptz NOT NULL,
    queued_for   timestamptz,   -- the due time of the task last queued
    checked_at   timestamptz    -- when a check last completed
);
CREATE INDEX schedule_due ON auditor.schedule (next_due);

---- create above / drop below ----

DROP TABLE auditor.schedule;
DROP TABLE auditor.audit_queue;
DROP TABLE auditor.resolution_tasks;
DROP TABLE auditor.bit_log;
DROP TABLE auditor.audit_log;
DROP TABLE auditor.content_index;
