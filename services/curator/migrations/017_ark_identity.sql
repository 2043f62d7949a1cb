-- contract: (#47) a build before #47 stores ARKs without their normal form
-- and storage prefix and fails here: roll back across #47 by restoring
-- the database from before it.
-- An identifier names one object for ever (#47).
--
-- ARKs are compared in their normal form (the ARK specification's
-- lexical equivalence: package ingest/ark, Normalize; curator.ark_norm is
-- the same rules in SQL, held to the Go code by TestARKRulesInSQL): every
-- spelling of one ARK finds the one row of its object, which keeps the
-- spelling it was first given. Each object keeps its versions under a
-- storage prefix of its own (ark.StoragePrefix, one to one with the normal
-- form): no other object's keys can begin with it.
CREATE FUNCTION curator.ark_norm(a text) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    m    text[];
    name text;
    norm text := '';
    i    int := 1;
BEGIN
    IF length(a) > 256 OR a !~ '^[!-~]+$' THEN
        RETURN NULL;
    END IF;
    m := regexp_match(a, '^[aA][rR][kK]:/?([^/]*)/(.*)$');
    IF m IS NULL OR lower(m[1]) !~ '^[0-9bcdfghjkmnpqrstvwxz]{5,}$' THEN
        RETURN NULL;
    END IF;
    name := replace(m[2], '-', '');
    WHILE i <= length(name) LOOP
        IF substr(name, i, 1) = '%' AND substr(name, i + 1, 2) ~ '^[0-9A-Fa-f]{2}$' THEN
            norm := norm || '%' || upper(substr(name, i + 1, 2));
            i := i + 3;
        ELSE
            norm := norm || substr(name, i, 1);
            i := i + 1;
        END IF;
    END LOOP;
    norm := rtrim(norm, '/.');
    IF norm = '' THEN
        RETURN NULL;
    END IF;
    RETURN 'ark:' || lower(m[1]) || '/' || norm;
END $$;

CREATE FUNCTION curator.ark_storage_prefix(a text) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    n   text := coalesce(curator.ark_norm(a), a);
    out text := 'objects/';
    c   text;
BEGIN
    FOR i IN 1..length(n) LOOP
        c := substr(n, i, 1);
        IF c ~ '^[0-9A-Za-z:._~=*+@$]$' THEN
            out := out || c;
        ELSE
            out := out || '%' || upper(lpad(to_hex(ascii(c)), 2, '0'));
        END IF;
    END LOOP;
    RETURN out || '/';
END $$;

ALTER TABLE curator.arks ADD COLUMN norm text;
ALTER TABLE curator.arks ADD COLUMN storage_prefix text;
UPDATE curator.arks SET norm = coalesce(curator.ark_norm(ark), ark), storage_prefix = curator.ark_storage_prefix(ark);

-- Two objects whose ARKs are spellings of one identifier cannot both keep
-- it: the upgrade stops, naming them, for an operator to decide.
DO $$
DECLARE
    dup text;
BEGIN
    SELECT string_agg(arks, '; ') INTO dup FROM (
        SELECT norm || ': ' || string_agg(ark, ', ' ORDER BY minted_at) AS arks FROM curator.arks GROUP BY norm HAVING count(*) > 1
    ) d;
    IF dup IS NOT NULL THEN
        RAISE EXCEPTION 'these objects have ARKs that are one identifier, which names one object only: %', dup
            USING HINT = 'give all but one a new ARK (UPDATE curator.arks, curator.jobs and the inventory tables), then migrate again';
    END IF;
END $$;

ALTER TABLE curator.arks ALTER COLUMN norm SET NOT NULL;
ALTER TABLE curator.arks ALTER COLUMN storage_prefix SET NOT NULL;
CREATE UNIQUE INDEX arks_norm ON curator.arks (norm);
CREATE UNIQUE INDEX arks_storage_prefix ON curator.arks (storage_prefix);

-- EZID: the tag a create of the ARK carries (archivist.tag), made with the
-- number; an "already exists" is this archive's own only when EZID holds
-- the tag.
ALTER TABLE curator.arks ADD COLUMN tag text NOT NULL DEFAULT '';

-- The shoulders (or NAANs) under which a batch's depositor may supply ARKs
-- that name no object yet: its key's arks= (comma-separated; "*" any but
-- the archive's own shoulder; '' none). NULL for batches submitted before,
-- which keep the old rule.
ALTER TABLE curator.batches ADD COLUMN ark_shoulders text;

---- create above / drop below ----

ALTER TABLE curator.batches DROP COLUMN ark_shoulders;
ALTER TABLE curator.arks DROP COLUMN tag;
DROP INDEX curator.arks_storage_prefix;
DROP INDEX curator.arks_norm;
ALTER TABLE curator.arks DROP COLUMN storage_prefix;
ALTER TABLE curator.arks DROP COLUMN norm;
DROP FUNCTION curator.ark_storage_prefix(text);
DROP FUNCTION curator.ark_norm(text);
