"""The control channel's vocabulary: content types, header ids and the protobuf message tables.

Numbers are those a real ``ziti router`` v1.3.3 uses (``shared/reference/behaviour/ctrl-channel.md``
lists where each was read). Framing is the channel format of ``channel/wire.py``; the channel-level
content types and headers (hello, result, heartbeat, reply-for) are shared with it. Message
tables name only the fields ziti-lite reads or writes; unknown fields are skipped when read.
"""

from __future__ import annotations

from .pb import Field, Msg


class C:
    """Content types: fabric (ctrl_pb) 1000s, edge (edge_ctrl_pb) 20000s."""
    RECONNECT_PING = -33
    LINK_CONNECTED = 1003
    FAULT = 1004
    ROUTE = 1005
    UNROUTE = 1006
    METRICS = 1007
    TRACE = 1010
    ROUTE_RESULT = 1022
    CIRCUIT_CONFIRMATION = 1034
    ROUTER_LINKS = 1035
    VERIFY_ROUTER = 1036
    REMOVE_TERMINATORS = 1038
    PEER_STATE_CHANGES = 1050
    UPDATE_ROUTER_INTERFACES = 1052   # v2 routers, only to controllers of v1.6.3 and later
    LINK_STATE = 1053
    ALERTS = 1054
    SERVER_HELLO = 20000
    CLIENT_HELLO = 20001
    ERROR = 20002
    SESSION_REMOVED = 20102
    API_SESSION_ADDED = 20200
    API_SESSION_REMOVED = 20202
    API_SESSION_HEARTBEAT = 20203
    CREATE_CIRCUIT = 20205
    CREATE_CIRCUIT_RESPONSE = 20206
    CREATE_TERMINATOR = 20207
    CREATE_TERMINATOR_RESPONSE = 20208
    UPDATE_TERMINATOR = 20209
    UPDATE_TERMINATOR_RESPONSE = 20210
    REMOVE_TERMINATOR = 20211
    REMOVE_TERMINATOR_RESPONSE = 20212
    VALIDATE_SESSIONS = 20213
    HEALTH_EVENT = 20214
    CREATE_TERMINATOR_V2 = 20216
    CREATE_TERMINATOR_V2_RESPONSE = 20217
    CREATE_CIRCUIT_V2 = 20218
    CREATE_CIRCUIT_V2_RESPONSE = 20219
    CREATE_TUNNEL_CIRCUIT_V2 = 20220
    CREATE_TUNNEL_CIRCUIT_V2_RESPONSE = 20221
    CREATE_API_SESSION = 20400
    CREATE_API_SESSION_RESPONSE = 20401
    LIST_SERVICES = 20404
    SERVICE_LIST = 20405
    CREATE_TUNNEL_TERMINATOR = 20406
    CREATE_TUNNEL_TERMINATOR_RESPONSE = 20407
    REMOVE_TUNNEL_TERMINATOR = 20410
    REMOVE_TUNNEL_TERMINATOR_RESPONSE = 20411
    UPDATE_TUNNEL_TERMINATOR = 20408
    UPDATE_TUNNEL_TERMINATOR_RESPONSE = 20409
    TUNNEL_HEALTH_EVENT = 20412
    CREATE_TUNNEL_TERMINATOR_V2 = 20413
    CREATE_TUNNEL_TERMINATOR_V2_RESPONSE = 20414
    CONNECT_EVENTS = 20415
    # the router data model (v1.6 with capability 4, always on v2.0)
    DATA_STATE = 20500
    DATA_STATE_CHANGE_SET = 20501
    SUBSCRIBE_TO_DATA_MODEL = 20505
    CURRENT_INDEX = 20506


class H:
    """Header ids of the control channel (channel-level ones are in ``channel.wire.H``)."""
    # hello, v1 routers (and the answer to every router)
    LISTENERS = 10
    ROUTER_METADATA = 11
    CAPABILITIES = 12
    # hello, grouped (multi-underlay) channels of v2 routers: 10 and 11 mean something else there
    TYPE = 7
    IS_GROUPED = 9
    GROUP_SECRET = 10
    IS_FIRST_GROUP_CONNECTION = 11
    LISTENERS_V2 = 1000
    ROUTER_METADATA_V2 = 1001
    CAPABILITIES_V2 = 1002
    # the router data model
    RDM_SUBSCRIPTION_ID = 1026
    # RouteResult
    ROUTE_ATTEMPT = 1101
    ROUTE_SUCCESS = 1102
    ROUTE_ERROR = 1103
    ROUTE_ERROR_CODE = 1104
    # CreateCircuitV2 request / response
    CIRCUIT_PEER_DATA = 10
    CIRCUIT_SESSION_TOKEN = 11
    CIRCUIT_ID = 11
    CIRCUIT_FINGERPRINTS = 12
    CIRCUIT_ADDRESS = 12
    CIRCUIT_INSTANCE_ID = 13
    CIRCUIT_TAGS = 13
    CIRCUIT_API_SESSION_TOKEN = 14
    ERROR_CODE = 1014
    # instant sync (ApiSessionAdded full state)
    SYNC_STRATEGY = 1013
    SYNC_STATE = 1014


# RouteResult error codes (header 1104) and CreateCircuit error codes (header 1014)
ROUTE_ERR_INVALID_TERMINATOR = 1
ROUTE_ERR_MISCONFIGURED = 2
ROUTE_ERR_DIAL_TIMEOUT = 3
ROUTE_ERR_CONNECTION_REFUSED = 4

# controller capabilities (bit numbers of the hello answer's mask): v1 routers read header 12 and
# bits 1-4, v2 routers header 1002 (else 12); v2 requires JWT sessions (6), dials a second
# underlay only when told grouped channels work (5)
CAP_CREATE_TERMINATOR_V2 = 1
CAP_SINGLE_ROUTER_LINK_SOURCE = 2
CAP_CREATE_CIRCUIT_V2 = 3
CAP_ROUTER_DATA_MODEL = 4
CAP_GROUPED_CTRL_CHAN = 5
CAP_JWT_LEGACY_SESSIONS = 6
# router capability (hello header 1002): "my hello uses the 1000+ header ids"
ROUTER_CAP_MULTI_CHANNEL = 1

# RouterMetadata capabilities; peer states
CAP_LINK_MANAGEMENT = 1
PEER_HEALTHY, PEER_UNHEALTHY, PEER_REMOVED = 0, 1, 2

# enums
FAULT_INGRESS, FAULT_EGRESS, FAULT_LINK, FAULT_FORWARD, FAULT_UNKNOWN_OWNER_FORWARD = 0, 1, 2, 3, 4
DEST_START, DEST_END, DEST_LINK = 0, 1, 2
PRECEDENCE = {0: "default", 1: "required", 2: "failed"}
PRECEDENCE_CODE = {v: k for k, v in PRECEDENCE.items()}
TERMINATOR_OK, TERMINATOR_ID_CONFLICT, TERMINATOR_OTHER, TERMINATOR_BUSY, TERMINATOR_INVALID_SESSION = 0, 1, 2, 3, 4


# ---------------------------------------------------------------- fabric (ctrl_pb)
LISTENER = Msg("Listener", (Field(1, "address", "string"), Field(2, "protocol", "string"),
                            Field(3, "costTags", "string", True), Field(4, "groups", "string", True),
                            Field(5, "localBinding", "string")))
LISTENERS = Msg("Listeners", (Field(1, "listeners", LISTENER, True),))
ROUTER_METADATA = Msg("RouterMetadata", (Field(1, "capabilities", "enum", True),))
FAULT = Msg("Fault", (Field(1, "subject", "enum"), Field(2, "id", "string"), Field(3, "iteration", "uint32")))
EGRESS = Msg("Egress", (Field(1, "binding", "string"), Field(2, "address", "string"),
                        Field(3, "destination", "string"), Field(4, "peerData", "map", key="uint32", value="bytes")))
FORWARD = Msg("Forward", (Field(1, "srcAddress", "string"), Field(2, "dstAddress", "string"),
                          Field(3, "dstType", "enum")))
CONTEXT = Msg("Context", (Field(1, "fields", "map", key="string", value="string"),
                          Field(2, "channelMask", "uint32")))
ROUTE = Msg("Route", (Field(1, "circuitId", "string"), Field(2, "attempt", "uint32"), Field(3, "egress", EGRESS),
                      Field(4, "forwards", FORWARD, True), Field(5, "context", CONTEXT), Field(6, "timeout", "uint64"),
                      Field(7, "tags", "map", key="string", value="string")))
UNROUTE = Msg("Unroute", (Field(1, "circuitId", "string"), Field(2, "now", "bool")))
CIRCUIT_CONFIRMATION = Msg("CircuitConfirmation", (Field(1, "circuitIds", "string", True),
                                                   Field(2, "idleTimes", "map", key="string", value="int64")))
REMOVE_TERMINATORS = Msg("RemoveTerminatorsRequest", (Field(1, "terminatorIds", "string", True),))
PEER_STATE_CHANGE = Msg("PeerStateChange", (Field(1, "id", "string"), Field(2, "version", "string"),
                                            Field(3, "state", "enum"), Field(4, "listeners", LISTENER, True)))
PEER_STATE_CHANGES = Msg("PeerStateChanges", (Field(1, "changes", PEER_STATE_CHANGE, True),))
ROUTER_LINK = Msg("RouterLink", (Field(1, "id", "string"), Field(2, "destRouterId", "string"),
                                 Field(3, "linkProtocol", "string"), Field(4, "linkCostTags", "string", True),
                                 Field(5, "dialAddress", "string"), Field(6, "iteration", "uint32")))
ROUTER_LINKS = Msg("RouterLinks", (Field(1, "links", ROUTER_LINK, True),))
LINK_CONN = Msg("LinkConn", (Field(1, "id", "string"), Field(2, "localAddr", "string"),
                             Field(3, "remoteAddr", "string")))
LINK_CONNECTED = Msg("LinkConnected", (Field(1, "id", "string"), Field(2, "conns", LINK_CONN, True)))
INTERFACE = Msg("Interface", (Field(1, "name", "string"), Field(2, "hardwareAddress", "string"),
                              Field(3, "mtu", "int64"), Field(4, "index", "int64"), Field(5, "flags", "uint64"),
                              Field(6, "addresses", "string", True)))
ROUTER_INTERFACES_UPDATE = Msg("RouterInterfacesUpdate", (Field(1, "interfaces", INTERFACE, True),))
VERIFY_ROUTER = Msg("VerifyRouter", (Field(1, "routerId", "string"), Field(2, "fingerprints", "string", True)))

# ---------------------------------------------------------------- edge (edge_ctrl_pb)
SERVER_HELLO = Msg("ServerHello", (Field(1, "version", "string"),
                                   Field(2, "data", "map", key="string", value="string")))
ADDRESS = Msg("Address", (Field(10, "value", "string"), Field(20, "protocol", "string"),
                          Field(30, "hostname", "string"), Field(40, "port", "int32")))
EDGE_LISTENER = Msg("EdgeListener", (Field(10, "address", ADDRESS), Field(20, "advertise", ADDRESS)))
CLIENT_HELLO = Msg("ClientHello", (Field(1, "version", "string"), Field(2, "hostname", "string"),
                                   Field(3, "protocols", "string", True),
                                   Field(4, "data", "map", key="string", value="string"),
                                   Field(5, "protocolPorts", "string", True),
                                   Field(10, "listeners", EDGE_LISTENER, True)))
API_SESSION = Msg("ApiSession", (Field(1, "token", "string"), Field(2, "certFingerprints", "string", True),
                                 Field(3, "id", "string"), Field(4, "identityId", "string")))
API_SESSION_ADDED = Msg("ApiSessionAdded", (Field(1, "isFullState", "bool"),
                                            Field(2, "apiSessions", API_SESSION, True)))
TOKENS_AND_IDS = Msg("Removed", (Field(1, "tokens", "string", True), Field(2, "ids", "string", True)))
API_SESSION_HEARTBEAT = Msg("ApiSessionHeartbeat", (Field(1, "tokens", "string", True),))
CREATE_CIRCUIT = Msg("CreateCircuitRequest", (
    Field(1, "sessionToken", "string"), Field(2, "fingerprints", "string", True),
    Field(3, "terminatorInstanceId", "string"), Field(4, "peerData", "map", key="uint32", value="bytes"),
    Field(5, "apiSessionToken", "string")))
CREATE_CIRCUIT_RESPONSE = Msg("CreateCircuitResponse", (
    Field(1, "circuitId", "string"), Field(2, "address", "string"),
    Field(3, "peerData", "map", key="uint32", value="bytes"), Field(4, "tags", "map", key="string", value="string")))
CREATE_TERMINATOR = Msg("CreateTerminatorRequest", (
    Field(1, "sessionToken", "string"), Field(2, "fingerprints", "string", True),
    Field(3, "peerData", "map", key="uint32", value="bytes"), Field(4, "cost", "uint32"),
    Field(5, "precedence", "enum"), Field(6, "instanceId", "string"), Field(7, "instanceSecret", "bytes"),
    Field(8, "apiSessionToken", "string")))
CREATE_TERMINATOR_V2 = Msg("CreateTerminatorV2Request", (
    Field(1, "address", "string"), Field(2, "sessionToken", "string"), Field(3, "fingerprints", "string", True),
    Field(4, "peerData", "map", key="uint32", value="bytes"), Field(5, "cost", "uint32"),
    Field(6, "precedence", "enum"), Field(7, "instanceId", "string"), Field(8, "instanceSecret", "bytes"),
    Field(9, "apiSessionToken", "string")))
CREATE_TERMINATOR_V2_RESPONSE = Msg("CreateTerminatorV2Response", (
    Field(1, "terminatorId", "string"), Field(2, "result", "enum"), Field(3, "msg", "string"),
    Field(4, "errorCode", "uint32"), Field(5, "retryHint", "uint32")))
# what a v2 router does after a refusal (errorCode -> retryHint): start over with a new session
# (2) for session problems, give up (3) for a service it may not host, else retry (0)
RETRY_START_OVER, RETRY_NOT_RETRIABLE = 2, 3
RETRY_HINTS = {2: RETRY_START_OVER, 3: RETRY_START_OVER, 4: RETRY_START_OVER, 5: RETRY_START_OVER,
               6: RETRY_NOT_RETRIABLE, 7: RETRY_NOT_RETRIABLE}
REMOVE_TERMINATOR = Msg("RemoveTerminatorRequest", (
    Field(1, "sessionToken", "string"), Field(2, "fingerprints", "string", True), Field(3, "terminatorId", "string"),
    Field(4, "apiSessionToken", "string")))
UPDATE_TERMINATOR = Msg("UpdateTerminatorRequest", (
    Field(1, "sessionToken", "string"), Field(2, "fingerprints", "string", True), Field(3, "terminatorId", "string"),
    Field(4, "cost", "uint32"), Field(5, "precedence", "enum"), Field(6, "updatePrecedence", "bool"),
    Field(7, "updateCost", "bool"), Field(8, "apiSessionToken", "string")))
HEALTH_EVENT = Msg("HealthEventRequest", (
    Field(1, "sessionToken", "string"), Field(2, "fingerprints", "string", True), Field(3, "terminatorId", "string"),
    Field(4, "checkPassed", "bool"), Field(5, "apiSessionToken", "string")))
VALIDATE_SESSIONS = Msg("ValidateSessionsRequest", (Field(1, "sessionTokens", "string", True),))


# ---------------------------------------------------------------- header value encodings
# (the channel library's: a little-endian uint32 count, then length-prefixed items; at most 128)
MAX_ITEMS = 128
MAX_ITEM = 8192


def _u32(b: bytes, pos: int) -> tuple[int, int]:
    if len(b) - pos < 4:
        raise ValueError("header value truncated")
    return int.from_bytes(b[pos:pos + 4], "little"), pos + 4


def _chunk(b: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _u32(b, pos)
    if n > MAX_ITEM or n > len(b) - pos:
        raise ValueError("header value item too long")
    return b[pos:pos + n], pos + n


def decode_strings(b: bytes | None) -> list[str]:
    if not b:
        return []
    count, pos = _u32(b, 0)
    if count > MAX_ITEMS:
        raise ValueError("too many strings in a header")
    out = []
    for _ in range(count):
        item, pos = _chunk(b, pos)
        out.append(item.decode("utf-8", "replace"))
    return out


def decode_u32_map(b: bytes | None) -> dict[int, bytes]:
    if not b:
        return {}
    count, pos = _u32(b, 0)
    if count > MAX_ITEMS:
        raise ValueError("too many entries in a header map")
    out = {}
    for _ in range(count):
        key, pos = _u32(b, pos)
        out[key], pos = _chunk(b, pos)
    return out


def _lp(data: bytes) -> bytes:
    return len(data).to_bytes(4, "little") + data


def encode_u32_map(m: dict[int, bytes]) -> bytes:
    if not m:
        return b""
    return len(m).to_bytes(4, "little") + b"".join(k.to_bytes(4, "little") + _lp(v) for k, v in m.items())


def encode_string_map(m: dict[str, str]) -> bytes:
    if not m:
        return b""
    return len(m).to_bytes(4, "little") + b"".join(_lp(k.encode()) + _lp(v.encode()) for k, v in m.items())


# ---------------------------------------------------------------- the tunneler (edge_ctrl_pb)
CREATE_API_SESSION = Msg("CreateApiSessionRequest", (Field(3, "configTypes", "string", True),))
CREATE_API_SESSION_RESPONSE = Msg("CreateApiSessionResponse", (
    Field(1, "sessionId", "string"), Field(2, "token", "string"), Field(3, "refreshIntervalSeconds", "uint32"),
    Field(4, "identityId", "string"), Field(5, "identityName", "string"), Field(6, "defaultHostingPrecedence", "enum"),
    Field(7, "defaultHostingCost", "uint32"), Field(8, "appDataJson", "string"),
    Field(9, "servicePrecedences", "map", key="string", value="enum"),
    Field(10, "serviceCosts", "map", key="string", value="uint32")))
CREATE_SESSION_RESPONSE = Msg("CreateSessionResponse", (Field(1, "sessionId", "string"), Field(2, "token", "string")))
TUNNEL_SERVICE = Msg("TunnelService", (
    Field(1, "id", "string"), Field(2, "name", "string"), Field(3, "permissions", "string", True),
    Field(4, "encryption", "bool"), Field(5, "config", "bytes"), Field(6, "tags", "bytes")))
SERVICES_LIST = Msg("ServicesList", (Field(1, "lastUpdate", "bytes"), Field(2, "services", TUNNEL_SERVICE, True)))
CREATE_TUNNEL_TERMINATOR = Msg("CreateTunnelTerminatorRequest", (
    Field(1, "serviceName", "string"), Field(2, "sessionId", "string"), Field(3, "address", "string"),
    Field(4, "peerData", "map", key="uint32", value="bytes"), Field(5, "cost", "uint32"),
    Field(6, "precedence", "enum"), Field(7, "instanceId", "string"), Field(8, "instanceSecret", "bytes"),
    Field(9, "startTime", "int64")))
CREATE_TUNNEL_TERMINATOR_RESPONSE = Msg("CreateTunnelTerminatorResponse", (
    Field(1, "apiSession", CREATE_API_SESSION_RESPONSE), Field(2, "session", CREATE_SESSION_RESPONSE),
    Field(3, "terminatorId", "string"), Field(4, "startTime", "int64")))
CREATE_TUNNEL_TERMINATOR_V2 = Msg("CreateTunnelTerminatorRequestV2", (
    Field(1, "serviceId", "string"), Field(2, "address", "string"),
    Field(3, "peerData", "map", key="uint32", value="bytes"),
    Field(4, "cost", "uint32"), Field(5, "precedence", "enum"), Field(6, "instanceId", "string"),
    Field(7, "instanceSecret", "bytes"), Field(8, "startTime", "int64")))
CREATE_TUNNEL_TERMINATOR_V2_RESPONSE = Msg("CreateTunnelTerminatorResponseV2", (
    Field(1, "terminatorId", "string"), Field(2, "startTime", "int64"), Field(3, "result", "enum"),
    Field(4, "msg", "string"), Field(5, "errorCode", "uint32"), Field(6, "retryHint", "uint32")))
UPDATE_TUNNEL_TERMINATOR = Msg("UpdateTunnelTerminatorRequest", (
    Field(1, "terminatorId", "string"), Field(2, "cost", "uint32"), Field(3, "precedence", "enum"),
    Field(4, "updatePrecedence", "bool"), Field(5, "updateCost", "bool")))
CONNECT_DETAILS = Msg("ConnectDetails", (Field(1, "connectTime", "int64"), Field(2, "srcAddr", "string"),
                                          Field(3, "dstAddr", "string")))
IDENTITY_CONNECT_EVENTS = Msg("IdentityConnectEvents", (Field(1, "identityId", "string"),
                                                        Field(2, "isConnected", "bool"),
                                                        Field(3, "connectTimes", CONNECT_DETAILS, True)))
CONNECT_EVENTS = Msg("ConnectEvents", (Field(1, "events", IDENTITY_CONNECT_EVENTS, True),
                                       Field(2, "fullState", "bool")))
# the routers' metrics (1007): the histograms only, for the links' latencies
HISTOGRAM = Msg("Histogram", (Field(1, "count", "int64"), Field(3, "mean", "double")))
METRICS = Msg("MetricsMessage", (Field(2, "sourceId", "string"),
                                 Field(8, "histograms", "map", key="string", value=HISTOGRAM)))
# TunnelHealthEvent: headers only
TUNNEL_TERMINATOR_ID = 1022
TUNNEL_CHECK_PASSED = 1023


# ---------------------------------------------------------------- the router data model (edge_ctrl_pb)
TIMESTAMP = Msg("Timestamp", (Field(1, "seconds", "int64"), Field(2, "nanos", "int32")))
SUBSCRIBE_TO_DATA_MODEL = Msg("SubscribeToDataModelRequest", (
    Field(1, "currentIndex", "uint64"), Field(2, "subscriptionDurationSeconds", "uint32"), Field(3, "renew", "bool"),
    Field(4, "timelineId", "string"), Field(5, "subscriptionId", "string")))
RDM_CONFIG_TYPE = Msg("ConfigType", (Field(1, "id", "string"), Field(2, "name", "string")))
RDM_CONFIG = Msg("Config", (Field(1, "id", "string"), Field(2, "typeId", "string"), Field(3, "name", "string"),
                            Field(4, "dataJson", "string")))
RDM_SERVICE_CONFIGS = Msg("ServiceConfigs", (Field(1, "configs", "map", key="string", value="string"),))
RDM_IDENTITY = Msg("Identity", (
    Field(1, "id", "string"), Field(2, "name", "string"), Field(3, "defaultHostingPrecedence", "enum"),
    Field(4, "defaultHostingCost", "uint32"),
    Field(5, "serviceHostingPrecedences", "map", key="string", value="enum"),
    Field(6, "serviceHostingCosts", "map", key="string", value="uint32"), Field(7, "appDataJson", "bytes"),
    Field(8, "serviceConfigs", "map", key="string", value=RDM_SERVICE_CONFIGS), Field(9, "disabled", "bool")))
RDM_SERVICE = Msg("Service", (Field(1, "id", "string"), Field(2, "name", "string"),
                              Field(3, "encryptionRequired", "bool"), Field(4, "configs", "string", True)))
RDM_SERVICE_POLICY = Msg("ServicePolicy", (Field(1, "id", "string"), Field(2, "name", "string"),
                                           Field(3, "policyType", "enum")))
RDM_REVOCATION = Msg("Revocation", (Field(1, "id", "string"), Field(2, "expiresAt", TIMESTAMP),
                                    Field(3, "type", "string"), Field(4, "issuedBefore", TIMESTAMP)))
RDM_POLICY_CHANGE = Msg("ServicePolicyChange", (
    Field(1, "policyId", "string"), Field(2, "relatedEntityIds", "string", True),
    Field(3, "relatedEntityType", "enum"), Field(4, "add", "bool")))
RDM_PUBLIC_KEY = Msg("PublicKey", (Field(1, "data", "bytes"), Field(2, "kid", "string"),
                                   Field(3, "usages", "enum", True), Field(4, "format", "enum")))
_PC_PROCESS = Msg("Process", (Field(1, "osType", "string"), Field(2, "path", "string"),
                              Field(3, "hashes", "string", True), Field(4, "fingerprints", "string", True)))
_PC_OS = Msg("Os", (Field(1, "osType", "string"), Field(2, "osVersions", "string", True)))
RDM_POSTURE_CHECK = Msg("PostureCheck", (
    Field(1, "id", "string"), Field(2, "name", "string"), Field(4, "typeId", "string"),
    Field(7, "mac", Msg("Mac", (Field(1, "macAddresses", "string", True),))),
    Field(8, "mfa", Msg("Mfa", (Field(1, "timeoutSeconds", "int64"), Field(2, "promptOnWake", "bool"),
                                Field(3, "promptOnUnlock", "bool"), Field(4, "ignoreLegacyEndpoints", "bool")))),
    Field(9, "osList", Msg("OsList", (Field(1, "osList", _PC_OS, True),))),
    Field(10, "process", _PC_PROCESS),
    Field(11, "processMulti", Msg("ProcessMulti", (Field(1, "semantic", "string"),
                                                   Field(2, "processes", _PC_PROCESS, True)))),
    Field(12, "domains", Msg("Domains", (Field(1, "domains", "string", True),)))))
RDM_EVENT = Msg("Event", (
    Field(1, "action", "enum"), Field(3, "isSynthetic", "bool"), Field(10, "identity", RDM_IDENTITY),
    Field(11, "service", RDM_SERVICE), Field(12, "servicePolicy", RDM_SERVICE_POLICY),
    Field(13, "postureCheck", RDM_POSTURE_CHECK), Field(14, "publicKey", RDM_PUBLIC_KEY),
    Field(15, "revocation", RDM_REVOCATION), Field(16, "servicePolicyChange", RDM_POLICY_CHANGE),
    Field(17, "configType", RDM_CONFIG_TYPE), Field(18, "config", RDM_CONFIG)))
RDM_CACHE = Msg("Cache", (Field(1, "data", "map", key="string", value="bytes"),))
DATA_STATE = Msg("DataState", (Field(1, "events", "bytes", True), Field(2, "endIndex", "uint64"),
                               Field(3, "timelineId", "string"),
                               Field(4, "caches", "map", key="string", value=RDM_CACHE)))
CHANGE_SET = Msg("ChangeSet", (Field(1, "index", "uint64"), Field(2, "isSynthetic", "bool"),
                               Field(3, "changes", "bytes", True), Field(4, "timestampId", "string"),
                               Field(5, "previousIndex", "uint64")))
# events are encoded once (RDM_EVENT) and carried as bytes in DATA_STATE and CHANGE_SET: the same
# wire form as a nested message, decoded with RDM_EVENT by whoever reads them
RDM_ACTION_CREATE, RDM_ACTION_UPDATE, RDM_ACTION_DELETE = 0, 1, 2
RDM_POLICY_DIAL, RDM_POLICY_BIND = 1, 2
RDM_RELATED_SERVICE, RDM_RELATED_IDENTITY, RDM_RELATED_POSTURE_CHECK = 1, 2, 3
RDM_KEY_JWT, RDM_KEY_CLIENT_CERT = 0, 1
RDM_KEY_FORMAT_X509_DER = 0
