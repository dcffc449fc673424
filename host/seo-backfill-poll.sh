#!/bin/sh
# The SEO backfill host poller (ADR-022 row 6). Claims up to SEO_BATCH jobs at a time from the
# worker's claim API (the worker first fails Running jobs older than SEO_STALE_AFTER_MS), runs
# SEO_COMMAND per job with the job JSON (with its edition) on stdin and expects the SEO fields as
# JSON on stdout:
#   {"meta_title": "…", "meta_description": "…", "meta_keywords": ["…", …]}
# then reports complete (the worker applies them, keeping a BeforeSnapshot for revert) or fail.
#
# Settings (environment):
#   TEXTSTACK_URL     the worker's base URL, e.g. http://127.0.0.1:8787 (required)
#   TEXTSTACK_TOKEN   the worker's INTERNAL_API_TOKEN (required)
#   POLL_INTERVAL_S   seconds between claims while the queue is empty (default 60)
#   SEO_BATCH         jobs per claim, 1..50 (default 5)
#   SEO_COMMAND       run with `sh -c` per job (default: host/seo-default-command.sh, which
#                     derives the fields from the edition itself, no network)
#   CURL_MAX_TIME_S, STOP_TIMEOUT_S, GIVE_BACK_MAX_TIME_S, BACKOFF_MAX_S   see host/poll-common.sh
#
# No startup recovery: the admin crew path is a second consumer, so a Running job at this start
# is not necessarily orphaned; the worker's sweep before each claim is the recovery (ADR-022).
# Each claim carries a fresh claim key, repeated until the claim is answered (docs/claim-keys.md).
# On SIGTERM or SIGINT it stops within STOP_TIMEOUT_S: the running job is settled by what its
# command did, every other unsettled job of the batch is given back in one request
# (host/poll-common.sh, docs/host-pollers.md), and it exits 0. A worker that is down or answers
# 5xx is retried with capped backoff. Logs go to stderr.
set -eu
POLLER=seo-backfill-poll
# shellcheck source=host/poll-common.sh
. "$(dirname "$0")/poll-common.sh"
SEO_BATCH=${SEO_BATCH:-5}
seconds SEO_BATCH "$SEO_BATCH"
SEO_COMMAND=${SEO_COMMAND:-"$(cd "$(dirname "$0")" && pwd)/seo-default-command.sh"}
BASE=/internal/seo
# The claimed batch not yet settled, one "id token" per line; the job whose step runs.
pending=$work/pending
: >"$pending"
cur=
cur_token=

# Drop job $1 from the pending list.
done_with() {
  grep -v "^$1 " "$pending" >"$pending.next" || true
  mv "$pending.next" "$pending"
}

# take_batch: the jobs of a claim's answer in $work/api.resp → the pending list and $work/batch.
take_batch() {
  jq -r '.jobs[] | "\(.id) \(.claim_token)"' "$work/api.resp" >"$pending"
  jq -c '.jobs[] | del(.claim_token)' "$work/api.resp" >"$work/batch"
}

# verdict: the settle for job $cur's step, from $step_rc and $step_how: sets $verb and $body.
verdict() {
  if [ "${step_how-}" = killed ]; then
    verb=fail
    body=$(jq -nc --arg t "$cur_token" --arg s "$((STOP_TIMEOUT_S - GIVE_BACK_MAX_TIME_S))" \
      '{claim_token: $t, error: ("interrupted (the poller stopped; SEO_COMMAND did not end " +
        "within " + $s + " s of SIGTERM and was killed: it may have half-run)")}')
  elif [ -z "$step_rc" ] || { [ -n "$stop_at" ] && [ "$step_rc" = 143 ]; }; then
    # Never started, or ended by the stop's SIGTERM.
    verb=give-back
    body=
  elif [ "$step_rc" = 0 ] && jq -e 'type == "object"' "$work/out" >/dev/null 2>&1; then
    verb=complete
    body=$(jq -c --arg t "$cur_token" '{claim_token: $t, result: .}' "$work/out")
  elif [ "$step_rc" = 0 ]; then
    verb=fail
    body=$(jq -nc --arg t "$cur_token" --arg o "$(tail_text "$work/out" 500)" \
      '{claim_token: $t, error: ("SEO_COMMAND printed no JSON object: " + $o)}')
  else
    verb=fail
    body=$(jq -nc --arg t "$cur_token" \
      --arg e "SEO_COMMAND exited $step_rc: $(tail_text "$work/err" 2000)" \
      '{claim_token: $t, error: $e}')
  fi
}

on_signal() {
  begin_stop
  case $outstanding in
    claim)
      finish_outstanding
      if [ "$code" = 200 ]; then
        take_batch
      else
        log "the claim in flight was not answered (HTTP $code); the sweep fails its jobs once stale"
      fi
      cur=
      ;;
    settle)
      finish_outstanding
      log "job $cur: settle in flight answered HTTP $code"
      done_with "$cur"
      cur=
      ;;
  esac
  settling=
  if [ -n "$cur" ]; then
    stop_step
    verdict
    if [ "$verb" != give-back ]; then
      done_with "$cur"
      until_s "$stop_at"
      send stop POST "$BASE/jobs/$cur/$verb" "$body" "$left"
      settling=$req
    fi
  fi
  # Every other unsettled job of the batch, in one request beside the settle.
  giving=
  if [ -s "$pending" ]; then
    until_s "$stop_at"
    send back POST "$BASE/jobs/give-back" \
      "$(jq -Rnc '{jobs: [inputs | split(" ") | {id: .[0], claim_token: .[1]}]}' <"$pending")" \
      "$left"
    giving=$req
  fi
  if [ -n "$settling" ]; then
    wait "$settling" || true
    answer stop
    if [ "$code" = 200 ]; then
      log "job $cur: $verb accepted"
    else
      log "job $cur: $verb not accepted (HTTP $code: $(error_of stop)); the sweep fails it once stale"
    fi
  fi
  if [ -n "$giving" ]; then
    wait "$giving" || true
    answer back
    if [ "$code" = 200 ]; then
      jq -r '.jobs[] | if .outcome == "settled" or .outcome == "repeated"
        then "job \(.id) given back" else "job \(.id) not given back (\(.outcome), \(.status))" end' \
        "$work/back.resp" | while read -r line; do log "$line"; done
    else
      log "give-back of $(wc -l <"$pending" | tr -d ' ') job(s) not accepted (HTTP $code:" \
        "$(error_of back)); the sweep fails them once stale"
    fi
  fi
  log "stopped"
  cleanup
  exit 0
}
trap 'on_signal' TERM INT
trap 'cleanup' EXIT

# settle: report job $cur's end (the verdict); left to the sweep after 10 tries.
settle() {
  verdict
  if ! settle_request "$BASE/jobs/$cur/$verb" "$body"; then
    log "job $cur: could not $verb (worker unreachable); the sweep fails it once stale"
  elif [ "$code" = 200 ]; then
    log "job $cur: $verb accepted"
  else
    log "job $cur: $verb refused (HTTP $code: $(api_error))"
  fi
  done_with "$cur"
  cur=
  outstanding=
}

log "starting: $TEXTSTACK_URL, every ${POLL_INTERVAL_S}s, up to $SEO_BATCH per claim"
while :; do
  cur=
  claim "$BASE/jobs/claim" \
    "$(jq -nc --argjson n "$SEO_BATCH" --arg k "$(new_key)" '{limit: $n, claim_key: $k}')"
  case $code in
    200) ;;
    401 | 403) log "the worker refused TEXTSTACK_TOKEN (HTTP $code)"; exit 2 ;;
    *) outstanding=; log "claim answered HTTP $code: $(api_error)"; back_off; continue ;;
  esac
  take_batch
  outstanding=
  if [ ! -s "$pending" ]; then
    nap "$POLL_INTERVAL_S"
    continue
  fi
  cp "$pending" "$work/batch.ids"
  log "claimed $(wc -l <"$pending" | tr -d ' ') job(s)"
  i=0
  while read -r id token <&3; do
    i=$((i + 1))
    sed -n "${i}p" "$work/batch" >"$work/job.json"
    step_rc=
    cur_token=$token
    cur=$id
    run_step "$SEO_COMMAND" "$work/job.json" "$work/out" "$work/err"
    settle
  done 3<"$work/batch.ids"
done
