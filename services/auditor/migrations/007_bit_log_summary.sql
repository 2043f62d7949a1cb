-- The bit log kept for AUDITOR_BIT_LOG_RETENTION; older checks are
-- summed here, a row per day and outcome, before they are deleted.
CREATE TABLE auditor.bit_log_summary (
    day       date    NOT NULL,
    row_no    integer NOT NULL,
    success   boolean NOT NULL,
    bit_error boolean NOT NULL,
    checks    bigint  NOT NULL,
    PRIMARY KEY (day, row_no, success, bit_error)
);

---- create above / drop below ----

DROP TABLE auditor.bit_log_summary;
