-- Authentication: Nacelle's per-user token state beside Nacos's users/roles/permissions
-- (created by 0001). Tokens of a user issued before tokens_not_before (epoch seconds) are
-- refused: set when the password changes.

CREATE TABLE IF NOT EXISTS nacelle_user_state (
    username TEXT NOT NULL PRIMARY KEY,
    tokens_not_before INTEGER NOT NULL
);
