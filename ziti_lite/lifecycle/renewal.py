"""Renewing the controller's own certificates before they end, without a restart.

Every certificate the controller presents or signs with is renewed when it enters its renewal
window: a third of its lifetime left, at least 30 days (but never more than half its lifetime,
so that a short-lived certificate is not renewed the moment it is made). The root CA and the
signing CA are certified again with the same key and subject (``pki.ca.reissue_ca``), so every
certificate they issued still verifies; the replaced signing CA stays in the controller's trust
anchors until its own end (``signer_cert_previous``). The TLS server certificate keeps its key
too: enrollment JWTs signed with it stay verifiable against the presented certificate. It is
also re-issued at once when the hosts it must name changed or one is missing from its SANs. A
replaced server certificate is kept until its own end too (``server_cert_previous``, the newest
few): session tokens name the certificate that signed them (``kid``), and v2 routers look the
key up by that name in the router data model, also after a restart.

``renew`` decides and writes in one transaction (a crash midway leaves the old, valid pair);
``apply`` then reads the new pair into the live controller and every registered TLS context
(``contexts.reload``), counts the renewal for ``/metrics`` and logs it. ``serve`` renews at
start (``bootstrap.ensure``) and the janitor calls ``tick`` every few seconds while it runs.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cryptography import x509

from .. import clock
from ..pki import ca
from . import contexts

if TYPE_CHECKING:
    from .contexts import LifecycleController

log = logging.getLogger("ziti_lite")

MIN_WINDOW = dt.timedelta(days=30)
KEYS = ("root", "signer", "server")   # issuer first: a renewed issuer signs what follows
PREVIOUS_SERVER = 8                   # replaced server certificates kept (hosts may change often)
NAMES = {"root": "root CA", "signer": "signing CA", "server": "TLS server certificate"}


@dataclass(frozen=True, slots=True)
class Renewal:
    name: str                  # root, signer or server
    reason: str                # "window", "expired" or "hosts"
    was_until: dt.datetime
    now_until: dt.datetime


def window(lifetime: dt.timedelta) -> dt.timedelta:
    """How long before its end a certificate of ``lifetime`` is renewed."""
    return max(lifetime / 3, min(MIN_WINDOW, lifetime / 2))


@lru_cache(maxsize=64)
def validity(pem: str) -> tuple[dt.datetime, dt.datetime]:
    """(not before, not after) of the first certificate of ``pem`` (cached: the timer asks often)."""
    cert = ca.load_cert(pem)
    return cert.not_valid_before_utc, cert.not_valid_after_utc


def renew_at(pem: str) -> dt.datetime:
    start, end = validity(pem)
    return end - window(end - start)


def next_renewal(state: dict[str, str]) -> dt.datetime:
    """When the first of the controller's certificates enters its renewal window."""
    return min(renew_at(state[f"{k}_cert"]) for k in KEYS)


def sans_lack(pem: str, hosts: list[str]) -> list[str]:
    """The hosts a server certificate does not name (DNS or IP SANs)."""
    try:
        sans = ca.load_cert(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return list(hosts)
    named = {str(v).lower() for v in sans.get_values_for_type(x509.DNSName)}
    named |= {str(v) for v in sans.get_values_for_type(x509.IPAddress)}
    out = []
    for h in hosts:
        try:
            key = str(ipaddress.ip_address(h))
        except ValueError:
            key = h.lower()
        if key not in named:
            out.append(h)
    return out


def hosts_for(settings: Any) -> list[str]:
    """The hosts the server certificate must name: loopback names and the listen and advertised hosts."""
    hosts = ["localhost", "127.0.0.1", "::1"]
    for h in (settings.host, settings.advertise, *settings.extra_hosts):
        if h and h not in hosts and h not in ("0.0.0.0", "::"):
            hosts.append(h)
    return hosts


def _get(store, key: str) -> str | None:
    return store.value("SELECT value FROM controller WHERE key = ?", (key,))


def _put(store, key: str, value: str) -> None:
    store.execute("INSERT INTO controller (key, value) VALUES (?, ?)"
                  " ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))


def _keep_previous(store, key: str, pem: str, now: dt.datetime, most: int | None = None) -> None:
    """Put a replaced certificate first in the list under ``key``, dropping those that ended."""
    previous = [p for p in json.loads(_get(store, key) or "[]") if validity(p)[1] > now and p != pem]
    _put(store, key, json.dumps([pem, *previous][:most]))


def renew(store, hosts: list[str], *, server_days: int = ca.SERVER_DAYS, now: dt.datetime | None = None,
          ca_days: int = ca.CA_DAYS) -> list[Renewal]:
    """Re-issue, in one transaction, each controller certificate that is due (see the module
    docstring); returns what was renewed (empty: nothing was due, nothing written)."""
    now = now or clock.now()
    out: list[Renewal] = []
    with store.write():
        pairs = {k: ca.KeyPair(_get(store, f"{k}_cert") or "", _get(store, f"{k}_key") or "") for k in KEYS}
        stored_hosts = json.loads(_get(store, "server_hosts") or "[]")
        for k in KEYS:
            pair = pairs[k]
            start, end = validity(pair.cert_pem)
            reason = None
            if now >= end:
                reason = "expired"
            elif now >= end - window(end - start):
                reason = "window"
            elif k == "server" and (stored_hosts != hosts or sans_lack(pair.cert_pem, hosts)):
                reason = "hosts"
            if reason is None:
                continue
            if k == "root":
                new = ca.reissue_ca(pair, None, days=ca_days, now=now)
            elif k == "signer":
                new = ca.reissue_ca(pair, pairs["root"], days=ca_days, now=now)
                _keep_previous(store, "signer_cert_previous", pair.cert_pem, now)
            else:
                new = ca.issue_server_cert(pairs["signer"], hosts, days=server_days, key_pem=pair.key_pem, now=now)
                _put(store, "server_hosts", json.dumps(hosts))
                _keep_previous(store, "server_cert_previous", pair.cert_pem, now, PREVIOUS_SERVER)
                # the embedded router is known by the server certificate's fingerprint
                store.execute("UPDATE routers SET fingerprint = ? WHERE fingerprint = ?",
                              (ca.fingerprint(new.cert_pem), ca.fingerprint(pair.cert_pem)))
                # and ziti-lite itself in /controllers by its certificate
                store.execute("UPDATE controllers SET cert_pem = ?, fingerprint = ? WHERE fingerprint = ?",
                              (new.cert_pem, ca.fingerprint(new.cert_pem), ca.fingerprint(pair.cert_pem)))
            _put(store, f"{k}_cert", new.cert_pem)
            _put(store, f"{k}_key", new.key_pem)
            _put(store, f"{k}_renewed_at", clock.fmt(now) or "")
            pairs[k] = new
            out.append(Renewal(k, reason, end, validity(new.cert_pem)[1]))
    return out


def apply(ctl: LifecycleController, renewals: list[Renewal]) -> None:
    """After ``renew`` committed: the live controller and its TLS contexts take the new pairs."""
    if not renewals:
        return
    ctl.state.update({k: v for k, v in ctl.store.conn.execute("SELECT key, value FROM controller")})
    reloaded = contexts.reload(ctl)
    for r in renewals:
        ctl.cert_renewals[r.name] = ctl.cert_renewals.get(r.name, 0) + 1
        log.warning("renewed the %s (%s): valid until %s, was until %s; %d live TLS context(s) reloaded",
                    NAMES[r.name], {"window": "in its renewal window", "expired": "it had ended",
                                    "hosts": "the advertised hosts changed"}[r.reason],
                    clock.fmt(r.now_until), clock.fmt(r.was_until), reloaded)


def tick(ctl: LifecycleController) -> list[Renewal]:
    """The janitor's periodic check: renew and reload when a certificate entered its window."""
    if clock.now() < next_renewal(ctl.state):
        return []
    done = renew(ctl.store, hosts_for(ctl.settings), server_days=ctl.settings.server_cert_days)
    apply(ctl, done)
    return done
