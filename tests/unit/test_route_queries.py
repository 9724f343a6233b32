"""What each route's query may hold is the route table's to say (``Route.params``, ``repeatable``,
``ignores_query``), checked once for both servers (``rules.check_query``): a route that takes no query string
refuses one, a parameter given twice is refused naming it, and ``GET /metrics`` filters by ``name[]``.

Before, ``POST /v1/chat/completions``, ``POST /v1/responses``, ``GET /v1/models`` and ``POST
/v1/responses/<id>/cancel`` took any query string and ignored it, and ``GET /v1/responses/<id>`` took
``stream`` and ``starting_after`` twice and used the last.
"""

from __future__ import annotations

import pytest

from tokenwire.endpoints.params import RequestError
from tokenwire.endpoints.routes import LIVE_ROUTES, Route

ROUTES = {route.described(): route for route in LIVE_ROUTES.routes}
NO_QUERY = ["POST /v1/chat/completions", "POST /v1/responses", "GET /v1/models", "POST /v1/responses/<id>/cancel",
            "POST /streams/<id>/stop", "POST /chat/<id>/stop"]


def refusal(route: Route, query: str) -> str:
    with pytest.raises(RequestError) as raised:
        route.check_query(query)
    assert raised.value.status == 400
    return raised.value.message


@pytest.mark.parametrize("name", NO_QUERY)
def test_a_route_that_takes_no_query_string_refuses_one(name: str) -> None:
    route = ROUTES[name]
    route.check_query("")
    assert refusal(route, "x=1") == f"{name} takes no query string, got 'x=1'"
    assert refusal(route, "api-version=2024-10-21") == f"{name} takes no query string, got 'api-version=2024-10-21'"


@pytest.mark.parametrize(("query", "message"), [
    ("stream=true&stream=false", "parameter 'stream' given more than once ('true' and 'false'); give it once"),
    ("stream=true&starting_after=1&starting_after=2",
     "parameter 'starting_after' given more than once ('1' and '2'); give it once"),
])
def test_a_retrieve_refuses_a_parameter_given_twice(query: str, message: str) -> None:
    route = ROUTES["GET /v1/responses/<id>"]
    assert refusal(route, query) == message
    route.check_query("stream=true&starting_after=3&include[]=a&include[]=b")    # the SDK's list, as it sends it


@pytest.mark.parametrize("name", [name for name, route in ROUTES.items() if not route.ignores_query
                                  and route.params is None])
def test_every_route_that_reads_its_query_refuses_a_parameter_given_twice(name: str) -> None:
    assert refusal(ROUTES[name], "a=1&a=2") == "parameter 'a' given more than once ('1' and '2'); give it once"


def test_metrics_takes_name_filters_only_and_any_number_of_them() -> None:
    route = ROUTES["GET /metrics"]
    route.check_query("name[]=tokenwire_streams_open&name[]=tokenwire_resumes_total")
    assert refusal(route, "names=x") == "unknown parameter 'names' (given 'x'); allowed: name[]"


def test_post_chat_ignores_its_query_as_the_docs_say() -> None:
    ROUTES["POST /chat"].check_query("a=1&a=2&anything")


def test_a_query_past_its_field_bound_is_refused_on_every_route_that_reads_one() -> None:
    many = "&".join(f"n{i}=1" for i in range(65))
    for route in LIVE_ROUTES.routes:
        if not route.ignores_query and route.params != ():
            assert refusal(route, many) == "query string has more than 64 parameters", route.described()
