-- The tables the database endpoints read, as TechEmpower's and HttpArena's verifiers expect
-- them. Loaded by scripts/pg.sh into a fresh database; world and items are filled after this.

-- TechEmpower: 10,000 rows of (id, randomNumber in 1..10000); `randomnumber` once unquoted.
CREATE TABLE world (
    id integer NOT NULL PRIMARY KEY,
    randomnumber integer NOT NULL DEFAULT 0
);
INSERT INTO world (id, randomnumber)
SELECT n, 1 + floor(random() * 10000)::integer FROM generate_series(1, 10000) AS n;

-- TechEmpower: the twelve fortunes (the test data its verifier compares byte for byte).
CREATE TABLE fortune (
    id integer NOT NULL PRIMARY KEY,
    message varchar(2048) NOT NULL
);
INSERT INTO fortune (id, message) VALUES
    (1, 'fortune: No such file or directory'),
    (2, 'A computer scientist is someone who fixes things that aren''t broken.'),
    (3, 'After enough decimal places, nobody gives a damn.'),
    (4, 'A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1'),
    (5, 'A computer program does what you tell it to do, not what you want it to do.'),
    (6, 'Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen'),
    (7, 'Any program that runs right is obsolete.'),
    (8, 'A list is only as strong as its weakest link. — Donald Knuth'),
    (9, 'Feature: A bug with seniority.'),
    (10, 'Computers make very fast, very accurate mistakes.'),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, 'フレームワークのベンチマーク');

-- HttpArena (async-db, crud): 100,000 items; no index on price, so a price range is a
-- sequential scan, as its profile intends. Rows come from scripts/pg/items.py.
CREATE TABLE items (
    id integer PRIMARY KEY,
    name text NOT NULL,
    category text NOT NULL,
    price integer NOT NULL,
    quantity integer NOT NULL,
    active boolean NOT NULL,
    tags jsonb NOT NULL,
    rating_score integer NOT NULL,
    rating_count integer NOT NULL
);

-- HttpArena (production-stack): the users `/api/me` reads by the token's `sub` (its
-- validation signs `sub` 42); four rows, as its seed has. Ids come from a sequence and email
-- and plan have defaults, so the library's users example and the bench's users service
-- (`users (id serial, name)`, created IF NOT EXISTS) work on this table too.
CREATE TABLE users (
    id serial PRIMARY KEY,
    name text NOT NULL,
    email text NOT NULL DEFAULT '',
    plan text NOT NULL DEFAULT 'free'
);
INSERT INTO users (id, name, email, plan) VALUES
    (1, 'Demo Admin', 'admin@example.com', 'enterprise'),
    (7, 'Bob Rivera', 'bob@example.com', 'free'),
    (42, 'Alice Chen', 'alice@example.com', 'pro'),
    (1000, 'Load Tester', 'load@example.com', 'team');
SELECT setval('users_id_seq', 1000);
