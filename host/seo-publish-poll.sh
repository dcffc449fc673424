#!/bin/sh
# The auto-publish host poller (ADR-022 row 5). Claims one auto-publish job at a time from the
# worker's claim API, runs PUBLISH_COMMAND with the job JSON on stdin, then reports complete (the
# worker publishes the edition, queues the Full SSG rebuild and pings IndexNow) or fail (with the
# command's stderr tail).
#
# Settings (environment):
#   TEXTSTACK_URL     the worker's base URL, e.g. http://127.0.0.1:8787 (required)
#   TEXTSTACK_TOKEN   the worker's INTERNAL_API_TOKEN (required)
#   POLL_INTERVAL_S   seconds between claims while the queue is empty (default 60)
#   PUBLISH_COMMAND   run with `sh -c`, job JSON on stdin (default: nothing to do on the host;
#                     the worker's complete does the publish)
#   CURL_MAX_TIME_S, STOP_TIMEOUT_S, GIVE_BACK_MAX_TIME_S, BACKOFF_MAX_S   see host/poll-common.sh
#
# On start it calls POST /internal/auto-publish/recover: there is one poller, so a job still
# Running belongs to a poller that died; it becomes Failed "interrupted (consumer restarted)".
# Each claim carries a fresh claim key, repeated until the claim is answered (docs/claim-keys.md).
# On SIGTERM or SIGINT it stops within STOP_TIMEOUT_S and settles the job by what its command did
# (host/poll-common.sh, docs/host-pollers.md), then exits 0. A worker that is down or answers 5xx
# is retried with capped backoff. Logs go to stderr.
set -eu
POLLER=seo-publish-poll
# shellcheck source=host/poll-common.sh
. "$(dirname "$0")/poll-common.sh"
PUBLISH_COMMAND=${PUBLISH_COMMAND:-:}
BASE=/internal/auto-publish
job_id=
job_token=

# verdict: the settle for the job's step, from $step_rc and $step_how: sets $verb and $body.
verdict() {
  if [ "${step_how-}" = killed ]; then
    verb=fail
    body=$(jq -nc --arg t "$job_token" --arg s "$((STOP_TIMEOUT_S - GIVE_BACK_MAX_TIME_S))" \
      '{claim_token: $t, error: ("interrupted (the poller stopped; PUBLISH_COMMAND did not end " +
        "within " + $s + " s of SIGTERM and was killed: it may have half-run)")}')
  elif [ -z "$step_rc" ] || { [ -n "$stop_at" ] && [ "$step_rc" = 143 ]; }; then
    # Never started, or ended by the stop's SIGTERM.
    verb=give-back
    body=$(jq -nc --arg t "$job_token" '{claim_token: $t}')
  elif [ "$step_rc" = 0 ]; then
    verb=complete
    body=$(jq -nc --arg t "$job_token" --arg o "$(tail_text "$work/out" 2000)" \
      '{claim_token: $t, result: {output: $o}}')
  else
    verb=fail
    body=$(jq -nc --arg t "$job_token" \
      --arg e "PUBLISH_COMMAND exited $step_rc: $(tail_text "$work/err" 2000)" \
      '{claim_token: $t, error: $e}')
  fi
}

# take_job: the job from a claim's answer in $work/api.resp ($job_id empty when none).
take_job() {
  job_token=$(jq -r '.jobs[0].claim_token // empty' "$work/api.resp")
  job_id=$(jq -r '.jobs[0].id // empty' "$work/api.resp")
}

on_signal() {
  begin_stop
  case $outstanding in
    claim)
      finish_outstanding
      if [ "$code" = 200 ]; then take_job; else job_id=; fi
      if [ -z "$job_id" ] && [ "$code" != 200 ]; then
        log "the claim in flight was not answered (HTTP $code); the next start recovers its job"
      fi
      step_rc=
      ;;
    settle)
      finish_outstanding
      log "job $job_id: settle in flight answered HTTP $code"
      job_id=
      ;;
  esac
  if [ -n "$job_id" ]; then
    stop_step
    verdict
    until_s "$stop_at"
    send stop POST "$BASE/jobs/$job_id/$verb" "$body" "$left"
    wait "$req" || true
    answer stop
    if [ "$code" = 200 ] && [ "$verb" = give-back ]; then
      log "job $job_id given back"
    elif [ "$code" = 200 ]; then
      log "job $job_id: $verb accepted"
    else
      log "job $job_id: $verb not accepted (HTTP $code: $(error_of stop)); the next start recovers it"
    fi
  fi
  log "stopped"
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
    200) log "recovered: $(jq -c '.recovered' "$work/api.resp")"; break ;;
    401 | 403) log "the worker refused TEXTSTACK_TOKEN (HTTP $code)"; exit 2 ;;
    *) log "recover answered HTTP $code: $(api_error)"; back_off ;;
  esac
done

# settle: report the job's end (the verdict); left for the next start's recovery after 10 tries.
settle() {
  verdict
  if ! settle_request "$BASE/jobs/$job_id/$verb" "$body"; then
    log "job $job_id: could not $verb (worker unreachable); the next start recovers it"
  elif [ "$code" = 200 ]; then
    log "job $job_id: $verb accepted"
  else
    log "job $job_id: $verb refused (HTTP $code: $(api_error))"
  fi
  job_id=
  outstanding=
}

while :; do
  claim "$BASE/jobs/claim" "$(jq -nc --arg k "$(new_key)" '{claim_key: $k}')"
  case $code in
    200) ;;
    401 | 403) log "the worker refused TEXTSTACK_TOKEN (HTTP $code)"; exit 2 ;;
    *) outstanding=; log "claim answered HTTP $code: $(api_error)"; back_off; continue ;;
  esac
  take_job
  outstanding=
  if [ -z "$job_id" ]; then
    nap "$POLL_INTERVAL_S"
    continue
  fi
  jq -c '.jobs[0] | del(.claim_token)' "$work/api.resp" >"$work/job.json"
  log "job $job_id claimed (edition $(jq -r '.edition_id' "$work/job.json"))"
  run_step "$PUBLISH_COMMAND" "$work/job.json" "$work/out" "$work/err"
  settle
done
