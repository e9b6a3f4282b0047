"""A journal store on a full disk is refused as a full disk (507), whichever write SQLite
could not do: a page ("database or disk is full") or its shared-memory index ("disk I/O
error"). Each test mounts its own tiny tmpfs (root, as CI runs) and unmounts it."""
from __future__ import annotations

import os
import sqlite3

import pytest

from session_supervisor.domain.model.errors import InsufficientStorageError, StoreUnavailableError
from session_supervisor.domain.store_faults import store_error
from session_supervisor.infra.event_store import SqliteJournal, full_disk_as_such
from tests.helpers import tmpfs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def full_disk(tmp_path):
    with tmpfs(tmp_path / "disk", "2m") as mount:
        with open(mount / "ballast", "wb") as ballast:
            try:
                while True:
                    ballast.write(b"\0" * 65536)
                    ballast.flush()
            except OSError:
                pass
        yield mount


def test_an_io_error_on_a_full_filesystem_is_a_full_disk(full_disk):
    error = full_disk_as_such(sqlite3.OperationalError("disk I/O error"), full_disk)
    assert isinstance(store_error(error), InsufficientStorageError)


def test_an_io_error_with_room_left_stays_an_io_error(tmp_path):
    error = full_disk_as_such(sqlite3.OperationalError("disk I/O error"), tmp_path)
    assert isinstance(store_error(error), StoreUnavailableError)


def test_a_new_store_that_cannot_be_made_on_a_full_disk_is_refused_as_a_full_disk(full_disk):
    for attempt in range(5):  # whichever file SQLite fails to write first
        with pytest.raises(Exception) as refused:
            SqliteJournal(full_disk / f"sandbox-{attempt}" / "state")
        assert isinstance(store_error(refused.value), InsufficientStorageError), repr(refused.value)
