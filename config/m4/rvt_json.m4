# SPDX-License-Identifier: BSD-3-Clause
# rvt_json.m4: nlohmann/json (Debian's nlohmann-json3-dev, header only),
# which builds the agent's status JSON (rvt-status --json).
#
# RVT_CHECK_JSON
#   Stops configure, naming the package, when <nlohmann/json.hpp> does not
#   compile with our C++ compiler. No flags: the header is in the
#   compiler's default include path.

AC_DEFUN([RVT_CHECK_JSON], [
AC_LANG_PUSH([C++])
AC_CHECK_HEADER([nlohmann/json.hpp], [],
    [AC_MSG_ERROR([<nlohmann/json.hpp> not found: install nlohmann-json3-dev (contrib/setup-deps.sh)])])
AC_LANG_POP([C++])
])
