# Sourced by the install scripts: `go_tool WHO BIN MODULE@VERSION GO_MIN`
# builds one Go tool with `go install` into $TOOLS/bin (GOPATH and the build
# cache under $TOOLS too, so everything stays in the git-ignored folder),
# unless $TOOLS/bin/BIN is already there. WHO prefixes the messages.
go_tool() {
  local who="$1" bin="$2" module="$3" go_min="$4"
  if [[ -x "$TOOLS/bin/$bin" ]]; then
    echo "$who: $TOOLS/bin/$bin already there"
    return 0
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "$who: go is required (Go >= $go_min) to build $module" >&2
    return 1
  fi
  mkdir -p "$TOOLS/bin" "$TOOLS/gopath" "$TOOLS/gocache"
  echo "$who: go install $module ($(go version))"
  local start
  start=$(date +%s)
  # -modcacherw: the module cache stays deletable (rm -rf .tools) without chmod.
  GOBIN="$TOOLS/bin" GOPATH="$TOOLS/gopath" GOCACHE="$TOOLS/gocache" \
    GOFLAGS=-modcacherw go install "$module"
  echo "$who: built $TOOLS/bin/$bin in $(( $(date +%s) - start ))s"
}
