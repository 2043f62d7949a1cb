-- Each collection's (profile's) notification settings: the addresses a
-- confirmation (a batch queued) and a report (a batch ended) are mailed to,
-- and the callback used when a batch names none.
CREATE TABLE curator.profiles (
    profile      text PRIMARY KEY,
    emails       text[]      NOT NULL DEFAULT '{}',
    callback_url text        NOT NULL DEFAULT '',
    confirm      boolean     NOT NULL DEFAULT true,
    report       boolean     NOT NULL DEFAULT true,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Mails queued by the move they tell of, in its transaction, and deleted
-- once sent; one the sender gives up on is parked with its reason.
CREATE TABLE curator.mail_outbox (
    id              bigserial PRIMARY KEY,
    batch_id        bigint      NOT NULL,
    kind            text        NOT NULL,
    recipients      text[]      NOT NULL,
    subject         text        NOT NULL,
    body            text        NOT NULL,
    message_id      text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    first_failed_at timestamptz,
    last_error      text        NOT NULL DEFAULT '',
    parked_at       timestamptz
);
CREATE INDEX mail_outbox_due ON curator.mail_outbox (next_attempt_at) WHERE parked_at IS NULL;

---- create above / drop below ----

DROP TABLE curator.mail_outbox;
DROP TABLE curator.profiles;
