-- 0019: the public projection (issue 14, point 6): what the owner chose to publish, and a role
-- that can read nothing else. `GET /public` reads through a connection made as that role.
-- See docs/security.md, "The remote server".
CREATE TABLE public_memories (
    memory_id    text PRIMARY KEY,
    title        text NOT NULL,
    summary      text NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now()
);

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pmem_public_reader') THEN
        CREATE ROLE pmem_public_reader NOLOGIN NOINHERIT;
    END IF;
    EXECUTE 'GRANT SELECT ON public_memories TO pmem_public_reader';
    EXECUTE format('GRANT pmem_public_reader TO %I', current_user);
EXCEPTION WHEN insufficient_privilege THEN
    -- a DATABASE_URL server where this user may not create roles: GET /public answers 503
    RAISE NOTICE 'pmem_public_reader not created (insufficient privilege); /public stays off';
END $$;
