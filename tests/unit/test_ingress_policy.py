"""The ingress's per-request decisions (pure): route matching, paths, CORS, auth, rate limits."""
from __future__ import annotations

import hashlib

import pytest

from session_supervisor.domain.model import ingress_policy as p
from session_supervisor.domain.model.services import normalize_services


def services(*routes, port=8080, public=True):
    return normalize_services([{"id": "app", "port": port, "ingress": {"public": public, "routes": list(routes)}}])


def test_the_longest_matching_prefix_wins_and_a_prefix_is_a_whole_segment():
    found = services({"id": "root", "path_prefix": "/"}, {"id": "api", "path_prefix": "/api"},
                     {"id": "v2", "path_prefix": "/api/v2"})
    assert p.match_route(found, 8080, "/api/v2/x", "GET").route["id"] == "v2"
    assert p.match_route(found, 8080, "/api", "GET").route["id"] == "api"
    assert p.match_route(found, 8080, "/apis", "GET").route["id"] == "root"
    assert p.match_route(found, 9090, "/api", "GET") is None  # another port
    assert p.match_route(services({"id": "r"}, public=False), 8080, "/", "GET") is None  # not public


def test_methods_limit_a_route():
    found = p.match_route(services({"id": "r", "methods": ["get"]}), 8080, "/", "POST")
    assert found is not None and not found.method_allowed
    assert p.match_route(services({"id": "r", "methods": ["*"]}), 8080, "/", "DELETE").method_allowed


@pytest.mark.parametrize("path, prefix, rewrite, expected", [
    ("/api/x", "/api", None, "/api/x"), ("/api/x", "/api", "/", "/x"), ("/api", "/api", "/v1", "/v1"),
    ("/x", "/", "/app", "/app/x"), ("/", "/", "/app", "/app"), ("/api/x/", "/api/", "/v1", "/v1/x/"),
])
def test_a_rewrite_replaces_the_matched_prefix(path, prefix, rewrite, expected):
    assert p.rewrite_path(path, prefix, rewrite) == expected


@pytest.mark.parametrize("raw, expected", [
    ("/", "/"), ("/a/../b", "/b"), ("/../../x", "/x"), ("/%61dmin", "/admin"), ("/a/b/..", "/a/"),
    ("/%2e%2e/secret", "/secret"), ("/a/./b/", "/a/b/"),
])
def test_paths_are_matched_as_the_service_will_read_them(raw, expected):
    assert p.normalize_path(raw) == expected


@pytest.mark.parametrize("raw", ["/a%2fb", "/a%5Cb", "/a\\b", "/x%00", "relative", "/%0a"])
def test_paths_that_could_mean_two_things_are_refused(raw):
    with pytest.raises(p.BadPathError):
        p.normalize_path(raw)


def test_cors_answers_a_preflight_and_refuses_a_foreign_origin():
    [route] = services({"id": "r", "methods": ["GET", "POST"], "cors": {
        "allowed_origins": ["https://a.example"], "allowed_headers": ["x-k"], "allow_credentials": True,
        "max_age_seconds": 30}})[0]["ingress"]["routes"]
    ok = p.cors(route, "OPTIONS", "https://a.example", "POST")
    assert ok.answer == 204 and ("Access-Control-Allow-Methods", "GET, POST") in ok.headers
    assert ("Access-Control-Allow-Credentials", "true") in ok.headers
    assert p.cors(route, "OPTIONS", "https://evil.example", "POST").answer == 403
    assert p.cors(route, "OPTIONS", "https://a.example", "DELETE").answer == 405
    simple = p.cors(route, "GET", "https://a.example", None)
    assert simple.answer is None and ("Access-Control-Allow-Origin", "https://a.example") in simple.headers
    assert p.cors(route, "GET", "https://evil.example", None).headers == []  # the browser blocks it


def test_bearer_and_header_auth_compare_digests():
    digest = hashlib.sha256(b"t0ken").hexdigest()
    [route] = services({"id": "r", "auth": {"mode": "bearer", "bearer_token_sha256": digest}})[0]["ingress"]["routes"]
    headers = {"authorization": "Bearer t0ken"}
    assert p.credential_refusal(route, headers.get) is None
    assert p.credential_refusal(route, {}.get) == "missing bearer token"
    assert p.credential_refusal(route, {"authorization": "Bearer nope"}.get) == "invalid bearer token"
    [route] = services({"id": "r", "auth": {"mode": "header", "header_name": "x-key",
                                            "header_value_sha256": digest}})[0]["ingress"]["routes"]
    assert p.credential_refusal(route, {"X-Key": "t0ken"}.get) is None
    assert p.credential_refusal(route, {}.get) == "invalid header credential"
    assert p.consumed_header(route) == "x-key"


def test_a_token_bucket_allows_a_burst_then_one_request_per_refill():
    limits = p.RateLimits()
    key = ("sb", "app", "r")
    assert [limits.take(key, 1, 2, 100.0) for _ in range(3)] == [0.0, 0.0, 1.0]
    assert limits.take(key, 1, 2, 100.5) == pytest.approx(0.5)
    assert limits.take(key, 1, 2, 101.0) == 0.0
    assert p.retry_after_seconds(0.2) == 1


def test_the_buckets_are_bounded():
    limits = p.RateLimits(max_buckets=3)
    for i in range(10):
        limits.take(("sb", str(i), "r"), 1, 1, 0.0)
    assert len(limits._buckets) == 3
