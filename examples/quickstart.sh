#!/usr/bin/env bash
# Start a throwaway controller, log in as admin, create an identity with an OTT enrollment and
# save its enrollment JWT. Needs curl and python3; uses loopback only.
set -euo pipefail
DB=${DB:-$(mktemp -d)/net.db}
PORT=${PORT:-1280}
PASS=${PASS:-admin-Passw0rd}
ziti-lite serve --db "$DB" --port "$PORT" --admin-password "$PASS" &
SERVER=$!
trap 'kill $SERVER' EXIT
BASE="https://127.0.0.1:$PORT/edge/management/v1"
until curl -sk "$BASE/version" >/dev/null; do sleep 0.2; done

TOKEN=$(curl -sk -X POST "$BASE/authenticate?method=password" -H 'content-type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$PASS\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["token"])')
ID=$(curl -sk -X POST "$BASE/identities" -H "zt-session: $TOKEN" -H 'content-type: application/json' \
  -d '{"name":"demo-client","type":"User","isAdmin":false,"roleAttributes":["demo"],"enrollment":{"ott":true}}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["id"])')
curl -sk "$BASE/identities/$ID" -H "zt-session: $TOKEN" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["enrollment"]["ott"]["jwt"])' > demo-client.jwt
echo "identity $ID created; enrollment JWT in demo-client.jwt"
