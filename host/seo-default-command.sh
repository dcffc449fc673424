#!/bin/sh
# The default SEO_COMMAND of host/seo-backfill-poll.sh: derives an edition's SEO fields from the
# edition itself (title, author, the first chapter's excerpt), with no network, so the pipeline
# works out of the box. Reads the job JSON on stdin, prints
#   {"meta_title": "…", "meta_description": "…", "meta_keywords": ["…", …]}
# on stdout. Needs jq.
set -eu
exec jq -c '
  .edition as $e
  | ($e.title // "" | gsub("\\s+"; " ")) as $t
  | (if $t == "" or $t == " " then "Untitled" else $t end) as $title
  | ($e.author // "" | gsub("\\s+"; " ")) as $a
  | ($e.excerpt // "" | gsub("\\s+"; " ") | ltrimstr(" ")) as $x
  | {
      meta_title: ((if $a != "" then "\($title) by \($a)" else $title end) | .[0:70]),
      meta_description: (
        if ($x | length) > 0 then
          (if ($x | length) > 155 then ($x | .[0:152]) + "..." else $x end)
        else "Read \($title)\(if $a != "" then " by \($a)" else "" end) on TextStack." end
      ),
      meta_keywords: (
        ([$title, $a] + ($title | ascii_downcase | [scan("[a-z0-9]{4,}")]))
        | map(select(. != "") | .[0:100]) | unique | .[0:10]
      )
    }'
