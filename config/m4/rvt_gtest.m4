# SPDX-License-Identifier: BSD-3-Clause
# rvt_gtest.m4: GoogleTest for the unit tests (Debian's googletest and
# libgtest-dev packages).
#
# RVT_CHECK_GTEST
#   --enable-gtest=yes|no|auto (default auto; --disable-gtest skips it).
#   Flags come from pkg-config gtest_main when it is there, else the plain
#   library names; either way a link test with our C++ compiler decides.
#   When absent, `make check` says that the unit tests were not built.
#
#   AC_SUBSTs: GTEST_CFLAGS, GTEST_LIBS;  AM_CONDITIONAL: HAVE_GTEST

AC_DEFUN([RVT_CHECK_GTEST], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_ENABLE([gtest],
    [AS_HELP_STRING([--disable-gtest],
        [do not build the GoogleTest unit tests (default: build them when
         GoogleTest is found)])],
    [], [enable_gtest=auto])
have_gtest=no
AS_IF([test "x$enable_gtest" != xno],
    [PKG_CHECK_MODULES([GTEST], [gtest_main], [],
        [GTEST_CFLAGS=""
         GTEST_LIBS="-lgtest_main -lgtest -pthread"])
     AC_LANG_PUSH([C++])
     rvt_save_CPPFLAGS=$CPPFLAGS
     rvt_save_LIBS=$LIBS
     CPPFLAGS="$GTEST_CFLAGS $CPPFLAGS"
     LIBS="$GTEST_LIBS $LIBS"
     AC_MSG_CHECKING([whether GoogleTest links ($GTEST_LIBS)])
     AC_LINK_IFELSE(
        [AC_LANG_PROGRAM([[#include <gtest/gtest.h>]],
            [[return testing::UnitTest::GetInstance() == nullptr;]])],
        [have_gtest=yes])
     AC_MSG_RESULT([$have_gtest])
     CPPFLAGS=$rvt_save_CPPFLAGS
     LIBS=$rvt_save_LIBS
     AC_LANG_POP([C++])
     AS_IF([test "x$enable_gtest" = xyes && test $have_gtest = no],
        [AC_MSG_ERROR([--enable-gtest but GoogleTest does not link; install googletest and libgtest-dev (contrib/setup-deps.sh)])])])
AM_CONDITIONAL([HAVE_GTEST], [test $have_gtest = yes])
AC_SUBST([GTEST_CFLAGS])
AC_SUBST([GTEST_LIBS])
])
