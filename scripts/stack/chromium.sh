# shellcheck shell=bash
# Headless Chromium (Debian's `chromium` package) for the e2e check that takes a
# screenshot of the Temporal UI listing a stuck saga (e2e/temporalui_test.go,
# docs/temporal-ui.md). Sourced by scripts/stack.sh after scripts/stack/lib.sh
# (log, logfile, $STACK_DIR); chromium_install is called from ensure_packages,
# where stack.sh's apt_install is defined.
#
#   chromium_install   install the `chromium` package when /usr/bin/chromium is
#                      missing (no recommends, like the other packages: the
#                      DejaVu fonts fontconfig pulls in are enough to render
#                      the UI). Nothing runs in the background: the test starts
#                      chromium --headless itself, once per screenshot.
#
# Measured on this Debian 12 machine: see docs/temporal-ui.md ("Chromium").

CHROMIUM_BIN=/usr/bin/chromium

chromium_install() {
  if [ -x "$CHROMIUM_BIN" ]; then return; fi
  local start=$SECONDS
  log "chromium: $CHROMIUM_BIN missing, installing Debian package chromium (headless screenshots of the Temporal UI)"
  apt_install chromium
  [ -x "$CHROMIUM_BIN" ] || fail chromium "$(logfile apt)" "package chromium installed but $CHROMIUM_BIN is missing"
  log "chromium: installed $("$CHROMIUM_BIN" --version 2>/dev/null | head -n1) in $((SECONDS - start))s"
}
