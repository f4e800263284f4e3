"""The in-process pool: containers each owning a worker; warm workers, admission, charges, expiry, watchdog."""

from interpreter_service.pool.config import PoolConfig
from interpreter_service.pool.pool import WorkerPool

__all__ = ["PoolConfig", "WorkerPool"]
