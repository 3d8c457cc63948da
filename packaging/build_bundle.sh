#!/usr/bin/env bash
# Build the one-folder PyInstaller bundle of Replica Studio and check it with --selftest.
#
#   packaging/build_bundle.sh [--no-selftest]
#
# Environment: PYTHON (default python3; 3.11 or newer), WORK (build folder, default
# build/bundle), DIST (output folder, default dist). The result is $DIST/replica-studio/,
# started by $DIST/replica-studio/replica-studio. Nothing outside $WORK and $DIST is touched.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="${WORK:-$ROOT/build/bundle}"
DIST="${DIST:-$ROOT/dist}"
SELFTEST=1
[ "${1:-}" = "--no-selftest" ] && SELFTEST=0

started=$(date +%s)
# A clean environment holding only the project's own dependencies and PyInstaller, so the
# bundle cannot pick up whatever else the developer's environment has.
rm -rf "$WORK/venv"
"$PYTHON" -m venv "$WORK/venv"
BIN="$WORK/venv/bin"
[ -d "$WORK/venv/Scripts" ] && BIN="$WORK/venv/Scripts"   # Windows (Git Bash)
"$BIN/python" -m pip install --quiet --upgrade pip
# A regular (not editable) install: gui_app and its resources land in site-packages as they
# would for a user, which is what the spec collects.
"$BIN/python" -m pip install --quiet "$ROOT" "pyinstaller>=6.10"
"$BIN/python" -m pip list --format=freeze > "$WORK/build-environment.txt"
installed=$(date +%s)

# From $WORK, not the checkout: `python -m` puts the current folder first on sys.path, and the
# source tree's gui_app (without its resources) would shadow the installed one.
(cd "$WORK" && "$BIN/python" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath "$DIST" --workpath "$WORK/pyinstaller" "$ROOT/packaging/replica-studio.spec")
built=$(date +%s)

BUNDLE="$DIST/replica-studio"
echo "bundle: $BUNDLE ($(du -sh "$BUNDLE" | cut -f1), $(find "$BUNDLE" -type f | wc -l) files)"
echo "time: $((installed - started)) s to make the build environment, $((built - installed)) s for PyInstaller"
echo "build environment: $WORK/build-environment.txt"
if [ "$SELFTEST" = 1 ]; then
  exe="$BUNDLE/replica-studio"
  [ -f "$exe.exe" ] && exe="$exe.exe"
  "$exe" --selftest
fi
