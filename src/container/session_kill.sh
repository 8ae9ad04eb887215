# Sessions (docs/api.md "Sessions"). `k` stops, then SIGKILLs, every live process but PID 1, the
# shell itself, the pids in $keep, the sessions listed in $bg (the background programs' pids, each
# its own session id: setsid), read from field 6 of /proc/PID/stat (the whole file, after the last
# ')': the name may hold anything, newlines included), and the sessions led by the interpreter and
# the relays to it (named ci-interpreter and ci-relay, session_server.py), whichever replica
# started them. A program may take those names to outlive the cleanup; it gains nothing a cell's
# subprocess does not have. A zombie is skipped only when no thread of it is left (a thread-group
# leader that ended while its other threads run shows Z too). Each phase is repeated until a pass
# finds nothing (children forked meanwhile); SIGSTOP first, so a fork bomb cannot refill the slots
# freed one by one. Builtins only: it needs no free pid. The caller sets $bg and $keep.
# shellcheck disable=SC2034,SC2086,SC2154
k() {
  local s n d p t f l a b
  for s in STOP KILL; do
    for n in {1..100}; do
      f=
      for d in /proc/[1-9]*; do
        p=${d#/proc/}
        [ "$p" = 1 ] || [ "$p" = $$ ] && continue
        t=
        read -r -d '' t 2>/dev/null < "$d/stat"
        [ -n "$t" ] || continue
        t=${t##*) }
        set -- $t
        case "$s$1" in
          STOPT|STOPt) continue ;;
          *Z|*X)
            b=1
            while read -r a b; do [ "$a" = Threads: ] && break; b=1; done 2>/dev/null < "$d/status"
            [ "${b:-1}" -gt 1 ] 2>/dev/null || continue ;;
        esac
        case " $bg " in *" ${4:-x} "*) continue ;; esac
        read -r l 2>/dev/null < "/proc/$4/stat" &&
          case "$l" in "$4 (ci-interpreter) "*|"$4 (ci-relay) "*) continue ;; esac
        case " $keep " in *" $p "*) continue ;; esac
        kill -$s "$p" 2>/dev/null && f=1
      done
      [ -n "$f" ] || break
    done
  done
}
