# SPDX-License-Identifier: BSD-3-Clause
# rvt_slurm.m4: Slurm's SPANK header, for the plugin spank_rvt.so
# (src/uct/ib/rvt/slurm/; docs/operations.md, "Under Slurm").
#
# RVT_CHECK_SLURM
#   --with-slurm: check (default: build the plugin when slurm/spank.h is
#   found, libslurm-dev on Debian), yes (the same, required), no, or
#   DIR (Slurm's prefix: DIR/include). The plugin is built against the
#   spank.h of the Slurm that will load it: SPANK refuses a plugin of
#   another major.minor. --with-slurm-plugindir=DIR: where it is
#   installed (default ${libdir}/slurm, Slurm's own default PluginDir;
#   Debian's is /usr/lib/<arch>/slurm-wlm).
#
#   AC_SUBSTs: SLURM_CPPFLAGS, slurmplugindir, SLURM_VERSION_TEXT,
#     HAVE_SLURM_TEXT (yes or no, for the tests)
#   AM_CONDITIONAL: HAVE_SLURM

AC_DEFUN([RVT_CHECK_SLURM], [
AC_ARG_WITH([slurm],
    [AS_HELP_STRING([--with-slurm@<:@=DIR@:>@],
        [build Slurm's SPANK plugin spank_rvt.so against DIR/include/slurm
         (default: when slurm/spank.h is found; --without-slurm: not)])],
    [], [with_slurm=check])
AC_ARG_WITH([slurm-plugindir],
    [AS_HELP_STRING([--with-slurm-plugindir=DIR],
        [where spank_rvt.so goes (default: LIBDIR/slurm)])],
    [slurmplugindir=$withval], [slurmplugindir='${libdir}/slurm'])
have_slurm=no
SLURM_CPPFLAGS=
SLURM_VERSION_TEXT=
AS_CASE([$with_slurm],
    [no], [],
    [yes|check], [],
    [SLURM_CPPFLAGS="-I$with_slurm/include"])
AS_IF([test "x$with_slurm" != xno], [
    rvt_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$SLURM_CPPFLAGS $CPPFLAGS"
    AC_CHECK_HEADER([slurm/spank.h], [have_slurm=yes], [],
        [#include <stdint.h>])
    AS_IF([test $have_slurm = yes], [
        AC_COMPUTE_INT([rvt_slurm_version], [SLURM_VERSION_NUMBER],
            [#include <slurm/slurm_version.h>], [rvt_slurm_version=0])
        SLURM_VERSION_TEXT=`printf '%d.%02d' $(expr $rvt_slurm_version / 65536) $(expr $rvt_slurm_version / 256 % 256)`])
    CPPFLAGS=$rvt_save_CPPFLAGS
    AS_IF([test $have_slurm = no && test "x$with_slurm" != xcheck],
        [AC_MSG_ERROR([slurm/spank.h not found (--with-slurm=$with_slurm); install libslurm-dev (contrib/setup-deps.sh), or configure --without-slurm])])])
AC_SUBST([SLURM_CPPFLAGS])
AC_SUBST([slurmplugindir])
AC_SUBST([SLURM_VERSION_TEXT])
HAVE_SLURM_TEXT=$have_slurm
AC_SUBST([HAVE_SLURM_TEXT])
AM_CONDITIONAL([HAVE_SLURM], [test $have_slurm = yes])
])
