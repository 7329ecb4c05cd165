"""First start of a controller: the rows and keys a fresh OpenZiti controller has.

``ensure`` is idempotent: on a new file it creates the instance id, the controller PKI (root CA,
intermediate signing CA, RSA TLS server certificate), the identity types, the ``default`` auth
policy, the built-in config types and posture check types, the quickstart's two router
policies (``edge/entity.py``), and the default admin with a password authenticator. On an
existing file it only loads the stored state; on either, it renews the controller's
certificates that are due (``lifecycle/renewal.py``: in their renewal window, or the server's
when the advertised hosts changed) in the same transaction.

``UPGRADES`` are named upgrades of those seeded rows for files made by an older ziti-lite: each
runs once, in the start-up transaction, after a snapshot of the file was written beside it (as
before a schema migration), and is recorded in the controller table as
``upgrade:<name>`` (a new file records them all as done). Changes to the tables themselves are
``Store.migrate``'s, numbered by ``user_version``.
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
from typing import TYPE_CHECKING

from . import clock
from .auth import passwords
from .auth.defaults import default_policy
from .edge.entity import seed_policies
from .ids import new_id
from .lifecycle import renewal
from .lifecycle.renewal import hosts_for
from .pki import ca
from .resources.builtins import CONFIG_TYPES, POSTURE_CHECK_TYPES

if TYPE_CHECKING:
    from .lifecycle.contexts import LifecycleController

DEFAULT_AUTH_POLICY = default_policy()


def _get(store, key: str) -> str | None:
    return store.value("SELECT value FROM controller WHERE key = ?", (key,))


def _put(store, key: str, value: str) -> None:
    store.execute(
        "INSERT INTO controller (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def ensure(ctl: LifecycleController) -> dict:
    store, settings = ctl.store, ctl.settings
    hosts = hosts_for(settings)
    if settings.admin_password and _get(store, "instance_id") is not None:
        logging.getLogger("ziti_lite").warning(
            "the admin password given (--admin-password or ZITI_LITE_ADMIN_PASSWORD) is ignored: %s already"
            " has a controller; change passwords through the API",
            settings.db,
        )
    pending = [name for name, _ in UPGRADES if _get(store, f"upgrade:{name}") is None]
    if pending and _get(store, "instance_id") is not None:   # an older file's rows are about to change
        snapshot = store.snapshot_before_migration(store.value("PRAGMA user_version"))
        if snapshot:
            logging.getLogger("ziti_lite").warning("upgrading %s (%s); its previous state is in %s",
                                                   settings.db, ", ".join(pending), snapshot)
    with store.write():
        if _get(store, "instance_id") is None:
            _put(store, "instance_id", "c" + new_id() + new_id()[:4])
            pki = ca.create_controller_pki(hosts, server_days=settings.server_cert_days)
            for part in ("root", "signer", "server"):
                kp = getattr(pki, part)
                _put(store, f"{part}_cert", kp.cert_pem)
                _put(store, f"{part}_key", kp.key_pem)
            _put(store, "server_hosts", json.dumps(hosts))
            _seed_rows(store)
            _seed_admin(store, settings)
            seed_policies(store)  # after the admin, whom #all selects
            for name, _ in UPGRADES:
                _put(store, f"upgrade:{name}", clock.stamp())
        else:
            _upgrade(store)
        # the controller's certificates: renewed when due, the server's when its hosts changed
        renewed = renewal.renew(store, hosts, server_days=settings.server_cert_days)
        _list_self(store, settings)
    ctl.state = {k: v for k, v in store.conn.execute("SELECT key, value FROM controller")}
    renewal.apply(ctl, renewed)   # logged and counted
    return ctl.state


def upstream_config_type_schemas(store) -> None:
    """The built-in config types get upstream's schemas (``$id``, ``definitions``, ``allOf``
    forms, health checks, listen options, proxy), which schema-driven clients such as the admin
    console render; before, ziti-lite stored simpler schemas of its own."""
    now = clock.stamp()
    for id, name, schema in CONFIG_TYPES:
        if store.value("SELECT 1 FROM config_types WHERE id = ?", (id,)):
            store.execute(
                "UPDATE config_types SET schema = ?, updated_at = ? WHERE id = ?", (json.dumps(schema), now, id)
            )
        elif not store.value("SELECT 1 FROM config_types WHERE name = ?", (name,)):
            _insert(store, "config_types", {"id": id, "name": name, "schema": json.dumps(schema)})


UPGRADES = (("builtin-config-types-as-upstream", upstream_config_type_schemas),)


# the APIs /controllers names for each controller (upstream lists the bindings of its web listener,
# as v2.0.3's quickstart shows them); the client API shows edge-client and edge-oidc only
API_PATHS = {"edge-client": "/edge/client/v1", "edge-management": "/edge/management/v1", "edge-oidc": "/oidc",
             "fabric": "/fabric/v1"}


def _list_self(store, settings) -> None:
    """ziti-lite itself as the one row of ``controllers``, as upstream lists the controllers of its
    cluster (itself when alone): its id, the server certificate's CN as its name, that certificate
    and its fingerprint, online, joined at this start, and the addresses of its APIs. Written at
    every start (a certificate renewal while serving updates the certificate, ``renewal.renew``)."""
    cert = _get(store, "server_cert") or ""
    base = settings.base_url
    addresses = {api: [{"url": base + path, "version": "v1"}] for api, path in API_PATHS.items()
                 if api != "edge-oidc" or settings.oidc}
    ctrl = f"tls:{settings.public_host}:{settings.ctrl_port}" if settings.ctrl_port else None
    now = clock.stamp()
    store.execute(
        "INSERT INTO controllers (id, created_at, updated_at, name, ctrl_address, cert_pem, fingerprint, is_online,"
        " last_joined_at, api_addresses) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT(id) DO UPDATE SET"
        " updated_at = excluded.updated_at, name = excluded.name, ctrl_address = excluded.ctrl_address,"
        " cert_pem = excluded.cert_pem, fingerprint = excluded.fingerprint, is_online = 1,"
        " last_joined_at = excluded.last_joined_at, api_addresses = excluded.api_addresses",
        (_get(store, "instance_id"), now, now, ca.cert_info(cert)["cn"] or "ziti-lite", ctrl, cert,
         ca.fingerprint(cert), now, json.dumps(addresses)))


def _upgrade(store) -> None:
    for name, step in UPGRADES:
        if _get(store, f"upgrade:{name}") is None:
            with store.write():  # a savepoint: a failing step leaves no half of itself behind
                step(store)
                _put(store, f"upgrade:{name}", clock.stamp())


def _insert(store, table: str, row: dict) -> None:
    now = clock.stamp()
    row = {"created_at": now, "updated_at": now, **row}
    store.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))


def _seed_rows(store) -> None:
    for t in ("Default", "Router"):
        _insert(store, "identity_types", {"id": t, "name": t, "is_system": 1})
    _insert(
        store,
        "auth_policies",
        {
            "id": "default",
            "name": "Default",
            "is_system": 1,
            "primary_": json.dumps(DEFAULT_AUTH_POLICY["primary"]),
            "secondary": json.dumps(DEFAULT_AUTH_POLICY["secondary"]),
        },
    )
    for id, name, schema in CONFIG_TYPES:
        _insert(store, "config_types", {"id": id, "name": name, "schema": json.dumps(schema)})
    for id, name, oses in POSTURE_CHECK_TYPES:
        _insert(store, "posture_check_types", {"id": id, "name": name, "operating_systems": json.dumps(oses)})


def _seed_admin(store, settings) -> None:
    import os

    password = settings.admin_password or os.environ.get("ZITI_LITE_ADMIN_PASSWORD") or ""
    generated = not password
    if generated:
        password = secrets.token_urlsafe(18)
    identity_id = new_id()
    _insert(
        store,
        "identities",
        {
            "id": identity_id,
            "name": "Default Admin",
            "type_id": "Default",
            "is_admin": 1,
            "is_default_admin": 1,
            "auth_policy_id": "default",
        },
    )
    hashed, salt = passwords.hash_password(password)
    _insert(
        store,
        "authenticators",
        {
            "id": new_id(),
            "identity_id": identity_id,
            "method": "updb",
            "username": settings.admin_user,
            "password_hash": hashed,
            "salt": salt,
        },
    )
    if generated:
        print(
            f"ziti-lite: created default admin '{settings.admin_user}' with password: {password}\n"
            "ziti-lite: this password is shown once; keep it.",
            file=sys.stderr,
            flush=True,
        )
