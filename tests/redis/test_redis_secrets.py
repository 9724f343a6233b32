"""No secret of a log URL in any output: every password and every query value named a secret is masked.

The table is ``redact_url``'s (what banners, reprs, log lines and errors print instead of a log URL) and
``scrub``'s (what takes a URL's secrets out of an exception's message).  Then real processes: ``tokenwire
serve`` on a Redis that speaks only mTLS, with a client key encrypted by a passphrase (``ssl_password``),
first right (a stream is made and read whole: the passphrase opened the key) and then wrong (the banner, the
start-up warning and the 503's log line name the Redis); ``tokenwire proxy`` with a secret in its upstream's
query.  The passphrase appears in none of their outputs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from support.redis_tls import KEY_PASSPHRASE, TLSRedis, make_certificates, running_tls_redis
from support.tokenwire_process import running_tokenwire

from tokenwire.endpoints.rules import LOG_UNAVAILABLE
from tokenwire.redislog.blocking import RedisTokenLog
from tokenwire.redislog.redact import redact_url, scrub

TIMEOUT_S = 20.0


@pytest.mark.parametrize(("url", "shown"), [
    ("rediss://h:6380/0?ssl_certfile=/c/client.crt&ssl_keyfile=/c/client.key&ssl_password=hunter2",
     "rediss://h:6380/0?ssl_certfile=/c/client.crt&ssl_keyfile=/c/client.key&ssl_password=***"),
    ("redis://h:6379/0?SSL_Password=hunter2&lease_ms=5", "redis://h:6379/0?SSL_Password=***&lease_ms=5"),
    ("redis://h:6379/0?ssl%5Fpassword=hunter2", "redis://h:6379/0?ssl%5Fpassword=***"),       # named quoted
    ("redis://h:6379/0?sentinel_password=hunter2&x=1", "redis://h:6379/0?sentinel_password=***&x=1"),
    ("redis://h:6379/0?client_secret=hunter2&TOKEN_SECRET=hunter3", "redis://h:6379/0?client_secret=***&TOKEN_SECRET=***"),
    ("redis://h:6379/0?password", "redis://h:6379/0?password=***"),                           # no value: still
    ("redis+sentinel://tw:hunter2@s1:26379,s2:26379/primary/0?sentinel_password=hunter3",
     "redis+sentinel://tw:***@s1:26379,s2:26379/primary/0?sentinel_password=***"),
    ("rediss://:hunter2@h:6380/0?ssl_password=hunter3#part", "rediss://:***@h:6380/0?ssl_password=***#part"),
    ("redis://[::1/0?ssl_password=hunter2", "redis://[::1/0?ssl_password=***"),                # an unclosed [
    ("redis://h:6379/0?ssl_keyfile=/k&passwordless=0", "redis://h:6379/0?ssl_keyfile=/k&passwordless=***"),
])
def test_every_secret_of_a_url_is_masked_and_the_rest_kept_as_written(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_scrub_takes_each_secret_query_value_out_of_any_text() -> None:
    url = "rediss://:pw1@h:1/0?ssl_password=p%40ss&sentinel_password=sp-2&my_secret=s3&db=0"
    assert scrub("pw1 p@ss p%40ss sp-2 s3 db 0", url) == "*** *** *** *** *** db 0"


def test_a_log_shows_its_url_with_the_passphrase_masked_in_its_repr_and_banner() -> None:
    log = RedisTokenLog("rediss://127.0.0.1:1/0?ssl_keyfile=/c/k.pem&ssl_password=hunter2&lease_ms=900")
    assert log.where == "rediss://127.0.0.1:1/0?ssl_keyfile=/c/k.pem&ssl_password=***"
    assert repr(log) == f"RedisTokenLog({log.where!r}, owner={log.owner_id!r})"
    assert log.describe().startswith(f"{log.where}, shared by every instance")


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> TLSRedis:
    with running_tls_redis(make_certificates(Path(tmp_path_factory.mktemp("tls")))) as redis:
        yield redis                                                             # type: ignore[misc]


def _read_whole(base: str) -> list[str]:
    """Make a stream of 10 tokens and read its events to the end; returns the event names."""
    with httpx.Client(base_url=base, timeout=TIMEOUT_S) as client:
        made = client.post("/streams?tokens=10&producer_ms=1")
        assert made.status_code == 201, made.text
        events = client.get(f"/streams/{made.json()['stream_id']}/events")
    return re.findall(r"^event: (\w+)$", events.text, re.MULTILINE)


def test_serve_on_mtls_opens_the_encrypted_key_and_never_says_its_passphrase(tls_redis: TLSRedis) -> None:
    url = tls_redis.url()
    with running_tokenwire(["serve", "--port", "0", "--log", url]) as server:
        names = _read_whole(server.url)
    said = server.output()
    assert names == ["open", *["token"] * 10, "done"], said
    assert f"token log: {url.replace(KEY_PASSPHRASE, '***')}, shared by every instance" in said
    assert "ssl_password=***" in said and KEY_PASSPHRASE not in said, said


def test_a_wrong_passphrase_is_told_with_the_redis_named_and_no_passphrase(tls_redis: TLSRedis) -> None:
    url = tls_redis.url("hunter3-wrong")
    with running_tokenwire(["serve", "--port", "0", "--log", url]) as server:
        with httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as client:
            refused = client.post("/streams?tokens=10")
        server.wait_for(re.compile("answering 503"))
    said = server.output()
    shown = url.replace("hunter3-wrong", "***")
    assert refused.status_code == 503 and refused.json() == {"error": LOG_UNAVAILABLE}
    assert f"tokenwire serve: cannot reach redis at {shown} now; starting anyway" in said
    assert f"(the token log is unavailable): token log unavailable: redis at {shown}: " in said
    assert "hunter3" not in said and "hunter3" not in json.dumps(refused.json()), said


def test_the_proxy_banner_masks_a_secret_in_its_upstream_url() -> None:
    upstream = "http://127.0.0.1:1/v1?client_secret=hunter2"
    with running_tokenwire(["proxy", "--port", "0", "--upstream", upstream]) as proxy:
        pass
    said = proxy.output()
    assert "relaying http://127.0.0.1:1/v1?client_secret=***" in said and KEY_PASSPHRASE not in said, said
