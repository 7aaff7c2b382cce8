#!/usr/bin/env bash
# The README's quick start as a newcomer types it, in this checkout:
#
#   cargo run --release -- demo        (one terminal: until it serves)
#   the commands the demo prints       (the agent, curl, jq, nodes list,
#                                       nodes approve, the poll; the console's
#                                       certificate imports into a fresh HOME)
#   cargo test --locked                (another terminal, the demo still running)
#
# each run exactly as printed (only the poll's ID is filled in, as the demo
# says to), then stops the demo. Fails when any of them fails as typed.
#
#   scripts/quickstart-check.sh [--no-tests]
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "quickstart-check: $*"; }
fail() { say "FAILED: $*"; exit 1; }
work=$(mktemp -d)
demo_pid=
agent_pid=
cleanup() {
  [ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null || true
  if [ -n "$demo_pid" ]; then
    kill "$demo_pid" 2>/dev/null || true
    wait "$demo_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# As typed: a release build on a fresh clone takes minutes (README).
say "cargo run --release -- demo"
cargo run --release -- demo >"$work/demo.out" 2>"$work/demo.err" &
demo_pid=$!
deadline=$((SECONDS + 1500))
until grep -q '^The endpoint serves' "$work/demo.out"; do
  kill -0 "$demo_pid" 2>/dev/null || { tail -20 "$work/demo.err"; fail "the demo ended before serving"; }
  [ $SECONDS -lt $deadline ] || fail "the demo did not serve within 1500 s"
  sleep 1
done
say "the demo serves ($SECONDS s after the start)"

# The printed commands: every indented line that starts with a command.
printed() { grep -E "^  ($1)" "$work/demo.out" | sed 's/^  //'; }
one() {
  local line
  line=$(printed "$1")
  [ "$(printf '%s\n' "$line" | grep -c .)" = 1 ] || fail "the demo printed $(printf '%s\n' "$line" | grep -c .) lines for '$1'"
  printf '%s\n' "$line"
}
run() { # NAME COMMAND: runs COMMAND as printed, its output in $work/NAME
  say "\$ $2"
  bash -c "$2" >"$work/$1" 2>"$work/$1.err" || { cat "$work/$1.err"; fail "'$2' exited $?"; }
  cat "$work/$1"; echo
}

agent=$(one 'cargo run --release -- agent ')
say "\$ $agent   (in the background)"
bash -c "$agent" >"$work/agent.out" 2>&1 &
agent_pid=$!
node_log=$(printf '%s\n' "$agent" | sed 's/.*| tee //')

run announce "$(one "curl .*@[^ ]*demo-announce.json\$")"
id=$(jq -r .id "$work/announce")
[ "$(jq -r .admitted "$work/announce")" = false ] || fail "the tokenless announcement was admitted"
run with-token "$(one 'jq ')"
[ "$(jq -r .admitted "$work/with-token")" = true ] || fail "the example token did not admit"

# The agent's console log names its CA before its announcement is listed.
deadline=$((SECONDS + 120))
until [ -s "$node_log" ] && grep -q 'SHA-256' "$node_log" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || { cat "$work/agent.out"; fail "the agent printed no console line in 120 s"; }
  sleep 0.5
done
run pending "$(one 'cargo run --release -- nodes list ')"
grep -q demo-agent "$work/pending" || fail "nodes list --pending does not show the agent's node"
run approve "$(one 'cargo run --release -- nodes approve ')"

poll=$(one "curl .*/register/ID ")
run poll "${poll//\/register\/ID /\/register\/$id }"
[ "$(cat "$work/poll")" = 202 ] || fail "the tokenless node's poll answered $(cat "$work/poll"), not 202"

# The agent polls every 15 s: it ends, 0, once it got the trust.
deadline=$((SECONDS + 90))
while kill -0 "$agent_pid" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || { cat "$work/agent.out"; fail "the approved agent did not end within 90 s"; }
  sleep 0.5
done
wait "$agent_pid" || { cat "$work/agent.out"; fail "the agent exited non-zero"; }
agent_pid=
say "the agent got the trust and ended"

# The console's certificate imports, into a fresh HOME (the browser itself is
# scripts/console-check.sh's).
if command -v certutil >/dev/null 2>&1; then
  mkdir -p "$work/home"
  grep -A3 '^Chromium on Linux' "$work/demo.out" | grep -E '^  (mkdir|certutil|pk12util)' | sed 's/^  //' >"$work/imports"
  [ "$(grep -c . "$work/imports")" = 3 ] || fail "the demo printed $(grep -c . "$work/imports") import commands for Chromium, not 3"
  while IFS= read -r line; do
    (export HOME="$work/home" && run import "$line")
  done <"$work/imports"
  HOME="$work/home" certutil -L -d "sql:$work/home/.pki/nssdb" | grep -q demo-admin ||
    fail "the imported profile holds no demo-admin credential"
else
  say "SKIPPED: the console's import commands (no certutil: Debian's libnss3-tools)"
fi
say "every command the demo printed ran as printed"

if [ "${1:-}" != --no-tests ]; then
  say "cargo test --locked, the demo still serving on 8443 and 8444"
  cargo test --locked
  kill -0 "$demo_pid" || fail "the demo ended while the tests ran"
fi
say "OK"
