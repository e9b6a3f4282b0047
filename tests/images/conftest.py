"""A hardened server whose image store holds the Debian trixie test image."""
from __future__ import annotations

import pytest

from session_supervisor.infra.images import ImageStore, store_root
from tests.conftest import make_http
from tests.helpers import TOKEN
from tests.serverproc import ServerProcess

from .fixtures import debian_image


@pytest.fixture(scope="module")
def image_server(tmp_path_factory):
    data = tmp_path_factory.mktemp("image-data")
    image = ImageStore(store_root(data)).import_archive(debian_image(), "trixie")
    proc = ServerProcess(data, token=TOKEN, runtime="bwrap")
    proc.start()
    proc.image_reference = image.reference
    yield proc
    proc.stop()


@pytest.fixture
def image_http(image_server):
    with make_http(image_server.url) as client:
        yield client
