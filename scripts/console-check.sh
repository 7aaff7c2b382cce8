#!/usr/bin/env bash
# The admin console in a real browser (docs/operating.md "The console"):
# headless Chromium from Debian's packages, the credential `certs admin
# --p12` wrote imported into its NSS database with pk12util, picked by the
# AutoSelectCertificateForUrls policy; it loads the pending page, sees a
# node (the project's agent) appear without a reload, is refused a
# mistyped fingerprint, approves with the right one, and the node is then
# admitted. A browser without the credential never gets a page (the
# handshake is refused). Screenshots go to target/console-check/.
#
# Installs chromium and libnss3-tools when missing; says SKIPPED where
# they cannot be installed, or where a private mount namespace (for the
# policy, never written to the host's /etc) is refused.
#
#   scripts/console-check.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/debug/janus-registration}")
shots=$(realpath -m target/console-check)
skip() { echo "console-check: SKIPPED: $*"; exit 0; }

if ! command -v chromium >/dev/null 2>&1 || ! command -v pk12util >/dev/null 2>&1; then
  apt-get install -y -qq chromium libnss3-tools >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium libnss3-tools >/dev/null 2>&1; } ||
    skip "chromium or libnss3-tools cannot be installed"
fi
venv=target/console-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import websocket' 2>/dev/null; then
  python3 -m venv "$venv" >/dev/null 2>&1 || { apt-get install -y -qq python3-venv >/dev/null 2>&1 && python3 -m venv "$venv"; } ||
    skip "no python3 venv"
  "$venv/bin/pip" install -q websocket-client || skip "websocket-client cannot be installed from PyPI"
fi
[ -d /etc/chromium ] || skip "Debian's chromium left no /etc/chromium to read its policy from"
unshare -m --propagation private true 2>/dev/null || skip "no private mount namespace (unshare -m) for the browser's policy"

work=$(mktemp -d)
server_pid=
evil_pid=
cleanup() {
  [ -n "$evil_pid" ] && kill "$evil_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  # The browser's processes write into $work until they are gone.
  pkill -f "$work/" 2>/dev/null || true
  for _ in $(seq 50); do
    pgrep -f "$work/" >/dev/null || break
    sleep 0.1
  done
  pkill -9 -f "$work/" 2>/dev/null || true
  rm -rf "$work" || rm -rf "$work"
}
trap cleanup EXIT
rm -rf "$shots" && mkdir -p "$shots"
cd "$work"

"$bin" certs fleet --out fleet >/dev/null
"$bin" certs controller --fleet fleet --out controller >/dev/null
"$bin" certs admin-ca --out admin-ca >/dev/null
printf 'console-check password\n' >p12-password
"$bin" certs admin --ca admin-ca --name alice --scope read --scope approve --scope reject \
  --out alice --p12 --p12-password-file p12-password >/dev/null
mkdir state
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
admin_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve --listen "127.0.0.1:$port" --fleet fleet --cert controller.crt --key controller.key --state state \
  --admin-listen "127.0.0.1:$admin_port" --admin-ca admin-ca/admin-ca.crt 2>serve.log &
server_pid=$!
until "$bin" healthcheck --addr "127.0.0.1:$port" 2>/dev/null; do
  kill -0 "$server_pid" 2>/dev/null || { cat serve.log; exit 1; }
  sleep 0.2
done

# The browser's own NSS database: the fleet's root trusted for servers,
# the credential from its PKCS#12, as a person imports them.
for who in with without; do
  mkdir -p "home-$who/.pki/nssdb"
  certutil -N -d "sql:home-$who/.pki/nssdb" --empty-password
  certutil -A -d "sql:home-$who/.pki/nssdb" -n "janus fleet root" -t "C,," -i fleet/root.crt
done
pk12util -i alice.p12 -d sql:home-with/.pki/nssdb -w p12-password | sed 's/^/console-check: /'
# The policy that picks the credential without a prompt, in /etc/chromium
# as this namespace alone sees it.
mkdir -p etc-chromium/policies/managed
cp -a /etc/chromium/. etc-chromium/ 2>/dev/null || true
origin="https://controller.fleet.janus:$admin_port"
printf '{"AutoSelectCertificateForUrls": ["{\\"pattern\\":\\"%s\\",\\"filter\\":{\\"ISSUER\\":{\\"CN\\":\\"janus-registration admin CA\\"}}}"]}\n' \
  "$origin" >etc-chromium/policies/managed/janus-console.json
browser() { # HOME-DIR ARGS...
  local home=$1
  shift
  # $0 and $@ are the inner shell's: the policy directory, then the browser's command.
  # shellcheck disable=SC2016
  unshare -m --propagation private sh -c 'mount --bind "$0" /etc/chromium && exec "$@"' \
    "$work/etc-chromium" env HOME="$work/$home" chromium --headless --no-sandbox --disable-gpu \
    --no-first-run --user-data-dir="$work/profile-$home/" \
    --host-resolver-rules="MAP controller.fleet.janus 127.0.0.1" "$@"
}

browser home-with --remote-debugging-port=0 --remote-allow-origins='*' about:blank 2>browser.log &
devtools=""
for _ in $(seq 100); do
  devtools=$(head -1 "profile-home-with/DevToolsActivePort" 2>/dev/null || true)
  [ -n "$devtools" ] && break
  sleep 0.1
done
[ -n "$devtools" ] || { cat browser.log; echo "console-check: the browser did not start"; exit 1; }

"$bin" user-data announce --fleet fleet --hostname web-7 --address "127.0.0.1:$port" >web-7.user-data.json
# agent --once exits 2 while the node is pending.
announce="$bin agent --user-data web-7.user-data.json --dir web-7-node --once || [ \$? = 2 ]"
said=$("$OLDPWD/$venv/bin/python" -u "$OLDPWD/scripts/console-browser.py" "$devtools" "$origin/console/" "$shots" \
  sh -c "$announce") || { printf '%s\n' "$said"; exit 1; }
printf '%s\n' "$said" | sed '$d'
name=$(printf '%s\n' "$said" | tail -1)
[ "$name" = web-7 ] || { echo "console-check: the page showed $name, not web-7"; exit 1; }
"$bin" agent --dir web-7-node --once >agent.log 2>&1 || { cat agent.log; echo "console-check: web-7 not admitted"; exit 1; }
grep -h '"event":"admitted"' state/audit/*.jsonl | grep -q '"user":"console (alice)"' ||
  { echo "console-check: the approval is not audited under alice"; exit 1; }
# Another site's page in the admin's browser (the credential picked for it
# without a prompt, as for the console): a cross-site form and a no-cors
# fetch to the API's reject route, and two frames of each event stream.
# Nothing is rejected, and the credential's stream slots stay free.
"$bin" user-data announce --fleet fleet --hostname web-8 --address "127.0.0.1:$port" >web-8.user-data.json
"$bin" agent --user-data web-8.user-data.json --dir web-8-node --once >/dev/null 2>&1 || [ $? = 2 ]
web8=$("$bin" nodes list --state state --pending --json | python3 -c 'import json,sys; print([n["id"] for n in map(json.loads, sys.stdin) if n["name"] == "web-8"][0])')
evil_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir evil
cat >evil/index.html <<EVIL
<!DOCTYPE html><title>working</title><body><p id="said">sending</p>
<iframe name="sink"></iframe>
<form id="reject" method="POST" target="sink" action="$origin/v1/nodes/$web8/reject"><input name="x" value="1"></form>
<iframe src="$origin/v1/events"></iframe><iframe src="$origin/v1/events"></iframe>
<iframe src="$origin/console/events"></iframe><iframe src="$origin/console/events"></iframe>
<script>
document.getElementById("reject").submit();
fetch("$origin/v1/nodes/$web8/reject", {method: "POST", mode: "no-cors", credentials: "include", body: "{}"})
  .then(() => "answered (opaque)", e => "refused: " + e)
  .then(r => { document.getElementById("said").textContent = "fetch " + r; setTimeout(() => { document.title = "done"; }, 1500); });
</script>
EVIL
python3 -m http.server --bind 127.0.0.1 "$evil_port" --directory evil >evil.log 2>&1 &
evil_pid=$!
until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$evil_port/')" 2>/dev/null; do sleep 0.1; done
mkfifo hold
"$OLDPWD/$venv/bin/python" -u "$OLDPWD/scripts/console-cross-site.py" "$devtools" "http://127.0.0.1:$evil_port/" "$shots" \
  <hold >cross-site.log 2>&1 &
cross_pid=$!
exec 9>hold
until grep -q 'the page says' cross-site.log; do
  kill -0 "$cross_pid" 2>/dev/null || { cat cross-site.log; exit 1; }
  sleep 0.2
done
sed 's/^/console-check: /' cross-site.log
# While the page and its frames are open: the credential's two stream slots are free.
stream() {
  curl -sS -o /dev/null -w '%{http_code}' --max-time 2 --cacert fleet/root.crt --cert alice.crt --key alice.key \
    --resolve "controller.fleet.janus:$admin_port:127.0.0.1" "$origin/v1/events" || true
}
first=$(stream) && second=$(stream)
exec 9>&-
wait "$cross_pid" || true
kill "$evil_pid" 2>/dev/null || true
wait "$evil_pid" 2>/dev/null || true
evil_pid=
[ "$first $second" = "200 200" ] ||
  { echo "console-check: another site's frames held the credential's event streams: $first $second"; exit 1; }
web8_state=$("$bin" nodes list --state state --json | python3 -c 'import json,sys; print([n["state"] for n in map(json.loads, sys.stdin) if n["name"] == "web-8"][0])')
[ "$web8_state" = pending ] || { echo "console-check: another site's page changed web-8: $web8_state"; exit 1; }
echo "console-check: another site's form, fetch and frames did nothing: web-8 pending, both stream slots free"
# The admin's own rejection takes a second step, and is undone on the node's page.
"$OLDPWD/$venv/bin/python" -u "$OLDPWD/scripts/console-undo.py" "$devtools" "$origin/console/" "$shots" web-8 |
  sed 's/^/console-check: /'
if [ -e "state/nodes/$web8.json" ] || [ -n "$(ls state/rejected-cas 2>/dev/null)" ]; then
  echo "console-check: web-8's rejection was not undone"; exit 1
fi

# The port served the pages; without the credential the handshake is refused.
without=$(browser home-without --dump-dom "$origin/console/" 2>without.log || true)
if grep -q 'Pending nodes' <<<"$without"; then
  echo "console-check: a browser without the credential got the page"; exit 1
fi
# (Chromium names the refusal by when it saw it: ERR_BAD_SSL_CLIENT_AUTH_CERT
# in the handshake, ERR_SOCKET_NOT_CONNECTED or a reset when TLS 1.3's
# alert came after it.)
# (Where the log names no error, the error page the DOM dump holds does.)
why=$({ grep -o 'ERR_[A-Z_0-9]*' without.log; grep -o 'ERR_[A-Z_0-9]*' <<<"$without"; } | head -1 || true)
[ -n "$why" ] || printf '%s\n' "$without" >without.dom
# A Chromium that takes the machine for offline says ERR_INTERNET_DISCONNECTED
# for the same refused connection (seen with Debian's 2026-12 build): the
# handshake's refusal is then checked without a browser too, just below.
case "$why" in
  ERR_BAD_SSL_CLIENT_AUTH_CERT | ERR_SSL_* | ERR_SOCKET_NOT_CONNECTED | ERR_CONNECTION_RESET | ERR_CONNECTION_CLOSED | ERR_INTERNET_DISCONNECTED) ;;
  *)
    cat without.log without.dom 2>/dev/null
    echo "console-check: without the credential, not a refused handshake: ${why:-no error}"
    exit 1
    ;;
esac
if curl -sS -o /dev/null --max-time 5 --cacert fleet/root.crt \
  --resolve "controller.fleet.janus:$admin_port:127.0.0.1" "$origin/console/" 2>curl-without.log; then
  echo "console-check: a client without the credential got an answer"; exit 1
fi
echo "console-check: without the credential: no page ($why; curl: $(head -1 curl-without.log))"

echo "console-check: the console approved web-7 in Chromium $(chromium --version 2>/dev/null | awk '{print $2}'); the node is admitted; screenshots in $shots"
