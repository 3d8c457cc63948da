"""The window's colours for errors and warnings, in one place: every module of the window may
import it (it imports nothing), so a form, a tab and a dialog say "wrong" in the same red."""
from __future__ import annotations

ERROR_COLOR = "#c62828"  # readable on light and dark palettes
WARNING_COLOR = "#b26a00"
ERROR_STYLE = f"color: {ERROR_COLOR};"
WARNING_STYLE = f"color: {WARNING_COLOR};"
