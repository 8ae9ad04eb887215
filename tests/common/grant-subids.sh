#!/bin/sh
# grant-subids.sh USER: gives USER 65536 subordinate uids and gids (/etc/subuid, /etc/subgid) when
# it has none, after every range already granted, as an administrator would with `usermod
# --add-subuids`. The rootless suites need them: with subordinate ids the sandbox's init and its
# program are different users (docs/security.md "Rootless"). Needs root; idempotent.
set -eu
user=$1
for file in /etc/subuid /etc/subgid; do
  touch "$file"
  if ! grep -q "^$user:" "$file"; then
    start=$(awk -F: 'BEGIN { end = 100000 } NF == 3 && $2 + $3 > end { end = $2 + $3 } END { print end }' "$file")
    echo "$user:$start:65536" >> "$file"
  fi
done
