#!/bin/sh
# Ask the worker for a Full static-site rebuild and follow it to its end (ADR-022 row 4).
#
# POST /internal/ssg/rebuild-all answers 201 with a new Queued job, or 200 with the Full job
# already in flight: a Queued one this call joins (it will read every edition written so far) or
# a Running one it waits out. Then GET /internal/ssg/jobs/<id> until the job ends.
#
# Exit 0 when it is Completed; 1 when it is Failed (its error is printed); 2 for bad settings or a
# refused token; 3 when REBUILD_TIMEOUT_S passes first; 4 when the worker cannot be reached.
#
# Settings (environment): TEXTSTACK_URL, TEXTSTACK_TOKEN (required); REBUILD_POLL_S (seconds
# between looks, default 2); REBUILD_TIMEOUT_S (default 3600); CURL_MAX_TIME_S (default 30).
# Progress goes to stderr; the final job JSON to stdout.
#
# SIGTERM or SIGINT stops following at once (exit 143 or 130) and leaves the rebuild alone: it
# belongs to the worker, which finishes it. curl and sleep run as background children followed
# by `wait`, so the trap runs at once instead of after them (a shell holds a trap until its
# foreground child ends; see host/poll-common.sh), and the trap stops that child.
set -eu
: "${TEXTSTACK_URL:?set TEXTSTACK_URL to the base URL of the worker, e.g. http://127.0.0.1:8787}"
: "${TEXTSTACK_TOKEN:?set TEXTSTACK_TOKEN to the INTERNAL_API_TOKEN of the worker}"
REBUILD_POLL_S=${REBUILD_POLL_S:-2}
REBUILD_TIMEOUT_S=${REBUILD_TIMEOUT_S:-3600}
CURL_MAX_TIME_S=${CURL_MAX_TIME_S:-30}
for value in "$REBUILD_POLL_S" "$REBUILD_TIMEOUT_S" "$CURL_MAX_TIME_S"; do
  case $value in
    '' | *[!0-9]* | 0)
      echo "rebuild-ssg: REBUILD_POLL_S, REBUILD_TIMEOUT_S and CURL_MAX_TIME_S must be positive integers (s), received \"$value\"" >&2
      exit 2
      ;;
  esac
done
TEXTSTACK_URL=${TEXTSTACK_URL%/}

umask 077
work=$(mktemp -d "${TMPDIR:-/tmp}/rebuild-ssg.XXXXXX")
child=
trap 'rm -rf "$work"' EXIT
# stop CODE: end the running child (curl or sleep), then exit (the EXIT trap removes $work).
stop() {
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; fi
  exit "$1"
}
trap 'stop 143' TERM
trap 'stop 130' INT
printf 'Authorization: Bearer %s\n' "$TEXTSTACK_TOKEN" >"$work/auth"

log() {
  printf '%s rebuild-ssg: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2
}

# Run "$@" as a background child and wait for it, so a signal's trap runs at once.
run_child() {
  "$@" &
  child=$!
  wait "$child" || true
  child=
}

# call METHOD PATH: the status to $code ("000" when unreachable), the body to $work/resp.
call() {
  : >"$work/code"
  run_child curl -sS -o "$work/resp" -w '%{http_code}' --max-time "$CURL_MAX_TIME_S" -X "$1" \
    -H "@$work/auth" "$TEXTSTACK_URL$2" >"$work/code" 2>"$work/err"
  code=$(cat "$work/code")
  code=${code:-000}
}

# The job object, whether the answer is the job itself or {"job": …}.
job() {
  jq -c '.job // .' "$work/resp"
}

call POST /internal/ssg/rebuild-all
case $code in
  200 | 201) ;;
  000) log "worker unreachable: $(cat "$work/err")"; exit 4 ;;
  401 | 403) log "the worker refused TEXTSTACK_TOKEN (HTTP $code)"; exit 2 ;;
  *) log "rebuild-all answered HTTP $code: $(cat "$work/resp")"; exit 1 ;;
esac
id=$(job | jq -r '.id')
status=$(job | jq -r '.status')
if [ "$code" = 201 ]; then
  log "queued Full rebuild $id"
else
  log "following Full rebuild $id, already $status"
fi

started=$(date +%s)
misses=0
while :; do
  case $status in
    Completed) job; log "rebuild $id completed"; exit 0 ;;
    Failed) job; log "rebuild $id failed: $(job | jq -r '.error // "no error text"')"; exit 1 ;;
  esac
  if [ $(($(date +%s) - started)) -ge "$REBUILD_TIMEOUT_S" ]; then
    log "rebuild $id still $status after ${REBUILD_TIMEOUT_S}s; giving up following it"
    exit 3
  fi
  run_child sleep "$REBUILD_POLL_S"
  call GET "/internal/ssg/jobs/$id"
  case $code in
    200) misses=0; status=$(job | jq -r '.status') ;;
    000 | 5??)
      misses=$((misses + 1))
      log "GET job $id: HTTP $code; retrying"
      if [ "$misses" -ge 30 ]; then log "worker unreachable for 30 tries"; exit 4; fi
      ;;
    *) log "GET job $id answered HTTP $code: $(cat "$work/resp")"; exit 1 ;;
  esac
done
