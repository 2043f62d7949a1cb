-- Exclusions (#33): captures an operator takes out of every answer (a
-- takedown, a legal hold), by SURT prefix and optionally a capture time
-- range; exported as pywb ACL rules. The version is bumped with every
-- change, so every replica reloads its copy before its next query.
CREATE TABLE aggregator.exclusions (
    id       bigserial PRIMARY KEY,
    surt     text        NOT NULL CHECK (surt <> ''),
    url      text        NOT NULL DEFAULT '',
    from_ts  text        NOT NULL DEFAULT '',   -- 14-digit timestamp prefix, '' open
    to_ts    text        NOT NULL DEFAULT '',
    reason   text        NOT NULL CHECK (reason <> ''),
    added_by text        NOT NULL,
    added_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE aggregator.exclusions_version (v bigint NOT NULL);
INSERT INTO aggregator.exclusions_version VALUES (0);

---- create above / drop below ----

DROP TABLE aggregator.exclusions_version;
DROP TABLE aggregator.exclusions;
