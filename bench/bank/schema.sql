-- The bank service's tables, for both halves of the comparison. Money is in cents;
-- a balance never goes below zero (the CHECK is the last line of defence: the service
-- refuses an overdraft itself, 409 / FAILED_PRECONDITION, before it would fire).
CREATE TABLE IF NOT EXISTS accounts (
    id      bigint PRIMARY KEY,
    owner   text   NOT NULL,
    balance bigint NOT NULL CHECK (balance >= 0)
);

CREATE TABLE IF NOT EXISTS transfers (
    id      bigserial   PRIMARY KEY,
    from_id bigint      NOT NULL REFERENCES accounts (id),
    to_id   bigint      NOT NULL REFERENCES accounts (id),
    amount  bigint      NOT NULL CHECK (amount > 0),
    at      timestamptz NOT NULL DEFAULT now()
);
