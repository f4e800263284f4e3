"""One worker process: its settings, Deno command line, OS limits and set-up before exec, its folder."""
