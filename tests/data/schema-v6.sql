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

-- permissions (OpenZiti 2.0's, a JSON array of ziti_lite/permissions.py's names) closes the
-- column list as version 6's ALTER TABLE ADD COLUMN left it, so a migrated file equals a fresh one
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
, permissions TEXT NOT NULL DEFAULT '[]') STRICT;
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
    last_activity_at TEXT NOT NULL,
    mfa_passed_at TEXT              -- last TOTP pass on this session (posture check MFA); NULL = none
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

-- ---------------------------------------------------------------- auth family (resources/auth.py)
-- external JWT signers; auth policies reference them from their JSON (extJwt.allowedSigners,
-- requireExtJwtSigner), checked on delete
CREATE TABLE external_jwt_signers (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    cert_pem TEXT,                   -- exactly one of cert_pem / jwks_endpoint
    jwks_endpoint TEXT,
    kid TEXT UNIQUE,
    issuer TEXT NOT NULL UNIQUE,
    audience TEXT,
    enabled INTEGER NOT NULL DEFAULT 0,
    claims_property TEXT NOT NULL DEFAULT 'sub',
    use_external_id INTEGER NOT NULL DEFAULT 0,
    external_auth_url TEXT,
    scopes TEXT,                     -- JSON list or 'null'
    client_id TEXT,
    target_token TEXT NOT NULL DEFAULT 'ACCESS',
    fingerprint TEXT UNIQUE,         -- computed from cert_pem (SHA-1 hex)
    common_name TEXT NOT NULL DEFAULT '',
    not_before TEXT,
    not_after TEXT
) STRICT;

-- third-party CAs (verify / jwt / ca enrollment flows build on these columns)
CREATE TABLE cas (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    cert_pem TEXT NOT NULL,
    fingerprint TEXT NOT NULL UNIQUE,          -- SHA-1 hex of the first certificate
    is_verified INTEGER NOT NULL DEFAULT 0,
    verification_token TEXT NOT NULL,
    is_auto_ca_enrollment_enabled INTEGER NOT NULL DEFAULT 0,
    is_ott_ca_enrollment_enabled INTEGER NOT NULL DEFAULT 0,
    is_auth_enabled INTEGER NOT NULL DEFAULT 0,
    identity_roles TEXT NOT NULL DEFAULT '[]',
    identity_name_format TEXT NOT NULL DEFAULT '[caName]-[commonName]',
    external_id_claim TEXT                     -- JSON object or NULL
) STRICT;
CREATE INDEX enrollments_ca ON enrollments(ca_id);
CREATE INDEX authenticators_ca ON authenticators(ca_id);

-- HA cluster members; a single (non-HA) controller has no rows
CREATE TABLE controllers (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    ctrl_address TEXT,
    cert_pem TEXT NOT NULL DEFAULT '',
    fingerprint TEXT NOT NULL DEFAULT '',
    is_online INTEGER NOT NULL DEFAULT 0,
    last_joined_at TEXT,
    api_addresses TEXT NOT NULL DEFAULT '{}'
) STRICT;

-- ---------------------------------------------------------------- policies (ziti_lite/policy)
-- Role lists are JSON arrays, sorted and de-duplicated. Membership ("layer A": which entities a
-- policy selects) is materialised per policy side and kept in step inside the write transaction
-- that changes it; identity<->service, identity<->router and service<->router answers are joins
-- of two membership tables at query time (see performance-notes.md).
CREATE TABLE service_policies (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL CHECK (type IN ('Dial', 'Bind')),
    semantic TEXT NOT NULL DEFAULT 'AllOf' CHECK (semantic IN ('AllOf', 'AnyOf')),
    identity_roles TEXT NOT NULL DEFAULT '[]',
    service_roles TEXT NOT NULL DEFAULT '[]',
    posture_check_roles TEXT NOT NULL DEFAULT '[]'
) STRICT;
CREATE INDEX service_policies_name_id ON service_policies(name, id);

CREATE TABLE edge_router_policies (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    semantic TEXT NOT NULL DEFAULT 'AllOf' CHECK (semantic IN ('AllOf', 'AnyOf')),
    identity_roles TEXT NOT NULL DEFAULT '[]',
    edge_router_roles TEXT NOT NULL DEFAULT '[]'
) STRICT;
CREATE INDEX edge_router_policies_name_id ON edge_router_policies(name, id);

CREATE TABLE service_edge_router_policies (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    semantic TEXT NOT NULL DEFAULT 'AllOf' CHECK (semantic IN ('AllOf', 'AnyOf')),
    service_roles TEXT NOT NULL DEFAULT '[]',
    edge_router_roles TEXT NOT NULL DEFAULT '[]'
) STRICT;
CREATE INDEX service_edge_router_policies_name_id ON service_edge_router_policies(name, id);

-- every role entry of every policy, for "which policies could select entity E" and for
-- removing @id references when E is deleted. kind: sp|erp|serp; side: identity|service|router|posture-check
CREATE TABLE policy_roles (
    kind TEXT NOT NULL,
    side TEXT NOT NULL,
    role TEXT NOT NULL,              -- '#attr' or '@id', as stored in the policy
    policy_id TEXT NOT NULL,
    PRIMARY KEY (kind, side, role, policy_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX policy_roles_policy ON policy_roles(policy_id, kind);

-- role attributes of identities, services, edge routers and posture checks, by attribute
CREATE TABLE entity_role_attributes (
    kind TEXT NOT NULL,              -- identity|service|router|posture-check
    attribute TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    PRIMARY KEY (kind, attribute, entity_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX entity_role_attributes_entity ON entity_role_attributes(entity_id, kind);

-- layer A membership. type ('Dial'|'Bind') is the policy's, copied so that "services an
-- identity may dial" is two index range scans joined on policy_id.
CREATE TABLE service_policy_identities (
    policy_id TEXT NOT NULL REFERENCES service_policies(id) ON DELETE CASCADE,
    identity_id TEXT NOT NULL REFERENCES identities(id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    PRIMARY KEY (policy_id, identity_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX service_policy_identities_identity ON service_policy_identities(identity_id, type, policy_id);

CREATE TABLE service_policy_services (
    policy_id TEXT NOT NULL REFERENCES service_policies(id) ON DELETE CASCADE,
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    PRIMARY KEY (policy_id, service_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX service_policy_services_service ON service_policy_services(service_id, type, policy_id);

CREATE TABLE service_policy_posture_checks (
    policy_id TEXT NOT NULL REFERENCES service_policies(id) ON DELETE CASCADE,
    posture_check_id TEXT NOT NULL REFERENCES posture_checks(id) ON DELETE CASCADE,
    PRIMARY KEY (policy_id, posture_check_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX service_policy_posture_checks_check ON service_policy_posture_checks(posture_check_id, policy_id);

CREATE TABLE edge_router_policy_identities (
    policy_id TEXT NOT NULL REFERENCES edge_router_policies(id) ON DELETE CASCADE,
    identity_id TEXT NOT NULL REFERENCES identities(id) ON DELETE CASCADE,
    PRIMARY KEY (policy_id, identity_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX edge_router_policy_identities_identity ON edge_router_policy_identities(identity_id, policy_id);

CREATE TABLE edge_router_policy_routers (
    policy_id TEXT NOT NULL REFERENCES edge_router_policies(id) ON DELETE CASCADE,
    router_id TEXT NOT NULL REFERENCES routers(id) ON DELETE CASCADE,
    PRIMARY KEY (policy_id, router_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX edge_router_policy_routers_router ON edge_router_policy_routers(router_id, policy_id);

CREATE TABLE service_edge_router_policy_services (
    policy_id TEXT NOT NULL REFERENCES service_edge_router_policies(id) ON DELETE CASCADE,
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    PRIMARY KEY (policy_id, service_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX service_edge_router_policy_services_service ON service_edge_router_policy_services(service_id, policy_id);

CREATE TABLE service_edge_router_policy_routers (
    policy_id TEXT NOT NULL REFERENCES service_edge_router_policies(id) ON DELETE CASCADE,
    router_id TEXT NOT NULL REFERENCES routers(id) ON DELETE CASCADE,
    PRIMARY KEY (policy_id, router_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX service_edge_router_policy_routers_router ON service_edge_router_policy_routers(router_id, policy_id);

-- an identity's config overrides: one config per (service, config type)
CREATE TABLE identity_service_configs (
    identity_id TEXT NOT NULL REFERENCES identities(id) ON DELETE CASCADE,
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    config_type_id TEXT NOT NULL,
    config_id TEXT NOT NULL REFERENCES configs(id),
    PRIMARY KEY (identity_id, service_id, config_type_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX identity_service_configs_config ON identity_service_configs(config_id);
CREATE INDEX identity_service_configs_service ON identity_service_configs(service_id);

-- ---------------------------------------------------------------- routers (resources/routers.py)
-- Edge routers and transit routers share one table, hence one name namespace; is_edge tells
-- them apart (/edge-routers shows is_edge = 1, /routers and /transit-routers show every row).
-- Enrollments point here through enrollments.edge_router_id / transit_router_id.
CREATE TABLE routers (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    is_edge INTEGER NOT NULL DEFAULT 0,
    fingerprint TEXT,                       -- lowercase hex SHA-1 of the enrolled client certificate
    cert_pem TEXT,                          -- edge routers: the enrolled client certificate
    unverified_fingerprint TEXT,            -- extend-enrollment: the new certificate until verified
    unverified_cert_pem TEXT,
    is_verified INTEGER NOT NULL DEFAULT 0, -- set when the router completes its enrollment
    cost INTEGER NOT NULL DEFAULT 0 CHECK (cost BETWEEN 0 AND 65535),
    no_traversal INTEGER NOT NULL DEFAULT 0,
    disabled INTEGER NOT NULL DEFAULT 0,
    role_attributes TEXT NOT NULL DEFAULT '[]',     -- edge routers only
    is_tunneler_enabled INTEGER NOT NULL DEFAULT 0, -- edge routers only
    app_data TEXT NOT NULL DEFAULT '{}'             -- edge routers only
) STRICT;
CREATE INDEX routers_edge ON routers(is_edge, id);
CREATE INDEX routers_fingerprint ON routers(fingerprint);
CREATE INDEX enrollments_edge_router ON enrollments(edge_router_id);
CREATE INDEX enrollments_transit_router ON enrollments(transit_router_id);

-- where a router hosts a service; deleting the service or the router deletes its terminators
CREATE TABLE terminators (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    router_id TEXT NOT NULL REFERENCES routers(id) ON DELETE CASCADE,
    binding TEXT NOT NULL,
    address TEXT NOT NULL,
    instance_id TEXT NOT NULL DEFAULT '',   -- wire name: identity
    instance_secret TEXT,                   -- base64, write-only (never rendered)
    cost INTEGER NOT NULL DEFAULT 0 CHECK (cost BETWEEN 0 AND 65535),
    precedence TEXT NOT NULL DEFAULT 'default' CHECK (precedence IN ('default', 'required', 'failed')),
    host_id TEXT NOT NULL DEFAULT ''        -- identity hosting it (router-created terminators)
) STRICT;
CREATE INDEX terminators_service ON terminators(service_id);
CREATE INDEX terminators_router ON terminators(router_id);

-- ---------------------------------------------------------------- posture checks (resources/posture.py)
-- the fixed rows bootstrap.py seeds from builtins.POSTURE_CHECK_TYPES
CREATE TABLE posture_check_types (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    operating_systems TEXT NOT NULL DEFAULT '[]'   -- [{type, versions}]
) STRICT;

-- one row per check; only the columns of its type_id are set, stored in their wire form
-- (normalised: sorted, de-duplicated, MACs cleaned, hashes lower-cased)
CREATE TABLE posture_checks (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL UNIQUE,
    type_id TEXT NOT NULL CHECK (type_id IN ('OS', 'PROCESS', 'DOMAIN', 'MAC', 'MFA', 'PROCESS_MULTI')),
    version INTEGER NOT NULL DEFAULT 1,
    role_attributes TEXT NOT NULL DEFAULT '[]',
    operating_systems TEXT,            -- OS: [{type, versions}]
    domains TEXT,                      -- DOMAIN: [name]
    mac_addresses TEXT,                -- MAC: [lowercase hex, no separators]
    process TEXT,                      -- PROCESS: {osType, path, hashes, signerFingerprint}
    processes TEXT,                    -- PROCESS_MULTI: [{osType, path, hashes, signerFingerprints}]
    semantic TEXT,                     -- PROCESS_MULTI: AllOf | AnyOf
    timeout_seconds INTEGER,           -- MFA: -1 = no timeout
    prompt_on_wake INTEGER,            -- MFA
    prompt_on_unlock INTEGER,          -- MFA
    ignore_legacy_endpoints INTEGER    -- MFA
) STRICT;
CREATE INDEX posture_checks_type ON posture_checks(type_id);

-- ---------------------------------------------------------------- client API (ziti_lite/client)
-- Sessions: the right of one API session to dial or bind one service. At most one per
-- (API session, service, type); they go with their API session, service or identity.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    token TEXT NOT NULL UNIQUE,
    api_session_id TEXT NOT NULL REFERENCES api_sessions(id) ON DELETE CASCADE,
    identity_id TEXT NOT NULL REFERENCES identities(id) ON DELETE CASCADE,
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    type TEXT NOT NULL CHECK (type IN ('Dial', 'Bind')),
    service_policies TEXT NOT NULL DEFAULT '[]'   -- ids of the policies whose posture passed
) STRICT;
CREATE UNIQUE INDEX sessions_api_session ON sessions(api_session_id, service_id, type);
CREATE INDEX sessions_identity ON sessions(identity_id, id);
CREATE INDEX sessions_service ON sessions(service_id);

-- short-lived client certificates issued to one API session (/current-api-session/certificates)
CREATE TABLE api_session_certificates (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}', is_system INTEGER NOT NULL DEFAULT 0,
    api_session_id TEXT NOT NULL REFERENCES api_sessions(id) ON DELETE CASCADE,
    identity_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    valid_from TEXT NOT NULL,
    valid_to TEXT NOT NULL,
    certificate TEXT NOT NULL          -- PEM: the leaf and the signing CA
) STRICT;
CREATE INDEX api_session_certificates_session ON api_session_certificates(api_session_id, id);
CREATE INDEX api_session_certificates_fingerprint ON api_session_certificates(fingerprint);

-- substring search (contains/icontains filters): FTS5 trigram indexes over the names, their upper()
-- and a NUL flag, external content (postings only), kept in step by triggers; see ziti_lite/db/search.py.
-- Schema version 2 added this section: the migration from version 1 runs it as written here.
-- @section search-indexes
CREATE VIEW identities_search_source (rid, name, name_upper, nul) AS SELECT t.rowid, t.name, upper(t.name), CASE WHEN instr(CAST(t.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END FROM identities t;
CREATE VIRTUAL TABLE identities_search USING fts5(name, name_upper, nul, content='identities_search_source', content_rowid='rid', tokenize='trigram case_sensitive 1');
CREATE TRIGGER identities_search_ai AFTER INSERT ON identities BEGIN
    INSERT INTO identities_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER identities_search_ad AFTER DELETE ON identities BEGIN
    INSERT INTO identities_search(identities_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER identities_search_au AFTER UPDATE OF name ON identities BEGIN
    INSERT INTO identities_search(identities_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
    INSERT INTO identities_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE VIEW services_search_source (rid, name, name_upper, nul) AS SELECT t.rowid, t.name, upper(t.name), CASE WHEN instr(CAST(t.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END FROM services t;
CREATE VIRTUAL TABLE services_search USING fts5(name, name_upper, nul, content='services_search_source', content_rowid='rid', tokenize='trigram case_sensitive 1');
CREATE TRIGGER services_search_ai AFTER INSERT ON services BEGIN
    INSERT INTO services_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER services_search_ad AFTER DELETE ON services BEGIN
    INSERT INTO services_search(services_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER services_search_au AFTER UPDATE OF name ON services BEGIN
    INSERT INTO services_search(services_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
    INSERT INTO services_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE VIEW configs_search_source (rid, name, name_upper, nul) AS SELECT t.rowid, t.name, upper(t.name), CASE WHEN instr(CAST(t.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END FROM configs t;
CREATE VIRTUAL TABLE configs_search USING fts5(name, name_upper, nul, content='configs_search_source', content_rowid='rid', tokenize='trigram case_sensitive 1');
CREATE TRIGGER configs_search_ai AFTER INSERT ON configs BEGIN
    INSERT INTO configs_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER configs_search_ad AFTER DELETE ON configs BEGIN
    INSERT INTO configs_search(configs_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER configs_search_au AFTER UPDATE OF name ON configs BEGIN
    INSERT INTO configs_search(configs_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
    INSERT INTO configs_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE VIEW service_policies_search_source (rid, name, name_upper, nul) AS SELECT t.rowid, t.name, upper(t.name), CASE WHEN instr(CAST(t.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END FROM service_policies t;
CREATE VIRTUAL TABLE service_policies_search USING fts5(name, name_upper, nul, content='service_policies_search_source', content_rowid='rid', tokenize='trigram case_sensitive 1');
CREATE TRIGGER service_policies_search_ai AFTER INSERT ON service_policies BEGIN
    INSERT INTO service_policies_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER service_policies_search_ad AFTER DELETE ON service_policies BEGIN
    INSERT INTO service_policies_search(service_policies_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER service_policies_search_au AFTER UPDATE OF name ON service_policies BEGIN
    INSERT INTO service_policies_search(service_policies_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
    INSERT INTO service_policies_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE VIEW edge_router_policies_search_source (rid, name, name_upper, nul) AS SELECT t.rowid, t.name, upper(t.name), CASE WHEN instr(CAST(t.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END FROM edge_router_policies t;
CREATE VIRTUAL TABLE edge_router_policies_search USING fts5(name, name_upper, nul, content='edge_router_policies_search_source', content_rowid='rid', tokenize='trigram case_sensitive 1');
CREATE TRIGGER edge_router_policies_search_ai AFTER INSERT ON edge_router_policies BEGIN
    INSERT INTO edge_router_policies_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER edge_router_policies_search_ad AFTER DELETE ON edge_router_policies BEGIN
    INSERT INTO edge_router_policies_search(edge_router_policies_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER edge_router_policies_search_au AFTER UPDATE OF name ON edge_router_policies BEGIN
    INSERT INTO edge_router_policies_search(edge_router_policies_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
    INSERT INTO edge_router_policies_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE VIEW service_edge_router_policies_search_source (rid, name, name_upper, nul) AS SELECT t.rowid, t.name, upper(t.name), CASE WHEN instr(CAST(t.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END FROM service_edge_router_policies t;
CREATE VIRTUAL TABLE service_edge_router_policies_search USING fts5(name, name_upper, nul, content='service_edge_router_policies_search_source', content_rowid='rid', tokenize='trigram case_sensitive 1');
CREATE TRIGGER service_edge_router_policies_search_ai AFTER INSERT ON service_edge_router_policies BEGIN
    INSERT INTO service_edge_router_policies_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER service_edge_router_policies_search_ad AFTER DELETE ON service_edge_router_policies BEGIN
    INSERT INTO service_edge_router_policies_search(service_edge_router_policies_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER service_edge_router_policies_search_au AFTER UPDATE OF name ON service_edge_router_policies BEGIN
    INSERT INTO service_edge_router_policies_search(service_edge_router_policies_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
    INSERT INTO service_edge_router_policies_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE VIEW routers_search_source (rid, name, name_upper, nul) AS SELECT t.rowid, t.name, upper(t.name), CASE WHEN instr(CAST(t.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END FROM routers t;
CREATE VIRTUAL TABLE routers_search USING fts5(name, name_upper, nul, content='routers_search_source', content_rowid='rid', tokenize='trigram case_sensitive 1');
CREATE TRIGGER routers_search_ai AFTER INSERT ON routers BEGIN
    INSERT INTO routers_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER routers_search_ad AFTER DELETE ON routers BEGIN
    INSERT INTO routers_search(routers_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER routers_search_au AFTER UPDATE OF name ON routers BEGIN
    INSERT INTO routers_search(routers_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
    INSERT INTO routers_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE VIEW posture_checks_search_source (rid, name, name_upper, nul) AS SELECT t.rowid, t.name, upper(t.name), CASE WHEN instr(CAST(t.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END FROM posture_checks t;
CREATE VIRTUAL TABLE posture_checks_search USING fts5(name, name_upper, nul, content='posture_checks_search_source', content_rowid='rid', tokenize='trigram case_sensitive 1');
CREATE TRIGGER posture_checks_search_ai AFTER INSERT ON posture_checks BEGIN
    INSERT INTO posture_checks_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER posture_checks_search_ad AFTER DELETE ON posture_checks BEGIN
    INSERT INTO posture_checks_search(posture_checks_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
CREATE TRIGGER posture_checks_search_au AFTER UPDATE OF name ON posture_checks BEGIN
    INSERT INTO posture_checks_search(posture_checks_search, rowid, name, name_upper, nul) VALUES ('delete', old.rowid, old.name, upper(old.name), CASE WHEN instr(CAST(old.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
    INSERT INTO posture_checks_search(rowid, name, name_upper, nul) VALUES (new.rowid, new.name, upper(new.name), CASE WHEN instr(CAST(new.name AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END);
END;
-- @end search-indexes

-- when something that changes an identity's service list last changed ('' = everyone), for
-- /current-api-session/service-updates; written in the transaction of the change
CREATE TABLE service_change_stamps (
    scope TEXT PRIMARY KEY,
    changed_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

-- @@ further tables are appended below by resource family @@

-- the audit trail (ziti_lite/events/audit.py): one row per successful management-API change and per
-- login outcome; secrets redacted before they get here. Schema version 3 added this section: the
-- migration from version 2 runs it as written here.
-- @section audit
CREATE TABLE IF NOT EXISTS audit_log (
    id INTEGER PRIMARY KEY,            -- the rowid: microseconds of the write and a counter, so rows append in time order
    created_at TEXT NOT NULL,
    identity_id TEXT,                  -- the caller (no reference: the row outlives the identity)
    identity_name TEXT,
    api_session_id TEXT,
    remote_address TEXT NOT NULL DEFAULT '',
    operation TEXT NOT NULL,           -- the route's operation id (createService, authenticate, ...)
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    entity_type TEXT,
    entity_id TEXT,
    entity_name TEXT,
    outcome TEXT NOT NULL DEFAULT 'success' CHECK (outcome IN ('success', 'failure')),
    reason TEXT,                       -- why a login failed
    changes TEXT NOT NULL DEFAULT '{}' -- JSON: field -> {"old": ..., "new": ...}
) STRICT;
-- no index beside the table: each b-tree a change touches is pages written at its COMMIT, and
-- the audit row rides in every write's transaction. The id grows with the time, so retention and
-- "since" read id ranges; other filters scan, as audit queries are rare. (Versions 3 and 4 had
-- an index on created_at; version 5 drops it.)
-- @end audit

-- the OIDC provider's revocation list (ziti_lite/oidc/): ids of refresh and access tokens (their
-- ``jti``) that must no longer be accepted, each kept until the token would have expired anyway
-- (the janitor prunes it then). Schema version 4 added this section: the migration from version 3
-- runs it as written here.
-- @section oidc
CREATE TABLE IF NOT EXISTS revocations (
    id TEXT PRIMARY KEY,               -- the revoked token's jti
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL           -- the token's own expiry: after it, the row is pruned
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS revocations_expiry ON revocations(expires_at);
-- @end oidc
