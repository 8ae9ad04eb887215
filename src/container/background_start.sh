# A background program: its own session, stdio on /dev/null; prints its pid (= session id) once
# setsid() is done, so the next run's kill cannot miss it. The exec's bash is a session leader
# (runc), so its `&` child is not a group leader and setsid(1) does not fork.
# shellcheck disable=SC2034,SC2086
setsid "$@" </dev/null >/dev/null 2>&1 & p=$!
for i in {1..400}; do
  read -r t 2>/dev/null < /proc/$p/stat || break
  t=${t##*) }; set -- $t
  [ "$4" = "$p" ] && break
  sleep 0.005
done
echo $p
