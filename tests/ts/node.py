"""Running a TypeScript suite's Node tools from the Python tests: `npm ci`, `tsc`, `node --test`.

Each suite folder (tests/ts, tests/ts/client) has its own package-lock.json; its
node_modules/ is installed from it, and again only when the lock file changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from pathlib import Path


async def run(
    suite: Path, *command: str, env: dict[str, str] | None = None, timeout: float = 300
) -> str:
    """Run `command` in `suite`; its combined output, or an AssertionError quoting its tail."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=suite,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    text = output.decode(errors="replace")
    if process.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {process.returncode}:\n{text[-8000:]}")
    return text


async def installed(suite: Path) -> None:
    """`npm ci` from the suite's checked-in lock file, again only when the lock file changed."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise AssertionError("node and npm are needed for the TypeScript client suites (Node 20+)")
    digest = hashlib.sha256((suite / "package-lock.json").read_bytes()).hexdigest()
    stamp = suite / "node_modules" / ".crux-lock-digest"
    if stamp.exists() and stamp.read_text() == digest:
        return
    # --ignore-scripts: nothing of the dependency tree runs at install time.
    await run(suite, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
    stamp.write_text(digest)
