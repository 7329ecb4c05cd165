"""When each certificate ends: the controller's own (server, signing CA, root) and the client
certificates of identities and routers, for ``/metrics``, ``/health-checks`` and ``ziti-lite check``.

Client certificates are parsed once each (their not-after is cached by fingerprint, which names
one certificate for good, and a PEM is read only for a fingerprint not seen before), and the
soonest end of each kind is cached until the database changes (on a large network, for up to a
minute), so a scrape of a network of 100k identities neither parses 100k certificates nor
stalls the event loop on each scrape.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from .. import clock
from ..pki import ca
from . import renewal

WARN_WITHIN = dt.timedelta(days=30)     # what `ziti-lite check` reports
CONTROLLER = ("server", "signer", "root")
KINDS = ("identity", "router")

# identity certificates: cert authenticators; router certificates: enrolled (edge) routers
_CLIENT_SQL = {
    "identity": "SELECT a.identity_id AS id, i.name AS name, a.fingerprint AS fp, a.ca_id AS ca_id, a.id AS auth_id"
                " FROM authenticators a JOIN identities i ON i.id = a.identity_id"
                " WHERE a.method = 'cert' AND a.cert_pem IS NOT NULL AND a.cert_pem != ''",
    "router": "SELECT id, name, fingerprint AS fp, NULL AS ca_id, NULL AS auth_id FROM routers"
              " WHERE cert_pem IS NOT NULL AND cert_pem != ''",
}
# a certificate's PEM is read only the first time its fingerprint is seen
_PEM_SQL = {"identity": "SELECT cert_pem FROM authenticators WHERE id = ?", "router": "SELECT cert_pem FROM routers"
            " WHERE id = ?"}
_NOT_AFTER: dict[str, dt.datetime] = {}       # fingerprint -> not after
# (database, kind) -> (generation, when computed, seconds it took, soonest ending)
_SOONEST: dict[tuple[str, str], tuple[tuple, float, float, Ending | None]] = {}
CHEAP = 0.005       # a pass that took less is made again whenever the database changed
REFRESH = 60.0      # else at most this often


@dataclass(frozen=True, slots=True)
class Ending:
    kind: str                 # server, signer, root, identity or router
    name: str                 # what it belongs to
    id: str | None            # the identity's or router's id
    not_after: dt.datetime
    external: bool = False    # an identity certificate issued by a third-party CA (not extendable here)
    authenticator: str | None = None   # an identity certificate's authenticator id

    def seconds_left(self, now: dt.datetime | None = None) -> float:
        return (self.not_after - (now or clock.now())).total_seconds()


def controller(state: dict[str, str]) -> list[Ending]:
    """The certificates the controller presents or signs with, in ``CONTROLLER`` order."""
    names = {"server": "TLS server certificate", "signer": "signing CA", "root": "root CA"}
    return [Ending(k, names[k], None, renewal.validity(state[f"{k}_cert"])[1]) for k in CONTROLLER]


def _not_after(store: Any, kind: str, row: dict) -> dt.datetime | None:
    fp = row["fp"]
    hit = _NOT_AFTER.get(fp) if fp else None
    if hit is None:
        pem = store.value(_PEM_SQL[kind], (row["auth_id"] if kind == "identity" else row["id"],))
        try:
            hit = ca.load_cert(pem or "").not_valid_after_utc
        except ValueError:
            return None     # not a certificate: the integrity check's business, not a metric's
        if fp:
            if len(_NOT_AFTER) > 500_000:
                _NOT_AFTER.clear()
            _NOT_AFTER[fp] = hit
    return hit


def clients(store: Any, kind: str) -> list[Ending]:
    """Every certificate of ``kind`` (identity or router) with its end, soonest first."""
    out = []
    for row in store.all(_CLIENT_SQL[kind]):
        end = _not_after(store, kind, row)
        if end is not None:
            out.append(Ending(kind, row["name"], row["id"], end, external=row["ca_id"] is not None,
                              authenticator=row["auth_id"]))
    return sorted(out, key=lambda e: (e.not_after, e.name))


def soonest(store: Any, kind: str) -> Ending | None:
    """The certificate of ``kind`` that ends first. Cached until the database changes; where a
    pass is costly (a large network: 120 ms at 20k identities) it is made again at most once a
    minute, so a busy controller's scrapes do not each stall the event loop."""
    generation = store.generation()
    key = (store.path, kind)
    hit = _SOONEST.get(key)
    now = time.monotonic()
    if hit is not None and (hit[0] == generation or (hit[2] > CHEAP and now - hit[1] < REFRESH)):
        return hit[3]
    found = clients(store, kind)
    if len(_SOONEST) > 64:
        _SOONEST.clear()
    _SOONEST[key] = (generation, now, time.monotonic() - now, found[0] if found else None)
    return found[0] if found else None


def expiring(store: Any, state: dict[str, str], within: dt.timedelta = WARN_WITHIN,
             now: dt.datetime | None = None) -> list[Ending]:
    """What ends (or has ended) within ``within`` from now: the controller's certificates first,
    then identities' and routers', soonest first."""
    limit = (now or clock.now()) + within
    own = [e for e in controller(state) if e.not_after <= limit]
    theirs = sorted((e for k in KINDS for e in clients(store, k) if e.not_after <= limit),
                    key=lambda e: (e.not_after, e.kind, e.name))
    return own + theirs


def server_state(state: dict[str, str], now: dt.datetime | None = None) -> tuple[str, str]:
    """(``ok``, ``warning`` or ``failing``, a sentence) for the TLS server certificate: a warning
    once it is in its renewal window (a serving controller renews it there, so a warning means
    renewal did not happen), failing once it has ended."""
    now = now or clock.now()
    pem = state["server_cert"]
    end = renewal.validity(pem)[1]
    left = end - now
    if left.total_seconds() <= 0:
        return "failing", (f"the TLS server certificate ended at {clock.fmt(end)}: clients refuse it;"
                           " restart ziti-lite serve to renew it")
    days = left.total_seconds() / 86400
    if now >= renewal.renew_at(pem):
        return "warning", (f"the TLS server certificate ends in {days:.1f} days ({clock.fmt(end)}) and was not"
                           " renewed: see the log for the renewal error")
    return "ok", (f"the TLS server certificate ends in {days:.1f} days ({clock.fmt(end)}), renewed from"
                  f" {clock.fmt(renewal.renew_at(pem))}")


def _when(e: Ending, now: dt.datetime) -> str:
    left = e.seconds_left(now) / 86400
    if left <= 0:
        return f"ended {-left:.1f} days ago ({clock.fmt(e.not_after)})"
    return f"ends in {left:.1f} days ({clock.fmt(e.not_after)})"


def report(store: Any, within: dt.timedelta = WARN_WITHIN, now: dt.datetime | None = None) -> list[str]:
    """``ziti-lite check``'s lines about certificates ending within ``within``, each with what to do."""
    now = now or clock.now()
    state = {k: v for k, v in store.conn.execute("SELECT key, value FROM controller")}
    out = []
    for e in expiring(store, state, within, now):
        if e.kind in CONTROLLER:
            out.append(f"certificate: the controller's {e.name} {_when(e, now)}: a running ziti-lite serve renews it"
                       " in its renewal window, a starting one at once")
        elif e.kind == "identity":
            fix = ("issued by an external CA: renew it there" if e.external else
                   "its SDK extends it while it can log in (POST /current-identity/authenticators/{id}/extend);"
                   f" otherwise re-enroll it: ziti edge delete authenticator {e.authenticator}, then"
                   f" ziti edge create enrollment ott {e.id}")
            out.append(f"certificate: identity '{e.name}' ({e.id}) {_when(e, now)}: {fix}")
        else:
            out.append(f"certificate: router '{e.name}' ({e.id}) {_when(e, now)}: the router extends it"
                       f" (POST /enroll/extend/router); otherwise ziti edge re-enroll edge-router {e.id}")
    return out
