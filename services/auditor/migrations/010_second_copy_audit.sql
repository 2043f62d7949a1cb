-- The second copy, audited (#49): its own cycle over the content index (a
-- cursor and the passes ended), and its own record of checks.
CREATE TABLE auditor.copy_audit (
    copy            text PRIMARY KEY,
    after           text        NOT NULL DEFAULT '',   -- the last object checked this pass
    checked         bigint      NOT NULL DEFAULT 0,    -- objects checked this pass
    pass_started_at timestamptz NOT NULL DEFAULT now(),
    passes          bigint      NOT NULL DEFAULT 0
);

CREATE TABLE auditor.copy_log (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    copy    text        NOT NULL,
    object  text        NOT NULL,
    outcome text        NOT NULL,   -- held, missing: copied back, sour: copied back, both bad, ...
    note    text        NOT NULL DEFAULT '',
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX copy_log_object ON auditor.copy_log (object, at DESC);
CREATE INDEX copy_log_at ON auditor.copy_log (at);

---- create above / drop below ----

DROP TABLE auditor.copy_log;
DROP TABLE auditor.copy_audit;
