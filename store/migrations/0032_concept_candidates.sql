-- Issue 27, item 3: a noun becomes a concept only when it recurs (two or more experiences show
-- it), an experience names it as its topic (the record's title or tags), or a stated relation
-- joins it to one that does. Every name an
-- experience shows, and every relation it states, is still stored, so that the second
-- experience finds the first one's and a concept's standing depends only on what is stored
-- (incremental = rebuild; a withdrawn experience takes it back). The tables become
-- `concept_names` (with an `established` flag) and `concept_relations`; `concepts` and
-- `concept_links` are now the views of the established concepts and of the relations between
-- two of them, which every reader reads (docs/adr/0021-concepts.md).
ALTER TABLE concepts RENAME TO concept_names;
ALTER INDEX concepts_keys RENAME TO concept_names_keys;
-- recurs: two or more experiences show it, or one names it as its topic; established: it
-- recurs, or a stated relation joins it to a name that recurs (気分転換 of 登山で気分転換になった)
ALTER TABLE concept_names ADD COLUMN recurs boolean NOT NULL DEFAULT false;
ALTER TABLE concept_names ADD COLUMN established boolean NOT NULL DEFAULT false;
-- the experience names the concept as its topic (its title or one of its tags)
ALTER TABLE experience_links ADD COLUMN topic boolean NOT NULL DEFAULT false;
UPDATE concept_names c SET recurs = (
    SELECT count(*) >= 2 OR coalesce(bool_or(l.topic), false)
      FROM experience_links l WHERE l.concept_id = c.id);
UPDATE concept_names c SET established = c.recurs OR EXISTS (
    SELECT 1 FROM concept_links r JOIN concept_names o
        ON o.id = CASE WHEN r.source_id = c.id THEN r.target_id ELSE r.source_id END
     WHERE c.id IN (r.source_id, r.target_id) AND r.stated AND o.recurs);
ALTER TABLE concept_links RENAME TO concept_relations;
ALTER INDEX concept_links_source RENAME TO concept_relations_source;
ALTER INDEX concept_links_target RENAME TO concept_relations_target;
CREATE VIEW concepts AS
    SELECT id, name, norm, aliases, keys, language, kind, first_memory_id, created_at
      FROM concept_names WHERE established;
CREATE VIEW concept_links AS
    SELECT r.* FROM concept_relations r
     WHERE EXISTS (SELECT 1 FROM concept_names s WHERE s.id = r.source_id AND s.established)
       AND EXISTS (SELECT 1 FROM concept_names t WHERE t.id = r.target_id AND t.established);
