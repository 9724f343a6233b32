"""Your own model behind ``TokenStreams``, mounted under ``/tokens`` (detach) and ``/cancel`` (cancel) in a
FastAPI app on a real uvicorn: exact streams and resumes, what the model's own step counter says about
detach and cancel, and a model that raises, yields a non-string or never yields, and a client leaving mid-token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.apps.fake_model import SECRET
from support.asgi import Read, Uvicorn, read_stream, uvicorn
from support.live import wait_until


@pytest.fixture(scope="module")
def server() -> Iterator[Uvicorn]:
    with uvicorn("support.apps.fake_model:app", env={"TOKENWIRE_TEST_HEARTBEAT_S": "0.2"}) as running:
        yield running


def create(server: Uvicorn, query: str, mount: str = "/tokens") -> str:
    made = httpx.post(f"{server.url}{mount}/streams?{query}")
    assert made.status_code == 201, made.text
    url = made.json()["events_url"]
    assert url == f"{mount}/streams/{made.json()['stream_id']}/events"     # the mount path is in it
    return server.url + url


def stats(server: Uvicorn, url: str) -> dict[str, Any]:
    stream_id = url.rsplit("/", 2)[1]
    return dict(httpx.get(f"{server.url}/model/{stream_id}").json())


def texts(n: int) -> str:
    return "".join(f" t{i}" for i in range(n))


def resume(url: str, first: Read) -> Read:
    return read_stream(url, headers={"Last-Event-ID": first.tokens[-1].id})


def test_a_model_stream_is_read_whole_by_httpx_sse_under_the_mount(server: Uvicorn) -> None:
    url = create(server, "n=25&delay_ms=1")
    read = read_stream(url)
    assert read.ids == list(range(25)) and read.text == texts(25)
    assert read.last.event == "done" and read.last.id == "24"
    assert read.last_json() == {"tokens": 25, "delivered_from": 0, "dropped": 0}
    assert stats(server, url) == {"steps": 25, "yielded": 25, "finished": True, "closed": True}


def test_get_stream_creates_and_streams_in_one_request_under_the_mount(server: Uvicorn) -> None:
    read = read_stream(f"{server.url}/tokens/stream?n=5&delay_ms=1")
    opened = json.loads(read.events[0].data)
    assert read.text == texts(5)
    assert stats(server, f"/streams/{opened['stream_id']}/events")["steps"] == 5


@pytest.mark.parametrize("k", [1, 9, 29])
def test_a_cut_after_k_tokens_resumes_to_the_exact_text_with_each_id_once(server: Uvicorn, k: int) -> None:
    url = create(server, f"n=30&delay_ms=1&cut_after={k}")
    first = read_stream(url)
    assert first.ids == list(range(k)) and first.events[-1].event == "token"
    second = resume(url, first)
    assert first.ids + second.ids == list(range(30))
    assert first.text + second.text == texts(30)
    assert second.last_json()["tokens"] == 30 and "stopped_early" not in second.last_json()


def test_detach_keeps_the_model_generating_while_the_reader_is_away(server: Uvicorn) -> None:
    url = create(server, "n=30&delay_ms=10")
    first = read_stream(url, stop_after=5)              # hangs up after 5 tokens
    wait_until(lambda: stats(server, url)["finished"], "the detached model to finish alone")
    assert stats(server, url) == {"steps": 30, "yielded": 30, "finished": True, "closed": True}   # once each
    second = resume(url, first)
    assert first.ids + second.ids == list(range(30)) and first.text + second.text == texts(30)
    assert second.last.event == "done" and "stopped_early" not in second.last_json()


def test_cancel_closes_the_model_within_one_token_and_a_resume_ends_early(server: Uvicorn) -> None:
    url = create(server, "n=200&delay_ms=20", mount="/cancel")
    first = read_stream(url, stop_after=5)
    wait_until(lambda: stats(server, url)["closed"], "the cancelled model to be closed")
    # A reader that kept only ids 0 and 1 (it may have everything else that was logged, then 204 would say so).
    second = read_stream(url, headers={"Last-Event-ID": "1"})
    logged = second.last_json()["tokens"]
    assert second.last.event == "done"
    assert second.last_json() == {"tokens": logged, "delivered_from": 2, "dropped": 0, "stopped_early": True,
                                  "reason": "cancelled"}
    assert first.ids[:2] + second.ids == list(range(logged))   # what was logged, each once, then the early done
    assert first.text[:6] + second.text == texts(logged)
    model = stats(server, url)
    assert not model["finished"] and model["yielded"] == logged
    assert model["steps"] <= logged + 1                       # at most one step for nobody
    assert logged < 200
    # A reader that has every logged token gets the early ending again, not a 204 saying its answer is whole
    # (a 204 would tell an EventSource it has the whole answer).
    last = read_stream(url, headers={"Last-Event-ID": str(logged - 1)})
    assert last.status == 200 and last.ids == [] and last.last_json()["reason"] == "cancelled"


def test_a_model_that_raises_ends_with_a_failed_event_naming_it_logged_once(server: Uvicorn) -> None:
    url = create(server, "n=10&delay_ms=1&mode=raise&at=3")
    read = read_stream(url)
    assert read.text == texts(3)
    assert read.last.event == "failed" and read.last.id == "2"
    assert read.last_json() == {"error": "the model raised RuntimeError", "tokens": 3}
    again = read_stream(url, headers={"Last-Event-ID": "1"})          # a resume replays, then the same error
    assert again.ids == [2] and again.last_json() == read.last_json()
    last = read_stream(url, headers={"Last-Event-ID": "2"})          # all it logged: the error, not a 204
    assert last.status == 200 and last.ids == [] and last.last_json() == read.last_json()
    assert all(SECRET not in event.data for event in read.events + again.events)
    assert stats(server, url)["closed"]
    wait_until(lambda: "the model raised RuntimeError" in server.stderr(), "the error in the server's log")
    assert server.stderr().count("the model raised RuntimeError") == 1


def test_a_model_that_yields_a_non_string_gets_a_clear_error(server: Uvicorn) -> None:
    url = create(server, "n=10&delay_ms=1&mode=nonstr&at=2")
    read = read_stream(url)
    assert read.text == texts(2)
    assert read.last_json() == {"error": "part 2: the model yielded 42 (int); a model yields a str, a part of "
                                         "tokenwire.core.parts, or a stream object of the openai, anthropic or "
                                         "LangChain clients", "tokens": 2}
    assert stats(server, url)["closed"]


def _pings_then_leave(url: str, pings: int) -> list[str]:
    lines: list[str] = []
    with httpx.Client(timeout=10) as client, client.stream("GET", url) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            lines.append(line)
            if lines.count(": ping") >= pings:
                break
    return lines


@pytest.mark.parametrize("mount", ["/tokens", "/cancel"])
def test_a_model_that_never_yields_keeps_the_connection_with_heartbeats(server: Uvicorn, mount: str) -> None:
    url = create(server, "mode=never", mount=mount)
    lines = _pings_then_leave(url, pings=3)
    assert not any(line.startswith("id:") for line in lines)
    model = stats(server, url)
    assert model["steps"] == 1 and model["yielded"] == 0
    if mount == "/cancel":     # the client left mid-token: the token being generated is abandoned, the model closed
        wait_until(lambda: stats(server, url)["closed"], "the model to be closed")
        # Nothing was logged, and the reader never saw how the stream ended: a plain reconnect gets that
        # ending (200), not a 204 that would tell an EventSource it has everything.
        replay = httpx.get(url)
        assert replay.status_code == 200 and "event: done" in replay.text and '"stopped_early": true' in replay.text


def test_a_client_leaving_mid_token_with_detach_resumes_everything(server: Uvicorn) -> None:
    url = create(server, "n=4&delay_ms=150")
    with httpx.Client(timeout=10) as client, client.stream("GET", url) as response:
        next(response.iter_lines())                 # the open frame, then away while token 0 is generated
    wait_until(lambda: stats(server, url)["finished"], "the detached model to finish")
    read = read_stream(url)
    assert read.ids == [0, 1, 2, 3] and read.text == texts(4)
    assert stats(server, url)["steps"] == 4


def test_a_factory_refusing_its_parameters_is_a_400_with_its_message(server: Uvicorn) -> None:
    refused = httpx.post(f"{server.url}/tokens/streams?mode=bad")
    assert (refused.status_code, refused.json()) == (400, {"error": "mode must be ok, raise, nonstr or never, "
                                                                    "got 'bad'"})
    assert httpx.get(f"{server.url}/tokens/stream?n=3&n=4").status_code == 400
    assert "Traceback" not in server.stderr().split("RuntimeError")[0]


@pytest.mark.parametrize("mount", ["/tokens", "/cancel"])
def test_a_model_that_fails_before_its_first_token_is_seen_failing_by_a_plain_reconnect(server: Uvicorn,
                                                                                         mount: str) -> None:
    """A stream that ended before index 0 answers a reconnect without ``Last-Event-ID`` with
    its ending (200), never with a 204 that would tell an ``EventSource`` it has everything."""
    url = create(server, "n=10&delay_ms=1&mode=raise&at=0", mount=mount)
    first = read_stream(url)
    assert first.ids == [] and first.last.event == "failed"
    assert first.last_json() == {"error": "the model raised RuntimeError", "tokens": 0}
    again = httpx.get(url)
    assert again.status_code == 200, again.text
    assert "event: failed" in again.text and '"tokens": 0' in again.text
    assert "id: -1" not in again.text                   # no id an EventSource would send back as Last-Event-ID
