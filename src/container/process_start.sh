# A session's process (E2B's): "pid N" first on its stdout, then it becomes the program, in `cwd`
# with exactly the environment given. An exec's process leads a session of its own already
# (runc), so the runs' kills, which spare that session, spare it.
# Arguments: cwd, the number of KEY=value words, those words, the program's argv.
cwd=$1 n=$2
shift 2
if ! cd -- "$cwd" 2>/dev/null; then
  echo "error: no directory $cwd"
  exit 126
fi
envs=("${@:1:n}")
shift "$n"
echo "pid $$"
exec env -i "${envs[@]}" "$@"
