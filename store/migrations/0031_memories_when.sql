-- When a memory happened, as a time-scoped search filters it (coalesce(occurred_at, created_at),
-- store.search.hybrid.RANGE_IDS): "in March 2023" reads the month's memories through this index
-- instead of testing every memory (issue 9: a month's search at 100k memories took ~0.3-0.5 s).
CREATE INDEX memories_when ON memories ((coalesce(occurred_at, created_at)));
