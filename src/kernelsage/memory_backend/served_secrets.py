"""The served database's secrets: the passwords its roles log in with, and its TLS certificate.

Each is made once and kept in the served directory, readable by its owner only, so that a restart serves the
same URL and nodes that check the certificate keep trusting it (a new one is made when the address changes).
The certificate comes from the openssl command: no library in kernelsage's dependencies makes one.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

from kernelsage.errors import DatabaseError

CERTIFICATE_DAYS = 3650


def certificate_command(address: str, certificate: Path, key: Path) -> list[str]:
    """The openssl command that writes a self-signed certificate (and its key) for `address`: its subject
    names the address, so clients may check it with sslmode=verify-full as well as verify-ca."""
    return ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-days", str(CERTIFICATE_DAYS), "-subj", "/CN=kernelsage served memory",
            "-addext", f"subjectAltName=IP:{address}", "-keyout", str(key), "-out", str(certificate)]


def secret(path: Path) -> str:
    """The secret kept in `path` (mode 0600), made once with a random value."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        value = path.read_text(encoding="utf-8").strip()
        if not value:
            raise DatabaseError(f"{path} is empty: delete it to have a new password made") from None
        return value
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        value = secrets.token_urlsafe(24)
        file.write(value + "\n")
    return value


def ensure_certificate(certificate: Path, key: Path, address: str) -> bool:
    """A certificate for `address` at `certificate` (its key at `key`), made when there is none or it names
    another address; True when one was made now (nodes that check it need the new one)."""
    named = certificate.with_name("address")  # the address the certificate was made for
    if certificate.is_file() and key.is_file() and kept(named) == address:
        return False
    if shutil.which("openssl") is None:
        raise DatabaseError("the openssl command is not installed: it makes the served database's TLS "
                            "certificate (install openssl, e.g. apt-get install openssl)")
    certificate.parent.mkdir(mode=0o700, exist_ok=True)
    new_certificate, new_key = (path.with_name(path.name + ".new") for path in (certificate, key))
    result = subprocess.run(certificate_command(address, new_certificate, new_key), capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise DatabaseError(f"openssl could not make the TLS certificate for {address} ({last})")
    new_key.chmod(0o600)
    new_key.replace(key)  # both replaced whole: a certificate is never paired with another's key for long
    new_certificate.replace(certificate)
    named.write_text(address + "\n", encoding="utf-8")
    return True


def kept(path: Path) -> str | None:
    """The value kept in `path`, None when there is none."""
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
