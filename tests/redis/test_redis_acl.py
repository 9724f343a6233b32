"""Least privilege: the ACL rule docs/redis.md gives is all tokenwire needs, and a user short of it is refused.

The rule is read from the docs (the block marked ``acl-rule``) and is the code's own (``acl.ACL_RULE``); every
command the log's scripts call is in it.  Then real Redis users made with ``ACL SETUSER``: one with the rule
runs the log's every script in-process (create, claim, append, read, readers' presence with Redis's clock,
stop) and two ``tokenwire serve`` processes through it (a stream made on one, cut, resumed on the other to
its ``done``, token for token; a background response and a chat), with no refusal said.  A user missing
``TIME`` or ``XSETID`` (with ``ACL DRYRUN`` allowed, and without: the probe) is refused at start-up by
``tokenwire serve``, ``tokenwire proxy`` and uvicorn running ``tokenwire.asgi:app``, in one line naming it.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support.docs import marked_block, section
from support.live import await_until, wait_until
from support.redis import LEAST_PRIVILEGE, RedisServer, redis_command
from support.requirements import ROOT, free_port
from support.tokenwire_process import refused, running_tokenwire, tokenwire_env

from tokenwire.core.tokenlog import StreamState
from tokenwire.redislog import acl
from tokenwire.redislog.blocking import RedisTokenLog

TIMEOUT_S = 20.0
USER, PASSWORD = "tw", "tw-pw-1"
SCRIPTS = [ROOT / "tokenwire" / "redislog" / name for name in ("scripts.py", "presence.py")]


def _rule(user: str = USER) -> list[str]:
    """The docs' rule for ``user``, as ``ACL SETUSER``'s arguments."""
    words = marked_block("acl-rule", "text").split()
    assert words[:3] == ["ACL", "SETUSER", "tw"], words
    return [user, "reset", *(f">{PASSWORD}" if word == ">pw" else word for word in words[3:])]


def _user(redis: RedisServer, *changes: str, user: str = USER) -> str:
    """Make ``user`` with the docs' rule, then ``changes``; returns the log URL that logs in as it."""
    redis_command(redis.url, "ACL", "SETUSER", *_rule(user))
    if changes:
        redis_command(redis.url, "ACL", "SETUSER", user, *changes)
    return f"redis://{user}:{PASSWORD}@127.0.0.1:{redis.port}/0"


# -- the rule --------------------------------------------------------------------------------------------
def test_the_docs_give_the_codes_rule() -> None:
    assert marked_block("acl-rule", "text").strip() == acl.ACL_RULE.format(user="tw", password="pw",
                                                                          prefix="tokenwire")


def test_every_command_the_scripts_call_is_in_the_rule() -> None:
    called = {name.lower() for path in SCRIPTS for name in re.findall(r"redis\.p?call\('(\w+)'", path.read_text())}
    assert called and called <= {need.command for need in acl.NEEDS}, called - {n.command for n in acl.NEEDS}
    scripted = {need.command for need in acl.NEEDS if not need.direct}
    assert scripted <= called, scripted - called                     # nothing asked that no script calls


@pytest.mark.parametrize(("url", "user"), [("redis://tw:pw@h:1/0", "tw"), ("redis://:pw@h:1/0", "default"),
                                           ("redis://h:1/0?username=ops&password=pw", "ops"),
                                           ("rediss://t%40w:pw@h:1/0", "t@w")])
def test_the_user_of_a_url(url: str, user: str) -> None:
    assert acl.user_of(url) == user


# -- a user with the rule ----------------------------------------------------------------------------------
def test_every_redis_the_tests_start_holds_the_docs_rule_for_its_default_user(redis_server: RedisServer) -> None:
    """What makes every Redis test a test of the rule: the URL the tests give tokenwire logs in as ``default``,
    which may run every command of the rule on the prefix's keys and nothing else."""
    if not LEAST_PRIVILEGE:
        pytest.skip("TOKENWIRE_TEST_REDIS_ACL=0: the test Redis's default user may do anything")
    def dry(*command: str) -> object:
        return redis_command(redis_server.url, "ACL", "DRYRUN", "default", *command)
    for need in acl.NEEDS:
        probe = [word.format(s="tokenwire:{x}:s", h="tokenwire:{x}:h", z="tokenwire:{x}:z", k="tokenwire:{x}:k")
                 for word in need.probe]
        assert dry(*probe) == "OK", need
    assert "no permissions" in str(dry("FLUSHALL")) and "no permissions" in str(dry("CONFIG", "GET", "maxmemory"))
    assert "no permissions" in str(dry("GET", "elsewhere:k"))          # keys outside the prefix


def test_a_user_with_the_rule_runs_every_script_of_the_log(own_redis: RedisServer) -> None:
    log = RedisTokenLog(_user(own_redis), lease_ms=500)
    assert log.check() is None
    log.create("s1", {"n": 1}, 3)
    assert log.claim("s1").owned
    for index, text in enumerate(["a", "b"]):
        log.append("s1", index, text)
    assert log.read_after("s1", -1) == ["a", "b"] and log.length("s1") == 2

    async def presence() -> tuple[bool, bool]:          # JOIN, LEAVE and DESERTED read Redis's clock (TIME)
        aio = log.aio
        await aio.attend("s1")
        return await aio.deserted("s1"), await aio.leave("s1")
    assert log._run(presence()) == (False, True)
    log.set_state("s1", StreamState.DONE)
    assert log.state("s1") is StreamState.DONE
    log.close()
    assert redis_command(own_redis.url, "KEYS", "tokenwire:{tokenwire-check}:*") == []     # the probe's keys went


def _read(base: str, target: str, **headers: str) -> str:
    with httpx.Client(base_url=base, timeout=TIMEOUT_S) as client:
        return client.get(target, headers=headers).text


def test_two_instances_through_the_rule_create_and_resume_exactly(own_redis: RedisServer) -> None:
    url = _user(own_redis)
    argv = ["serve", "--port", "0", "--log", url]
    with running_tokenwire(argv) as one, running_tokenwire(argv) as two, \
            httpx.Client(base_url=one.url, timeout=TIMEOUT_S) as client:
        stream_id = client.post("/streams", params={"tokens": 40, "producer_ms": 2}).json()["stream_id"]
        first = _read(one.url, f"/streams/{stream_id}/events?cut_after=15")
        rest = _read(two.url, f"/streams/{stream_id}/events", **{"Last-Event-ID": "14"})
        response = client.post("/v1/responses", json={"model": "m", "input": "hi", "background": True,
                                                      "tokens": 10, "producer_ms": 1}).json()["id"]
        wait_until(lambda: httpx.get(f"{two.url}/v1/responses/{response}", timeout=TIMEOUT_S).json()["status"]
                   == "completed", "the background response completed on the other instance")
        chat = httpx.post(f"{two.url}/chat", json={"messages": [], "tokens": 5, "producer_ms": 1}, timeout=TIMEOUT_S)
    ids = [int(i) for i in re.findall(r"^id: (\d+)\nevent: token$", first + rest, re.MULTILINE)]
    assert ids == list(range(40)) and "event: done" in rest, (first, rest)
    assert chat.status_code == 200 and chat.text.rstrip().endswith("data: [DONE]"), chat.text
    said = one.output() + two.output()
    assert "may not use" not in said and "can't run" not in said and not re.search(r'" 5\d\d ', said), said


# -- a user short of it ---------------------------------------------------------------------------------------
def _refusal(redis: RedisServer, command: str) -> str:
    purpose = next(need.purpose for need in acl.NEEDS if need.command == command)
    return (f"redis at redis://{USER}:***@127.0.0.1:{redis.port}/0: user {USER!r} may not use "
            f"{command.upper()} ({purpose}); tokenwire needs it: ACL SETUSER {USER} +{command} (the whole rule: "
            f"docs/redis.md, 'Least privilege')")


@pytest.mark.parametrize("command", ["time", "xsetid"])
@pytest.mark.parametrize("dryrun", [True, False], ids=["acl-dryrun", "probed"])
def test_serve_refuses_a_user_missing_a_command_naming_it(own_redis: RedisServer, command: str,
                                                          dryrun: bool) -> None:
    url = _user(own_redis, f"-{command}", *(["+acl|dryrun"] if dryrun else []))
    assert refused(["serve", "--port", "0", "--log", url]) == (
        1, "", f"tokenwire serve: {_refusal(own_redis, command)}; not starting\n")
    assert redis_command(own_redis.url, "KEYS", "*") == []           # the check left nothing behind


def test_the_proxy_refuses_a_user_missing_xsetid(own_redis: RedisServer) -> None:
    url = _user(own_redis, "-xsetid")
    code, out, err = refused(["proxy", "--port", "0", "--upstream", "http://127.0.0.1:1/v1", "--log", url])
    assert (code, out, err) == (1, "", f"tokenwire proxy: {_refusal(own_redis, 'xsetid')}; not starting\n")


def test_a_user_that_may_not_touch_the_prefix_is_told_which_keys(own_redis: RedisServer) -> None:
    url = _user(own_redis, "resetkeys", "~elsewhere:*")
    assert refused(["serve", "--port", "0", "--log", url]) == (
        1, "", f"tokenwire serve: redis at redis://{USER}:***@127.0.0.1:{own_redis.port}/0: user {USER!r} may not "
               f"use the keys ~tokenwire:*; tokenwire needs it: ACL SETUSER {USER} ~tokenwire:* (the whole rule: "
               f"docs/redis.md, 'Least privilege'); not starting\n")


def test_an_asgi_app_under_uvicorn_fails_its_startup_naming_the_command(own_redis: RedisServer) -> None:
    url = _user(own_redis, "-time")
    done = subprocess.run([sys.executable, "-m", "uvicorn", "tokenwire.asgi:app", "--host", "127.0.0.1",
                           "--port", str(free_port()), "--log-level", "warning"], cwd=ROOT,
                          env=tokenwire_env(TOKENWIRE_LOG_URL=url), capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    assert done.returncode != 0 and _refusal(own_redis, "time") in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and PASSWORD not in done.stderr, done.stderr


def test_a_mounted_app_raises_from_its_lifespan(own_redis: RedisServer) -> None:
    from tokenwire.asgi import TokenStreams
    streams = TokenStreams(log=_user(own_redis, "-xsetid"))

    async def start() -> None:
        async with streams.lifespan():
            raise AssertionError("started")
    with pytest.raises(acl.NotPermitted, match=re.escape(_refusal(own_redis, "xsetid"))):
        asyncio.run(start())


def test_an_unreachable_redis_is_said_and_serve_starts_anyway(tmp_path: Path) -> None:
    port = free_port()
    with running_tokenwire(["serve", "--port", "0", "--log", f"redis://{USER}:{PASSWORD}@127.0.0.1:{port}/0"]) as one:
        pass
    assert f"tokenwire serve: cannot reach redis at redis://{USER}:***@127.0.0.1:{port}/0 now; starting anyway" \
        in one.output()


def test_the_docs_say_what_each_command_is_for() -> None:
    table = section("Least privilege")
    for need in acl.NEEDS:
        sender = "tokenwire" if need.direct else "its scripts"
        assert f"| `{need.command.upper().replace('|', ' ')}` | {sender} | {need.purpose} |" in table, need


def test_an_app_with_no_lifespan_says_the_refusal_on_its_log_at_its_first_request(
        own_redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    from tokenwire.asgi import TokenStreams
    streams = TokenStreams(log=_user(own_redis, "-time"))

    async def first_request() -> None:
        transport = httpx.ASGITransport(app=streams)          # no lifespan: the app starts at its first request
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            await client.get("/v1/models")
            await await_until(lambda: _refusal(own_redis, "time") in caplog.text, "the refusal said")
    with caplog.at_level("ERROR", logger="tokenwire"):
        asyncio.run(first_request())
    assert caplog.text.count(_refusal(own_redis, "time")) == 1, caplog.text
