#!/bin/sh
# The SEO backfill host poller (ADR-022 row 6; issue 8). Claims up to SEO_BATCH jobs at a time
# from the worker's claim API (the worker first fails Running jobs older than
# SEO_STALE_AFTER_MS), runs SEO_COMMAND per job with the job JSON (with its edition) on stdin and
# expects the SEO fields as JSON on stdout:
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
#   CURL_MAX_TIME_S, GIVE_BACK_MAX_TIME_S, BACKOFF_MAX_S   see host/poll-common.sh
#
# No startup recovery: the admin crew path is a second consumer, so a Running job at this start
# is not necessarily orphaned; the worker's sweep before each claim is the recovery (ADR-022).
# On SIGTERM or SIGINT it stops the command, gives back every job of the batch it has not settled
# (Queued, attempt not counted) and exits 0. A worker that is down or answers 5xx is retried with
# capped backoff. Logs go to stderr.
set -eu
POLLER=seo-backfill-poll
# shellcheck source=host/poll-common.sh
. "$(dirname "$0")/poll-common.sh"
SEO_BATCH=${SEO_BATCH:-5}
seconds SEO_BATCH "$SEO_BATCH"
SEO_COMMAND=${SEO_COMMAND:-"$(cd "$(dirname "$0")" && pwd)/seo-default-command.sh"}
BASE=/internal/seo
# The claimed batch not yet settled, one "id token" per line.
pending=$work/pending
: >"$pending"

give_back_all() {
  while read -r id token; do
    body=$(jq -nc --arg t "$token" '{claim_token: $t}')
    if api_with POST "$BASE/jobs/$id/give-back" "$body" --max-time "$GIVE_BACK_MAX_TIME_S" &&
      [ "$code" = 200 ]; then
      log "job $id given back"
    else
      log "job $id not given back (HTTP $code: $(api_error)); the sweep fails it once stale"
    fi
  done <"$pending"
  : >"$pending"
}

on_signal() {
  trap '' TERM INT
  log "stopping"
  stop_child
  give_back_all
  cleanup
  exit 0
}
trap 'on_signal' TERM INT
trap 'cleanup' EXIT

# Drop job $1 from the pending list.
done_with() {
  grep -v "^$1 " "$pending" >"$pending.next" || true
  mv "$pending.next" "$pending"
}

# settle ID VERB JSON: report a job's end; retried while the worker is down (a repeat with the
# same token gets the same answer), at most 10 tries, then left to the sweep.
settle() {
  SETTLE_TRIES=10
  if ! api_retrying POST "$BASE/jobs/$1/$2" "$3"; then
    log "job $1: could not $2 (worker unreachable); the sweep fails it once stale"
  elif [ "$code" = 200 ]; then
    log "job $1: $2 accepted"
  else
    log "job $1: $2 refused (HTTP $code: $(api_error))"
  fi
  unset SETTLE_TRIES
  done_with "$1"
}

log "starting: $TEXTSTACK_URL, every ${POLL_INTERVAL_S}s, up to $SEO_BATCH per claim"
claim_body=$(jq -nc --argjson n "$SEO_BATCH" '{limit: $n}')
while :; do
  api_retrying POST "$BASE/jobs/claim" "$claim_body"
  case $code in
    200) ;;
    401 | 403) log "the worker refused TEXTSTACK_TOKEN (HTTP $code)"; exit 2 ;;
    *) log "claim answered HTTP $code: $(api_error)"; back_off; continue ;;
  esac
  jq -r '.jobs[] | "\(.id) \(.claim_token)"' "$work/resp" >"$pending"
  if [ ! -s "$pending" ]; then
    nap "$POLL_INTERVAL_S"
    continue
  fi
  jq -c '.jobs[] | del(.claim_token)' "$work/resp" >"$work/batch"
  cp "$pending" "$work/batch.ids"
  log "claimed $(wc -l <"$pending" | tr -d ' ') job(s)"
  i=0
  while read -r id token <&3; do
    i=$((i + 1))
    sed -n "${i}p" "$work/batch" >"$work/job.json"
    rc=0
    run_command "$SEO_COMMAND" "$work/job.json" "$work/out" "$work/err" || rc=$?
    if [ "$rc" -eq 0 ] && jq -e 'type == "object"' "$work/out" >/dev/null 2>&1; then
      settle "$id" complete "$(jq -c --arg t "$token" '{claim_token: $t, result: .}' "$work/out")"
    elif [ "$rc" -eq 0 ]; then
      settle "$id" fail "$(jq -nc --arg t "$token" --arg o "$(tail_text "$work/out" 500)" \
        '{claim_token: $t, error: ("SEO_COMMAND printed no JSON object: " + $o)}')"
    else
      settle "$id" fail "$(jq -nc --arg t "$token" \
        --arg e "SEO_COMMAND exited $rc: $(tail_text "$work/err" 2000)" \
        '{claim_token: $t, error: $e}')"
    fi
  done 3<"$work/batch.ids"
done
