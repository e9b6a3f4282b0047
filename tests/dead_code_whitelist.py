"""Names the dead-code scan (``tests/test_dead_code.py``, vulture) cannot see used, each with why.

vulture reads this file as source: a name mentioned here counts as used. Add a name only with
its reason; a function nobody calls is removed, not listed. ``_`` stands for any object.
"""
# pyflakes: this file is never imported, only read by vulture.

# Read by a library from the object we hand it, not by our code.
_.RESPONSE_TIMEOUT  # Sanic reads its app.config (api/app.py)
_.REQUEST_TIMEOUT
_.KEEP_ALIVE_TIMEOUT
_.GRACEFUL_SHUTDOWN_TIMEOUT
_.WEBSOCKET_MAX_SIZE
_.request_max_size  # Sanic's request stream reads it (api/routes/files.py)
_.row_factory  # sqlite3 connections (infra/key_store.py, infra/sqlite_factory.py)
_.autocommit  # psycopg connections (infra/pg_key_store.py)
_.mtime  # tarfile writes the TarInfo fields (infra/workspace_checkpoint.py)
_.collect  # prometheus_client calls a registered collector's collect() (api/metrics.py)
snapshot_class  # eventsourcing's Application reads these class attributes (infra/event_store.py)
_.construct_mapper
originator_topic  # eventsourcing's aggregate and event classes (domain/model/events.py, sandbox.py)
class_version
_.upcast_v1_v2  # eventsourcing upcasts stored version-1 state through it

# Protocol methods the standard library calls (asyncio protocols, io.RawIOBase, http.server).
_.connection_made  # infra/process_io.py
_.data_received
_.eof_received
_.connection_lost
_.pause_writing
_.resume_writing
_.writable  # infra/workspace_checkpoint.py: a raw stream handed to tarfile / zstandard
_.readinto
_.do_POST  # BaseHTTPRequestHandler dispatches on the method name (tests/edges, tests/ui)
_.log_message
_.allow_reuse_address  # socketserver reads it before binding
protocol_version
disable_nagle_algorithm

# pyte's screen calls its listener's methods by name for each control sequence.
_.carriage_return  # api/client/terminal_text.py
_.backspace
_.tab
_.cursor_back
_.cursor_forward
_.cursor_to_column
_.erase_in_line

# The stand-in harnesses dispatch JSON-RPC requests to methods named after them (getattr).
_.account_read  # tests/harness_standin/codex.py
_.model_list
_.thread_start
_.thread_resume
_.thread_read
_.thread_list
_.thread_inject_items
_.turn_start
_.turn_interrupt
_.on_initialize  # tests/harness_standin/opencode.py
_.on_session_new
_.on_session_resume
_.on_session_list
_.on_session_prompt
_.on_session_cancel
_.on_get_state  # tests/harness_standin/pi.py
_.on_get_messages
_.on_prompt
_.on_abort
_.on_bash
_.on_set_session_name

# The module's lazy attribute protocol (PEP 562): ``from session_supervisor.client import Client``.
__getattr__  # api/client/__init__.py
__dir__

# Public client library surface, documented for users (docs/clients.md), not called inside the repo.
_.notifications  # api/client/harness.py
_.healthz  # api/client/operations.py

# Wire fields: dataclass fields filled from a server's JSON and read by the library's users.
updated_at  # api/client/access.py, api/client/models.py
claimed_at
exit_signal
exited_at
ready_at
start_reason
transmit_bytes  # domain/model/metrics.py: a sandbox's network counters, rendered as they are
receive_bytes
transmit_errors
receive_errors

# Enum members: values of the spec that are parsed by value (StrEnum(value)), never named.
RESTART  # domain/model/phases.py: runtime_recovery "restart"
DELAY  # readiness kind "delay"
PIPES  # io mode "pipes"

# pytest fixtures requested only by parameter name, for their set-up and tear-down.
ignoring_like_nohup  # tests/infra/test_signals.py

# Typed spec records (domain/model/session_spec.py) mirror the normalized spec field for field, so a
# reader finds every field there; the restart decision and retention still read the stored dict.
window_seconds
initial_backoff_ms
max_backoff_ms
max_age_seconds
ready_ns  # AttemptRecord: an attempt as the history stores it
