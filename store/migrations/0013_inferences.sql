-- 0013: a case record keeps what the person stated (`stated_facts`) apart from what the drafter
-- inferred (`inferences`), in every revision and on the memory row (issue 13, item 4).
ALTER TABLE memories ADD COLUMN inferences text[] NOT NULL DEFAULT '{}';
