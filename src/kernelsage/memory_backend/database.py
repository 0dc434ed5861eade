"""Connections to the memory database: DATABASE_URL or the embedded server, a pool, clear failures."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TypeVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from kernelsage.errors import DatabaseError
from kernelsage.memory_backend.embedded import embedded_database_url

CONNECT_ATTEMPTS = 4
TRANSACTION_ATTEMPTS = 8  # whole-transaction retries when the server reports a deadlock or serialization failure
_RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
# What the database refuses about the data itself (a value out of range, a row over a limit, a character it
# cannot hold, a constraint): the same statement fails again, so it is not retried.
REFUSED_DATA = (psycopg.DataError, psycopg.IntegrityError, psycopg.errors.ProgramLimitExceeded, UnicodeEncodeError)
T = TypeVar("T")


def database_url(data_dir: Path | None = None) -> str:
    """DATABASE_URL when set (checked to be a connection string), else the embedded server's URI."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        return embedded_database_url(data_dir)
    check_url(url, "DATABASE_URL")
    return url


def check_url(url: str, what: str = "the database URL") -> None:
    """A one-line DatabaseError when `url` is not a PostgreSQL connection string."""
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise DatabaseError(
            f"{what} is not a valid PostgreSQL connection string ({_one_line(exc)}): use the form "
            "postgresql://USER:PASSWORD@HOST:5432/DBNAME, or unset DATABASE_URL to use the embedded server"
        ) from None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def refusal(exc: BaseException) -> str:
    """A refusal of the database (REFUSED_DATA) in one line: its SQLSTATE and first line."""
    state = getattr(exc, "sqlstate", None)
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"{state}: {first}" if state else first


def redact(url: str) -> str:
    """The URL with its password hidden, for messages."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<unparseable connection string>"
    if params.get("password"):
        params["password"] = "***"
    return make_conninfo("", **params)


@retry(
    retry=retry_if_exception_type(psycopg.OperationalError),
    stop=stop_after_attempt(CONNECT_ATTEMPTS),
    wait=wait_exponential_jitter(multiplier=0.2, max=2.0, jitter=0.2),
    reraise=True,
)
def _connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True, connect_timeout=5)


def ensure_vector_extension(url: str) -> None:
    """Check the server is reachable and has pgvector, creating the extension if allowed."""
    check_url(url)
    try:
        conn = _connect(url)
    except psycopg.OperationalError as exc:
        raise DatabaseError(
            f"cannot reach the memory database at {redact(url)} after {CONNECT_ATTEMPTS} attempts: "
            f"{_one_line(exc)}. Start the server, fix DATABASE_URL, or unset it to use the embedded server"
        ) from exc
    with conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise DatabaseError(
                f"the database at {redact(url)} has no usable pgvector extension ({_one_line(exc)}): "
                "install pgvector and run CREATE EXTENSION vector as a superuser, or unset DATABASE_URL "
                "to use the embedded server"
            ) from exc


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)
    conn.row_factory = dict_row  # type: ignore[assignment]


def open_pool(url: str, *, max_size: int = 4) -> ConnectionPool:
    """A connection pool whose connections know pgvector types and return rows as dicts."""
    ensure_vector_extension(url)
    pool = ConnectionPool(
        url, min_size=1, max_size=max_size, configure=_configure, open=False,
        kwargs={"connect_timeout": 5},
    )
    try:
        pool.open(wait=True, timeout=15)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot open a connection pool to {redact(url)}: {exc}") from exc
    return pool


@contextmanager
def autocommit(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """A pooled connection in autocommit mode for the block (each statement one round trip, no BEGIN or
    COMMIT around it), set back before it returns to the pool (closed, which the pool discards, when it
    cannot be)."""
    conn.autocommit = True
    try:
        yield conn
    finally:
        try:
            conn.autocommit = False
        except psycopg.Error:
            conn.close()


@contextmanager
def transaction(pool: ConnectionPool) -> Iterator[psycopg.Connection]:
    """A connection of the pool inside one transaction: committed when the block ends, rolled back on error."""
    with pool.connection() as conn, conn.transaction():
        yield conn


def run_transaction(pool: ConnectionPool, work: Callable[[psycopg.Connection], T], *, snapshot: bool = False,
                    pipeline: bool = False, attempts: int = TRANSACTION_ATTEMPTS) -> T:
    """`work(conn)` inside one transaction, re-run from the start (a bounded number of times, with jittered
    back-off) when the server aborts it for a deadlock or a serialization failure, so such a transaction
    is never lost. `work` must therefore only touch the database and values it recomputes.

    `snapshot` runs it at REPEATABLE READ (said in its BEGIN): every statement sees the same snapshot of the
    database. `pipeline` runs it in pipeline mode: the BEGIN travels with the first statement, statements
    whose results `work` does not read wait for the next one it does, the last ones travel with the COMMIT
    (one round trip per read instead of one per statement). `work` must then not use COPY, nor read a
    cursor's `rowcount` before its results were fetched.
    """
    for attempt in range(1, attempts + 1):
        try:
            with pool.connection() as conn:
                return _in_transaction(conn, work, snapshot=snapshot, pipeline=pipeline)
        except _RETRYABLE as exc:
            if attempt == attempts:
                raise DatabaseError(
                    f"a memory transaction was aborted {attempts} times by concurrent ones ({_one_line(exc)}): "
                    "nothing was changed; retry later or run fewer workers on one namespace"
                ) from exc
            time.sleep(random.uniform(0.0, min(0.5, 0.01 * 2**attempt)))
    raise AssertionError("unreachable")


def _in_transaction(conn: psycopg.Connection, work: Callable[[psycopg.Connection], T], *, snapshot: bool,
                    pipeline: bool) -> T:
    """One attempt of run_transaction on a pooled connection. The isolation level is the connection's
    setting for its next BEGIN (no statement of its own), set back before the connection returns to the
    pool (a connection that cannot be is closed, which the pool discards)."""
    if snapshot:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    try:
        with conn.pipeline() if pipeline else nullcontext(), conn.transaction():
            return work(conn)
    finally:
        if snapshot:
            try:
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.rollback()
                conn.isolation_level = None
            except psycopg.Error:
                conn.close()
