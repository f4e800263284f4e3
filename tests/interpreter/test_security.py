"""Escape probes: each must fail inside the sandbox, and the pool must keep serving afterwards."""

from __future__ import annotations

import asyncio
import os
import pwd
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from interpreter_service.api import InterpreterError
from interpreter_service.dist.distribution import default_dist_dir
from interpreter_service.pool import PoolConfig, WorkerPool
from interpreter_service.process.launch import WorkerConfig, find_deno
from interpreter_service.process.sandbox_dir import resolve_user
from interpreter_service.process.worker import WorkerProcess

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parents[2]
PROJECT_FILE = str(ROOT / "pyproject.toml")
HOST_MARK = Path("/tmp") / f"vr-sandbox-pwned-{os.getpid()}"
DENIED = ("Requires", "NotCapable", "PermissionDenied")  # how Deno reports a missing permission


class Listener:
    """A TCP server on 127.0.0.1 that counts connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await asyncio.wait_for(reader.read(1024), 1.0)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> Listener:
        self.server = await asyncio.start_server(self._on_conn, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


NOT_IN_SANDBOX = ("is not available in the sandbox",)


def _probes(port: int) -> list[tuple[str, str, tuple[str, ...]]]:
    """(name, code, any-of substrings expected in the error) — each code must raise inside the sandbox."""
    url = f"http://127.0.0.1:{port}/"
    return [
        ("etc_passwd", "open('/etc/passwd').read()", ("FileNotFoundError",)),
        ("project_file", f"open({PROJECT_FILE!r}).read()", ("FileNotFoundError",)),
        ("deno_read", "import js\njs.Deno.readTextFileSync('/etc/passwd')", DENIED),
        ("deno_read_project", f"import js\njs.Deno.readTextFileSync({PROJECT_FILE!r})", DENIED),
        ("proc_environ", "import js\njs.Deno.readFileSync('/proc/self/environ')", DENIED),
        ("node_fs", "import js\njs.require('node:fs').readFileSync('/etc/passwd', 'utf8')", DENIED),
        (
            "nodefs_mount",
            "import pyodide_js, pyodide.ffi, os\nfs = pyodide_js.FS\nfs.mkdirTree('/host')\n"
            "fs.mount(fs.filesystems.NODEFS, pyodide.ffi.to_js({'root': '/etc'}), '/host')\nos.listdir('/host')",
            DENIED,
        ),
        ("env_python", "import os\nos.environ['VR_TEST_SECRET']", ("KeyError",)),
        ("deno_env", "import js\njs.Deno.env.get('VR_TEST_SECRET')", DENIED),
        ("deno_env_all", "import js\njs.Deno.env.toObject()", DENIED),
        # the worker keeps V8's collector (--expose-gc) to itself
        ("js_gc", "import js\njs.gc()", ("not callable",)),
        ("node_process_env", "import js\njs.require('node:process').env.toString()", DENIED),
        ("subprocess", "import subprocess\nsubprocess.run(['/usr/bin/id'])", ("does not support processes",)),
        ("deno_command", "import js\njs.eval(\"new Deno.Command('/usr/bin/id').outputSync()\")", DENIED),
        # a bare name fails even earlier: the worker's environment has no PATH
        (
            "deno_command_path",
            "import js\njs.eval(\"new Deno.Command('id').outputSync()\")",
            (*DENIED, "NotFound", "no path to search"),
        ),
        # require() refuses the module; a dynamic import gets it, and Deno's permissions refuse the run
        ("child_process", "import js\njs.require('node:child_process').execSync('id')", NOT_IN_SANDBOX),
        (
            "child_process_import",
            "from pyodide.code import run_js\n"
            "await run_js(\"import('node:child_process').then((m) => m.execSync('id'))\")",
            DENIED,
        ),
        (
            "run_js_read",
            "from pyodide.code import run_js\nrun_js(\"Deno.readTextFileSync('/etc/hostname')\")",
            DENIED,
        ),
        ("deno_write", f"import js\njs.Deno.writeTextFileSync({str(HOST_MARK)!r}, 'x')", DENIED),
        ("node_fs_write", f"import js\njs.require('node:fs').writeFileSync({str(HOST_MARK)!r}, 'x')", DENIED),
        ("dlopen_ffi", "import js, pyodide.ffi\njs.Deno.dlopen('libc.so.6', pyodide.ffi.to_js({}))", DENIED),
        ("sys_hostname", "import js\njs.Deno.hostname()", DENIED),
        ("js_fetch", f"import js\nawait js.fetch({url!r})", DENIED),
        ("pyfetch", f"from pyodide.http import pyfetch\nawait pyfetch({url!r})", DENIED),
        (
            "deno_connect",
            f"import js, pyodide.ffi\nawait js.Deno.connect(pyodide.ffi.to_js({{'hostname': '127.0.0.1', 'port': {port}}}))",
            DENIED,
        ),
        (
            "socket",
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)",
            ("OSError",),
        ),
        (
            "micropip_pypi",
            "import micropip\nawait micropip.install('requests')",
            ("Requires", "Can't fetch", "ValueError"),
        ),
        (
            "micropip_url",
            f"import micropip\nawait micropip.install('{url}evil-1.0-py3-none-any.whl')",
            ("Requires", "Can't fetch", "ValueError"),
        ),
    ]


@pytest.fixture(scope="module")
async def probe_container(pool: WorkerPool):
    info = await pool.create_container(name="probes")
    try:
        yield info.id
    finally:
        await pool.delete_container(info.id)


async def test_bridge_works_for_allowed_paths(pool: WorkerPool, probe_container: str) -> None:
    """Positive control: the JS bridge itself works, so the probes below fail on permissions, not on typos."""
    code = "import js\nlen(js.Deno.readTextFileSync(js.__dirname + '/pyodide-lock.json')) > 100"
    r = await pool.execute(probe_container, code)
    assert r.ok and r.logs == "True\n", r.logs


async def test_escape_probes_all_fail(pool: WorkerPool, probe_container: str) -> None:
    secret = os.environ["VR_TEST_SECRET"]
    host_passwd_lines = [ln for ln in Path("/etc/passwd").read_text().splitlines() if ln.startswith("root:")]
    async with asyncio.timeout(120), Listener() as server:
        failures = []
        for name, code, expected in _probes(server.port):
            r = await pool.execute(probe_container, code, timeout_s=15)
            text = f"{r.error}\n{r.logs}"
            if r.ok or r.error_kind not in ("exception", "crashed"):
                failures.append(f"{name}: did not fail ({r.error_kind}): {r.logs[-300:]}")
            elif not any(s in text for s in expected):
                failures.append(f"{name}: failed for an unexpected reason: {r.error}")
            if secret in text or any(ln in text for ln in host_passwd_lines):
                failures.append(f"{name}: leaked host data")
        await asyncio.sleep(0.5)
        assert server.connections == 0, "a sandboxed probe reached the host's TCP server"
    assert not HOST_MARK.exists(), "a sandboxed probe wrote to the host"
    assert not failures, "\n".join(failures)
    other = await pool.create_container()
    try:
        r = await pool.execute(other.id, "print('still serving')")
        assert r.ok and r.logs == "still serving\n"
    finally:
        await pool.delete_container(other.id)


async def test_runtime_tampering_does_not_leak_to_other_containers(
    pool: WorkerPool, probe_container: str
) -> None:
    a = probe_container
    b = (await pool.create_container()).id
    try:
        r = await pool.execute(a, "import builtins, js\nbuiltins.print = None\njs.globalThis.pwned = 1\n1")
        assert r.ok
        r = await pool.execute(b, "import js\nprint(hasattr(js.globalThis, 'pwned'))")
        assert r.ok and r.logs == "False\n"
    finally:
        await pool.delete_container(b)


async def test_allow_net_opt_in_reaches_only_listed_host(dist_dir: Path) -> None:
    """Positive control for the network probes: with `--allow-net=127.0.0.1:PORT` a fetch does get through."""
    async with asyncio.timeout(120), Listener() as server, Listener() as unlisted:
        w = WorkerProcess(
            WorkerConfig(dist_dir=dist_dir, allow_net=(f"127.0.0.1:{server.port}",), preload=())
        )
        try:
            await w.start()
            code = f"from pyodide.http import pyfetch\nr = await pyfetch('http://127.0.0.1:{server.port}/')\nawait r.string()"
            r = await w.execute(code, timeout_s=20)
            assert r.ok and r.logs == "'ok'\n", (r.error, r.logs)
            assert server.connections == 1
            r = await w.execute(
                f"import js\nawait js.fetch('http://127.0.0.1:{unlisted.port}/')", timeout_s=20
            )
            assert not r.ok and any(s in (r.error or "") for s in DENIED), r.error
            await asyncio.sleep(0.3)
            assert unlisted.connections == 0
        finally:
            await w.kill()


async def test_worker_process_has_no_server_env_and_minimal_permissions(
    pool: WorkerPool, probe_container: str
) -> None:
    """Read the live Deno process's environment and command line from /proc."""
    worker = pool._containers[probe_container].worker  # white-box: the container's process
    assert worker is not None and worker.pid is not None
    # nothing of the server's: only glibc's malloc threshold (launch.WORKER_ENV)
    assert Path(f"/proc/{worker.pid}/environ").read_bytes() == b"MALLOC_MMAP_THRESHOLD_=131072\0"
    argv = Path(f"/proc/{worker.pid}/cmdline").read_bytes().decode().split("\0")
    allows = [a for a in argv if a.startswith("--allow")]
    assert allows == [f"--allow-read={pool.cfg.dist_dir}"], allows
    assert "--no-prompt" in argv and not any(a.startswith(("-A", "--allow-all")) for a in argv)
    assert any(
        a.startswith("--v8-flags=--wasm-max-mem-pages=") and "--max-old-space-size=" in a for a in argv
    )


def _host_paths() -> list[str]:
    """Host paths sandboxed code must not learn: the real distribution (in the user's home), the home, the
    project, the virtual environment (where the Deno binary lives) and the server's working directory."""
    return [str(default_dist_dir()), str(Path.home()), str(ROOT), sys.prefix, os.getcwd(), find_deno()]


WHERE_PROBES = [
    ("deno_cwd", "import js\nprint(js.Deno.cwd())"),
    ("python_cwd", "import os\nprint(os.getcwd())"),
    ("main_module", "import js\nprint(js.Deno.mainModule)"),
    ("exec_path", "import js\nprint(js.Deno.execPath())"),
    ("dirname", "import js\nprint(js.__dirname)"),
    ("index_url", "import pyodide_js\nprint(pyodide_js._api.config.indexURL)"),
    ("environ", "import os\nprint(dict(os.environ))"),
    ("proc_self", "import os\nprint(os.listdir('/proc/self'), os.listdir('/proc/self/fd'))"),
    ("proc_cmdline", "print(open('/proc/self/cmdline').read())"),
    ("deno_proc_cmdline", "import js\nprint(js.Deno.readTextFileSync('/proc/self/cmdline'))"),
    ("require_resolve", "import js\nprint(js.require.resolve('x'))"),
    ("sys_path", "import sys\nprint(sys.path, sys.executable)"),
    ("deno_list_cwd", "import js\nprint(list(js.Deno.readDirSync('.')))"),
]


async def test_code_learns_no_host_path(pool: WorkerPool, container: str) -> None:
    """Where the worker runs, its script and binary, the distribution: all under the pool's neutral sandbox
    folder in the temp dir, and the working directory is one it cannot list."""
    sandbox = pool._sandbox  # white-box: the folder the pool made
    assert sandbox is not None and sandbox.root.parent == Path(tempfile.gettempdir())
    leaks = []
    async with asyncio.timeout(120):
        for name, code in WHERE_PROBES:
            r = await pool.execute(container, code, timeout_s=15)
            text = f"{r.error}\n{r.logs}"
            leaks += [f"{name}: {path!r} in {text[-300:]!r}" for path in _host_paths() if path in text]
        r = await pool.execute(container, "import js\nprint(js.Deno.cwd())")
        assert r.logs == f"{sandbox.cwd}\n" and r.logs.startswith(str(sandbox.root))
        r = await pool.execute(container, "import js\nlist(js.Deno.readDirSync('.'))")
        assert r.error_kind == "exception" and any(s in r.error for s in DENIED), r.error
    assert not leaks, "\n".join(leaks)
    assert stat.S_IMODE(sandbox.cwd.stat().st_mode) == 0o111  # not readable by anyone but root
    argv = Path(f"/proc/{pool._containers[container].worker.pid}/cmdline").read_bytes().split(b"\0")
    assert all(str(ROOT).encode() not in a and sys.prefix.encode() not in a for a in argv), argv


@pytest.mark.skipif(os.geteuid() != 0, reason="workers switch user only when the server runs as root")
async def test_workers_run_as_nobody_when_root(pool: WorkerPool, container: str) -> None:
    nobody = pwd.getpwnam("nobody")
    pids = [w.pid for w in pool._warm.idle] + [c.worker.pid for c in pool._containers.values() if c.worker]
    assert pids
    for pid in pids:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        assert status["Uid"].split() == [str(nobody.pw_uid)] * 4, (pid, status["Uid"])
        assert status["Gid"].split() == [str(nobody.pw_gid)] * 4, (pid, status["Gid"])
        assert status["Groups"].split() == []  # no supplementary groups (root's are dropped)
        assert status["NoNewPrivs"].strip() == "1" and int(status["CapEff"], 16) == 0, (pid, status)
        limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
        core = [x for x in limits if x.startswith("Max core")]
        assert core and core[0].split()[4:6] == ["0", "0"], core
        data = [x for x in limits if x.startswith("Max data size")]  # RLIMIT_DATA, set once it was ready
        assert data and data[0].split()[3:5] != ["unlimited", "unlimited"], data
    r = await pool.execute(container, "print('still works')")
    assert r.ok and r.logs == "still works\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="workers switch user only when the server runs as root")
async def test_an_empty_user_keeps_the_servers_own(dist_dir: Path) -> None:
    async with (
        asyncio.timeout(120),
        WorkerPool(PoolConfig(workers=1, spares=0, dist_dir=dist_dir, preload=(), user="")) as p,
    ):
        (w,) = p._warm.idle
        uids = dict(line.split(":", 1) for line in Path(f"/proc/{w.pid}/status").read_text().splitlines())
        assert uids["Uid"].split()[0] == "0"


def test_worker_user_resolution() -> None:
    with pytest.raises(InterpreterError, match="does not exist"):
        resolve_user("no-such-user-here")
    assert resolve_user("") is None
    if os.geteuid() == 0:
        nobody = resolve_user(None)
        assert nobody is not None and nobody.name == "nobody" and nobody.uid == pwd.getpwnam("nobody").pw_uid
    else:
        assert resolve_user(None) is None
        with pytest.raises(InterpreterError, match="needs the server to run as root"):
            resolve_user("nobody")
