# shellcheck shell=sh
# Shared by host/seo-publish-poll.sh and host/seo-backfill-poll.sh (sourced; POSIX sh, run by
# dash and bash alike). The caller sets POLLER (its name, for logs) and, before sourcing, `set -eu`.
# What a deployment can rely on is in docs/host-pollers.md; the claim key in docs/claim-keys.md.
#
# Children. Every curl, step and sleep runs as a background child followed by `wait`: a trapped
# SIGTERM interrupts `wait` at once (a foreground child would hold the trap until it ended; GNU
# Bash manual, "Signals"). No function call is redirected: a trap runs with the redirections of
# the command it interrupted, so the stop's own log lines would go to that command's files.
#
# The step (PUBLISH_COMMAND, SEO_COMMAND) runs under `setsid`: a background child of a shell
# without job control is never a group leader, so setsid makes it one in place and its pid is its
# process group's id (`set -m` cannot do this: without a terminal dash and bash turn job control
# off). The stop signals the group as `kill -TERM -PGID`: dash refuses `kill -TERM -- -PGID`
# ("Illegal number").
#
# The stop (SIGTERM or SIGINT) takes at most STOP_TIMEOUT_S, below the unit's TimeoutStopSec:
#   1. a running step gets SIGTERM (its group) and until STOP_TIMEOUT_S - GIVE_BACK_MAX_TIME_S to
#      end, its whole group included; then the group gets SIGKILL;
#      a claim or settle in flight is waited for until then too, and repeated once if its answer
#      was lost;
#   2. in what is left (at least GIVE_BACK_MAX_TIME_S), the jobs are settled by what happened:
#      step exited 0 → complete; ended by the SIGTERM (status 143) → give back; SIGKILLed after
#      ignoring it (it may have half-run) → fail "interrupted"; any other status → fail, as
#      always; jobs claimed and not started → give back. Those requests go out in parallel, the
#      SEO poller's give-backs in one request.
# A job whose step may still be running is never given back.

: "${TEXTSTACK_URL:?set TEXTSTACK_URL to the base URL of the worker, e.g. http://127.0.0.1:8787}"
: "${TEXTSTACK_TOKEN:?set TEXTSTACK_TOKEN to the INTERNAL_API_TOKEN of the worker}"
POLL_INTERVAL_S=${POLL_INTERVAL_S:-60}
# Longest one API call may take.
CURL_MAX_TIME_S=${CURL_MAX_TIME_S:-30}
# The stop's budget (keep the unit's TimeoutStopSec above it), and the part of it kept for the
# final settle and give-back requests.
STOP_TIMEOUT_S=${STOP_TIMEOUT_S:-15}
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
seconds STOP_TIMEOUT_S "$STOP_TIMEOUT_S"
seconds GIVE_BACK_MAX_TIME_S "$GIVE_BACK_MAX_TIME_S"
seconds BACKOFF_MAX_S "$BACKOFF_MAX_S"
if [ "$STOP_TIMEOUT_S" -le "$GIVE_BACK_MAX_TIME_S" ]; then
  printf '%s: Cannot use STOP_TIMEOUT_S=%s: it must be above GIVE_BACK_MAX_TIME_S (%s)\n' \
    "$POLLER" "$STOP_TIMEOUT_S" "$GIVE_BACK_MAX_TIME_S" >&2
  exit 2
fi
if ! command -v setsid >/dev/null 2>&1; then
  printf '%s: setsid not found: install util-linux (the step runs in its own process group)\n' \
    "$POLLER" >&2
  exit 2
fi
TEXTSTACK_URL=${TEXTSTACK_URL%/}

umask 077
work=$(mktemp -d "${TMPDIR:-/tmp}/$POLLER.XXXXXX")
# The token goes to curl through a file (`-H @file`), never on a command line `ps` shows.
printf 'Authorization: Bearer %s\n' "$TEXTSTACK_TOKEN" >"$work/auth"
# The background child being waited for (curl, step or sleep) and which kind it is.
child=
child_is=
# The step's pid (= its process group id) and its status once it ended ("" while it runs).
step=
step_rc=
# The request whose answer the poller has not processed yet ("claim" or "settle"), for the stop.
outstanding=
out_path=
out_body=
backoff=0
# When the stop started and the moments its parts end (epoch seconds).
stop_at=
step_until=

log() {
  printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$POLLER" "$*" >&2
}

now() {
  date +%s
}

# A fresh claim key: a random uuid (docs/claim-keys.md).
new_key() {
  if [ -r /proc/sys/kernel/random/uuid ]; then
    cat /proc/sys/kernel/random/uuid
  else
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n' |
      sed 's/^\(.\{8\}\)\(.\{4\}\)\(.\{4\}\)\(.\{4\}\)/\1-\2-\3-\4-/'
  fi
}

# Sleep $1 seconds, interruptible by a signal.
nap() {
  sleep "$1" &
  child=$! child_is=sleep
  wait "$child" || true
  child='' child_is=''
}

# Sleep for the next capped backoff step: 1, 2, 4 … BACKOFF_MAX_S seconds.
back_off() {
  if [ "$backoff" -eq 0 ]; then backoff=1; else backoff=$((backoff * 2)); fi
  if [ "$backoff" -gt "$BACKOFF_MAX_S" ]; then backoff=$BACKOFF_MAX_S; fi
  log "retrying in ${backoff}s"
  nap "$backoff"
}

# send NAME METHOD PATH JSON MAX_TIME: start curl in the background; its answer goes to
# $work/NAME.resp, its status to $work/NAME.code; sets $req to its pid.
send() {
  : >"$work/$1.resp"
  : >"$work/$1.code"
  if [ -n "$4" ]; then
    printf '%s' "$4" >"$work/$1.body"
    curl -sS -o "$work/$1.resp" -w '%{http_code}' --max-time "$5" -X "$2" -H "@$work/auth" \
      -H 'Content-Type: application/json' --data-binary "@$work/$1.body" \
      "$TEXTSTACK_URL$3" >"$work/$1.code" 2>"$work/$1.err" </dev/null &
  else
    curl -sS -o "$work/$1.resp" -w '%{http_code}' --max-time "$5" -X "$2" -H "@$work/auth" \
      "$TEXTSTACK_URL$3" >"$work/$1.code" 2>"$work/$1.err" </dev/null &
  fi
  req=$!
}

# answer NAME: the status of request NAME once its curl ended, in $code ("000": no answer).
answer() {
  code=$(cat "$work/$1.code" 2>/dev/null || true)
  code=${code:-000}
}

# api METHOD PATH [JSON]: call the worker and wait; the status goes to $code ("000" when
# unreachable), the body to $work/api.resp. Returns 0 when curl got an answer.
api() {
  send api "$1" "$2" "${3-}" "$CURL_MAX_TIME_S"
  child=$req child_is=curl
  wait "$child" || true
  child='' child_is=''
  answer api
  if [ "$code" = 000 ]; then
    log "$1 $2: no answer from the worker: $(tr '\n' ' ' <"$work/api.err")"
    return 1
  fi
  return 0
}

# The "error" field of request NAME's answer ($1, default api), for logs.
error_of() {
  jq -r '.error // empty' "$work/$1.resp" 2>/dev/null | head -c 500 || true
}
api_error() {
  error_of api
}

# api_retrying METHOD PATH [JSON]: `api`, retried with capped backoff while the worker is down or
# answers 5xx; up to $SETTLE_TRIES tries when that is set, else until it answers.
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

# claim PATH JSON: claim with the claim key in JSON, repeating it (same key) until the worker
# answers; a lost answer is asked again, never replaced by a new claim (docs/claim-keys.md).
claim() {
  step_rc=
  : >"$work/api.code"
  outstanding=claim out_path=$1 out_body=$2
  api_retrying POST "$1" "$2"
}

# settle_request PATH JSON: report a job's end; retried while the worker is down (a repeat with
# the same token gets the same answer), at most 10 tries. Returns 1 when it never got an answer.
settle_request() {
  : >"$work/api.code"
  outstanding=settle out_path=$1 out_body=$2
  SETTLE_TRIES=10
  rc=0
  api_retrying POST "$1" "$2" || rc=1
  unset SETTLE_TRIES
  return "$rc"
}

# run_step COMMAND IN OUT ERR: run COMMAND with `sh -c` as the leader of its own process group,
# stdin from IN, stdout to OUT, stderr to ERR; sets $step_rc to its status.
run_step() {
  step_rc=
  step_before=${!:-}
  child_is=step
  setsid sh -c "$1" <"$2" >"$3" 2>"$4" &
  step=$!
  child=$step
  wait "$step" && step_rc=0 || step_rc=$?
  child='' child_is='' step=''
}

# The stop's clock: call first in the signal trap.
begin_stop() {
  trap '' TERM INT
  stop_at=$(($(now) + STOP_TIMEOUT_S))
  step_until=$((stop_at - GIVE_BACK_MAX_TIME_S))
  log "stopping (within ${STOP_TIMEOUT_S}s)"
  # A signal between the step's `&` and `step=$!`: the step may have started all the same.
  if [ "$child_is" = step ] && [ -z "$step" ] && [ "${!:-}" != "$step_before" ]; then step=$!; fi
  if [ "$child_is" = sleep ]; then kill -TERM "$child" 2>/dev/null || true; fi
}

# Seconds from now until epoch second $1, at least 1 (a curl --max-time, a watchdog's sleep).
until_s() {
  left=$(($1 - $(now)))
  if [ "$left" -lt 1 ]; then left=1; fi
}

# watch SECONDS TARGET: in the background, SIGKILL TARGET (a pid, or -PGID for a group) after
# SECONDS, first creating $work/fired; `unwatch` stops it. It runs in its own group, so `unwatch`
# ends its sleep too, with SIGKILL: started in the stop, it inherits the trap's ignored SIGTERM.
watch() {
  rm -f "$work/fired"
  # shellcheck disable=SC2016 # expanded by the watcher's own sh
  setsid sh -c 'sleep "$1" && : >"$3" && kill -KILL "$2"' watch "$1" "$2" "$work/fired" \
    </dev/null >/dev/null 2>&1 &
  watcher=$!
}
unwatch() {
  kill -KILL -"$watcher" 2>/dev/null || true
  wait "$watcher" 2>/dev/null || true
}

# Whether process group $1 has a live member (a zombie is not one: a container's init may never
# reap the step's orphans).
group_alive() {
  if command -v ps >/dev/null 2>&1; then
    ps -e -o pgid= -o stat= 2>/dev/null |
      awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }'
  else
    kill -0 -"$1" 2>/dev/null
  fi
}

# In the stop: end the running step. SIGTERM to its group, then wait until $step_until for the
# whole group to end; past it, SIGKILL. Sets $step_rc (the step's status) and $step_how:
# "exited" (it ended by itself or by the SIGTERM) or "killed" (SIGKILL was needed: it may have
# half-run).
stop_step() {
  step_how=exited
  if [ -n "$step_rc" ] || [ -z "$step" ]; then return 0; fi
  kill -TERM -"$step" 2>/dev/null || true
  until_s "$step_until"
  watch "$left" "-$step"
  wait "$step" && step_rc=0 || step_rc=$?
  # The leader ended; the rest of its group may not have.
  while group_alive "$step"; do
    if [ "$(now)" -ge "$step_until" ]; then
      kill -KILL -"$step" 2>/dev/null || true
      step_how=killed
      break
    fi
    sleep 0.2 2>/dev/null || sleep 1
  done
  unwatch
  if [ -e "$work/fired" ]; then step_how=killed; fi
  log "step ended in the stop: status $step_rc ($step_how)"
}

# In the stop: wait for the request in flight (until $step_until), and when its answer is lost
# (no answer, 5xx), ask once more within the budget. The answer is in $work/api.resp, $code.
finish_outstanding() {
  code=000
  if [ "$child_is" = curl ]; then
    until_s "$step_until"
    watch "$left" "$child"
    wait "$child" || true
    unwatch
    answer api
  elif [ -s "$work/api.code" ] && [ "$(cat "$work/api.code")" != 000 ]; then
    answer api
  fi
  case $code in
    000 | 5??)
      log "stopping: asking the $outstanding again (its answer was lost)"
      until_s "$stop_at"
      send api POST "$out_path" "$out_body" "$left"
      wait "$req" || true
      answer api
      ;;
  esac
}

# The last $2 bytes of file $1 as text safe for JSON (NUL bytes dropped).
tail_text() {
  tail -c "$2" "$1" 2>/dev/null | tr -d '\000' || true
}

cleanup() {
  rm -rf "$work"
}
