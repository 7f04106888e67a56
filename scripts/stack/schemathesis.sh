# shellcheck shell=bash
# Schemathesis (PyPI) for the API contract test (e2e/contract_test.go,
# e2e/schemathesis/). Sourced by scripts/stack.sh after scripts/stack/lib.sh;
# schemathesis_install is called from ensure_packages.
#
#   schemathesis_install   create the virtualenv $SCHEMATHESIS_VENV (python3 -m
#                          venv; the Debian package python3-venv if the
#                          interpreter lacks the module) and pip install the
#                          pinned e2e/schemathesis/requirements.txt into it,
#                          unless it already holds exactly that pin.
#                          Nothing runs in the background.

SCHEMATHESIS_VENV=$STACK_DIR/venv
SCHEMATHESIS_REQ=$ROOT/e2e/schemathesis/requirements.txt
# The test finds the tool here (Makefile exports SECKILL_SCHEMATHESIS).
SCHEMATHESIS_BIN=$SCHEMATHESIS_VENV/bin/st

schemathesis_install() {
  local want stamp=$SCHEMATHESIS_VENV/.requirements
  want=$(grep -v '^#' "$SCHEMATHESIS_REQ")
  if [ -x "$SCHEMATHESIS_BIN" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then return; fi
  local start=$SECONDS lf; lf=$(logfile schemathesis)
  command -v python3 >/dev/null || apt_install python3
  log "schemathesis: installing $(echo "$want" | tr '\n' ' ')into $SCHEMATHESIS_VENV (API contract test)"
  if ! python3 -m venv --clear "$SCHEMATHESIS_VENV" >>"$lf" 2>&1; then
    apt_install python3-venv
    python3 -m venv --clear "$SCHEMATHESIS_VENV" >>"$lf" 2>&1 || fail schemathesis "$lf" "python3 -m venv failed"
  fi
  "$SCHEMATHESIS_VENV/bin/pip" install --disable-pip-version-check -q -r "$SCHEMATHESIS_REQ" >>"$lf" 2>&1 ||
    fail schemathesis "$lf" "pip install -r $SCHEMATHESIS_REQ failed"
  echo "$want" >"$stamp"
  log "schemathesis: $("$SCHEMATHESIS_BIN" --version 2>/dev/null | head -n1) in $((SECONDS - start))s"
}
