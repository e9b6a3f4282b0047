"""OpenAPI entries for a sandbox's edges: services, observability and metrics.
The ingress itself (exposure hosts and the path form) is a proxy, not an API
operation: docs/edges.md describes it."""
from __future__ import annotations

from .openapi_schemas import BOOL, INT32, STR, STR_MAP, TIME, array, enum, obj, ref

SB = "/api/v1/sandboxes/{sandbox_id}"
_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}

SCHEMAS = {
    "SandboxAppServiceRoute": obj({
        "id": STR, "resume": BOOL, "path_prefix": STR, "methods": array(STR, maxItems=16),
        "rewrite_prefix": STR,
        "auth": obj({"mode": enum("none", "bearer", "header"), "bearer_token_sha256": STR, "header_name": STR,
                     "header_value_sha256": STR}, ("mode",)),
        "cors": obj({"allowed_origins": array(STR), "allowed_methods": array(STR), "allowed_headers": array(STR),
                     "expose_headers": array(STR), "allow_credentials": BOOL, "max_age_seconds": INT32}),
        "rate_limit": obj({"rps": INT32, "burst": INT32}, ("rps", "burst")), "timeout_seconds": INT32},
        ("id", "resume")),
    "SandboxAppService": obj({
        "id": STR, "display_name": STR, "port": _PORT,
        "ingress": obj({"public": BOOL, "routes": array(ref("SandboxAppServiceRoute"), maxItems=32)}),
        "runtime": obj({"type": enum("manual", "cmd"), "command": array(STR), "cwd": STR, "env_vars": STR_MAP},
                       ("type",)),
        "health_check": obj({"path": STR})}, ("id", "ingress")),
    "SandboxAppServiceView": {"allOf": [ref("SandboxAppService"), obj({
        "publishable": BOOL, "publish_blockers": array(enum("not_public", "missing_runtime", "manual_runtime",
                                                            "missing_command", "missing_function")),
        "public_url": STR}, ("publishable",))]},
    "SandboxServicesUpdateRequest": obj({"services": array(ref("SandboxAppService"))}, ("services",)),
    "SandboxServices": obj({"sandbox_id": STR, "services": array(ref("SandboxAppServiceView")),
                            "exposure_domain": STR}, ("sandbox_id", "services")),
    "SandboxObservabilityLogs": obj({"logs": array(obj({
        "team_id": STR, "sandbox_id": STR, "region_id": STR, "cluster_id": STR, "occurred_at": TIME,
        "ingested_at": TIME, "message": STR, "cursor": STR, "context_id": STR, "process_id": STR,
        "stream": enum("stdout", "stderr", "pty"), "attributes": {"type": "object"}},
        ("team_id", "sandbox_id", "region_id", "cluster_id", "occurred_at", "ingested_at", "message", "cursor"))),
        "next_cursor": STR, "watermark": STR}, ("logs",)),
    "SandboxObservabilityEvents": obj({"events": array({"type": "object", "description": "SandboxObservabilityEvent: "
                                                        "event_id, schema_version 2, actor, resource, producer, "
                                                        "integrity (signature_status unavailable), attributes"}),
                                       "next_cursor": STR, "watermark": STR}, ("events",)),
    "SandboxRuntimeMetrics": obj({"start_time": TIME, "end_time": TIME, "step_seconds": INT32,
                                  "series": array({"type": "object"}), "freshness": {"type": "object"},
                                  "gaps": array({"type": "object"}), "partial": BOOL},
                                 ("start_time", "end_time", "step_seconds", "series", "freshness", "gaps", "partial")),
    "SandboxRuntimeMetricsCatalog": obj({"metrics": array(obj({
        "name": STR, "kind": enum("gauge", "counter"), "unit": STR, "dimensions": array(STR), "description": STR},
        ("name", "kind", "unit", "dimensions", "description")))}, ("metrics",)),
}


def edge_paths(operation, query) -> dict:
    """``operation`` is openapi.py's builder (passed in: no import cycle)."""
    s, o = {"tag": "services"}, {"tag": "observability"}
    window = [query("start_time", TIME), query("end_time", TIME), query("limit", {"type": "integer", "minimum": 1}),
              query("cursor", STR), query("watch", BOOL)]
    events = [query(name, STR) for name in ("source", "event_type", "outcome", "actor_kind", "actor_id", "action",
                                            "resource_type", "operation_id", "event_id")]
    metrics = [query("start_time", TIME), query("end_time", TIME), query("metrics", STR),
               query("step_seconds", {"type": "integer", "minimum": 1, "maximum": 86400}),
               query("statistic", enum("auto", "average", "last", "maximum", "minimum", "rate")),
               query("max_points", {"type": "integer", "minimum": 1, "maximum": 1000})]
    return {
        SB + "/observability/logs": {"get": operation(
            "list_sandbox_logs", "Sessions' and contexts' output lines (watch=true: NDJSON)",
            {200: ref("SandboxObservabilityLogs")}, (400, 401, 404), params=window + [
                query("context_id", STR), query("stream", enum("stdout", "stderr", "pty"))], **o)},
        SB + "/observability/events": {"get": operation(
            "list_sandbox_observability_events", "Lifecycle, process, API and network policy events "
            "(watch=true: NDJSON)", {200: ref("SandboxObservabilityEvents")}, (400, 401, 404),
            params=window + events, **o)},
        SB + "/metrics": {"get": operation("get_sandbox_metrics", "Runtime metrics from the sandbox's cgroups",
                                           {200: ref("SandboxRuntimeMetrics")}, (400, 401, 404), params=metrics, **o)},
        SB + "/metrics/catalog": {"get": operation("get_sandbox_metrics_catalog", "The metrics there are",
                                                   {200: ref("SandboxRuntimeMetricsCatalog")}, (401, 404), **o)},
        SB + "/services": {
            "get": operation("get_sandbox_services", "The sandbox's services with their public URLs",
                             {200: ref("SandboxServices")}, (401, 404), **s),
            "put": operation("update_sandbox_services", "Replace the services ([] clears them)",
                             {200: ref("SandboxServices")}, (400, 401, 404, 503), "SandboxServicesUpdateRequest",
                             **s)},
    }



