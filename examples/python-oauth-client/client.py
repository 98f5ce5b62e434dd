#!/usr/bin/env python3
"""A standard OAuth 2.0 client (authlib) getting a token from the service, checked with PyJWT.

Nothing here knows the service's own API: it reads the RFC 8414 metadata, asks the token endpoint for
grant_type=client_credentials (client_secret_basic or client_secret_post), and verifies the answer as a
strict RFC 9068 resource server would (typ at+jwt, every required claim, signature from jwks_uri,
iss equal to the metadata's issuer, aud naming the resource asked for: [resource, platform_id]).

Debian 12: apt-get install python3-authlib python3-jwt python3-requests

Environment: ACE_PUBLIC_URL (default http://localhost:8080), ACE_CLIENT_ID (api_key_id),
ACE_CLIENT_SECRET, ACE_PLATFORM_ID, ACE_RESOURCE (default urn:uuid:<platform_id>; or
https://<verified domain>, or a resource identifier registered to the platform, e.g. an MCP server's URL), ACE_AUTH_METHOD (client_secret_basic, the default, or client_secret_post),
ACE_SCOPE (optional, space-delimited). With ACE_AUTH_METHOD=private_key_jwt (RFC 7523): ACE_PRIVATE_KEY_FILE
(a PEM private key whose public JWK is registered for the agent) and ACE_ASSERTION_ALG (RS256, the default,
ES256 or PS256) instead of ACE_CLIENT_SECRET. Prints one JSON line; exit code 0 when the token passed every check,
2 with {"error": ...} when the server refused (an OAuth error), 1 when a check failed.
"""
import ipaddress
import json
import os
import sys
from urllib.parse import urlsplit

import jwt  # PyJWT
import requests
from authlib.integrations.requests_client import OAuth2Session
from authlib.integrations.base_client.errors import OAuthError
from authlib.oauth2.rfc7523 import PrivateKeyJWT, private_key_jwt_sign

RFC9068_CLAIMS = ["iss", "exp", "aud", "sub", "client_id", "iat", "jti"]
RFC8414_REQUIRED = ["issuer", "token_endpoint", "response_types_supported"]


def fail(message):
    print(json.dumps({"check_failed": message}))
    sys.exit(1)


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(name, value):
    """RFC 8414 section 2: https, no query or fragment (for issuer); http is accepted for loopback only."""
    parts = urlsplit(value)
    if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.hostname or "")):
        fail(f"{name} {value!r} is not https (http is accepted only on a loopback host)")
    if name == "issuer" and (parts.query or parts.fragment):
        fail("issuer has a query or fragment")


def metadata(base_url):
    response = requests.get(f"{base_url}/.well-known/oauth-authorization-server", timeout=10)
    response.raise_for_status()
    document = response.json()
    for field in RFC8414_REQUIRED:
        if field not in document:
            fail(f"metadata lacks the required {field}")
    for field in ["issuer", "token_endpoint", "jwks_uri"]:
        check_url(field, document[field])
    if "client_credentials" not in document.get("grant_types_supported", []):
        fail("client_credentials is not in grant_types_supported")
    return document


class ShortLivedPrivateKeyJWT(PrivateKeyJWT):
    """authlib's private_key_jwt with a one-minute assertion and a fresh jti each time.

    authlib 1.2 signs assertions valid for an hour by default; the service accepts at most
    CLIENT_ASSERTION_MAX_LIFETIME_SECONDS (300 by default), as RFC 7523 section 3 lets it.
    """

    def sign(self, auth, token_endpoint):
        return private_key_jwt_sign(auth.client_secret, client_id=auth.client_id, token_endpoint=token_endpoint, alg=self.alg, expires_in=60)


def main():
    base_url = os.environ.get("ACE_PUBLIC_URL", "http://localhost:8080").rstrip("/")
    client_id = os.environ["ACE_CLIENT_ID"]
    method = os.environ.get("ACE_AUTH_METHOD", "client_secret_basic")
    if method == "private_key_jwt":
        with open(os.environ["ACE_PRIVATE_KEY_FILE"], encoding="ascii") as key_file:
            client_secret = key_file.read()  # authlib carries the private key where the secret would be
    else:
        client_secret = os.environ["ACE_CLIENT_SECRET"]
    platform_id = os.environ["ACE_PLATFORM_ID"]
    resource = os.environ.get("ACE_RESOURCE", f"urn:uuid:{platform_id}")
    scope = os.environ.get("ACE_SCOPE") or None

    server = metadata(base_url)
    if method not in server["token_endpoint_auth_methods_supported"]:
        fail(f"{method} is not supported by the server")

    session = OAuth2Session(client_id, client_secret, token_endpoint_auth_method=method, scope=scope)
    if method == "private_key_jwt":
        alg = os.environ.get("ACE_ASSERTION_ALG", "RS256")
        if alg not in server.get("token_endpoint_auth_signing_alg_values_supported", []):
            fail(f"{alg} is not in token_endpoint_auth_signing_alg_values_supported")
        session.register_client_auth_method(ShortLivedPrivateKeyJWT(server["token_endpoint"], alg=alg))
    try:
        token = session.fetch_token(server["token_endpoint"], grant_type="client_credentials", resource=resource)
    except OAuthError as error:
        print(json.dumps({"error": error.error, "description": error.description}))
        sys.exit(2)

    access_token = token["access_token"]
    header = jwt.get_unverified_header(access_token)
    if header.get("typ") != "at+jwt":
        fail(f"header typ is {header.get('typ')!r}, RFC 9068 requires at+jwt")
    signing_key = jwt.PyJWKClient(server["jwks_uri"]).get_signing_key_from_jwt(access_token)
    claims = jwt.decode(
        access_token,
        signing_key.key,
        algorithms=["RS256"],
        # A resource server checks its own identifier (RFC 9068 §4): aud is [resource, platform_id].
        audience=resource,
        issuer=server["issuer"],
        options={"require": RFC9068_CLAIMS},
    )
    print(json.dumps({
        "token_type": token["token_type"],
        "expires_in": token["expires_in"],
        "scope": token.get("scope"),
        "typ": header["typ"],
        "claims": claims,
    }))


if __name__ == "__main__":
    main()
