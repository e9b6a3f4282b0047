"""The tag of one server's data dir: what it leaves on the host (network namespaces, the host
ends of veth pairs, its nftables table, its cgroups) carries it, so the next server over the
same data dir finds and removes exactly that, and never another server's."""
from __future__ import annotations

import hashlib
import os


def instance_tag(data_dir: str) -> str:
    return hashlib.sha256(os.path.realpath(data_dir).encode()).hexdigest()[:8]
