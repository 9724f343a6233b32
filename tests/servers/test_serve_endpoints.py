"""The live endpoints over real loopback sockets, with http.client and raw sockets.

Every server binds 127.0.0.1 port 0; every client has a timeout; waits for
something to happen are bounded loops.  Assertions are about order, counts
and content, never about how long anything took.
"""

from __future__ import annotations

import json
import threading
from urllib.parse import quote

import httpx
from support.live import (
    create,
    events,
    open_events,
    read_token_ids,
    request,
    serving,
    token_ids,
    wait_until,
)

from tokenwire.core.effects import TokenItem
from tokenwire.core.frames import done_frame, open_frame, token_frame
from tokenwire.core.model import ANSWER
from tokenwire.core.stream import Ending
from tokenwire.endpoints.page import LIVE_CSP
from tokenwire.endpoints.registry import Registry


def no_banner(headers: dict[str, str]) -> bool:
    """No Server header, or one naming the software without a version (nor Python's)."""
    server = headers.get("server", "")
    return "/" not in server and "python" not in server.lower()


# -- creating and reading -------------------------------------------------------------
def test_post_streams_answers_201_with_an_unguessable_id_and_its_events_url() -> None:
    with serving() as server:
        status, headers, body = request(server, "POST", "/streams?tokens=30")
        other = create(server)
    info = json.loads(body)
    assert status == 201
    assert headers["content-type"] == "application/json"
    assert info["events_url"] == f"/streams/{info['stream_id']}/events" == headers["location"]
    assert len(info["stream_id"]) >= 22 and info["stream_id"] != other
    assert no_banner(headers)


def test_events_are_exactly_the_frames_the_core_makes_with_the_sse_headers() -> None:
    with serving() as server:
        sid = create(server, "tokens=30&scenario=block&buffer=4")
        status, headers, body = request(server, "GET", f"/streams/{sid}/events")
    assert status == 200
    assert headers["content-type"] == "text/event-stream; charset=utf-8"
    assert headers["cache-control"] == "no-store"
    assert headers["x-accel-buffering"] == "no"
    assert "content-encoding" not in headers and "content-length" not in headers
    assert no_banner(headers)
    expected = (open_frame(sid, resumed=False, start_index=0, policy="block", buffer=4)
                + b"".join(token_frame(TokenItem(i, t)) for i, t in enumerate(ANSWER[:30]))
                + done_frame(30, delivered_from=0, dropped=0))
    assert body == expected


def test_last_event_id_resumes_strictly_after_it_and_the_header_wins_over_the_query() -> None:
    with serving() as server:
        sid = create(server)
        _, _, whole = request(server, "GET", f"/streams/{sid}/events")
        _, _, by_header = request(server, "GET", f"/streams/{sid}/events?last_event_id=3",
                                  headers={"Last-Event-ID": "17"})
        _, _, by_query = request(server, "GET", f"/streams/{sid}/events?last_event_id=3")
        _, _, empty = request(server, "GET", f"/streams/{sid}/events", headers={"Last-Event-ID": ""})
    assert token_ids(whole) == list(range(30))
    assert token_ids(by_header) == list(range(18, 30))
    assert token_ids(by_query) == list(range(4, 30))
    assert token_ids(empty) == list(range(30))
    opened = json.loads(events(by_header)[0].data)
    assert opened["resumed"] is True and opened["start_index"] == 18


MALFORMED_IDS = ["04", "-1", "+1", "1.0", "x", "1e3", "0x1", "9999999999", "\u0661"]


def test_a_malformed_last_event_id_is_a_400_that_quotes_it() -> None:
    with serving() as server:
        sid = create(server)
        request(server, "GET", f"/streams/{sid}/events")
        by_header = [request(server, "GET", f"/streams/{sid}/events",
                             headers={"Last-Event-ID": value.encode().decode("latin-1")}) for value in MALFORMED_IDS]
        by_query = [request(server, "GET", f"/streams/{sid}/events?last_event_id={quote(value)}")
                    for value in [*MALFORMED_IDS, " 1", "1 "]]
    for value, (status, _, body) in zip(MALFORMED_IDS, by_header, strict=True):
        assert status == 400, value
        assert json.loads(body)["error"].startswith("Last-Event-ID must be a decimal integer"), value
    for (status, _, body), value in zip(by_query, [*MALFORMED_IDS, " 1", "1 "], strict=True):
        assert status == 400, value
        assert f"got {value!r}" in json.loads(body)["error"]


def test_ids_past_the_end_or_never_sent_are_400_and_a_finished_stream_is_204() -> None:
    with serving() as server:
        fresh = create(server)
        status_fresh, _, body_fresh = request(server, "GET", f"/streams/{fresh}/events",
                                              headers={"Last-Event-ID": "5"})
        sid = create(server)
        request(server, "GET", f"/streams/{sid}/events")
        status_past, _, body_past = request(server, "GET", f"/streams/{sid}/events", headers={"Last-Event-ID": "30"})
        status_done, headers_done, body_done = request(server, "GET", f"/streams/{sid}/events",
                                                       headers={"Last-Event-ID": "29"})
    assert status_fresh == 400 and "'5' was never sent" in json.loads(body_fresh)["error"]
    assert status_past == 400 and "'30' is past the end" in json.loads(body_past)["error"]
    assert status_done == 204 and body_done == b"" and no_banner(headers_done)


def test_unknown_streams_bad_parameters_and_wrong_methods() -> None:
    with serving() as server:
        unknown = request(server, "GET", "/streams/AAAAAAAAAAAAAAAAAAAAAA/events")
        bad_param = request(server, "POST", "/streams?tokens=0")
        bad_cut = request(server, "POST", "/streams?tokens=30&cut_after=30")
        extra = request(server, "GET", f"/streams/{create(server)}/events?tokens=5")
        get_streams = request(server, "GET", "/streams")
        post_live = request(server, "POST", "/live")
        big_body = request(server, "POST", "/streams", body=b"x" * 2048)
    assert unknown[0] == 404 and "unknown stream" in json.loads(unknown[2])["error"]
    assert bad_param[0] == 400 and "tokens" in json.loads(bad_param[2])["error"]
    assert bad_cut[0] == 400 and "cut_after" in json.loads(bad_cut[2])["error"]
    assert extra[0] == 400
    assert get_streams[0] == 405 and get_streams[1]["allow"] == "POST"
    assert post_live[0] == 405 and post_live[1]["allow"] == "GET, HEAD"
    assert big_body[0] == 413


def test_cut_after_closes_the_first_connection_once_and_the_resume_completes_it() -> None:
    with serving() as server:
        sid = create(server)
        _, _, first = request(server, "GET", f"/streams/{sid}/events?cut_after=7")
        _, _, second = request(server, "GET", f"/streams/{sid}/events?cut_after=7",
                               headers={"Last-Event-ID": "6"})
        journal = list(server.journal)
    assert token_ids(first) == list(range(7))
    assert [e.event for e in events(first)][-1] == "token"          # no done: the server closed it
    assert token_ids(second) == list(range(7, 30))
    assert events(second)[-1].event == "done"
    assert [j.ending for j in journal] == [Ending.CLOSED_BY_SERVER, Ending.DONE]
    assert journal[1].last_event_id_header == "6"


def test_stream_creates_and_streams_in_one_request_and_its_id_resumes() -> None:
    with serving() as server:
        _, _, first = request(server, "GET", "/stream?tokens=20&cut_after=5")
        sid = json.loads(events(first)[0].data)["stream_id"]
        _, _, rest = request(server, "GET", f"/streams/{sid}/events", headers={"Last-Event-ID": "4"})
    texts = [e.data for e in events(first) + events(rest) if e.event == "token"]
    assert token_ids(first) + token_ids(rest) == list(range(20))
    assert "".join(texts) == "".join(ANSWER[:20])


def test_a_silent_stream_gets_ping_comments() -> None:
    with serving(heartbeat_s=0.01) as server:
        _, _, body = request(server, "GET", "/stream?tokens=3&producer_ms=100")
    assert token_ids(body) == [0, 1, 2]
    assert b"\n\n: ping\n" in body and b": ping\n\n" not in body    # between frames, never a block of its own


# -- clients that go away ---------------------------------------------------------------
def test_a_client_that_disconnects_leaves_no_producer_running() -> None:
    baseline_threads = threading.active_count()
    with serving() as server:
        sock = open_events(server, "/stream?tokens=277&producer_ms=20&scenario=block")
        assert read_token_ids(sock, 5)[:5] == [0, 1, 2, 3, 4]
        sock.close()
        wait_until(lambda: len(server.journal) == 1, "the server to notice the client left")
        wait_until(lambda: server.registry.producers_running == 0, "the producer to stop")
        entry = server.journal[0]
        final = server.registry.log.length(entry.stream_id)
        wait_until(lambda: threading.active_count() <= baseline_threads + 1, "threads back to baseline")
    assert entry.ending is Ending.PEER_GONE and entry.failure is not None
    assert final < 277
    assert final <= entry.generated + 1          # it stopped within one token of the cancel


def test_a_client_that_stops_reading_is_dropped_after_the_write_timeout() -> None:
    # Asking for 1 byte gets the kernel's floor for each buffer: a few dozen
    # token frames fit in them, far fewer than the 277 of the answer.
    with serving(write_timeout_s=0.3, sndbuf=1) as server:
        sock = open_events(server, "/stream?tokens=277&scenario=block", rcvbuf=1)
        try:
            wait_until(lambda: len(server.journal) == 1, "the write timeout")
            wait_until(lambda: server.registry.producers_running == 0, "the producer to stop")
        finally:
            sock.close()
        entry = server.journal[0]
    assert entry.ending is Ending.PEER_GONE
    assert entry.failure is not None and entry.failure.startswith("write timeout")
    assert entry.tokens_sent < 277


def test_past_max_live_open_streams_the_server_answers_503_with_retry_after() -> None:
    with serving(Registry(max_live=2)) as server:
        held = [open_events(server, "/stream?tokens=50&producer_ms=100") for _ in range(2)]
        try:
            for sock in held:
                read_token_ids(sock, 1)
            status, headers, body = request(server, "GET", "/stream?tokens=5")
        finally:
            for sock in held:
                sock.close()
    assert status == 503 and headers["retry-after"] == "1"
    assert "at most 2" in json.loads(body)["error"]


# -- the live page and the fallback ------------------------------------------------------------
def test_the_live_page_is_strict_and_its_files_are_served() -> None:
    with serving() as server:
        status, headers, body = request(server, "GET", "/live?tokens=30")
        js = request(server, "GET", "/static/live.js")
        css = request(server, "GET", "/static/live.css")
        missing = request(server, "GET", "/static/../server.py")
        head = request(server, "HEAD", "/live")
        head_events = request(server, "HEAD", f"/streams/{create(server)}/events")
    page = body.decode()
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    assert headers["content-security-policy"] == LIVE_CSP and "script-src 'self'" in LIVE_CSP
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"
    assert no_banner(headers)
    assert '<script src="/static/live.js" defer></script>' in page
    assert page.count("<script") == 1 and "<style" not in page and " style=" not in page
    assert js[0] == 200 and js[1]["content-type"] == "text/javascript; charset=utf-8" and b"EventSource" in js[2]
    assert css[0] == 200 and css[1]["content-type"] == "text/css; charset=utf-8"
    assert missing[0] == 404
    assert head[0] == 200 and head[2] == b"" and head[1]["content-length"] == str(len(body))
    assert head_events[0] == 405 and head_events[1]["allow"] == "GET"


def test_other_paths_fall_back_to_the_report_handler() -> None:
    with serving() as server:
        missing = request(server, "GET", "/no-such-page")
    assert missing[0] == 404 and no_banner(missing[1])


def test_serve_without_metrics_counts_nothing_and_answers_404() -> None:
    with serving() as live:
        live.endpoints.meter = None
        answer = httpx.get(f"{live.url}/metrics")
    assert answer.status_code == 404
