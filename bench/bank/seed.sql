-- N accounts (psql -v accounts=N, default 1000), each holding `balance` cents (psql -v
-- balance=B, default 10^12: the lab's repeated 1-cent transfer from account 1 never drains
-- it). Run after schema.sql; empties both tables first.
\if :{?accounts} \else \set accounts 1000 \endif
\if :{?balance} \else \set balance 1000000000000 \endif
TRUNCATE transfers, accounts;
INSERT INTO accounts (id, owner, balance)
    SELECT g, 'owner ' || g, :balance FROM generate_series(1, :accounts) g;
