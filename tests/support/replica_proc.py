"""A gateway replica in a process of its own, over the fake engine (slow output), the fake embedder and a shared
`--db`, for the tests that kill one with SIGKILL: `python -m tests.support.replica_proc DB REPLICA_ID [LEASE_S] [stuck]`
(`stuck`: the embedder's calls never end, so that a vector store file stays in its ingestion); prints its base URL
when up."""

from __future__ import annotations

import sys
import threading
import time

from tests.support.fake_embedder import FakeEmbedder
from tests.support.fakes import FakeEngine, FakeInterpreter, say
from tests.support.serving import LiveServer
from vllm_responses.config import Config


def main() -> None:
    db, replica_id = sys.argv[1], sys.argv[2]
    lease = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    embedder = FakeEmbedder(max_input_tokens=100_000)
    if sys.argv[4:] == ["stuck"]:
        embedder.gate = threading.Event()  # never opened
    engine = FakeEngine()
    engine.reset(say("slow " * 2000), delay=0.05)  # ~100 s of output: still running when killed
    config = Config(replica_id=replica_id, replica_heartbeat=0.2, replica_lease=lease)
    server = LiveServer(config, engine, FakeInterpreter(), db=db, open_embedder=embedder.opener).start()
    print(server.base_url, flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
