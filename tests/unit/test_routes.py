"""The route table (``tokenwire.endpoints.routes``) that both servers, the HTTP layer and the README read: each body
limit set by its setting's name, the routes a table refuses, the 404 that lists them, the README's endpoint table.
(Routes added to the table and served by both servers: ``processes/test_routes_served.py``.)"""

from __future__ import annotations

import re

import pytest
from support.apps.routes import EXTENDED
from support.docs import all_text

from tokenwire.endpoints.config import MAX_CHAT_BODY_BYTES
from tokenwire.endpoints.params import RequestError
from tokenwire.endpoints.routes import LIVE_ROUTES, Route, RouteTable


def test_every_body_limit_is_settable_by_its_setting_name() -> None:
    table = EXTENDED.with_limits({"max_body_bytes": 2048, "max_v2_body_bytes": 1})
    # /chat and OpenAI's two POST routes take a conversation: max_chat_body_bytes.
    assert [route.body_limit for route in table.routes if route.takes_body] == [2048, *[MAX_CHAT_BODY_BYTES] * 3, 1]
    with pytest.raises(ValueError, match=r"^no route's body is limited by 'max_chat_bytes'; the settings are "
                                         r"\['max_body_bytes', 'max_chat_body_bytes', 'max_v2_body_bytes'\]$"):
        EXTENDED.with_limits({"max_chat_bytes": 1})
    with pytest.raises(ValueError, match=r"^max_body_bytes must be a non-negative int, got -1$"):
        LIVE_ROUTES.with_limits({"max_body_bytes": -1})


def test_a_table_refuses_routes_it_could_not_serve() -> None:
    with pytest.raises(ValueError, match="each pattern is one route"):
        LIVE_ROUTES.add(Route("/streams", ("GET",), "events", "read"))
    with pytest.raises(ValueError,
                       match=r"^a route's action must be one of \('create', 'read', 'stop', 'scrape'\), got 'x'$"):
        Route("/x", ("GET",), "events", "x")  # type: ignore[arg-type]
    from tokenwire.endpoints.config import LiveConfig
    from tokenwire.endpoints.decide import Endpoints
    from tokenwire.endpoints.registry import Registry
    with pytest.raises(ValueError, match=r"^no handler answers a route of kind 'teleport'"):
        Endpoints(Registry(), LiveConfig(), routes=RouteTable((Route("/x", ("GET",), "teleport", "read"),)))


def test_the_404_lists_the_tables_routes() -> None:
    with pytest.raises(RequestError) as caught:
        LIVE_ROUTES.find("/nowhere", "GET", alone=True)
    assert caught.value.message == ("no such path '/nowhere': the routes here are "
                                    + ", ".join(route.described() for route in LIVE_ROUTES.routes[:-1])
                                    + f" and {LIVE_ROUTES.routes[-1].described()}")


def test_the_readmes_route_table_is_the_tables() -> None:
    """Each route of the table is a row of the README's endpoint table, with its summary; no other live row."""
    rows = dict(re.findall(r"^\| `([A-Z/]+ /[^`?]*)(?:\?[^`]*)?` \| (.*) \|$", all_text(), re.M))
    for route in LIVE_ROUTES.routes:
        assert rows.get(route.described()) == route.summary, route.described()
    live = {name for name in rows if name.split(" ")[1].startswith(("/stream", "/chat", "/metrics", "/v1/"))}
    assert live == {route.described() for route in LIVE_ROUTES.routes}
