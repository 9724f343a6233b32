"""Credentials as requests carry them, for the tests that check none is shown, logged or kept; no tests here.

``CREDENTIALED``: what a browser and an API client send, a bearer token and a session cookie (each a secret) and a
benign header.  ``CREDENTIALS``: every common way a request carries a credential, each secret (``Kz...``) found
nowhere else, so finding it anywhere is a leak; ``CREDENTIAL_HEADERS`` the headers they make.
"""

from __future__ import annotations

from tokenwire.endpoints.access import header_map

CREDENTIALED = header_map((("authorization", "Bearer tok-alice-1234"), ("cookie", "theme=dark; session=sess-alice-99"),
                           ("x-tenant", "acme")))

CREDENTIALS = {
    "authorization": ("Bearer {}", "Kz01authq"), "proxy-authorization": ("Basic {}", "Kz02proxyq"),
    "cookie": ("theme=dark; session={}", "Kz03cookieq"), "set-cookie": ("sid={}; Path=/", "Kz04setcookieq"),
    "x-api-key": ("{}", "Kz05xapikeyq"), "api-key": ("{}", "Kz06azureq"), "x-goog-api-key": ("{}", "Kz07googq"),
    "x-auth-token": ("{}", "Kz08xauthq"), "x-access-token": ("{}", "Kz09xaccessq"),
    "x-amz-security-token": ("{}", "Kz10amzq"), "ocp-apim-subscription-key": ("{}", "Kz11apimq"),
    "x-csrf-token": ("{}", "Kz12csrfq"), "x-xsrf-token": ("{}", "Kz13xsrfq"),
}
CREDENTIAL_HEADERS = {name: shape.format(secret) for name, (shape, secret) in CREDENTIALS.items()}
