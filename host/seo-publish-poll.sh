#!/bin/sh
# The auto-publish host poller (ADR-022 row 5; issue 8). Claims one auto-publish job at a time
# from the worker's claim API, runs PUBLISH_COMMAND with the job JSON on stdin, then reports
# complete (the worker publishes the edition, queues the Full SSG rebuild and pings IndexNow) or
# fail (with the command's stderr tail).
#
# Settings (environment):
#   TEXTSTACK_URL     the worker's base URL, e.g. http://127.0.0.1:8787 (required)
#   TEXTSTACK_TOKEN   the worker's INTERNAL_API_TOKEN (required)
#   POLL_INTERVAL_S   seconds between claims while the queue is empty (default 60)
#   PUBLISH_COMMAND   run with `sh -c`, job JSON on stdin (default: nothing to do on the host;
#                     the worker's complete does the publish)
#   CURL_MAX_TIME_S, GIVE_BACK_MAX_TIME_S, BACKOFF_MAX_S   see host/poll-common.sh
#
# On start it calls POST /internal/auto-publish/recover: there is one poller, so a job still
# Running belongs to a poller that died; it becomes Failed "interrupted (consumer restarted)".
# On SIGTERM or SIGINT it stops the command, gives the claimed job back (Queued, attempt not
# counted) and exits 0. A worker that is down or answers 5xx is retried with capped backoff.
# Logs go to stderr.
set -eu
POLLER=seo-publish-poll
# shellcheck source=host/poll-common.sh
. "$(dirname "$0")/poll-common.sh"
PUBLISH_COMMAND=${PUBLISH_COMMAND:-:}
BASE=/internal/auto-publish
job_id=
job_token=

give_back() {
  if [ -z "$job_id" ]; then return 0; fi
  body=$(jq -nc --arg t "$job_token" '{claim_token: $t}')
  if api_with POST "$BASE/jobs/$job_id/give-back" "$body" --max-time "$GIVE_BACK_MAX_TIME_S" &&
    [ "$code" = 200 ]; then
    log "job $job_id given back"
  else
    log "job $job_id not given back (HTTP $code: $(api_error)); the next start recovers it"
  fi
  job_id=
}

on_signal() {
  trap '' TERM INT
  log "stopping"
  stop_child
  give_back
  cleanup
  exit 0
}
trap 'on_signal' TERM INT
trap 'cleanup' EXIT

log "starting: $TEXTSTACK_URL, every ${POLL_INTERVAL_S}s"
if [ "$PUBLISH_COMMAND" = : ]; then log "PUBLISH_COMMAND unset: no host step before complete"; fi

# Startup recovery, retried until the worker answers.
while :; do
  api_retrying POST "$BASE/recover"
  case $code in
    200) log "recovered: $(jq -c '.recovered' "$work/resp")"; break ;;
    401 | 403) log "the worker refused TEXTSTACK_TOKEN (HTTP $code)"; exit 2 ;;
    *) log "recover answered HTTP $code: $(api_error)"; back_off ;;
  esac
done

# settle VERB JSON: report the job's end; retried while the worker is down (a repeat with the same
# token gets the same answer), at most 10 tries, then left for the next start's recovery.
settle() {
  SETTLE_TRIES=10
  if ! api_retrying POST "$BASE/jobs/$job_id/$1" "$2"; then
    log "job $job_id: could not $1 (worker unreachable); the next start recovers it"
  elif [ "$code" = 200 ]; then
    log "job $job_id: $1 accepted"
  else
    log "job $job_id: $1 refused (HTTP $code: $(api_error))"
  fi
  unset SETTLE_TRIES
  job_id=
}

while :; do
  api_retrying POST "$BASE/jobs/claim"
  case $code in
    200) ;;
    401 | 403) log "the worker refused TEXTSTACK_TOKEN (HTTP $code)"; exit 2 ;;
    *) log "claim answered HTTP $code: $(api_error)"; back_off; continue ;;
  esac
  job_token=$(jq -r '.jobs[0].claim_token // empty' "$work/resp")
  job_id=$(jq -r '.jobs[0].id // empty' "$work/resp")
  if [ -z "$job_id" ]; then
    nap "$POLL_INTERVAL_S"
    continue
  fi
  jq -c '.jobs[0] | del(.claim_token)' "$work/resp" >"$work/job.json"
  log "job $job_id claimed (edition $(jq -r '.edition_id' "$work/job.json"))"
  rc=0
  run_command "$PUBLISH_COMMAND" "$work/job.json" "$work/out" "$work/err" || rc=$?
  if [ "$rc" -eq 0 ]; then
    out=$(tail_text "$work/out" 2000)
    settle complete "$(jq -nc --arg t "$job_token" --arg o "$out" \
      '{claim_token: $t, result: {output: $o}}')"
  else
    err=$(tail_text "$work/err" 2000)
    settle fail "$(jq -nc --arg t "$job_token" --arg e "PUBLISH_COMMAND exited $rc: $err" \
      '{claim_token: $t, error: $e}')"
  fi
done
