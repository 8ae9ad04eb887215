# A session run: `ci-run <background pids> <cpu seconds> <watchdog seconds> argv...`, after
# session_kill.sh. The program gets RLIMIT_CPU (soft N, hard N+1 as in container_config.cc) in a
# subshell of its own. A watchdog subshell forked before it (while a pid is surely free) waits on
# a pipe only it holds (`read -t`: no `sleep` for the program to see) and then kills what the
# program started, with builtins only: the daemon's kill exec needs a free pid, which a fork bomb
# can keep from it. Its stdout and stderr are relayed by two `cat`s, so what holds the exec's
# stream is known: once the program has exited and its leftovers are killed, the relays get
# 500 ms to drain (EOF on fd 7 once both are gone: they alone hold its write end, opened through
# /proc) and are then killed. Without them a background program's child that inherited the
# program's stdout would hold the exec's stream, and the Engine would wait 2 s for it on every
# later exec's exit too (its exit events are handled one after the other per container).
# shellcheck disable=SC2034,SC2086
bg=$1 c=$2 w=$3 keep=; shift 3; exec 7< <(:); exec 8> /proc/$$/fd/7
exec 5> >(exec cat 7<&-); o=$!; exec 6> >(exec cat >&2 5>&- 7<&-); e=$!; exec 8>&-
[ "$w" = 0 ] || { exec 9< <(:) 3> "/proc/$BASHPID/fd/9"; read -r -t "$w" -u 9 _
  keep="$BASHPID $o $e"; k; } </dev/null >/dev/null 2>&1 5>&- 6>&- 7<&- &
(ulimit -S -t "$c" 2>/dev/null; ulimit -H -t $((c + 1)) 2>/dev/null; exec "$@") >&5 2>&6 5>&- 6>&- 7<&-
# One line from here: bash reports a killed background job (the watchdog, killed by this `k`) at
# the next line it reads, into the run's stderr.
s=$?; exec 5>&- 6>&-; keep="$o $e"; k; read -r -t 0.5 -u 7 _ || [ $? -le 128 ] || kill -9 $o $e 2>/dev/null; exit $s
