"""The offline Pyodide distribution: its assembly and checks, wheels added to it, its start cache."""
