"""The JetStream API table (protocol/jsapi/subjects.py ``API``) is the one source of the server's ``$JS`` subjects.

No socket: every row has exactly one handler (a method marked ``@serves``), every handler names a row, the router's
routes are built from the rows (pattern, reply type, error fields) with those handlers, and no module under
server/ writes a ``$JS.API`` subject itself (server/jetstream/ writes no ``$JS.`` subject at all: the advisory,
ack, flow-control and snapshot subjects are the table's templates).  What each route answers is checked against
both servers in test_stream_api.py, test_consumer_api.py and tests/protocol/test_jsapi_oracle.py.
"""
from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from skiff.protocol.jsapi.subjects import API, API_PREFIX, TYPE_PREFIX, Endpoint
from skiff.server.jetstream import api
from skiff.server.jetstream.api import _OUTSIDE_API, LAZY, ApiRouter, handlers_of, serves
from skiff.server.jetstream.api_consumers import ConsumerApi
from skiff.server.jetstream.api_snapshot import SnapshotApi
from skiff.server.jetstream.api_streams import StreamApi
from skiff.server.jetstream.direct_get import DirectGet

ROUTER_HANDLERS = (StreamApi, SnapshotApi, ConsumerApi)  # what api_streams/api_consumers.register serve
HANDLERS = ROUTER_HANDLERS + (DirectGet,)  # plus the stream's own Direct Get subscriptions
SERVER = Path(__file__).resolve().parents[2] / "server"

# Literals left where this work may not edit; each must still be there (remove the entry when it goes).
KNOWN_LITERALS: dict[str, str] = {}


def _served() -> Counter:
    return Counter(name for cls in HANDLERS for name, _fn, _spec in handlers_of(cls))


def _router(*handler_classes) -> ApiRouter:
    js = SimpleNamespace(server=None)
    router = ApiRouter(js)
    router.serve(*(cls(js) for cls in handler_classes))
    return router


def _example(row: Endpoint) -> str:
    """A request subject that matches the row: ``*`` as a stream or consumer name, ``>`` as two more tokens."""
    return API_PREFIX + ".".join({"*": "NAME", ">": "a.b"}.get(t, t) for t in row.pattern.split("."))


def test_every_row_has_exactly_one_handler():
    served = _served()
    assert sorted(set(API) - set(served)) == [], "rows no handler serves"
    assert sorted(set(served) - set(API)) == [], "handlers of rows the table does not have"
    assert [name for name, n in served.items() if n > 1] == [], "rows served twice"


def test_serves_refuses_a_name_the_table_does_not_have():
    with pytest.raises(KeyError, match="STREAM.FROBNICATE"):
        serves("STREAM.FROBNICATE")


@pytest.mark.parametrize("row", [r for r in API.values() if r.routed], ids=lambda r: r.name)
def test_router_route_is_built_from_the_row(row: Endpoint):
    router = _router(*ROUTER_HANDLERS)
    router.build_routes()
    tokens, route = router._find(_example(row))
    assert route is not None
    assert route.pattern == tuple(row.pattern.split("."))
    assert route.type == TYPE_PREFIX + row.reply_type
    assert route.error_extra == row.error_fields
    assert row.name in route.handler.serves.names


@pytest.mark.parametrize("row", [r for r in API.values() if not r.routed], ids=lambda r: r.name)
def test_own_subscription_rows_stay_outside_the_router(row: Endpoint):
    """DIRECT.GET and CONSUMER.MSG.NEXT are answered by the stream and the consumer: the router has no route for
    them and treats them as nats-server treats its jsDirectGetPre / jsRequestNextPre subjects."""
    router = _router(*ROUTER_HANDLERS)
    router.build_routes()
    assert router._find(_example(row))[1] is None
    assert _example(row).startswith(_OUTSIDE_API)


def test_a_row_without_handler_stops_the_start():
    router = _router(StreamApi, SnapshotApi)  # no consumer handlers
    with pytest.raises(LookupError, match="CONSUMER"):
        router.build_routes()


def _routed_rows(*handler_classes) -> list[str]:
    return sorted(name for cls in handler_classes for name, _fn, _spec in handlers_of(cls) if API[name].routed)


def test_lazy_modules_list_the_rows_their_handlers_serve():
    """api.py LAZY names the rows each handler module serves, so the start checks the table without importing
    them: the names must be what the modules' ``@serves`` say (what register serves; ApiRouter.load checks it too)."""
    assert sorted(LAZY) == ["api_consumers", "api_streams"]
    assert sorted(LAZY["api_streams"]) == _routed_rows(StreamApi, SnapshotApi)
    assert sorted(LAZY["api_consumers"]) == _routed_rows(ConsumerApi)


def test_lazy_router_checks_names_at_start_and_loads_a_module_with_its_first_row():
    router = ApiRouter(SimpleNamespace(server=None))
    router.serve_later("api_streams", "api_consumers")
    router.build_routes()  # every routed row is covered, by name
    _, route = router._find(API["CONSUMER.INFO"].fill("S", "C"))
    assert route.handler is None and route.lazy == "api_consumers"
    assert route.type == TYPE_PREFIX + "consumer_info_response"  # what a refusal (10039) needs, without loading
    h = router.load("api_consumers")
    assert isinstance(h, ConsumerApi) and router.load("api_consumers") is h  # loaded once
    _, route = router._find(API["CONSUMER.INFO"].fill("S", "C"))
    assert route.handler.__self__ is h and not route.level_check  # the row's own @serves flags now
    assert router._find(API["STREAM.INFO"].fill("S"))[1].handler is None  # the other module is still not loaded
    router.load("api_streams")
    assert all(r.handler is not None for routes in router._routes.values() for r in routes)


def test_lazy_rows_without_a_module_stop_the_start():
    router = ApiRouter(SimpleNamespace(server=None))
    router.serve_later("api_streams")
    with pytest.raises(LookupError, match="CONSUMER"):
        router.build_routes()
    with pytest.raises(ValueError, match="two handlers for API table row .*: api_streams and"):
        router.serve(StreamApi(router.js))


def test_a_lazy_list_that_is_not_what_the_module_serves_stops_its_load(monkeypatch):
    consumers = tuple(n for n in LAZY["api_consumers"] if n != "CONSUMER.RESET")
    monkeypatch.setitem(api.LAZY, "api_consumers", consumers)
    monkeypatch.setitem(api.LAZY, "api_streams", LAZY["api_streams"] + ("CONSUMER.RESET",))
    router = ApiRouter(SimpleNamespace(server=None))
    router.serve_later("api_streams", "api_consumers")
    router.build_routes()
    with pytest.raises((LookupError, ValueError), match="CONSUMER.RESET"):
        router.load("api_consumers")


def test_a_module_that_fails_to_load_answers_with_the_general_error(monkeypatch):
    """As a handler that raises (ApiRouter._run): the failure is logged, the request gets JSStreamGeneralErrorF (10051) with the reason,
    and the next request tries again."""
    monkeypatch.setitem(api.LAZY, "api_nope", ("STREAM.INFO",))
    monkeypatch.setitem(api.LAZY, "api_streams", tuple(n for n in LAZY["api_streams"] if n != "STREAM.INFO"))
    sent, logged = [], []
    server = SimpleNamespace(js_account=SimpleNamespace(jetstream=True), log_error=lambda *a, **kw: logged.append(kw),
                             publish=lambda subject, data, *a: sent.append((subject, data)))
    router = ApiRouter(SimpleNamespace(server=server))
    router.serve_later("api_streams", "api_consumers", "api_nope")
    router.build_routes()
    for _ in range(2):
        router._dispatch_now(None, API["STREAM.INFO"].fill("S"), "reply", 0, b"", None)
    assert [s for s, _ in sent] == ["reply", "reply"] and len(logged) == 2 and logged[0]["module"] == "api_nope"
    reply = json.loads(sent[0][1])
    assert reply["type"] == TYPE_PREFIX + "stream_info_response" and reply["error"]["err_code"] == 10051
    assert "api_nope" in reply["error"]["description"] and router.errors == 2


def test_two_handlers_for_one_row_are_refused():
    with pytest.raises(ValueError, match="two handlers"):
        _router(StreamApi, StreamApi)


def test_fill_and_prefix():
    assert API["CONSUMER.DELETE"].fill("S", "C") == "$JS.API.CONSUMER.DELETE.S.C"
    assert API["CONSUMER.CREATE.EX"].fill("S", "C", "foo.>") == "$JS.API.CONSUMER.CREATE.S.C.foo.>"
    assert API["DIRECT.GET.LAST"].fill("KV_b") == "$JS.API.DIRECT.GET.KV_b.>"
    assert API["CONSUMER.MSG.NEXT"].prefix == "$JS.API.CONSUMER.MSG.NEXT."
    assert API["INFO"].prefix == "$JS.API.INFO"
    with pytest.raises(ValueError):
        API["STREAM.INFO"].fill("S", "extra")


def _string_literals(path: Path) -> list[tuple[int, str]]:
    """Every string constant of the module but its docstrings (f-string parts included)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def test_no_module_under_server_writes_a_js_subject():
    found: dict[str, list] = {}
    for path in sorted(SERVER.rglob("*.py")):
        rel = path.relative_to(SERVER).as_posix()
        forbidden = "$JS." if rel.startswith("jetstream/") else "$JS.API"
        hits = [(line, s) for line, s in _string_literals(path) if forbidden in s]
        if hits:
            found[rel] = hits
    known = {rel: hits for rel, hits in found.items()
             if rel in KNOWN_LITERALS and all(KNOWN_LITERALS[rel] in s for _line, s in hits)}
    assert {rel: hits for rel, hits in found.items() if rel not in known} == {}, \
        "write these subjects through protocol/jsapi/subjects.py"
    assert sorted(known) == sorted(KNOWN_LITERALS), "a known literal is gone: drop its KNOWN_LITERALS entry"
