#!/usr/bin/env python3
"""A platform in Python that accepts the Agent Credential Exchange's tokens: Python 3 stdlib + PyJWT.

Debian 12: apt-get install python3-jwt   (python3-yaml too, to read the scope file as YAML)

Two modes:

  platform.py --vectors DIR
      Runs every conformance vector of DIR (tokens.json, sets.json, jwks.json: see conformance/README.md)
      through the same checks the live mode uses, at each vector's fixed clock. Prints one JSON summary;
      exit 0 when every verdict agrees, 1 otherwise.

  ACE_FEED_TOKEN=... platform.py --service-url URL --scopes FILE [--port 3000] [--poll-interval 5]
      Serves HTTP. Each request needs an agent's Bearer token: RS256 against the service's JWKS, iss (the
      service's issuer), aud = this platform, exp/nbf/iat (5 s leeway), typ per profile (JWT for
      svc-native-jwt, at+jwt for oauth-at-jwt), the required claims; then the route's scopes from the scope
      file. It follows the platform's revocation feed (RFC 8936 poll with ack; each SET verified with the
      JWKS as a SET: typ secevent+jwt, iss, aud) and refuses revoked tokens. The feed is polled with
      Authorization: Bearer $ACE_FEED_TOKEN (the platform's feed credential).

Answers: 200 {"agent", "client_id", "scopes", "route"} for an accepted token; 401 invalid_token, 403
insufficient_scope, 503 (feed not current) with the service's error shape {"detail", "error_code"} and an
RFC 6750 WWW-Authenticate challenge. The printed line "listening on http://HOST:PORT" means ready.
"""
import os
import sys

# This file is named like the standard library's `platform` module; run as a script, its folder comes first
# on sys.path, and a library importing `platform` would get this file. Nothing is imported from here.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

import jwt  # noqa: E402  PyJWT (Debian: python3-jwt)

PROFILE_TYP = {"svc-native-jwt": "jwt", "oauth-at-jwt": "at+jwt"}
REQUIRED_CLAIMS = ["iss", "sub", "aud", "exp", "iat"]
MAX_TOKEN_AGE = 86400  # the longest lifetime the service can give a token (TOKEN_TTL_SECONDS max)
MAX_TOKEN_LENGTH = 8192
MAX_BODY = 1 << 20  # request bodies are read off the connection and dropped; larger ones close it
TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")  # RFC 6750 b64token

SET_TYP = "secevent+jwt"
SESSION_REVOKED = "https://schemas.openid.net/secevent/caep/event-type/session-revoked"
PLATFORM_REVOKED = "urn:agent-credential-exchange:secevent:platform-tokens-revoked"
KEY_RETIRED = "urn:agent-credential-exchange:secevent:signing-key-retired"
STREAM_HEAD = "urn:agent-credential-exchange:secevent:stream-head"

# The refusal texts (the same as the Node middleware's error_description).
DETAILS = {
    "malformed": "The access token is malformed.",
    "crit_not_supported": "The access token names a critical header parameter (crit) that is not supported.",
    "alg_not_allowed": "The access token uses an algorithm that is not accepted.",
    "unknown_kid": "The access token is signed with an unknown key.",
    "bad_signature": "The access token signature is invalid.",
    "wrong_aud": "The access token is meant for another platform.",
    "wrong_iss": "The access token has an unexpected issuer.",
    "expired": "The access token expired.",
    "not_yet_valid": "The access token is not valid yet.",
    "issued_in_future": "The access token is issued in the future.",
    "unknown_profile": "The access token has an unknown profile.",
    "typ_mismatch": "The access token has a type (typ) that does not match its profile.",
    "revoked": "The access token was revoked.",
}


class Refused(Exception):
    """A token or SET that must not be accepted; `reason` is a conformance reason code."""

    def __init__(self, reason, claim=None, status=401, detail=None):
        super().__init__(reason)
        self.reason = reason
        self.claim = claim
        self.status = status
        if detail is None:
            if reason == "missing_claim":
                detail = f"The access token lacks the {claim} claim."
            elif reason == "invalid_claim":
                detail = f"The access token has an invalid {claim} claim."
            else:
                detail = DETAILS.get(reason, "The access token is not accepted.")
        self.detail = detail


def normal_typ(value):
    """RFC 7515 section 4.1.9: case-insensitive, the "application/" prefix optional."""
    if not isinstance(value, str):
        return None
    value = value.lower()
    return value[len("application/"):] if value.startswith("application/") else value


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ---- keys -------------------------------------------------------------------------------------------------


class KeySet:
    """The service's RS256 signing keys by kid. With a URL: fetched at start, again for an unknown kid
    (at most once per `cooldown` seconds; a feed SET's unknown kid once at once, as a key retirement is
    signed by the key that replaced the retired one)."""

    def __init__(self, jwks=None, url=None, cooldown=5.0):
        self.url = url
        self.cooldown = cooldown
        self.keys = {}
        self.fetched_at = float("-inf")
        self.forced = set()
        self.lock = threading.Lock()
        if jwks is not None:
            self.load(jwks)

    def load(self, jwks):
        keys = {}
        for jwk in jwks.get("keys", []) if isinstance(jwks, dict) else []:
            # Only RSA signature keys for RS256; anything else is ignored rather than trusted.
            if not isinstance(jwk, dict) or jwk.get("kty") != "RSA" or not isinstance(jwk.get("kid"), str):
                continue
            if jwk.get("use", "sig") != "sig" or jwk.get("alg", "RS256") != "RS256":
                continue
            try:
                keys[jwk["kid"]] = jwt.PyJWK(jwk, algorithm="RS256").key
            except jwt.exceptions.PyJWKError:
                continue
        self.keys = keys

    def refresh(self):
        if self.url is None:
            return
        self.fetched_at = time.monotonic()
        with urllib.request.urlopen(urllib.request.Request(self.url, headers={"accept": "application/json"}), timeout=5) as answer:
            self.load(json.load(answer))

    def get(self, kid, for_feed=False):
        if not isinstance(kid, str):
            return None
        with self.lock:
            if kid not in self.keys and self.url is not None:
                forced = for_feed and kid not in self.forced
                if forced or time.monotonic() - self.fetched_at >= self.cooldown:
                    if forced:
                        self.forced.add(kid)
                    try:
                        self.refresh()
                    except (OSError, ValueError) as error:
                        print(f"platform: JWKS fetch failed: {error}", file=sys.stderr)
            return self.keys.get(kid)


# ---- access tokens ----------------------------------------------------------------------------------------


def rs256_header(token):
    """The protected header of a JWS this platform may verify (tokens and SETs alike), or Refused."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.exceptions.DecodeError:
        raise Refused("malformed")
    except jwt.exceptions.InvalidTokenError:
        # PyJWT releases with the RFC 7515 crit check (Debian's 2.6.0-1+deb12u1, upstream 2.10.2) refuse an
        # unsupported or malformed crit while reading the header; older ones pass it through to the check below.
        raise Refused("crit_not_supported")
    # No extension is implemented here, so any critical one must be refused (RFC 7515 section 4.1.11).
    if "crit" in header:
        raise Refused("crit_not_supported")
    if header.get("alg") != "RS256":
        raise Refused("alg_not_allowed")
    return header


def verify_token(token, keys, issuer, platform_id, now, leeway=5, feed=None, resources=()):
    """The claims of a valid token, or Refused. `now`: seconds since the epoch. `resources`: the platform's
    resource identifiers (the scope file's `resources`), which an OAuth token names in aud beside the id."""
    if len(token) > MAX_TOKEN_LENGTH or not TOKEN_PATTERN.match(token):
        raise Refused("malformed")
    header = rs256_header(token)
    kid = header.get("kid")
    if feed is not None and feed.key_is_void(kid):
        raise Refused("revoked")
    key = keys.get(kid)
    if key is None:
        raise Refused("unknown_kid")
    try:
        # PyJWT checks the signature (RS256 only), the presence of the required claims, iss and aud. The
        # time claims are checked below against `now` (PyJWT reads the system clock only).
        claims = jwt.decode(
            token,
            key,
            algorithms=["RS256"],
            audience=platform_id,
            issuer=issuer,
            options={"require": REQUIRED_CLAIMS, "verify_exp": False, "verify_nbf": False, "verify_iat": False},
        )
    except jwt.exceptions.InvalidSignatureError:
        raise Refused("bad_signature")
    except jwt.exceptions.MissingRequiredClaimError as error:
        raise Refused("missing_claim", claim=error.claim)
    except jwt.exceptions.InvalidAudienceError:
        raise Refused("wrong_aud")
    except jwt.exceptions.InvalidIssuerError:
        raise Refused("wrong_iss")
    except jwt.exceptions.InvalidAlgorithmError:
        raise Refused("alg_not_allowed")
    except jwt.exceptions.PyJWTError:
        raise Refused("malformed")
    # The service binds a token to exactly one platform: aud is its id, or [resource, id] for a token asked
    # for a resource (RFC 8707 / RFC 9068) of this platform. PyJWT accepts any list holding the id.
    aud = claims["aud"]
    if aud != platform_id and not (
        isinstance(aud, list) and len(aud) == 2 and aud[1] == platform_id and aud[0] in (*resources, f"urn:uuid:{platform_id}")
    ):
        raise Refused("wrong_aud", detail="The access token has an unexpected audience.")
    for claim in ("nbf", "exp", "iat"):
        if claim in claims and not is_number(claims[claim]):
            raise Refused("invalid_claim", claim=claim)
    if not isinstance(claims["sub"], str) or not claims["sub"]:
        raise Refused("invalid_claim", claim="sub")
    if "nbf" in claims and claims["nbf"] > now + leeway:
        raise Refused("not_yet_valid")
    if claims["exp"] <= now - leeway:
        raise Refused("expired")
    age = now - claims["iat"]
    if age - leeway > MAX_TOKEN_AGE:
        raise Refused("expired")
    if age < -leeway:
        raise Refused("issued_in_future")
    expected = PROFILE_TYP.get(claims.get("svc_token_profile")) if isinstance(claims.get("svc_token_profile"), str) else None
    if expected is None:
        raise Refused("unknown_profile")
    if normal_typ(header.get("typ")) != expected:
        raise Refused("typ_mismatch")
    if feed is not None:
        verdict = feed.check(claims["sub"], claims["iat"], kid)
        if verdict == "revoked":
            raise Refused("revoked")
        if verdict == "unavailable":
            raise Refused("unavailable", status=503, detail="The revocation feed is not current: try again shortly.")
    return claims


def scopes_of(claims):
    scope = claims.get("scope")
    return [s for s in scope.split(" ") if s] if isinstance(scope, str) else []


def check_scopes(claims, required):
    missing = [s for s in required if s not in scopes_of(claims)]
    if missing:
        raise Refused("insufficient_scope", status=403, detail=f"This route needs the scope {' '.join(required)}.")


# ---- revocation feed (SSF / RFC 8417 SETs, RFC 8936 poll) ---------------------------------------------------


class Feed:
    """This platform's copy of its revocation stream. `now`: a function giving seconds since the epoch."""

    def __init__(self, platform_id, issuer, keys, now=time.time, leeway=5, stale_after=15):
        self.platform_id = platform_id
        self.issuer = issuer
        self.keys = keys
        self.now = now
        self.leeway = leeway
        self.stale_after = stale_after
        self.seq = 0
        self.ahead = set()
        self.agents = {}  # sub -> (iat_max, expires_at)
        self.platform = None  # (iat_max, expires_at)
        self.kids = {}  # kid -> expires_at
        self.last_contact = 0.0
        self.rejected = 0
        self.poll_wanted = False
        self.lock = threading.RLock()

    def seq_of(self, jti):
        prefix = f"{self.platform_id}:"
        if not isinstance(jti, str) or not jti.startswith(prefix):
            return None
        tail = jti[len(prefix):]
        return int(tail) if re.fullmatch(r"0|[1-9][0-9]{0,15}", tail) else None

    def ack(self):
        return [f"{self.platform_id}:{self.seq}"] if self.seq > 0 else []

    def live(self, expires_at):
        return expires_at + self.leeway >= self.now()

    def key_is_void(self, kid):
        with self.lock:
            return isinstance(kid, str) and kid in self.kids and self.live(self.kids[kid])

    def revoked_subjects(self):
        with self.lock:
            return sorted(sub for sub, (_, expires_at) in self.agents.items() if self.live(expires_at))

    def void_kids(self):
        with self.lock:
            return sorted(kid for kid, expires_at in self.kids.items() if self.live(expires_at))

    def fresh(self):
        return self.now() - self.last_contact <= self.stale_after

    def check(self, sub, iat, kid=None):
        """'revoked', 'unavailable' (the copy is not proven current) or 'accept'."""
        with self.lock:
            if self.key_is_void(kid):
                return "revoked"
            if self.platform and iat <= self.platform[0] and self.live(self.platform[1]):
                return "revoked"
            cutoff = self.agents.get(sub)
            if cutoff and iat <= cutoff[0] and self.live(cutoff[1]):
                return "revoked"
        return "accept" if self.fresh() else "unavailable"

    def apply_set(self, token):
        """Verifies one SET and applies it; raises Refused (reason code) when it must not be trusted."""
        try:
            self._apply(token)
        except Refused:
            self.rejected += 1
            raise

    def _apply(self, token):
        header = rs256_header(token)
        # RFC 8417 section 2.3: a SET is explicitly typed, so no access token can pass as one.
        if normal_typ(header.get("typ")) != SET_TYP:
            raise Refused("wrong_typ")
        if self.key_is_void(header.get("kid")):
            raise Refused("void_key")
        key = self.keys.get(header.get("kid"), for_feed=True)
        if key is None:
            raise Refused("unknown_kid")
        try:
            payload = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=self.platform_id,
                issuer=self.issuer,
                options={"require": ["iss", "aud"], "verify_exp": False, "verify_nbf": False, "verify_iat": False},
            )
        except jwt.exceptions.InvalidSignatureError:
            raise Refused("bad_signature")
        except jwt.exceptions.InvalidAudienceError:
            raise Refused("wrong_aud")
        except jwt.exceptions.InvalidIssuerError:
            raise Refused("wrong_iss")
        except jwt.exceptions.PyJWTError:
            raise Refused("malformed")
        events = payload.get("events")
        if not isinstance(events, dict) or not is_number(payload.get("iat")):
            raise Refused("malformed")
        with self.lock:
            if STREAM_HEAD in events:
                head = events[STREAM_HEAD]
                seq = head.get("seq") if isinstance(head, dict) else None
                if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
                    raise Refused("malformed")
                live = head.get("live")
                # A head without `live` (a service of an earlier release) proves no purge; a malformed one is refused whole.
                if "live" in head and not live_ranges_ok(live, seq):
                    raise Refused("malformed")
                self._apply_head(seq, live if "live" in head else None, payload["iat"])
                return
            seq = self.seq_of(payload.get("jti"))
            if seq is None:
                raise Refused("wrong_jti")
            self._apply_events(payload.get("sub_id"), events)
            if seq > self.seq:
                self.ahead.add(seq)  # held
                self._over_held()

    def _over_held(self):
        """The contiguous sequence moves over every sequence held just above it."""
        while self.seq + 1 in self.ahead:
            self.ahead.discard(self.seq + 1)
            self.seq += 1

    def _skip_to(self, seq):
        """Every sequence up to `seq` was purged (proven by a head): nothing to wait for below it."""
        if seq > self.seq:
            self.seq = seq
            self.ahead = {s for s in self.ahead if s > seq}

    def _apply_head(self, head_seq, live, iat):
        # The contiguous sequence moves over a number only when it is held, or the head proves it purged (not
        # in `live`): a SET dropped on the way (a proxy that strips them) leaves a gap, never a jump.
        if live is not None:
            for first, last in live:
                if last <= self.seq:
                    continue
                self._skip_to(first - 1)  # the numbers between two live ranges were purged
                self._over_held()
                if self.seq < last:
                    break  # a live SET we do not hold: a gap
            else:
                self._skip_to(head_seq)  # past the last live range: purged
        self._over_held()
        if self.seq < head_seq:
            self.poll_wanted = True  # a gap: poll again at once; the copy is not proven current
            return
        # Current as of the head's signing time (never later than now).
        self.last_contact = max(self.last_contact, min(self.now(), iat + 1))

    def _apply_events(self, subject, events):
        subject = subject if isinstance(subject, dict) else {}
        for event_type, event in events.items():
            if not isinstance(event, dict) or not is_number(event.get("expires_at")):
                continue
            expires_at = event["expires_at"]
            iat_max = event.get("iat_max")
            if event_type == KEY_RETIRED and subject.get("format") == "opaque" and isinstance(subject.get("id"), str):
                self.kids[subject["id"]] = max(self.kids.get(subject["id"], 0), expires_at)
            elif event_type == PLATFORM_REVOKED and is_number(iat_max):
                self.platform = merge(self.platform, iat_max, expires_at)
            elif (
                event_type == SESSION_REVOKED
                and is_number(iat_max)
                and subject.get("format") == "iss_sub"
                and subject.get("iss") == self.issuer
                and isinstance(subject.get("sub"), str)
            ):
                self.agents[subject["sub"]] = merge(self.agents.get(subject["sub"]), iat_max, expires_at)
            # Any other event type: ignored, as SSF asks.

    def apply_answer(self, answer):
        """Applies an RFC 8936 poll answer: revocations in sequence order, then the head. Returns
        (moreAvailable, the jtis of the SETs refused)."""
        if not isinstance(answer, dict) or not isinstance(answer.get("sets"), dict):
            raise ValueError('poll answer has no "sets"')
        entries = sorted(answer["sets"].items(), key=lambda item: (self.seq_of(item[0]) is None, self.seq_of(item[0]) or 0))
        rejected = []
        for jti, token in entries:
            try:
                self.apply_set(str(token))
            except Refused as error:
                rejected.append(jti)
                print(f"platform: revocation SET {jti} rejected ({error.reason})", file=sys.stderr)
        return bool(answer.get("moreAvailable")), rejected

    def poll(self, transport, max_pages=100):
        """One RFC 8936 poll, page after page: `transport(request_body) -> answer`. Returns the refused jtis.
        A gap left at the end sets `poll_wanted`: the caller polls again at once (a new poll, not another page)."""
        rejected = []
        for _ in range(max_pages):
            self.poll_wanted = False
            more, refused = self.apply_answer(transport({"ack": self.ack(), "maxEvents": 1000, "returnImmediately": True}))
            rejected += refused
            if not more:
                break
        return rejected


def live_ranges_ok(live, seq):
    """A head's `live`: [from, to] integer pairs, ascending, disjoint, non-adjacent, within 1..seq."""
    if not isinstance(live, list):
        return False
    previous = 0
    for pair in live:
        if not isinstance(pair, list) or len(pair) != 2:
            return False
        first, last = pair
        if not all(isinstance(n, int) and not isinstance(n, bool) and abs(n) <= 2**53 - 1 for n in pair):
            return False
        if first <= (previous + 1 if previous else 0) or last < first or last > seq:
            return False
        previous = last
    return True


def merge(current, iat_max, expires_at):
    if current is None:
        return (iat_max, expires_at)
    return (max(current[0], iat_max), max(current[1], expires_at))


# ---- conformance vectors ----------------------------------------------------------------------------------


def run_vectors(directory):
    def read(name):
        with open(os.path.join(directory, name), encoding="utf-8") as file:
            return json.load(file)

    tokens, sets, jwks = read("tokens.json"), read("sets.json"), read("jwks.json")
    paths = read("paths.json") if os.path.exists(os.path.join(directory, "paths.json")) else {"vectors": []}
    keys = KeySet(jwks=jwks)
    summary = {"tokens": {"passed": 0, "failed": []}, "sets": {"passed": 0, "failed": []}, "polls": {"passed": 0, "failed": []}, "paths": {"passed": 0, "failed": []}}

    def outcome(group, name, problems):
        if problems:
            summary[group]["failed"].append({"name": name, "problems": problems})
        else:
            summary[group]["passed"] += 1

    for vector in tokens["vectors"]:
        problems = []
        try:
            claims = verify_token(vector["token"], keys, tokens["issuer"], vector["platform_id"], vector["now"], tokens["clock_tolerance_seconds"])
            check_scopes(claims, vector["route"]["scopes"])
            got = {"verdict": "accept", "status": 200}
            if vector["verdict"] == "accept" and (claims["sub"] != vector["expect"]["sub"] or scopes_of(claims) != vector["expect"]["scopes"]):
                problems.append(f"claims {claims['sub']} {scopes_of(claims)} differ from {vector['expect']}")
        except Refused as error:
            got = {"verdict": "reject", "status": error.status, "reason": error.reason}
            if vector.get("claim"):
                got["claim"] = error.claim
        wanted = {k: vector[k] for k in ("verdict", "status", "reason", "claim") if k in vector}
        if got != wanted:
            problems.append(f"expected {wanted}, got {got}")
        outcome("tokens", vector["name"], problems)

    def verdict_of(feed, check):
        return "revoked" if feed.check(check["sub"], check["iat"], check["kid"]) == "revoked" else "accept"

    def check_all(feed, checks, problems):
        for check in checks:
            got = verdict_of(feed, check)
            if got != check["verdict"]:
                problems.append(f"token {check}: got {got}")

    def new_feed():
        return Feed(sets["platform_id"], sets["issuer"], keys, now=lambda: sets["now"], leeway=sets["clock_tolerance_seconds"])

    for vector in sets["sets"]:
        problems = []
        feed = new_feed()
        try:
            feed.apply_set(vector["set"])
            got = {"verdict": "accept"}
        except Refused as error:
            got = {"verdict": "reject", "reason": error.reason}
        wanted = {k: vector[k] for k in ("verdict", "reason") if k in vector}
        if got != wanted:
            problems.append(f"expected {wanted}, got {got}")
        effect = vector.get("effect") or {}
        if effect.get("event") == "stream-head" and feed.fresh() != effect["fresh"]:
            problems.append(f"fresh is {feed.fresh()}, expected {effect['fresh']}")
        if effect.get("event") == "session-revoked" and not effect.get("expired") and feed.revoked_subjects() != [effect["sub"]]:
            problems.append(f"revoked subjects {feed.revoked_subjects()}, expected [{effect['sub']}]")
        check_all(feed, vector["checks"], problems)
        outcome("sets", vector["name"], problems)

    for vector in sets["polls"]:
        problems = []
        feed = new_feed()
        exchanges = list(vector["exchanges"])

        def transport(body, exchanges=exchanges, problems=problems):
            if not exchanges:
                raise RuntimeError("no more answers in this vector")
            exchange = exchanges.pop(0)
            if body["ack"] != exchange["request"]["ack"]:
                problems.append(f"poll acknowledged {body['ack']}, expected {exchange['request']['ack']}")
            return exchange["answer"]

        rejected = feed.poll(transport)
        if exchanges:
            problems.append(f"{len(exchanges)} answers left unasked")
        if vector.get("then_poll_again"):
            exchanges.append(vector["then_poll_again"])
            rejected += feed.poll(transport)
        expect = vector["expect"]
        for name, got in (
            ("next_ack", feed.ack()),
            ("rejected", sorted(rejected)),
            ("revoked_subjects", feed.revoked_subjects()),
            ("void_kids", feed.void_kids()),
            ("fresh", feed.fresh()),
        ):
            wanted = sorted(expect[name]) if isinstance(expect[name], list) else expect[name]
            if name == "next_ack":
                wanted = expect[name]
            if got != wanted:
                problems.append(f"{name}: expected {wanted}, got {got}")
        check_all(feed, expect["checks"], problems)
        outcome("polls", vector["name"], problems)

    for vector in paths["vectors"]:
        routes = compile_routes(vector["routes"])
        problems = []
        for request in vector["requests"]:
            rule = route_for(routes, request["method"], request["path"])
            got = rule[2] if rule else None
            if got != request["rule"]:
                problems.append(f"{request['method']} {request['path']}: expected {request['rule']}, got {got}")
        outcome("paths", vector["name"], problems)

    failed = sum(len(group["failed"]) for group in summary.values())
    summary["ok"] = failed == 0
    print(json.dumps(summary, indent=2))
    return 0 if failed == 0 else 1


# ---- live platform ----------------------------------------------------------------------------------------


def load_routes(path):
    """The scope file's routes: YAML (the file the service serves) needs python3-yaml; .json is read as is."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    if path.endswith(".json"):
        document = json.loads(text)
    else:
        try:
            import yaml  # Debian: python3-yaml
        except ImportError:
            sys.exit("platform: reading a YAML scope file needs python3-yaml (or pass the routes as a .json file)")
        document = yaml.safe_load(text)
    if not isinstance(document, dict) or not isinstance(document.get("routes"), list):
        sys.exit(f"platform: {path} has no routes list")
    return document.get("platform_id"), compile_routes(document["routes"]), list(document.get("resources") or [])


PARAMETER = r"(\{[A-Za-z_][A-Za-z0-9_]*\})"


def segment_rank(segment):
    """2 for a literal segment, 1 for a literal with a parameter in it, 0 for a parameter alone."""
    parts = [part for part in re.split(PARAMETER, segment) if part]
    if not any(part.startswith("{") for part in parts):
        return 2
    return 1 if len(parts) > 1 else 0


def compile_routes(rules):
    routes = []
    for rule in rules:
        pattern = "".join("[^/]+" if re.fullmatch(PARAMETER, part) else re.escape(part) for part in re.split(PARAMETER, rule["path"]))
        rank = tuple(segment_rank(segment) for segment in rule["path"].split("/")[1:])
        routes.append((rule["method"].upper(), re.compile(f"^{pattern}$"), rule["path"], list(rule.get("scopes", [])), rank))
    return routes


def route_for(routes, method, path):
    """The rule a path reaches, as the Node middleware decides: of the rules that match, the one whose
    segments are most literal, compared left to right (/orders/export before /orders/{id}); two of the
    same rank name no single rule (None: refused)."""
    matches = [r for r in routes if r[0] == method and r[1].match(path)]
    if not matches:
        return None
    top = max(r[4] for r in matches)
    best = [r for r in matches if r[4] == top]
    return best[0] if len(best) == 1 else None


def follow_feed(feed, url, feed_token, interval, stop):
    """Polls the feed every `interval` seconds (at once again when a head shows SETs missing)."""

    def transport(body):
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"content-type": "application/json", "accept": "application/json", "authorization": f"Bearer {feed_token}"},
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            return json.load(answer)

    again = False
    while not stop.is_set():
        try:
            feed.poll(transport)
        except urllib.error.HTTPError as error:
            print(f"platform: revocation feed answered HTTP {error.code}", file=sys.stderr)
        except (OSError, ValueError) as error:
            print(f"platform: revocation feed unreachable: {error}", file=sys.stderr)
        # A gap (a live SET the answer lacked): once more at once, then at the usual pace while it lasts
        # (a proxy that strips SETs must not turn this loop into a flood; the copy ages towards stale meanwhile).
        again = feed.poll_wanted and not again
        stop.wait(0 if again else interval)


def serve(args):
    feed_token = os.environ.get("ACE_FEED_TOKEN")
    if not feed_token:
        sys.exit("platform: set ACE_FEED_TOKEN (POST /admin/v1/platforms/{platform_id}/feed-credentials answers it)")
    service_url = args.service_url.rstrip("/")
    issuer = args.issuer or service_url
    file_platform, routes, resources = load_routes(args.scopes)
    platform_id = args.platform_id or file_platform
    if not platform_id:
        sys.exit("platform: no platform id (--platform-id, or platform_id in the scope file)")
    keys = KeySet(url=f"{service_url}/.well-known/jwks.json")
    keys.refresh()
    feed = Feed(platform_id, issuer, keys, stale_after=args.stale_after)
    stop = threading.Event()
    feed_url = f"{service_url}/api/v1/platforms/{platform_id}/revocations"
    threading.Thread(target=follow_feed, args=(feed, feed_url, feed_token, args.poll_interval, stop), daemon=True).start()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self, status, body, headers=None):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def refuse(self, error):
            code = {401: "invalid_token", 403: "insufficient_scope", 503: "service_unavailable"}.get(error.status, "invalid_token")
            headers = {}
            if error.status == 503:
                headers["retry-after"] = "5"
            else:
                headers["www-authenticate"] = f'Bearer realm="{platform_id}", error="{code}", error_description="{error.detail}"'
            self.answer(error.status, {"detail": error.detail, "error_code": code}, headers)

        def framing_refused(self, status, detail, code):
            # The body's end is unknown (or too far): answer, then close, so no byte of it is read as a request.
            self.close_connection = True
            self.answer(status, {"detail": detail, "error_code": code}, {"connection": "close"})
            return False

        def discard_body(self):
            """Reads the request body off the keep-alive connection (nothing here uses it); False when the
            request was refused for its framing (RFC 9112 section 6) and the connection is closing."""
            if self.headers.get_all("transfer-encoding"):
                # Chunked (or any transfer coding) is not decoded here: Content-Length is the only framing read.
                return self.framing_refused(411, "A request body needs a Content-Length (Transfer-Encoding is not accepted).", "length_required")
            lengths = self.headers.get_all("content-length") or []
            if not lengths:
                return True
            if len(lengths) != 1 or not re.fullmatch(r"[0-9]{1,15}", lengths[0].strip()):
                return self.framing_refused(400, "The request has an invalid Content-Length.", "bad_request")
            remaining = int(lengths[0])
            if remaining > MAX_BODY:
                return self.framing_refused(413, "The request body is too large.", "payload_too_large")
            while remaining > 0:
                chunk = self.rfile.read(min(remaining, 65536))
                if not chunk:  # the client hung up mid-body
                    self.close_connection = True
                    return False
                remaining -= len(chunk)
            return True

        def handle_any(self):
            if not self.discard_body():
                return
            path = self.path.split("?", 1)[0]
            if args.status and self.command == "GET" and path == "/_platform/status":
                return self.answer(200, {
                    "seq": feed.seq,
                    "fresh": feed.fresh(),
                    "revoked_subjects": feed.revoked_subjects(),
                    "void_kids": feed.void_kids(),
                    "sets_rejected": feed.rejected,
                })
            authorization = self.headers.get_all("authorization") or []
            if len(authorization) != 1 or not authorization[0].lower().startswith("bearer "):
                return self.answer(401, {"detail": "A Bearer access token is required.", "error_code": "unauthorized"}, {"www-authenticate": f'Bearer realm="{platform_id}"'})
            try:
                claims = verify_token(authorization[0][7:].strip(), keys, issuer, platform_id, time.time(), feed=feed, resources=resources)
                rule = route_for(routes, self.command, path)
                if rule is None:
                    raise Refused("insufficient_scope", status=403, detail="No scope rule allows this route.")
                check_scopes(claims, rule[3])
            except Refused as error:
                return self.refuse(error)
            except Exception as error:  # a token shaped in a way no check foresaw: refused, never a 500
                print(f"platform: token refused on an unexpected {type(error).__name__}", file=sys.stderr)
                return self.refuse(Refused("malformed"))
            self.answer(200, {"agent": claims["sub"], "client_id": claims.get("client_id"), "scopes": scopes_of(claims), "route": f"{rule[0]} {rule[2]}"})

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        def log_message(self, format, *values):  # one line per request on stderr, never the token
            if args.access_log:
                sys.stderr.write(f"platform: {self.command} {self.path.split('?', 1)[0]}\n")

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.server_close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", metavar="DIR", help="run the conformance vectors of DIR and exit")
    parser.add_argument("--service-url", default=os.environ.get("ACE_PUBLIC_URL", "http://localhost:8080"))
    parser.add_argument("--issuer", help="expected iss (default: the service URL)")
    parser.add_argument("--scopes", help="the platform's scope file (YAML with python3-yaml, or .json)")
    parser.add_argument("--platform-id", help="default: the scope file's platform_id")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--poll-interval", type=float, default=5.0, help="seconds between feed polls (default 5)")
    parser.add_argument("--stale-after", type=float, default=15.0, help="refuse tokens (503) when no stream head proved the feed current for this long (default 15)")
    parser.add_argument("--status", action="store_true", help="serve GET /_platform/status (the feed's state: revoked subjects, void kids)")
    parser.add_argument("--access-log", action="store_true")
    args = parser.parse_args()
    if args.vectors:
        sys.exit(run_vectors(args.vectors))
    if not args.scopes:
        parser.error("--scopes is required (or --vectors DIR)")
    serve(args)


if __name__ == "__main__":
    main()
