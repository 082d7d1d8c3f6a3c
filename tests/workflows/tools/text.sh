#!/bin/sh
# A tool with operations (listed in text.yaml): the first argument names one.
op="$1"; shift
text=""
for arg in "$@"; do
  case "$arg" in
    --text=*) text="${arg#--text=}" ;;
  esac
done
case "$op" in
  upper) printf '%s\n' "$text" | tr 'a-z' 'A-Z' ;;
  words) printf '%s\n' "$text" | wc -w | tr -d ' ' ;;
  fail) echo "cannot do that" >&2; exit 3 ;;
  quiet) echo "only a note" >&2 ;;
esac
