"""The ``authorize`` hook's answers (``tokenwire.endpoints.access``), sans-IO: a principal, 401 with a challenge, 403
with the hook's message, 500 for a hook that fails or answers something else; the headers it is shown; the settings
``TokenStreams`` refuses."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from support.credentials import CREDENTIAL_HEADERS, CREDENTIALED, CREDENTIALS
from support.docs import DOCS, marked_block

from tokenwire.asgi import Access, StreamRequest, TokenStreams
from tokenwire.core.tokenlog import UnknownStream
from tokenwire.endpoints.access import SECRET_HEADERS, ask, chat_name, check_owner, header_map, redacted, shown
from tokenwire.endpoints.params import RequestError

ACCESS = Access("read", header_map((("authorization", "Bearer t"),)), "some-stream")


def refused(hook: object, access: Access = ACCESS) -> RequestError:
    with pytest.raises(RequestError) as caught:
        asyncio.run(ask(hook, access))  # type: ignore[arg-type]
    return caught.value


async def async_alice(access: Access) -> str:
    return "alice"


def test_a_hook_sync_or_async_names_the_principal_and_sees_what_the_request_asks() -> None:
    seen: list[Access] = []

    def hook(access: Access) -> str:
        seen.append(access)
        return ""                                        # any str is a principal, the empty one too
    assert asyncio.run(ask(hook, ACCESS)) == ""
    assert asyncio.run(ask(async_alice, ACCESS)) == "alice"
    assert seen == [ACCESS] and seen[0].headers["authorization"] == "Bearer t"


def test_none_is_a_401_with_a_challenge() -> None:
    error = refused(lambda access: None)
    assert (error.status, error.message) == (401, "credentials needed to read: the request carries none this "
                                                  "server accepts")
    assert error.headers == (("WWW-Authenticate", 'Bearer realm="tokenwire"'),)
    with pytest.raises(RequestError) as caught:
        asyncio.run(ask(lambda access: None, ACCESS, 'Basic realm="x"'))
    assert caught.value.headers == (("WWW-Authenticate", 'Basic realm="x"'),)


def test_a_permission_error_is_a_403_with_its_message_if_it_has_one() -> None:
    def no(access: Access) -> str:
        raise PermissionError("read-only key")

    def bare(access: Access) -> str:
        raise PermissionError

    assert (refused(no).status, refused(no).message) == (403, "not allowed to read: read-only key")
    assert (refused(bare).status, refused(bare).message, refused(bare).headers) == (403, "not allowed to read", ())


def test_a_hook_that_fails_or_answers_something_else_is_a_500_and_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    def broken(access: Access) -> str:
        raise RuntimeError("db password is hunter2")

    with caplog.at_level(logging.ERROR, logger="tokenwire"):
        error = refused(broken)
    assert (error.status, error.message) == (500, "the authorize hook raised RuntimeError")   # never its message
    assert "the authorize hook raised RuntimeError" in caplog.text
    error = refused(lambda access: 42)
    assert (error.status, error.message) == (500, "the authorize hook returned int, not a str or None")


def test_the_headers_are_a_read_only_mapping_a_repeated_name_joined() -> None:
    headers = header_map((("accept", "a"), ("cookie", "x=1"), ("accept", "b"), ("cookie", "y=2")))
    assert dict(headers) == {"accept": "a, b", "cookie": "x=1; y=2"}
    with pytest.raises(TypeError):
        headers["accept"] = "c"  # type: ignore[index]


def test_a_stream_is_its_creators_and_a_chat_name_its_principals_own() -> None:
    check_owner({"principal": "alice"}, "alice", "s")
    for meta, principal in (({"principal": "alice"}, "bob"), ({}, "bob"), ({"principal": "alice"}, None)):
        with pytest.raises(UnknownStream) as caught:
            check_owner(meta, principal, "s")
        assert caught.value.stream_id == "s"
    assert chat_name(None, "c1") == "c1"
    assert chat_name("alice", "c1") != chat_name("bob", "c1") and chat_name("alice", "c1").endswith(".c1")


def test_tokenstreams_refuses_a_bad_hook_or_keep_out_of_log() -> None:
    with pytest.raises(TypeError, match=r"^authorize must be a callable that takes an Access, got 'yes'$"):
        TokenStreams(authorize="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^keep_out_of_log must be a tuple of header names, got the str "
                                        r"'authorization'; write \('authorization',\)$"):
        TokenStreams(keep_out_of_log="authorization")
    with pytest.raises(TypeError, match=r"^keep_out_of_log must hold header names \(str\), got 3$"):
        TokenStreams(keep_out_of_log=("cookie", 3))  # type: ignore[arg-type]
    streams = TokenStreams(async_alice, keep_out_of_log=("X-Api-Key",))   # any callable will do: it is not called
    assert streams.models is not None and streams.models.keep_out_of_log == ("x-api-key",)
    assert streams.endpoints.authorize is None


def test_the_readmes_authorize_example_answers_as_it_says() -> None:
    source = marked_block("authorize-example", "python")
    assert source.rstrip().endswith("streams = TokenStreams(model, authorize=authorize)")
    space: dict[str, Any] = {"model": async_alice}                    # the reader's own model
    exec(compile(source, "README.md", "exec"), space)                 # noqa: S102 - the README's example, as written
    assert isinstance(space["streams"], TokenStreams) and space["streams"].endpoints.authorize is space["authorize"]

    def asks(action: str, authorization: str) -> str:
        return asyncio.run(ask(space["authorize"], Access(action, header_map((("authorization", authorization),)))))
    assert asks("create", "Bearer alice-token") == "alice" and asks("read", "Bearer read-only-token") == "carol"
    assert refused(space["authorize"], Access("create", header_map((("authorization", "Bearer read-only-token"),)))
                   ).message == "not allowed to create: this key may only read"
    assert refused(space["authorize"], Access("read", header_map((("authorization", "Basic alice-token"),)))
                   ).status == 401


def test_a_hook_that_fails_on_the_token_logs_neither_the_token_nor_the_cookie(caplog: pytest.LogCaptureFixture) -> None:
    users = {"tok-bob-5678": "bob"}

    def lookup(access: Access) -> str:          # the commonest hook, and its commonest bug: KeyError('<the token>')
        return users[access.headers["authorization"].removeprefix("Bearer ")]

    def chatty(access: Access) -> str:
        raise ValueError(f"no user for {access.headers['cookie']} in {access!r}")

    with caplog.at_level(logging.ERROR, logger="tokenwire"):
        for hook in (lookup, chatty, lambda access: ("alice", access.headers["authorization"])):
            assert refused(hook, Access("create", CREDENTIALED)).status == 500
    assert "KeyError: '[redacted]'" in caplog.text       # the traceback is still there, and says where
    assert "Traceback (most recent call last)" in caplog.text
    assert "the authorize hook returned ('alice', '[redacted]')" in caplog.text
    for secret in ("tok-alice-1234", "sess-alice-99", "session=sess-alice-99"):
        assert secret not in caplog.text
    assert "x-tenant': 'acme'" in caplog.text and "theme=dark" not in caplog.text


def test_an_access_and_a_stream_request_show_no_credentials_in_their_repr() -> None:
    shown = repr(Access("read", CREDENTIALED, "s1"))
    assert shown == ("Access(action='read', headers={'authorization': '[redacted]', 'cookie': '[redacted]', "
                     "'x-tenant': 'acme'}, stream_id='s1')")
    request = StreamRequest("s1", {}, b"", "127.0.0.1", headers=CREDENTIALED, principal="alice")
    assert repr(request) == ("StreamRequest(stream_id='s1', params={}, body=b'', client='127.0.0.1', prefix=(), "
                             "start=0, chat=None, headers={'authorization': '[redacted]', 'cookie': '[redacted]', "
                             "'x-tenant': 'acme'}, principal='alice', openai=None)")


def test_redacted_hides_whole_values_and_their_parts_but_not_a_short_one() -> None:
    headers = header_map((("authorization", "Basic dXNlcjpwYXNz"), ("cookie", 'a=1; sid=abcdef; q="quoted-1"')))
    assert redacted("Basic dXNlcjpwYXNz, dXNlcjpwYXNz, a=1; sid=abcdef; q=\"quoted-1\", abcdef, 1, 'quoted-1'",
                    headers) == \
        "[redacted], [redacted], [redacted], [redacted], 1, '[redacted]'"


def test_a_header_sent_twice_has_each_of_its_values_redacted() -> None:
    """A secret header (not a cookie) sent twice is its values joined by ", ": each is a credential on its own."""
    headers = header_map((("x-api-key", "key-one-1"), ("x-api-key", "key-two-2"),
                          ("authorization", "Bearer tok-one-11"), ("authorization", "Bearer tok-two-22")))
    assert headers["x-api-key"] == "key-one-1, key-two-2"
    assert redacted("key-one-1 key-two-2 tok-one-11 tok-two-22 Bearer tok-one-11 key-one-1, key-two-2", headers) == \
        "[redacted] [redacted] [redacted] [redacted] [redacted] [redacted]"


# What ``docs/deploying.md`` suggests: one more header kept out of the log, and so out of every repr and traceback.
TENANT = "x-tenant-secret"


def test_a_header_kept_out_of_the_log_is_redacted_wherever_the_request_is_shown(
        caplog: pytest.LogCaptureFixture) -> None:
    """The hook's ``Access``, the factory's ``StreamRequest``, and the tracebacks of a hook, a factory and a model
    that fail on the header: each hides it, as it does ``authorization``."""
    seen: list[str] = []

    def authorize(access: Access) -> str:
        seen.append(repr(access))
        if access.action == "stop":
            raise LookupError(f"no tenant {access.headers[TENANT]}")
        return "alice"

    async def model(request: StreamRequest) -> AsyncIterator[str]:
        seen.append(repr(request))
        if request.params.get("fail") == "start":
            raise KeyError(request.headers[TENANT])
        yield "a"
        raise RuntimeError(f"the upstream refused {request.headers[TENANT]}")

    async def run(streams: TokenStreams) -> list[int]:
        headers = {TENANT: "tenant-key-4242", "x-tenant": "acme", "authorization": "Bearer tok-alice-1234"}
        async with (streams.lifespan(),
                    httpx.AsyncClient(transport=httpx.ASGITransport(app=streams), base_url="http://t") as client):
            failing = await client.post("/streams?fail=start", headers=headers)      # the factory raises
            made = await client.post("/streams", headers=headers)
            events = await client.get(made.json()["events_url"], headers=headers)    # the model raises
            assert "event: failed" in events.text
            stop = await client.post(f"/streams/{made.json()['stream_id']}/stop", headers=headers)   # the hook raises
            return [failing.status_code, made.status_code, events.status_code, stop.status_code]

    with caplog.at_level(logging.ERROR, logger="tokenwire"):
        assert asyncio.run(run(TokenStreams(model, authorize=authorize,
                                            keep_out_of_log=(*SECRET_HEADERS, TENANT)))) == [500, 201, 200, 500]
    assert "KeyError: '[redacted]'" in caplog.text                          # the factory's traceback
    assert "LookupError: no tenant [redacted]" in caplog.text               # the hook's
    assert "RuntimeError: the upstream refused [redacted]" in caplog.text   # the model's, mid-answer
    assert [one.partition("(")[0] for one in seen] == ["Access", "StreamRequest", "Access", "StreamRequest",
                                                       "Access", "Access"]
    for one in seen:
        assert f"'{TENANT}': '[redacted]'" in one and "'x-tenant': 'acme'" in one
    assert "tenant-key-4242" not in caplog.text + "".join(seen) and "tok-alice-1234" not in caplog.text


def test_a_model_factory_that_fails_on_a_header_logs_no_credentials(caplog: pytest.LogCaptureFixture) -> None:
    def factory(request: StreamRequest) -> list[str]:
        return [{"tok-bob-5678": "hi"}[request.headers["authorization"].removeprefix("Bearer ")]]

    async def create() -> int:
        streams = TokenStreams(factory)
        async with (streams.lifespan(),
                    httpx.AsyncClient(transport=httpx.ASGITransport(app=streams), base_url="http://t") as client):
            made = await client.post("/streams", headers=dict(CREDENTIALED))
            return made.status_code

    with caplog.at_level(logging.ERROR, logger="tokenwire"):
        assert asyncio.run(create()) == 500
    assert "the model factory raised KeyError" in caplog.text and "KeyError: '[redacted]'" in caplog.text
    assert "tok-alice-1234" not in caplog.text


def test_bob_asking_for_alices_response_makes_the_look_ups_an_unknown_id_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same look-ups, so the same time: on Redis each is a round; one more told Alice's id from a made-up one."""
    users = {"Bearer alice-token": "alice", "Bearer bob-token": "bob"}
    streams = TokenStreams(lambda request: iter(["a", "b"]), authorize=lambda access: users.get(
        access.headers.get("authorization", "")))
    looked: list[str] = []
    records_get, meta = streams.endpoints.records.get, streams.registry.log.meta

    async def counted_get(response_id: str) -> Any:
        looked.append("record")
        return await records_get(response_id)

    def counted_meta(stream_id: str) -> Any:
        looked.append("meta")
        return meta(stream_id)

    monkeypatch.setattr(streams.endpoints.records, "get", counted_get)
    monkeypatch.setattr(streams.registry.log, "meta", counted_meta)

    async def look_ups() -> dict[str, tuple[int, list[str]]]:
        seen = {}
        async with (streams.lifespan(),
                    httpx.AsyncClient(transport=httpx.ASGITransport(app=streams), base_url="http://t") as client):
            made = await client.post("/v1/responses", json={"model": "m", "input": "hi"},
                                     headers={"authorization": "Bearer alice-token"})
            alices = made.json()["id"]
            unknown = "resp_" + "Q" * len(alices.removeprefix("resp_"))
            for name, response_id in (("alice's", alices), ("unknown", unknown)):
                for method, path in (("GET", f"/v1/responses/{response_id}"),
                                     ("POST", f"/v1/responses/{response_id}/cancel")):
                    looked.clear()
                    answer = await client.request(method, path, headers={"authorization": "Bearer bob-token"})
                    seen[f"{method} {name}"] = (answer.status_code, list(looked))
        return seen

    seen = asyncio.run(look_ups())
    assert seen["GET alice's"] == seen["GET unknown"] == (404, ["meta"])
    assert seen["POST alice's"] == seen["POST unknown"] == (404, ["meta"])


def test_every_header_kept_out_of_the_log_is_redacted_from_reprs_and_tracebacks() -> None:
    headers = header_map((*CREDENTIAL_HEADERS.items(), ("x-tenant", "acme")))
    assert shown(headers) == {**dict.fromkeys(CREDENTIAL_HEADERS, "[redacted]"), "x-tenant": "acme"}
    said = redacted(f"{[secret for _, secret in CREDENTIALS.values()]} acme", headers)
    assert said == f"{['[redacted]'] * len(CREDENTIALS)} acme"
    assert TokenStreams(async_alice).models.keep_out_of_log == SECRET_HEADERS    # type: ignore[union-attr]
    assert set(SECRET_HEADERS) >= set(CREDENTIALS)


def test_the_docs_name_every_credential_header_and_no_other() -> None:
    page = (DOCS / "deploying.md").read_text()
    listed = page.partition("<!-- secret-headers -->")[2].partition("<!-- /secret-headers -->")[0]
    assert tuple(re.findall(r"`([a-z-]+)`", listed)) == SECRET_HEADERS
