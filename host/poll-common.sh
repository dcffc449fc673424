# shellcheck shell=sh
# Shared by host/seo-publish-poll.sh and host/seo-backfill-poll.sh (sourced; POSIX sh). The caller
# sets POLLER (its name, for logs) and, before sourcing, `set -eu`.
#
# Every curl, command and sleep runs as a background child followed by `wait`: a trapped SIGTERM
# interrupts `wait` at once (a foreground child would hold the trap until it ended), and the trap
# then stops that child — see EXAMPLES.md §1, "GNU Bash manual, Signals". The host command runs
# under `setsid` (when present) so the trap stops its whole process group, not only its `sh -c`.
# (`set -m` cannot do this: without a terminal, dash and bash turn job control off.) A background
# child's stdin is /dev/null unless redirected, so the job JSON is redirected explicitly.

: "${TEXTSTACK_URL:?set TEXTSTACK_URL to the base URL of the worker, e.g. http://127.0.0.1:8787}"
: "${TEXTSTACK_TOKEN:?set TEXTSTACK_TOKEN to the INTERNAL_API_TOKEN of the worker}"
POLL_INTERVAL_S=${POLL_INTERVAL_S:-60}
# Longest one API call may take, and longest the give-back on a signal may take (keep
# TimeoutStopSec in the systemd unit above GIVE_BACK_MAX_TIME_S plus the command's stop).
CURL_MAX_TIME_S=${CURL_MAX_TIME_S:-30}
GIVE_BACK_MAX_TIME_S=${GIVE_BACK_MAX_TIME_S:-5}
# Backoff while the worker is down or answers 5xx: 1 s, 2 s, 4 s … capped here.
BACKOFF_MAX_S=${BACKOFF_MAX_S:-60}

# seconds NAME VALUE: exit 2 naming the setting unless VALUE is a positive integer.
seconds() {
  case $2 in
    '' | *[!0-9]* | 0)
      printf '%s: Cannot parse %s: expected a positive integer (s), received "%s"\n' \
        "$POLLER" "$1" "$2" >&2
      exit 2
      ;;
  esac
}
seconds POLL_INTERVAL_S "$POLL_INTERVAL_S"
seconds CURL_MAX_TIME_S "$CURL_MAX_TIME_S"
seconds GIVE_BACK_MAX_TIME_S "$GIVE_BACK_MAX_TIME_S"
seconds BACKOFF_MAX_S "$BACKOFF_MAX_S"
TEXTSTACK_URL=${TEXTSTACK_URL%/}

umask 077
work=$(mktemp -d "${TMPDIR:-/tmp}/$POLLER.XXXXXX")
# The token goes to curl through a file (`-H @file`), never on a command line `ps` shows.
printf 'Authorization: Bearer %s\n' "$TEXTSTACK_TOKEN" >"$work/auth"
child=
backoff=0

log() {
  printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$POLLER" "$*" >&2
}

# Stop the running child (command, curl or sleep) and its process group.
stop_child() {
  if [ -n "$child" ]; then
    kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null || true
    child=
  fi
}

# Run "$@" as a background child and wait for it; returns its status.
run_child() {
  "$@" &
  child=$!
  rc=0
  wait "$child" || rc=$?
  child=
  return "$rc"
}

# run_command COMMAND IN OUT ERR: run COMMAND with `sh -c` in its own process group (setsid),
# stdin from IN, stdout to OUT, stderr to ERR, as a background child; returns its status.
run_command() {
  if command -v setsid >/dev/null 2>&1; then
    setsid -w sh -c "$1" <"$2" >"$3" 2>"$4" &
  else
    sh -c "$1" <"$2" >"$3" 2>"$4" &
  fi
  child=$!
  rc=0
  wait "$child" || rc=$?
  child=
  return "$rc"
}

# Sleep $1 seconds, interruptible by a signal.
nap() {
  run_child sleep "$1" || true
}

# Sleep for the next capped backoff step: 1, 2, 4 … BACKOFF_MAX_S seconds.
back_off() {
  if [ "$backoff" -eq 0 ]; then backoff=1; else backoff=$((backoff * 2)); fi
  if [ "$backoff" -gt "$BACKOFF_MAX_S" ]; then backoff=$BACKOFF_MAX_S; fi
  log "retrying in ${backoff}s"
  nap "$backoff"
}

# api METHOD PATH [JSON]: call the worker; the status goes to $code ("000" when unreachable), the
# body to $work/resp. Returns 0 when curl got an answer.
api() {
  set -- "$1" "$2" "${3-}" --max-time "$CURL_MAX_TIME_S"
  api_with "$@"
}

# api_with METHOD PATH JSON CURL-OPTIONS…: `api` with other curl options (the give-back's bound).
api_with() {
  method=$1 path=$2 body=$3
  shift 3
  : >"$work/resp"
  if [ -n "$body" ]; then
    printf '%s' "$body" >"$work/body"
    run_child curl -sS -o "$work/resp" -w '%{http_code}' "$@" -X "$method" -H "@$work/auth" \
      -H 'Content-Type: application/json' --data-binary "@$work/body" \
      "$TEXTSTACK_URL$path" >"$work/code" 2>"$work/curl_err" || true
  else
    run_child curl -sS -o "$work/resp" -w '%{http_code}' "$@" -X "$method" -H "@$work/auth" \
      "$TEXTSTACK_URL$path" >"$work/code" 2>"$work/curl_err" || true
  fi
  code=$(cat "$work/code" 2>/dev/null || true)
  code=${code:-000}
  if [ "$code" = 000 ]; then
    log "$method $path: worker unreachable: $(tr '\n' ' ' <"$work/curl_err")"
    return 1
  fi
  return 0
}

# The body's "error" field, for logs.
api_error() {
  jq -r '.error // empty' "$work/resp" 2>/dev/null | head -c 500 || true
}

# api_retrying METHOD PATH [JSON]: `api`, retried with capped backoff while the worker is down or
# answers 5xx; up to $2 tries when SETTLE_TRIES is set, else until it answers.
api_retrying() {
  tries=0
  while :; do
    tries=$((tries + 1))
    if api "$@"; then
      case $code in
        5??) log "$1 $2: worker answered $code: $(api_error)" ;;
        *) backoff=0; return 0 ;;
      esac
    fi
    if [ -n "${SETTLE_TRIES-}" ] && [ "$tries" -ge "$SETTLE_TRIES" ]; then return 1; fi
    back_off
  done
}

# The last $2 bytes of file $1 as text safe for JSON (NUL bytes dropped).
tail_text() {
  tail -c "$2" "$1" 2>/dev/null | tr -d '\000' || true
}

cleanup() {
  rm -rf "$work"
}
