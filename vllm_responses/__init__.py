"""vllm-responses: the OpenAI Responses API over an in-process vLLM engine, with a sandboxed code interpreter."""

__version__ = "0.1.0"
