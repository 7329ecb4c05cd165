-- ziti-lite data model: the single source of truth for what a controller stores.
-- Conventions: every entity table starts with the base columns (id, created_at, updated_at, tags,
-- is_system); timestamps are TEXT 'YYYY-MM-DDTHH:MM:SS.mmmZ' (UTC, sorts as text); booleans are
-- INTEGER 0/1; lists and maps are JSON text. Applied once to a new file by db/store.py.

-- ---------------------------------------------------------------- controller state
CREATE TABLE controller (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;  -- instance id, PKI material (PEM), settings fixed at first start

-- ---------------------------------------------------------------- identities and auth
CREATE TABLE identity_types (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE
) STRICT;

CREATE TABLE auth_policies (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    primary_ TEXT NOT NULL,       -- authPolicyPrimary as JSON
    secondary TEXT NOT NULL       -- authPolicySecondary as JSON
) STRICT;

CREATE TABLE identities (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    type_id TEXT NOT NULL REFERENCES identity_types(id),
    is_admin INTEGER NOT NULL DEFAULT 0,
    is_default_admin INTEGER NOT NULL DEFAULT 0,
    role_attributes TEXT NOT NULL DEFAULT '[]',
    auth_policy_id TEXT NOT NULL DEFAULT 'default' REFERENCES auth_policies(id),
    external_id TEXT UNIQUE,
    app_data TEXT NOT NULL DEFAULT '{}',
    default_hosting_cost INTEGER NOT NULL DEFAULT 0,
    default_hosting_precedence TEXT NOT NULL DEFAULT 'default',
    service_hosting_costs TEXT NOT NULL DEFAULT '{}',
    service_hosting_precedences TEXT NOT NULL DEFAULT '{}',
    disabled_at TEXT,               -- disabled while set and disabled_until is NULL or future
    disabled_until TEXT,
    env_info TEXT NOT NULL DEFAULT '{}',
    sdk_info TEXT NOT NULL DEFAULT '{}',
    failed_logins INTEGER NOT NULL DEFAULT 0   -- consecutive password failures (lockout)
) STRICT;
CREATE INDEX identities_name_id ON identities(name, id);
CREATE INDEX identities_created ON identities(created_at, id);
CREATE INDEX identities_auth_policy ON identities(auth_policy_id);

CREATE TABLE authenticators (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    identity_id TEXT NOT NULL REFERENCES identities(id) ON DELETE CASCADE,
    method TEXT NOT NULL CHECK (method IN ('updb', 'cert')),
    username TEXT UNIQUE,            -- updb
    password_hash TEXT,              -- updb: base64 argon2id
    salt TEXT,                       -- updb: base64
    fingerprint TEXT UNIQUE,         -- cert: lowercase hex SHA-1 of the DER
    cert_pem TEXT,                   -- cert
    ca_id TEXT,                      -- cert issued through a 3rd-party CA
    is_issued_by_network INTEGER NOT NULL DEFAULT 0,
    unverified_cert_pem TEXT,        -- extend: the new certificate until extend-verify
    unverified_fingerprint TEXT
) STRICT;
CREATE INDEX authenticators_identity ON authenticators(identity_id);

CREATE TABLE api_sessions (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    token TEXT NOT NULL UNIQUE,
    identity_id TEXT NOT NULL REFERENCES identities(id) ON DELETE CASCADE,
    authenticator_id TEXT NOT NULL,
    ip_address TEXT NOT NULL DEFAULT '',
    config_types TEXT NOT NULL DEFAULT '[]',
    is_mfa_required INTEGER NOT NULL DEFAULT 0,
    is_mfa_complete INTEGER NOT NULL DEFAULT 0,
    is_cert_extendable INTEGER NOT NULL DEFAULT 0,
    last_activity_at TEXT NOT NULL
) STRICT;
CREATE INDEX api_sessions_identity ON api_sessions(identity_id);
CREATE INDEX api_sessions_activity ON api_sessions(last_activity_at);

-- ---------------------------------------------------------------- services and configs
CREATE TABLE config_types (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    schema TEXT NOT NULL DEFAULT '{}'
) STRICT;

CREATE TABLE configs (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    config_type_id TEXT NOT NULL REFERENCES config_types(id),
    data TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX configs_type ON configs(config_type_id);

CREATE TABLE services (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    role_attributes TEXT NOT NULL DEFAULT '[]',
    configs TEXT NOT NULL DEFAULT '[]',          -- config ids, in order
    encryption_required INTEGER NOT NULL DEFAULT 0,
    terminator_strategy TEXT NOT NULL DEFAULT 'smartrouting',
    max_idle_time_millis INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX services_name_id ON services(name, id);

-- service <-> config, kept in step with services.configs for reverse lookups
CREATE TABLE service_configs (
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    config_id TEXT NOT NULL REFERENCES configs(id) ON DELETE CASCADE,
    PRIMARY KEY (service_id, config_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX service_configs_config ON service_configs(config_id, service_id);

-- enrollments of identities (ott, ottca, updb) and routers (erott, trott)
CREATE TABLE enrollments (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    method TEXT NOT NULL CHECK (method IN ('ott', 'ottca', 'updb', 'erott', 'trott')),
    identity_id TEXT REFERENCES identities(id) ON DELETE CASCADE,
    edge_router_id TEXT,
    transit_router_id TEXT,
    token TEXT NOT NULL UNIQUE,
    jwt TEXT NOT NULL DEFAULT '',
    expires_at TEXT NOT NULL,
    ca_id TEXT,
    username TEXT
) STRICT;
CREATE INDEX enrollments_identity ON enrollments(identity_id);

-- TOTP MFA enrollment of an identity (one at most)
CREATE TABLE mfa (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    identity_id TEXT NOT NULL UNIQUE REFERENCES identities(id) ON DELETE CASCADE,
    is_verified INTEGER NOT NULL DEFAULT 0,
    secret TEXT NOT NULL,
    recovery_codes TEXT NOT NULL DEFAULT '[]'
) STRICT;

-- @@ further tables are appended below by resource family @@
