"""`python -m vllm_responses serve ...` (the guard matters: vLLM spawns worker processes that re-import it)."""

import sys

from vllm_responses.cli import main

if __name__ == "__main__":
    sys.exit(main())
