def test_declared_but_unimplemented_client_operations_answer_501(client):
    from tests.conftest import CLIENT
    for method, path in (("POST", "/enroll/challenge"), ("GET", "/enroll/jwks")):
        r = client.request(method, CLIENT + path)
        assert r.status_code == 501, (path, r.text)
        assert "has not yet been implemented" in r.json()
