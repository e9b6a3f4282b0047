"""OpenAPI entries for the context and file routes (the SDKs' ``apispec/api/contexts|files``)."""
from __future__ import annotations

from .openapi_schemas import BOOL, NO_NUL, STR, STR_MAP, TIME, array, enum, obj, ref

CTX = "/api/v1/sandboxes/{sandbox_id}/contexts"
FILES = "/api/v1/sandboxes/{sandbox_id}/files"
_SIGNED = {"type": "integer"}
_SIZE = {"type": "integer", "minimum": 1, "maximum": 10000}
_FINISH = {"stdout": STR, "stderr": STR, "exit_code": _SIGNED, "state": enum("stopped", "killed", "crashed")}

SCHEMAS = {
    "CreateContextRequest": obj({
        "type": enum("repl", "cmd"),
        "repl": obj({"alias": enum("python", "python3", "bash", "sh", "node", "nodejs", "javascript", "js",
                                   "shell"), "input": STR}),
        "cmd": obj({"command": array(NO_NUL, minItems=1)}, ("command",)),
        "wait_until_done": BOOL, "cwd": STR, "env_vars": STR_MAP,
        "pty_size": obj({"rows": _SIZE, "cols": _SIZE}),
        "idle_timeout_sec": {"type": "integer", "minimum": 0}, "ttl_sec": {"type": "integer", "minimum": 0}},
        # Without a type, a body with cmd is a command and any other a REPL; repl with a command
        # context, or cmd with a REPL, is refused (400).
        anyOf=[{"properties": {"type": {"const": "cmd"}}, "required": ["cmd"], "not": {"required": ["repl"]}},
               {"properties": {"type": {"const": "repl"}}, "not": {"required": ["cmd"]}}]),
    "Context": obj({"id": STR, "type": enum("repl", "cmd"), "running": BOOL, "paused": BOOL, "created_at": TIME,
                    "alias": STR, "command": array(STR), "cwd": STR, "env_vars": STR_MAP, "output_raw": STR,
                    **_FINISH}, ("id", "type", "running", "paused", "created_at")),
    "ContextList": obj({"contexts": array(ref("Context"))}, ("contexts",)),
    "ContextInputRequest": obj({"data": STR}, ("data",)),
    "ContextExecResponse": obj({"output_raw": STR, **_FINISH}, ("output_raw",)),
    "ContextResizeRequest": obj({"rows": _SIZE, "cols": _SIZE}, ("rows", "cols")),
    "ContextSignalRequest": obj({"signal": STR}, ("signal",)),
    "FileInfo": obj({"name": STR, "path": STR, "type": enum("file", "dir", "symlink"),
                     "size": {"type": "integer", "minimum": 0}, "mode": STR, "mod_time": TIME, "is_link": BOOL,
                     "link_target": STR}),
    "FileList": obj({"entries": array(ref("FileInfo"))}, ("entries",)),
    "FileContent": obj({"content": STR, "encoding": enum("base64")}),
    "MoveFileRequest": obj({"source": {**NO_NUL, "minLength": 1}, "destination": {**NO_NUL, "minLength": 1}},
                           ("source", "destination")),
    **{name: obj({key: {"const": True}}, (key,)) for name, key in (
        ("Written", "written"), ("Created", "created"), ("Deleted", "deleted"), ("Moved", "moved"),
        ("Signaled", "signaled"), ("Resized", "resized"))},
}


def workspace_paths(operation, query, upgrade) -> dict:
    """``operation``/``query``/``upgrade`` are openapi.py's builders (passed in: no import cycle)."""
    c = {"tag": "contexts"}
    f = {"tag": "files"}
    path = [{**query("path", {**NO_NUL, "minLength": 1}, "a sandbox path under /workspace or /tmp (relative: "
                                                         "under /workspace)"), "required": True}]
    one = CTX + "/{context_id}"
    ctx_errors = (400, 401, 404, 409, 503)
    file_errors = (400, 401, 403, 404, 409, 503)
    return {
        CTX: {"get": operation("list_contexts", "List contexts", {200: ref("ContextList")}, (401, 404, 503), **c),
              "post": operation("create_context", "Start a REPL or command context (wait_until_done waits)",
                                {201: ref("Context")}, (400, 401, 404, 408, 410, 500, 503), "CreateContextRequest",
                                **c)},
        one: {"get": operation("get_context", "Get a context", {200: ref("Context")}, (401, 404, 503), **c),
              "delete": operation("delete_context", "End and forget a context", {200: ref("Deleted")},
                                  (401, 404, 503), **c)},
        one + "/restart": {"post": operation("restart_context", "A new process, same request",
                                             {200: ref("Context")}, (401, 404, 500, 503), **c)},
        one + "/input": {"post": operation("context_input", "Write input as given", {200: ref("Written")},
                                           (*ctx_errors, 410), "ContextInputRequest", **c)},
        one + "/exec": {"post": operation("context_exec", "Submit input; the output up to the next prompt",
                                          {200: ref("ContextExecResponse")}, (*ctx_errors, 408, 410),
                                          "ContextInputRequest", **c)},
        one + "/resize": {"post": operation("context_resize", "Resize the PTY", {200: ref("Resized")},
                                            ctx_errors, "ContextResizeRequest", **c)},
        one + "/signal": {"post": operation("context_signal", "Signal the process group", {200: ref("Signaled")},
                                            ctx_errors, "ContextSignalRequest", **c)},
        one + "/ws": {"get": {**operation("connect_context", "WebSocket: retained output, live output, done",
                                          {101: upgrade}, (401, 404, 426, 503), **c),
                              "x-websocket": {"server": "{type: output, source, data} | {type: done, exit_code, "
                                                        "state} | {type: done, request_id}",
                                              "client": "{type: input, data, request_id} | {type: resize, rows, "
                                                        "cols} | {type: signal, signal}"}}},
        FILES: {
            "get": operation("read_file", "Read a file (octet-stream; JSON base64 with Accept: application/json)",
                             {200: {"description": "the bytes", "content": {
                                 "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                                 "application/json": {"schema": ref("FileContent")}}}}, (*file_errors, 413),
                             params=path, **f),
            "post": operation("write_file", "Write a file atomically (body: the bytes), or mkdir=true",
                              {200: ref("Written"), 201: ref("Created")}, file_errors,
                              params=[*path, query("mkdir", BOOL), query("recursive", BOOL)], **f),
            "delete": operation("delete_file", "Delete a file, a link or a directory tree",
                                {200: ref("Deleted")}, file_errors, params=path, **f)},
        FILES + "/stat": {"get": operation("stat_file", "Stat a path (links are not followed)",
                                           {200: ref("FileInfo")}, file_errors, params=path, **f)},
        FILES + "/list": {"get": operation("list_files", "List a directory", {200: ref("FileList")}, file_errors,
                                           params=path, **f)},
        FILES + "/move": {"post": operation("move_file", "Rename within the sandbox", {200: ref("Moved")},
                                            file_errors, "MoveFileRequest", **f)},
        FILES + "/watch": {"get": {**operation("watch_files", "WebSocket: subscribe to a directory's changes",
                                               {101: upgrade}, (401, 404, 426, 503), **f),
                                   "x-websocket": {"client": "{action: subscribe, path, recursive} | "
                                                             "{action: unsubscribe, watch_id}",
                                                   "server": "{type: subscribed|unsubscribed|event|error, "
                                                             "watch_id, event, path, error}"}}},
    }
