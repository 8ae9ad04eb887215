b=/tmp/.go-build; s=@STD@/pkg; mkdir -p "$b" || exit 1
export GOCACHE="$b/cache" GOPATH="$b/gopath" GOFLAGS=-pkgdir=$s CGO_ENABLED=0 GOPROXY=off \
  GOENV=off GOMAXPROCS=2
if [ "$(find . -name '*.go' | head -n 2)" = ./main.go ] && grep -qx 'module sandbox' go.mod &&
   ! grep -qE '^(//go:build|// \+build|//go:embed)|^import +"C"|^[[:space:]]+"C"[[:space:]]*$' main.go
then
  t="$(dirname "$(readlink -f @GO@)")/../pkg/tool/linux_amd64"
  (cd "$s" && find . -name '*.a') | sed "s|^\./\(.*\)\.a\$|packagefile \1=$s/\1.a|" >"$b/importcfg" &&
  "$t/compile" -p main -complete -importcfg "$b/importcfg" -o "$b/main.a" "$PWD/main.go" \
    >"$b/err" 2>&1 &&
  "$t/link" -importcfg "$b/importcfg" -s -w -o "$b/main" "$b/main.a" >>"$b/err" 2>&1
else
  @GO@ build -o "$b/main" -ldflags='-s -w' . 2>"$b/err"
fi
r=$?; cat "$b/err" >&2
if [ $r -ne 0 ]; then
  grep -qE '^[^ ]*: no required module provides package|could not import' "$b/err" &&
    echo 'The sandbox has no network: only packages of the Go standard library can be imported.' >&2
  exit $r
fi
exec "$b/main"
