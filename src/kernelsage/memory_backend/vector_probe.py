"""Does the embedded server's pgvector run on this CPU? A throwaway server answers one vector query.

Run as `python -m kernelsage.memory_backend.vector_probe`: exit 0 when it does, 3 when the server's backend
died of an illegal instruction (the build uses CPU instructions this machine lacks: scripts/install.sh then
builds pgvector for this CPU), 1 on any other failure. Each outcome prints one line.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

from kernelsage.memory_backend.embedded import VECTOR_PROBE, crash_in_log

WORKS, CRASHES, OTHER = 0, 3, 1


def probe(data_dir: Path) -> tuple[int, str]:
    """Start a server in data_dir (deleted afterwards), run the vector probe, and say how it went."""
    import pgserver
    import psycopg

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        server = pgserver.get_server(data_dir, cleanup_mode="delete")
    try:
        try:
            with psycopg.connect(str(server.get_uri()), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(VECTOR_PROBE)
        except psycopg.Error as exc:
            if crash_in_log(data_dir) is not None:
                _kill(server)  # after the crash, a clean stop waits out its whole timeout (60 s, seen)
                return CRASHES, "pgvector crashes on this CPU (illegal instruction): its build needs instructions " \
                                "this machine lacks"
            return OTHER, f"the vector probe failed: {str(exc).strip().splitlines()[0][:200]}"
        return WORKS, "pgvector runs on this CPU"
    finally:
        server.cleanup()


def _kill(server) -> None:
    """Kill the throwaway server's postmaster; the data directory goes with cleanup()."""
    import psutil

    pid = server.get_pid()
    if pid is None:
        return
    try:
        process = psutil.Process(pid)
        process.kill()
        process.wait(10)
    except (psutil.NoSuchProcess, psutil.TimeoutExpired):
        pass


def main() -> int:
    try:
        import pgserver  # noqa: F401
    except ImportError:
        print("the embedded server (kernelsage[embedded]) is not installed: nothing to probe")
        return OTHER
    with tempfile.TemporaryDirectory(prefix="kernelsage-vector-probe-") as tmp:
        try:
            code, line = probe(Path(tmp) / "pgdata")
        except Exception as exc:  # pgserver raises plain exceptions carrying the whole server log
            code, line = OTHER, f"the embedded server did not start: {str(exc).strip().splitlines()[-1][:200]}"
    print(line)
    return code


if __name__ == "__main__":
    sys.exit(main())
