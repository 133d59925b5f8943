# SPDX-License-Identifier: BSD-3-Clause
# A program's --help as one line per option: each "  --NAME..." entry
# with its wrapped lines (indented 6 or more) joined by one space. Read by
# check-man-pages.sh and check-settings-tables.py.
/^  --/ { if (l != "") print l; l = $0; next }
/^      / && l != "" { sub(/^ +/, " "); l = l $0; next }
{ if (l != "") print l; l = "" }
END { if (l != "") print l }
