#!/usr/bin/env python3
"""An adapter process (docs/adapters.md) in front of dedup_service.py: a service with real effects
that de-duplicates by idempotency key. Configured by $REMIT_DEDUP_STATE and $REMIT_DEDUP_KILL (see
dedup_service.py), so the command line a trace records carries no test setting."""
import json
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dedup_service import Service  # noqa: E402

# A test may run remitvm with a small soft RLIMIT_FSIZE (a full disk for its trace); the service's
# own files are another disk.
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))

service = Service()
for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    reply = service.handle(request)
    sys.stdout.write(json.dumps({"id": request["id"], **reply}) + "\n")
    sys.stdout.flush()
