-- The action log of the work kit (pkg/work), in each schema whose work it
-- serves: every operator's (or depositor's) action on work, who took it,
-- the filter, the count the dry run showed and the actor confirmed, how
-- many items moved, and the outcome (done, refused when the count had
-- moved, failed). Each moved item's own history also names the action.
CREATE TABLE {{.schema}}.work_actions (
    id       bigserial PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor    text        NOT NULL,
    verb     text        NOT NULL,
    filter   jsonb       NOT NULL,
    counted  integer     NOT NULL,
    moved    integer     NOT NULL DEFAULT 0,
    outcome  text        NOT NULL,
    -- The first items moved (pipeline/kind/id), up to 1,000.
    items    jsonb       NOT NULL DEFAULT '[]'
);
CREATE INDEX work_actions_actor ON {{.schema}}.work_actions (actor, id);

---- create above / drop below ----

DROP TABLE {{.schema}}.work_actions;
