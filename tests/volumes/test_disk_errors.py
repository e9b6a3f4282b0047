"""What a volume's disk tool reports reaches the caller in the contract's envelope: 507 for a full
disk, 404 for a volume deleted meanwhile, else 503 with the tool's words; never a bare 500."""
from __future__ import annotations

import errno

import pytest

from session_supervisor.domain.model.errors import InsufficientStorageError, UnavailableError
from session_supervisor.domain.model.volumes import VolumeNotFoundError
from session_supervisor.domain.volumes import disk_errors


@pytest.mark.parametrize("code, expected", [(errno.ENOSPC, InsufficientStorageError),
                                            (errno.EDQUOT, InsufficientStorageError),
                                            (errno.ENOENT, VolumeNotFoundError),
                                            (errno.EIO, UnavailableError),
                                            (errno.EBUSY, UnavailableError)])
def test_a_disk_tools_failure_becomes_the_error_a_caller_can_act_on(code, expected):
    with pytest.raises(expected) as raised, disk_errors("the volume's disk could not be made"):
        raise OSError(code, "mount failed: what the tool said")
    assert "the volume's disk could not be made" in str(raised.value) or expected is VolumeNotFoundError


def test_an_error_that_is_not_the_disks_passes_through_unchanged():
    with pytest.raises(KeyError), disk_errors("anything"):
        raise KeyError("a bug stays a bug")
