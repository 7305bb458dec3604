-- HttpArena's fortunes profile: a `fortune` table of 200 rows (TechEmpower's 12, then 188
-- adages of our own making, each with the characters HttpArena's seed puts in every row so
-- escaping runs on every cell: & ' " and an em-dash), in schema `httparena`, found first by the
-- database's search_path. Loaded by scripts/pg.sh into `linerate_arena`, a copy of the
-- TechEmpower/HttpArena database, so the demo's one `SELECT id, message FROM fortune` reads the
-- 200 rows there and the 12 in `linerate`; every other table is the same in both.
CREATE SCHEMA httparena;
CREATE TABLE httparena.fortune (
    id integer NOT NULL PRIMARY KEY,
    message varchar(2048) NOT NULL
);
INSERT INTO httparena.fortune SELECT id, message FROM public.fortune;
INSERT INTO httparena.fortune (id, message)
SELECT n, format('%s & %s: the "%s" isn''t %s — adage %s of the arena''s table',
                 (ARRAY['Patience', 'Practice', 'Measurement', 'Caching', 'Latency', 'Simplicity',
                        'Profiling', 'Batching', 'Backpressure', 'Testing', 'Rigour'])[1 + n % 11],
                 (ARRAY['care', 'craft', 'doubt', 'rest', 'proof', 'time', 'luck'])[1 + n % 7],
                 (ARRAY['fast path', 'slow path', 'hot loop', 'cold start', 'tail', 'median',
                        'outlier', 'baseline', 'budget'])[1 + n % 9],
                 (ARRAY['free', 'obvious', 'optional', 'measured twice', 'a guess', 'forever'])[1 + n % 6],
                 n)
FROM generate_series(13, 200) AS n;
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET search_path = httparena, public', current_database());
END $$;
