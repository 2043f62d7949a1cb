-- An HTTP record's message id on the bus is unforgeable (#48, N31): the
-- CURATION stream de-duplicates by message id over the whole stream, so a
-- NATS publisher that sent "radio/KEY" first had radio's POST with
-- Idempotency-Key KEY answered as a duplicate and stored nowhere. The API
-- now sends an HMAC of the event id under this secret, which no publisher
-- knows; every curator replica reads the same one.
CREATE TABLE curator.secrets (
    name  text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO curator.secrets (name, value)
    VALUES ('idempotency', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));

---- create above / drop below ----

DROP TABLE curator.secrets;
