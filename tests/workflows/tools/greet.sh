#!/bin/sh
# An external script tool: the step's inputs arrive as --key=value.
name=world
loud=no
for arg in "$@"; do
  case "$arg" in
    --name=*) name="${arg#--name=}" ;;
    --loud) loud=yes ;;
  esac
done
printf '{"greeting": "hello %s", "loud": "%s", "args": %s, "home": "%s", "greeting_env": "%s"}\n' \
  "$name" "$loud" "$#" "${HOME:-}" "${GREETING_STYLE:-}"
