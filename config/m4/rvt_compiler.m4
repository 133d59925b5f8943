# SPDX-License-Identifier: BSD-3-Clause
# rvt_compiler.m4: the C++ compiler and rvt's own compile flags.
#
# RVT_CHECK_COMPILER
#   Requires C++20 (designated initializers in UCX ops tables, std::expected
#   style results, <bit>), probes each warning flag on its own so a compiler
#   that lacks one still builds, turns warnings into errors for developer
#   builds, and hides every symbol the code does not export on purpose.
#
#   AC_SUBSTs:
#     RVT_CXXFLAGS             warnings (+ -Werror): used by all our C++ code
#     RVT_VISIBILITY_CXXFLAGS  -fvisibility=hidden: product code only exports
#                              what it marks (the UCT component registration)
#
# Flags go into these variables, never into CXXFLAGS, which stay the user's.

AC_DEFUN([RVT_CHECK_COMPILER], [
AC_REQUIRE([AC_PROG_CXX])
AX_CXX_COMPILE_STDCXX([20], [noext], [mandatory])

# Developer builds (a git checkout) fail on warnings so they get fixed when
# written; a release tarball must build with tomorrow's compiler too.
AC_ARG_ENABLE([werror],
    [AS_HELP_STRING([--enable-werror],
        [treat compiler warnings as errors (default: yes in a git checkout,
         no otherwise)])],
    [],
    [AS_IF([test -e "$srcdir/.git"], [enable_werror=yes], [enable_werror=no])])

AC_LANG_PUSH([C++])
RVT_CXXFLAGS=""
# -Wpedantic is safe because UCX's internal headers come in with -isystem
# (config/m4/rvt_ucx.m4): they use flexible array members and pass
# non-void pointers to %p, which -Wpedantic/-Wformat flag.
m4_foreach_w([rvt_flag],
    [-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
     -Wformat=2 -Wimplicit-fallthrough -Wmissing-declarations -Wundef
     -Wcast-align],
    [AX_CHECK_COMPILE_FLAG(rvt_flag,
        [RVT_CXXFLAGS="$RVT_CXXFLAGS rvt_flag"], [], [-Werror])])
AS_IF([test "x$enable_werror" = xyes],
    [RVT_CXXFLAGS="$RVT_CXXFLAGS -Werror"])

RVT_VISIBILITY_CXXFLAGS=""
AX_CHECK_COMPILE_FLAG([-fvisibility=hidden],
    [RVT_VISIBILITY_CXXFLAGS="-fvisibility=hidden"], [], [-Werror])
AC_LANG_POP([C++])

AC_SUBST([RVT_CXXFLAGS])
AC_SUBST([RVT_VISIBILITY_CXXFLAGS])
])
