#!/bin/sh
# An external script tool: inputs arrive as --key=value, stdout is JSON.
text=""
for arg in "$@"; do
  case "$arg" in
    --text=*) text="${arg#--text=}" ;;
  esac
done
words=$(printf '%s' "$text" | wc -w | tr -d ' ')
printf '{"words": %s}\n' "$words"
