import httpx, pytest
from tests.enroll.conftest import issue, make_ca, register_ca
from tests.pki.conftest import make_ca as old_ca
import datetime as dt

def test_probe(live, keys):
    admin = live.admin()
    root = old_ca("Probe Root", not_before=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=60), days=365)
    register_ca(admin, root, "probe", keys[3])
    iid = admin.create("identities", {"name": "probe-exp", "type": "Device", "isAdmin": False})
    old = issue(root, "old", keys[4], not_before=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=40), days=10)
    r = admin.post("/authenticators", json={"method": "cert", "identityId": iid, "certPem": old})
    print("AUTH", r.status_code, r.text)
    _, r = live.cert_login(old, keys[4])
    print("EXPLOGIN", r.status_code, r.text[:200])
