-- Every item an action moved, so that the item's history shows the action
-- (whatever the action's size: work_actions.items names only the first
-- 1,000).
CREATE TABLE {{.schema}}.work_action_items (
    ref    text   NOT NULL,
    action bigint NOT NULL REFERENCES {{.schema}}.work_actions (id) ON DELETE CASCADE,
    PRIMARY KEY (ref, action)
);
CREATE INDEX work_action_items_action ON {{.schema}}.work_action_items (action);

---- create above / drop below ----

DROP TABLE {{.schema}}.work_action_items;
